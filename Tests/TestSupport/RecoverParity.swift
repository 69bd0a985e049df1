// Damaged copies of a sound database made the same way on every run, and a
// tally of what a salvage of one kept of each table of the original, taken
// the same way of litectl's `recover` and of the sqlite3 shell's `.recover`
// (by the sqlite3 CLI, with the original attached), so that the two can be
// compared table by table.
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

    /// The damages tried on every database: random bit flips anywhere in
    /// the file, bit flips within one page, a zeroed page, a zeroed table
    /// leaf, a zeroed interior page of a table, a truncated file. Each is
    /// drawn from a generator seeded by the file's name and the damage's
    /// place in the list, so that a failure can be run again.
    public static func standard(for path: String, map: PageMap) -> [CorpusDamage] {
        let pageSize = map.pageSize
        let pageCount = Int(map.pageCount)
        var seed: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in DurableFolder.baseName(of: path).utf8 { seed = (seed ^ UInt64(byte)) &* 0x100_0000_01B3 }
        var damages: [CorpusDamage] = []
        var rng = SplitMix64(seed: seed)
        func page(_ rng: inout SplitMix64) -> Int { 2 + Int(rng.next() % UInt64(max(1, pageCount - 1))) }
        func zero(_ page: Int) -> @Sendable (inout [UInt8]) -> Void {
            { bytes in for i in (page - 1) * pageSize..<min(bytes.count, page * pageSize) { bytes[i] = 0 } }
        }

        for copy in 1...2 {
            let flips = (0..<16).map { _ in (rng.next(), UInt8(1) << (rng.next() % 8)) }
            damages.append(CorpusDamage(name: "16 random bits flipped (\(copy))") { bytes in
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
    /// value, with its type; TEXT and BLOB byte for byte).
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
        for rtree in rtrees where present.contains(rtree) {
            let q = quoteIdentifier(rtree)
            let columns = try columns(rtree)
            guard let id = columns.first.map(quoteIdentifier) else { continue }
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
