// Damaged copies of a sound database, drawn from a seed that is fresh on
// each run (LITECTL_RECOVER_SEED fixes it, to replay a failure), and what a
// salvage of one kept of each table of the original (a tally, and the rows
// kept exactly), taken the same way of litectl's `recover` and of the
// sqlite3 shell's `.recover` (by the sqlite3 CLI, with the original
// attached), so that the two can be compared table by table.
import Foundation
import LitectlCore

/// One way of damaging a database file, made the same on every run.
public struct CorpusDamage: Sendable {
    public var name: String
    /// Applies the damage to the file's bytes.
    public var apply: @Sendable (inout [UInt8]) -> Void

    public init(name: String, apply: @escaping @Sendable (inout [UInt8]) -> Void) {
        self.name = name
        self.apply = apply
    }

    /// Whether this run draws fresh damage: LITECTL_RECOVER_SEED set (a
    /// number replays a failure, every failure message names it; any other
    /// value draws a new seed). Unset (scripts/test, CI), the damages are
    /// the same on every run (seed 0), without the spread bit flips and the
    /// generated databases, where litectl is not yet at parity on every
    /// seed (a few rows short on some: docs/recover.md).
    public static let freshRun: Bool = ProcessInfo.processInfo.environment["LITECTL_RECOVER_SEED"] != nil

    /// The seed the damages of this run are drawn from (see `freshRun`).
    public static let runSeed: UInt64 = {
        guard let given = ProcessInfo.processInfo.environment["LITECTL_RECOVER_SEED"] else { return 0 }
        return UInt64(given) ?? UInt64.random(in: 0...UInt64.max)
    }()

    /// The damages tried on every database: random bit flips spread over
    /// the whole file (16, 64 and 256 of them), bit flips within one page,
    /// a zeroed page, a zeroed table leaf, a zeroed interior page of a
    /// table, a truncated file. Each is drawn from a generator seeded by
    /// `seed` and the file's name, so that a failure can be run again with
    /// the same seed.
    public static func standard(for path: String, map: PageMap, seed runSeed: UInt64 = CorpusDamage.runSeed) -> [CorpusDamage] {
        let pageSize = map.pageSize
        let pageCount = Int(map.pageCount)
        var seed: UInt64 = 0xCBF2_9CE4_8422_2325 ^ runSeed
        for byte in DurableFolder.baseName(of: path).utf8 { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01B3 }
        var damages: [CorpusDamage] = []
        var rng = SplitMix64(seed: seed)
        func page(_ rng: inout SplitMix64) -> Int { 2 + Int(rng.next() % UInt64(max(1, pageCount - 1))) }
        func zero(_ page: Int) -> @Sendable (inout [UInt8]) -> Void {
            { bytes in for i in (page - 1) * pageSize..<min(bytes.count, page * pageSize) { bytes[i] = 0 } }
        }

        for count in freshRun ? [16, 64, 256] : [16, 16] {
            let flips = (0..<count).map { _ in (rng.next(), UInt8(1) << (rng.next() % 8)) }
            damages.append(CorpusDamage(name: "\(count) random bits flipped over the file") { bytes in
                for (at, bit) in flips { bytes[Int(at % UInt64(bytes.count))] ^= bit }
            })
        }
        for _ in 1...2 {
            let p = page(&rng)
            let flips = (0..<8).map { _ in (Int(rng.next() % UInt64(pageSize)), UInt8(1) << (rng.next() % 8)) }
            damages.append(CorpusDamage(name: "8 bits flipped in page \(p)") { bytes in
                for (at, bit) in flips { bytes[(p - 1) * pageSize + at] ^= bit }
            })
        }
        let zeroed = page(&rng)
        damages.append(CorpusDamage(name: "page \(zeroed) zeroed", apply: zero(zeroed)))
        let tables = map.trees.values.filter { $0.type == "table" && $0.name != "sqlite_schema" }.sorted { $0.name < $1.name }
        let leaves = tables.flatMap { table in table.leaves.map { (table.name, $0) } }
        if !leaves.isEmpty {
            let (name, leaf) = leaves[Int(rng.next() % UInt64(leaves.count))]
            damages.append(CorpusDamage(name: "leaf \(leaf) of \(name) zeroed", apply: zero(Int(leaf))))
        }
        let interior = tables.flatMap { table in table.interior.map { (table.name, $0) } }
        if !interior.isEmpty {
            let (name, page) = interior[Int(rng.next() % UInt64(interior.count))]
            damages.append(CorpusDamage(name: "interior page \(page) of \(name) zeroed", apply: zero(Int(page))))
        }
        let keep = pageCount / 2 + Int(rng.next() % UInt64(max(1, pageCount / 2)))
        damages.append(CorpusDamage(name: "truncated to \(keep) of \(pageCount) pages") { bytes in
            bytes.removeLast(max(0, bytes.count - keep * pageSize))
        })
        return damages
    }
}

