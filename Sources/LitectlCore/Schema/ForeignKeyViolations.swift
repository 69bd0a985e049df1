// The rows PRAGMA foreign_key_check reports, kept as a set so that a change
// can be judged by which rows it orphans, not by how many: a change that fixes
// k old orphans and makes k new ones leaves the count alone but is caught here.
// See https://www.sqlite.org/pragma.html#pragma_foreign_key_check

/// What foreign_key_check reports, each row once per time it is reported.
public struct ForeignKeyViolations: Sendable, Equatable {
    /// One reported row: the child table, its rowid (nil in a WITHOUT ROWID
    /// table), the parent table, and the foreign key by its child columns.
    /// The columns stand in for foreign_key_check's `fkid`, which is the
    /// key's place in the table's list: adding or dropping another key
    /// renumbers it, while its columns stay.
    public struct Violation: Hashable, Sendable, CustomStringConvertible {
        public var table: [UInt8]
        public var rowid: Int64?
        public var parent: [UInt8]
        /// The child columns, ASCII lower case, comma-separated ("" when not compared).
        public var key: [UInt8]

        public var description: String {
            let table = String(decoding: self.table, as: UTF8.self), parent = String(decoding: self.parent, as: UTF8.self)
            return "\(quoteIdentifier(table)) rowid \(rowid.map(String.init) ?? "?") -> \(quoteIdentifier(parent))"
        }
    }

    /// How many times each row is reported (a WITHOUT ROWID table's rows
    /// have no rowid to tell them apart).
    public private(set) var counts: [Violation: Int] = [:]

    public var count: Int { counts.values.reduce(0, +) }
    public var isEmpty: Bool { counts.isEmpty }

    /// Reads foreign_key_check of the main schema, or of `tables` only. For
    /// the tables in `ignoringKeyOf` the key columns are not compared (a table
    /// whose keys a transform rewrites: same rowid and parent is the same row).
    public static func read(_ connection: Connection, tables: [String]? = nil,
                            ignoringKeyOf ignored: [String] = []) throws -> ForeignKeyViolations {
        var result = ForeignKeyViolations()
        var keyColumns: [[UInt8]: [Int64: [UInt8]]] = [:]
        let ignoredKeys = Set(ignored.map { sqlNameKey($0) })
        func key(table: [UInt8], id: Int64) throws -> [UInt8] {
            if ignoredKeys.contains(table.map(asciiLower)) { return [] }
            if keyColumns[table] == nil {
                var byID: [Int64: [UInt8]] = [:]
                let list = try connection.prepare("SELECT id, \"from\" FROM pragma_foreign_key_list(?1, 'main') ORDER BY id, seq")
                try list.bind(.text(table), at: 1)
                try list.forEachRow { row in
                    let id = row.int64(at: 0)
                    var columns = byID[id] ?? []
                    if !columns.isEmpty { columns.append(UInt8(ascii: ",")) }
                    columns.append(contentsOf: row.bytes(at: 1).map(asciiLower))
                    byID[id] = columns
                }
                keyColumns[table] = byID
            }
            return keyColumns[table]?[id] ?? Array("#\(id)".utf8)
        }
        func add(_ row: Row) throws {
            let table = Array(row.bytes(at: 0))
            let violation = Violation(table: table, rowid: row.isNull(at: 1) ? nil : row.int64(at: 1),
                                      parent: Array(row.bytes(at: 2)), key: try key(table: table, id: row.int64(at: 3)))
            result.counts[violation, default: 0] += 1
        }
        if let tables {
            let check = try connection.prepare("SELECT \"table\", rowid, parent, fkid FROM pragma_foreign_key_check(?1, 'main')")
            for table in tables {
                try check.reset()
                try check.bind(.text(Array(table.utf8)), at: 1)
                try check.forEachRow(add)
            }
        } else {
            try connection.prepare("PRAGMA main.foreign_key_check").forEachRow(add)
        }
        return result
    }

    /// The rows reported here more often than in `before`: what a change orphaned.
    public func added(since before: ForeignKeyViolations) -> [Violation] {
        var out: [Violation] = []
        for (violation, n) in counts {
            let extra = n - (before.counts[violation] ?? 0)
            if extra > 0 { out.append(contentsOf: repeatElement(violation, count: extra)) }
        }
        return out.sorted { a, b in
            if a.table != b.table { return compareBytes(a.table, b.table) < 0 }
            if a.rowid != b.rowid { return (a.rowid ?? .min) < (b.rowid ?? .min) }
            if a.parent != b.parent { return compareBytes(a.parent, b.parent) < 0 }
            return compareBytes(a.key, b.key) < 0
        }
    }

    /// A short list of `violations` for a message: the first three and how many more.
    public static func describe(_ violations: [Violation]) -> String {
        var text = violations.prefix(3).map(\.description).joined(separator: ", ")
        if violations.count > 3 { text += " and \(violations.count - 3) more" }
        return text.replacingNewlines()
    }
}
