// Foreign keys a salvage left without their parent row: a row whose parent
// was on a lost page is kept (it is data), but `check` on OUT fails on it, so
// the report names each such foreign key and how many rows it leaves
// orphaned, as PRAGMA foreign_key_check finds them in OUT.
// https://www.sqlite.org/pragma.html#pragma_foreign_key_check

extension RecoveryRun {
    /// The foreign keys of OUT with rows whose parent row is missing, one
    /// entry per foreign key (by child table name, then the key's place in
    /// the table's list), whatever the foreign_keys setting. A key that
    /// foreign_key_check cannot judge (a parent key with no UNIQUE index,
    /// say, because that index could not be made) is reported as a problem.
    func foreignKeyOrphans() throws -> [RecoveryReport.ForeignKeyOrphans] {
        let db = out.db
        // Child table → foreign key id → (parent, its rows).
        // Keyed by the name's bytes: Swift's String equality would merge two
        // tables whose names differ only in Unicode normalization.
        var counts: [[UInt8]: [Int64: (parent: String, rows: Int)]] = [:]
        do {
            try db.prepare("PRAGMA main.foreign_key_check").forEachRow { row in
                let table = Array(row.bytes(at: 0)), id = row.int64(at: 3)
                counts[table, default: [:]][id, default: (row.string(at: 2), 0)].rows += 1
            }
        } catch let error as DatabaseError where error.code.primary == .error {
            problems.append("foreign keys could not be checked: \(error.message)")
            return []
        }
        var result: [RecoveryReport.ForeignKeyOrphans] = []
        let list = try db.prepare("SELECT id, \"from\", \"to\" FROM pragma_foreign_key_list(?1, 'main') ORDER BY id, seq")
        for tableBytes in counts.keys.sorted(by: { $0.map(asciiLower).lexicographicallyPrecedes($1.map(asciiLower)) }) {
            let table = String(decoding: tableBytes, as: UTF8.self)
            var columns: [Int64: (from: [String], to: [String])] = [:]
            list.reset()
            try list.bind(.text(tableBytes), at: 1)
            try list.forEachRow { row in
                let id = row.int64(at: 0)
                columns[id, default: ([], [])].from.append(row.string(at: 1))
                if !row.isNull(at: 2) { columns[id, default: ([], [])].to.append(row.string(at: 2)) }
            }
            for (id, found) in counts[tableBytes, default: [:]].sorted(by: { $0.key < $1.key }) {
                result.append(.init(table: table, columns: columns[id]?.from ?? [], parent: found.parent,
                                    parentColumns: columns[id]?.to ?? [], rows: found.rows))
            }
        }
        return result
    }
}