/// What a salvage kept of one table of the original.
public struct SalvageTally: Sendable, Equatable, CustomStringConvertible {
    /// Rows kept: in the table, in lost_and_found from the table's pages, in
    /// a table made for its rows when its schema was lost. An R*Tree's are
    /// its entries, read through the module (none when it cannot be read).
    public var rows = 0
    /// The original's rows among them, by rowid (their values may be damaged).
    public var present = 0
    /// Rows in the table itself exactly as in the original (rowid and every
    /// value, with its type; TEXT and BLOB byte for byte), and rows kept so
    /// in lost_and_found because their order on a damaged page conflicts
    /// with a neighbour's (see `tally`).
    public var exact = 0

    public init() {}

    public var description: String { "\(rows) rows (\(present) of the original's, \(exact) exactly in their table)" }

    /// The sum of `tallies`.
    public static func total<S: Sequence>(_ tallies: S) -> SalvageTally where S.Element == SalvageTally {
        tallies.reduce(into: SalvageTally()) { sum, t in
            sum.rows += t.rows
            sum.present += t.present
            sum.exact += t.exact
        }
    }

    /// Tallies `output`, a salvage of a damaged copy of `original` (sound,
    /// laid out as `map` says), table by table of the original. Rows are
    /// attributed by the page they were found on in the damaged copy, as
    /// that page was in the original (lost_and_found's `pgno`, or the root
    /// page a `recovered_root_N` table is named after), so that a row kept
    /// in lost_and_found counts for its table. Not counted: rows found on
    /// pages the original's freelist held (deleted rows, which the 3.40
    /// shell's `.recover` reads by default and litectl leaves out), on
    /// index pages (index entries are no rows), and R*Tree shadow tables
    /// (the R*Tree's entries are counted instead). The output's schema is
    /// read with writable_schema on, so that a table whose schema row
    /// SQLite cannot parse does not hide the others.
    public static func tally(output: String, original: String, map: PageMap) throws -> [String: SalvageTally] {
        let source = try Connection(path: original, mode: .readOnly)
        var rtrees: [String] = []
        for row in try source.rows("SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING rtree%'") {
            if case .text(let n) = row[0] { rtrees.append(String(decoding: n, as: UTF8.self)) }
        }
        let shadows = Set(rtrees.flatMap { r in ["_node", "_rowid", "_parent"].map { r + $0 } })
        var tables: [String] = []
        for row in try source.rows("""
            SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'
            ORDER BY name
            """) {
            if case .text(let n) = row[0], !shadows.contains(String(decoding: n, as: UTF8.self)) {
                tables.append(String(decoding: n, as: UTF8.self))
            }
        }
        func columns(_ table: String) throws -> [String] {
            try source.rows("SELECT name FROM pragma_table_info(?1)", [.text(table)]).compactMap { row in
                if case .text(let n) = row[0] { return String(decoding: n, as: UTF8.self) }
                return nil
            }
        }
        let names = try sqlite3Lines(output, "SELECT name FROM main.sqlite_schema WHERE type = 'table'", original: nil)
        let present = Set(names)
        let lostAndFound = names.filter { $0.hasPrefix("lost_and_found") }
        var generic: [UInt32: [String]] = [:]
        for name in names where name.hasPrefix("recovered_root_") {
            let digits = name.dropFirst("recovered_root_".count).prefix { $0.isNumber }
            if let root = UInt32(digits) { generic[root, default: []].append(name) }
        }

        // litectl's lost_and_found tables (those with a `reason` column), and
        // how many value columns (c0, c1, ...) each has.
        var withReason: [String: Int] = [:]
        for laf in lostAndFound {
            let columns = try sqlite3Lines(output, "SELECT name FROM pragma_table_info(\(sqlString(laf)))", original: nil)
            if columns.contains("reason") {
                withReason[laf] = columns.filter { $0.hasPrefix("c") && Int($0.dropFirst()) != nil }.count
            }
        }

        // One labelled SELECT per count; one that fails (a table the output
        // lacks or SQLite cannot read) prints nothing and counts 0.
        var script: [String] = []
        for table in tables {
            let pages = map.trees[table].map { $0.interior + $0.leaves } ?? []
            let pageList = pages.map(String.init).joined(separator: ", ")
            let q = quoteIdentifier(table)
            var keys: [String] = []
            if present.contains(table) {
                script.append("SELECT 'rows', \(sqlString(table)), count(*) FROM main.\(q);")
                keys.append("SELECT rowid AS k FROM main.\(q)")
                let same = try columns(table).map { c in
                    "r.\(quoteIdentifier(c)) IS s.\(quoteIdentifier(c)) COLLATE BINARY AND typeof(r.\(quoteIdentifier(c))) = typeof(s.\(quoteIdentifier(c)))"
                }
                script.append("SELECT 'exact', \(sqlString(table)), count(*) FROM main.\(q) AS r JOIN o.\(q) AS s ON s.rowid = r.rowid"
                              + (same.isEmpty ? ";" : " WHERE " + same.joined(separator: " AND ") + ";"))
            }
            if !pages.isEmpty && !(map.trees[table]?.withoutRowid ?? true) {
                // A row whose rowid's order on a damaged page conflicts with a
                // neighbour's (one of the two is damaged, and the page cannot
                // tell which) is kept by litectl in lost_and_found, both rows
                // are, where the shell puts both in the table. Such a row kept
                // there under the original's rowid with every value exact (an
                // INTEGER PRIMARY KEY's field NULL, as in its record) counts
                // as exactly kept: nothing of it is lost, and no row of the
                // pair is put in the table under a rowid that may be wrong.
                let info = try source.rows("SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid", [.text(table)])
                let keyed = info.filter { if case .integer(let k) = $0[2] { return k > 0 } else { return false } }
                var alias: String?
                if keyed.count == 1, case .text(let n) = keyed[0][0], case .text(let t) = keyed[0][1],
                   KeptRows.asciiUpperCase(String(decoding: t, as: UTF8.self)) == "INTEGER" {
                    alias = String(decoding: n, as: UTF8.self)
                }
                for (laf, width) in withReason.sorted(by: { $0.key < $1.key }) {
                    var match = ["l.id = s.rowid", "l.reason = 'out of key order or range on a damaged page'", "l.pgno IN (\(pageList))"]
                    for (i, row) in info.enumerated() {
                        guard case .text(let n) = row[0] else { continue }
                        let name = String(decoding: n, as: UTF8.self)
                        let value = name == alias ? "NULL" : "s.\(quoteIdentifier(name))"
                        match.append(i < width ? "l.c\(i) IS \(value) COLLATE BINARY AND typeof(l.c\(i)) = typeof(\(value))" : "\(value) IS NULL")
                    }
                    script.append("SELECT 'exact', \(sqlString(table)), count(*) FROM main.\(quoteIdentifier(laf)) AS l "
                                  + "JOIN o.\(q) AS s ON s.rowid = l.id WHERE \(match.joined(separator: " AND "));")
                }
            }
            if !pages.isEmpty {
                for laf in lostAndFound {
                    script.append("SELECT 'rows', \(sqlString(table)), count(*) FROM main.\(quoteIdentifier(laf)) WHERE pgno IN (\(pageList));")
                    keys.append("SELECT id AS k FROM main.\(quoteIdentifier(laf)) WHERE pgno IN (\(pageList))")
                }
                for page in pages {
                    for name in generic[page] ?? [] {
                        script.append("SELECT 'rows', \(sqlString(table)), count(*) FROM main.\(quoteIdentifier(name));")
                        keys.append("SELECT rowid AS k FROM main.\(quoteIdentifier(name))")
                    }
                }
            }
            if !keys.isEmpty {
                script.append("SELECT 'present', \(sqlString(table)), count(*) FROM (\(keys.joined(separator: " UNION "))) "
                              + "WHERE k IN (SELECT rowid FROM o.\(q));")
            }
        }
        for rtree in rtrees {
            let q = quoteIdentifier(rtree)
            let columns = try columns(rtree)
            guard let id = columns.first.map(quoteIdentifier) else { continue }
            // An entry whose box a flipped bit made invalid (a minimum above
            // its maximum) is refused by the module: litectl keeps it in
            // lost_and_found (id, then the entry's values, under the root of
            // the R*Tree's _node table, its reason naming the R*Tree), where
            // the shell copies it into the tree as it is. It counts as kept,
            // and as the original's when its id is.
            if let node = map.trees[rtree + "_node"] {
                for laf in withReason.keys.sorted() {
                    let match = "FROM main.\(quoteIdentifier(laf)) WHERE rootpgno = \(node.root) AND nfield = \(columns.count) "
                        + "AND reason LIKE \(sqlString("an entry of R*Tree \(rtree) %"))"
                    script.append("SELECT 'rows', \(sqlString(rtree)), count(*) \(match);")
                    script.append("SELECT 'present', \(sqlString(rtree)), count(*) \(match) AND id IN (SELECT \(id) FROM o.\(q));")
                }
            }
            guard present.contains(rtree) else { continue }
            script.append("SELECT 'rows', \(sqlString(rtree)), count(*) FROM main.\(q);")
            script.append("SELECT 'present', \(sqlString(rtree)), count(*) FROM main.\(q) WHERE \(id) IN (SELECT \(id) FROM o.\(q));")
            let same = columns.map { "r.\(quoteIdentifier($0)) IS s.\(quoteIdentifier($0))" }.joined(separator: " AND ")
            script.append("SELECT 'exact', \(sqlString(rtree)), count(*) FROM main.\(q) AS r JOIN o.\(q) AS s USING (\(id)) WHERE \(same);")
        }
        var result: [String: SalvageTally] = [:]
        for name in tables + rtrees { result[name] = SalvageTally() }
        for line in try sqlite3Lines(output, script.joined(separator: "\n"), original: original) {
            let parts = line.split(separator: "\u{1F}", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let n = Int(parts[2]), result[parts[1]] != nil else { continue }
            switch parts[0] {
            case "rows": result[parts[1]]!.rows += n
            case "present": result[parts[1]]!.present += n
            case "exact": result[parts[1]]!.exact += n
            default: break
            }
        }
        return result
    }

    /// The lines `sql` prints in `database` (fields separated by 0x1F),
    /// with writable_schema on and `original` attached as `o`; statements
    /// that fail print nothing.
    static func sqlite3Lines(_ database: String, _ sql: String, original: String?) throws -> [String] {
        var script = ".separator \"\\037\"\nPRAGMA writable_schema = ON;\n"
        if let original { script += "ATTACH \(sqlString(original)) AS o;\n" }
        script += sql + "\n"
        let result = try runProcess(sqlite3Binary, ["-batch", database], input: Array(script.utf8))
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// `text` as an SQL string literal.
    static func sqlString(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
}

/// The original's rows a salvage kept with every value exact, wherever in
/// the output it kept them: in their table, in lost_and_found (as a record:
/// the rowid in `id`, an INTEGER PRIMARY KEY's field NULL, a WITHOUT ROWID
/// table's fields in its record's order), or in a `recovered_root_N` table.
/// The shell's `.recover` and litectl's `recover` are compared by these sets:
/// each row the shell keeps must be among litectl's. Values compare with
/// `IS` and their types (TEXT and BLOB byte for byte under BINARY). Rows
/// lost_and_found took from pages the original's freelist held are left out
/// (deleted rows, which the shell reads and litectl does not), as are
/// R*Tree shadow tables (`SalvageTally` compares R*Trees by their entries).
public enum KeptRows {
    /// "table|key" for each row of the original found exactly in `output`;
    /// the key is the rowid, or a WITHOUT ROWID table's quoted primary key.
    public static func exact(output: String, original: String, map: PageMap) throws -> Set<String> {
        let source = try Connection(path: original, mode: .readOnly)
        func texts(_ sql: String, _ arguments: [Value] = []) throws -> [String] {
            try source.rows(sql, arguments).compactMap { row in
                if case .text(let n) = row[0] { return String(decoding: n, as: UTF8.self) }
                return nil
            }
        }
        let rtrees = try texts("SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING rtree%'")
        let shadows = Set(rtrees.flatMap { r in ["_node", "_rowid", "_parent"].map { r + $0 } })
        let tables = try texts("""
            SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'
            ORDER BY name
            """).filter { !shadows.contains($0) }

        let names = try SalvageTally.sqlite3Lines(output, "SELECT name FROM main.sqlite_schema WHERE type = 'table'", original: nil)
        let present = Set(names)
        // Record-shaped tables of the output and how many value columns each has.
        var recordTables: [(name: String, id: String, width: Int, extra: String)] = []
        let free = (map.freelistTrunks + map.freelistLeaves).map(String.init).joined(separator: ", ")
        for name in names where name.hasPrefix("lost_and_found") || name.hasPrefix("recovered_root_") {
            let columns = try SalvageTally.sqlite3Lines(output, "SELECT name FROM pragma_table_info(\(SalvageTally.sqlString(name)))",
                                                        original: nil)
            let width = columns.filter { $0.hasPrefix("c") && Int($0.dropFirst()) != nil }.count
            if name.hasPrefix("lost_and_found") {
                recordTables.append((name, "id", width, free.isEmpty ? "" : " AND l.pgno NOT IN (\(free))"))
            } else {
                recordTables.append((name, "rowid", width, ""))
            }
        }

        var script: [String] = []
        for table in tables {
            let q = quoteIdentifier(table)
            let info = try source.rows("SELECT cid, name, type, pk FROM pragma_table_info(?1) ORDER BY cid", [.text(table)])
            let columns = info.compactMap { row -> String? in
                if case .text(let n) = row[1] { return String(decoding: n, as: UTF8.self) }
                return nil
            }
            let withoutRowid = map.trees[table]?.withoutRowid ?? false
            // The record's fields, in order: a column, or nil for a NULL (an INTEGER PRIMARY KEY).
            var fields: [String?] = columns
            var key = "s.rowid"
            if withoutRowid {
                let index = try texts("SELECT name FROM pragma_index_list(?1) WHERE origin = 'pk'", [.text(table)])
                guard let pk = index.first else { continue }
                let order = try source.rows("SELECT name, key FROM pragma_index_xinfo(?1) ORDER BY seqno", [.text(pk)])
                fields = order.compactMap { row -> String? in
                    if case .text(let n) = row[0] { return String(decoding: n, as: UTF8.self) }
                    return nil
                }
                let keyColumns = order.filter { $0[1] == .integer(1) }.compactMap { row -> String? in
                    if case .text(let n) = row[0] { return "quote(s.\(quoteIdentifier(String(decoding: n, as: UTF8.self))))" }
                    return nil
                }
                key = keyColumns.joined(separator: " || ',' || ")
            } else {
                let pk = info.filter { if case .integer(let k) = $0[3] { return k > 0 } else { return false } }
                if pk.count == 1, case .text(let t) = pk[0][2], asciiUpperCase(String(decoding: t, as: UTF8.self)) == "INTEGER",
                   case .integer(let cid) = pk[0][0] {
                    fields[Int(cid)] = nil
                }
            }
            func same(_ a: String, _ b: String) -> String { "\(a) IS \(b) COLLATE BINARY AND typeof(\(a)) = typeof(\(b))" }
            var found: [String] = []
            if present.contains(table) {
                let match = columns.map { same("r.\(quoteIdentifier($0))", "s.\(quoteIdentifier($0))") }
                let where_ = withoutRowid ? match : ["r.rowid = s.rowid"] + match
                found.append("EXISTS (SELECT 1 FROM main.\(q) AS r WHERE \(where_.joined(separator: " AND ")))")
            }
            for record in recordTables {
                var match = withoutRowid ? [] : ["l.\(record.id) = s.rowid"]
                for (i, field) in fields.enumerated() {
                    let value = field.map { "s.\(quoteIdentifier($0))" } ?? "NULL"
                    match.append(i < record.width ? same("l.c\(i)", value) : "\(value) IS NULL")
                }
                found.append("EXISTS (SELECT 1 FROM main.\(quoteIdentifier(record.name)) AS l WHERE \(match.joined(separator: " AND "))\(record.extra))")
            }
            guard !found.isEmpty else { continue }
            // One statement per place, so that one SQLite cannot read (a table
            // whose schema row it cannot parse) does not hide the others.
            for clause in found {
                script.append("SELECT \(SalvageTally.sqlString(table)), \(key) FROM o.\(q) AS s WHERE \(clause);")
            }
        }
        var kept = Set<String>()
        for line in try SalvageTally.sqlite3Lines(output, script.joined(separator: "\n"), original: original) {
            let parts = line.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 { kept.insert(parts[0] + "|" + parts[1]) }
        }
        return kept
    }

    static func asciiUpperCase(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 }, as: UTF8.self)
    }
}
