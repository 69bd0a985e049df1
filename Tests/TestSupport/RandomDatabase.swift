// Random databases for property tests of the page reader, the hash and the
// diff: random schemas (declared types of every affinity, STRICT, WITHOUT
// ROWID, INTEGER PRIMARY KEY and other keys, generated columns, columns added
// by ALTER TABLE ADD COLUMN with all kinds of defaults) filled with values of
// every storage class (boundary integers, REALs bit by bit, TEXT with NULs
// and invalid UTF-8 or UTF-16, rows big enough to overflow), in files of any
// page size, reserved bytes, text encoding, auto_vacuum, and WAL mode with
// commits left in the -wal. The same seed makes the same database.
import Foundation
import LitectlCore

public struct RandomDatabase {
    public var path: String
    /// What was chosen, for failure messages.
    public var summary: String
    /// Table names, in creation order.
    public var tables: [String]
    /// The connection that wrote the database, still open when commits were
    /// left in its -wal (closing it would checkpoint them).
    public var writer: Connection?

    public struct Settings: Sendable {
        public var pageSize = 4096
        public var reserved = 0
        public var encoding = "UTF-8"
        public var autoVacuum = false
        /// Leave the last commits in the -wal (the writer stays open).
        public var wal = false
        public init() {}

        public static func random(_ rng: inout SplitMix64) -> Settings {
            var s = Settings()
            s.pageSize = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536].randomElement(using: &rng)!
            s.reserved = [0, 0, 0, 1, 8, 32].randomElement(using: &rng)!
            if s.pageSize - s.reserved < 480 { s.reserved = 0 }
            s.encoding = ["UTF-8", "UTF-8", "UTF-8", "UTF-16le", "UTF-16be"].randomElement(using: &rng)!
            s.autoVacuum = Int.random(in: 0..<5, using: &rng) == 0
            s.wal = Int.random(in: 0..<4, using: &rng) == 0
            return s
        }
    }

    /// Makes a database at `path` with `tableCount` random tables.
    public static func make(at path: String, seed: UInt64, tableCount: Int, settings: Settings? = nil,
                            maxRows: Int = 120) throws -> RandomDatabase {
        var rng = SplitMix64(seed: seed)
        let s = settings ?? Settings.random(&rng)
        var setup = [".filectrl reserve_bytes \(s.reserved)", "PRAGMA page_size = \(s.pageSize)",
                     "PRAGMA encoding = '\(s.encoding)'"]
        if s.autoVacuum { setup.append("PRAGMA auto_vacuum = FULL") }
        setup += ["CREATE TABLE litectl_init(x)", "DROP TABLE litectl_init"]
        try sqlite3(["-batch", path] + setup)
        let db = try Connection(path: path, mode: .readWrite)
        try db.execute("PRAGMA synchronous = OFF")
        var summary = "seed \(seed): page \(s.pageSize), reserved \(s.reserved), \(s.encoding)\(s.autoVacuum ? ", auto_vacuum" : "")\(s.wal ? ", wal" : "")"
        if s.wal { try db.execute("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0") }
        var generator = Generator(rng: rng, maxRows: maxRows)
        var tables: [String] = []
        for t in 0..<tableCount {
            let name = "t\(t)"
            let description = try generator.table(db, name: name)
            summary += "\n  " + description
            tables.append(name)
        }
        if s.wal {
            // More commits after the first ones, some of them touching the same pages.
            for name in tables where Bool.random(using: &generator.rng) {
                try generator.fill(db, name: name, rows: Int.random(in: 1...20, using: &generator.rng))
            }
            return RandomDatabase(path: path, summary: summary, tables: tables, writer: db)
        }
        try db.close()
        return RandomDatabase(path: path, summary: summary, tables: tables, writer: nil)
    }

    /// Random schemas and values.
    public struct Generator {
        public var rng: SplitMix64
        var maxRows: Int
        /// Per table: its insertable columns (with declared types) and whether it is STRICT.
        var columns: [String: [(name: String, type: String)]] = [:]
        var strict: [String: Bool] = [:]
        var withoutRowid: [String: Bool] = [:]

        init(rng: SplitMix64, maxRows: Int) {
            self.rng = rng
            self.maxRows = maxRows
        }

        static let types = ["", "", "INTEGER", "INT", "REAL", "DOUBLE PRECISION", "FLOAT", "TEXT", "BLOB", "NUMERIC",
                            "VARCHAR(20)", "FLOATING POINT", "BIGINT", "CHARINT", "x REAL y", "BOOLEAN", "DATE", "DOUB"]
        static let strictTypes = ["INT", "INTEGER", "REAL", "TEXT", "BLOB", "ANY"]
        public static let defaults = ["NULL", "0", "1", "-1", "1.0", "-0.0", "2.5", "'abc'", "'12'", "'1e3'", "' 7 '", "x'00ff'",
                               "TRUE", "FALSE", "-9223372036854775808", "9223372036854775807", "1e400", "-1e400",
                               "'é'", "0x10", "CURRENT_TIMESTAMP", "(1 + 2)", "(5)", "-(-3)", "+4", "abc", "''",
                               "9223372036854775808", "3.0e0", "CAST('5' AS INTEGER)", "(CAST(2.0 AS TEXT))"]

        /// Creates table `name` with random columns and rows; returns its description.
        mutating func table(_ db: Connection, name: String) throws -> String {
            let isStrict = Int.random(in: 0..<5, using: &rng) == 0
            let count = Int.random(in: 1...6, using: &rng)
            var definitions: [String] = []
            var insertable: [(name: String, type: String)] = []
            for c in 0..<count {
                let type = isStrict ? Self.strictTypes.randomElement(using: &rng)! : Self.types.randomElement(using: &rng)!
                var definition = "c\(c)" + (type.isEmpty ? "" : " \(type)")
                if Int.random(in: 0..<6, using: &rng) == 0 { definition += " DEFAULT \(["1", "'d'", "2.5", "NULL"].randomElement(using: &rng)!)" }
                definitions.append(definition)
                insertable.append(("c\(c)", type))
            }
            // The key: none, an INTEGER PRIMARY KEY (the rowid), or another.
            var withoutRowid = false
            var constraints: [String] = []
            switch Int.random(in: 0..<7, using: &rng) {
            case 0, 1:
                definitions.insert("id INTEGER PRIMARY KEY", at: Int.random(in: 0...definitions.count, using: &rng))
                insertable.append(("id", "INTEGER"))
            case 2:
                definitions.insert("id INTEGER PRIMARY KEY DESC", at: 0)
                insertable.append(("id", "INTEGER"))
            case 3:
                constraints.append("PRIMARY KEY(c0\(count > 1 ? ", c1" : ""))")
                withoutRowid = Bool.random(using: &rng)
            case 4:
                definitions.insert("k TEXT PRIMARY KEY", at: 0)
                insertable.append(("k", "TEXT"))
                withoutRowid = Bool.random(using: &rng)
            default:
                break
            }
            // Generated columns: never stored (VIRTUAL) and stored.
            if Int.random(in: 0..<4, using: &rng) == 0 {
                definitions.append("gv\(isStrict ? " ANY" : "") AS (typeof(c0) || 'v') VIRTUAL")
            }
            if Int.random(in: 0..<4, using: &rng) == 0 && !isStrict {
                definitions.append("gs AS (length(c0)) STORED")
            }
            let sql = "CREATE TABLE \(name)(\((definitions + constraints).joined(separator: ", ")))" + (withoutRowid ? " WITHOUT ROWID" : "")
                + (isStrict ? (withoutRowid ? ", STRICT" : " STRICT") : "")
            try db.execute(sql)
            columns[name] = insertable
            strict[name] = isStrict
            self.withoutRowid[name] = withoutRowid
            var described = sql
            try fill(db, name: name, rows: Int.random(in: 0...maxRows, using: &rng))
            // Columns added later: the rows above are shorter than the table.
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                let added = "a\(columns[name]!.count)"
                let type = isStrict ? Self.strictTypes.randomElement(using: &rng)! : Self.types.randomElement(using: &rng)!
                let dflt = Self.defaults.randomElement(using: &rng)!
                let alter = "ALTER TABLE \(name) ADD COLUMN \(added)\(type.isEmpty ? "" : " " + type) DEFAULT \(dflt)"
                do {
                    try db.execute(alter)
                    described += "; " + alter
                    columns[name]!.append((added, type))
                    try fill(db, name: name, rows: Int.random(in: 0...maxRows / 3, using: &rng))
                } catch {
                    // A default ADD COLUMN refuses (not constant, or a STRICT mismatch).
                }
            }
            if Int.random(in: 0..<3, using: &rng) == 0 {
                try db.execute("CREATE INDEX \(name)_i ON \(name)(c0)")
            }
            if Int.random(in: 0..<4, using: &rng) == 0 {
                try db.execute("DELETE FROM \(name) WHERE " + (withoutRowid ? "length(CAST(c0 AS BLOB)) % 3 = 1" : "rowid % 3 = 0"))
                described += " (some rows deleted)"
            }
            return described
        }

        /// Inserts about `rows` random rows into `name` (rows SQLite refuses are skipped).
        mutating func fill(_ db: Connection, name: String, rows: Int) throws {
            guard let all = columns[name] else { return }
            var statements: [String: Statement] = [:]
            try db.execute("BEGIN")
            for _ in 0..<rows {
                // Some columns left out: they take their DEFAULT.
                let chosen = all.filter { _ in Int.random(in: 0..<8, using: &rng) != 0 }
                let list = chosen.isEmpty ? "DEFAULT VALUES" : "(\(chosen.map(\.name).joined(separator: ", "))) VALUES ("
                    + chosen.indices.map { i in
                        // In a UTF-16 database this makes TEXT of any bytes (odd lengths, lone surrogates).
                        Int.random(in: 0..<25, using: &rng) == 0 ? "CAST(?\(i + 1) AS TEXT)" : "?\(i + 1)"
                    }.joined(separator: ", ") + ")"
                let sql = "INSERT OR IGNORE INTO \(name) \(list)"
                let statement = try statements[sql] ?? db.prepare(sql)
                statements[sql] = statement
                statement.reset()
                for (i, column) in chosen.enumerated() {
                    var value = randomValue()
                    if column.name == "id", case .integer = value {} else if column.name == "id" {
                        value = Bool.random(using: &rng) ? .null : .integer(Int64.random(in: -1000...1_000_000, using: &rng))
                    }
                    try statement.bind(value, at: i + 1)
                }
                do { try statement.step() } catch {
                    // STRICT type mismatches, NOT NULL key columns of WITHOUT ROWID tables.
                }
            }
            try db.execute("COMMIT")
        }

        mutating func randomValue() -> Value {
            switch Int.random(in: 0..<20, using: &rng) {
            case 0, 1: return .null
            case 2, 3, 4:
                let specials: [Int64] = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 8_388_607, 8_388_608,
                                         2_147_483_647, 2_147_483_648, -2_147_483_649, 140_737_488_355_327, 140_737_488_355_328,
                                         -140_737_488_355_329, 9_007_199_254_740_993, .max, .min, .max - 1]
                return .integer(Bool.random(using: &rng) ? specials.randomElement(using: &rng)!
                                : Int64.random(in: -100_000...100_000, using: &rng))
            case 5, 6, 7:
                let specials: [Double] = [0.0, -0.0, 1.5, -2.25, 3.0, 1e308, -1e-308, .leastNonzeroMagnitude, .infinity, -.infinity, 0.1,
                                          9_007_199_254_740_992.0, 1e20, -1e19, 123456789.0]
                if Bool.random(using: &rng) { return .real(specials.randomElement(using: &rng)!) }
                var bits = rng.next()
                if Double(bitPattern: bits).isNaN { bits = 0 }
                return .real(Double(bitPattern: bits))
            case 8, 9, 10, 11:
                let specials = ["", "a", "é", "日本語", "😀", "12", "1.5", " 3 ", "1e5", "abc\u{0}def", "NULL", "x'00'"]
                if Bool.random(using: &rng) { return .text(specials.randomElement(using: &rng)!) }
                return .text(randomBytes(utf8: true))
            case 12:
                // Invalid UTF-8 stored as TEXT.
                return .text(randomBytes(utf8: false))
            case 13, 14, 15:
                return .blob(randomBytes(utf8: false))
            case 16:
                // Big enough to overflow any page.
                let count = Int.random(in: 1000...(Int.random(in: 0..<10, using: &rng) == 0 ? 300_000 : 20_000), using: &rng)
                return Bool.random(using: &rng) ? .blob(fastBytes(count)) : .text(fastBytes(count, from: Self.printable))
            default:
                return Bool.random(using: &rng) ? .integer(Int64.random(in: 0...100, using: &rng)) : .text("v\(rng.next() % 1000)")
            }
        }

        mutating func randomBytes(utf8: Bool) -> [UInt8] {
            let count = Int.random(in: 0...(Int.random(in: 0..<4, using: &rng) == 0 ? 600 : 40), using: &rng)
            if utf8 {
                var out: [UInt8] = []
                out.reserveCapacity(count * 2)
                let scalars: [UInt32] = [0x41, 0x7A, 0xE9, 0x3B1, 0x4E2D, 0x1F600, 0x10FFFF, 0xFFFD, 0xFEFF, 0x0]
                for word in fastBytes(count) {
                    let c = word & 1 == 0 ? UInt32(0x20 + (word >> 1) % 95) : scalars[Int(word >> 1) % scalars.count]
                    out.append(contentsOf: Array(String(Unicode.Scalar(c)!).utf8))
                }
                return out
            }
            return fastBytes(count)
        }

        /// Random bytes to take slices from: generating bytes one by one is
        /// slow in debug builds.
        static let pool: [UInt8] = {
            var rng = SplitMix64(seed: 0xB10B)
            return (0..<(1 << 17)).flatMap { _ in withUnsafeBytes(of: rng.next()) { Array($0) } }
        }()

        /// `pool` made printable ASCII.
        static let printable: [UInt8] = pool.map { 0x20 + $0 % 95 }

        /// `count` random bytes (at most a megabyte): a slice of `pool` at a random place.
        mutating func fastBytes(_ count: Int, from pool: [UInt8] = Generator.pool) -> [UInt8] {
            let count = min(count, pool.count - 1)
            let start = Int.random(in: 0...(pool.count - count), using: &rng)
            return Array(pool[start..<start + count])
        }
    }
}
