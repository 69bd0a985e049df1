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
        var counts: [String: [Int64: (parent: String, rows: Int)]] = [:]
        do {
            try db.prepare("PRAGMA main.foreign_key_check").forEachRow { row in
                let table = row.string(at: 0), id = row.int64(at: 3)
                counts[table, default: [:]][id, default: (row.string(at: 2), 0)].rows += 1
            }
        } catch let error as DatabaseError where error.code.primary == .error {
            problems.append("foreign keys could not be checked: \(error.message)")
            return []
        }
        var result: [RecoveryReport.ForeignKeyOrphans] = []
        let list = try db.prepare("SELECT id, \"from\", \"to\" FROM pragma_foreign_key_list(?1, 'main') ORDER BY id, seq")
        for table in counts.keys.sorted(by: { sqlNameKey($0).lexicographicallyPrecedes(sqlNameKey($1)) }) {
            var columns: [Int64: (from: [String], to: [String])] = [:]
            list.reset()
            try list.bind(.text(Array(table.utf8)), at: 1)
            try list.forEachRow { row in
                let id = row.int64(at: 0)
                columns[id, default: ([], [])].from.append(row.string(at: 1))
                if !row.isNull(at: 2) { columns[id, default: ([], [])].to.append(row.string(at: 2)) }
            }
            for (id, found) in counts[table, default: [:]].sorted(by: { $0.key < $1.key }) {
                result.append(.init(table: table, columns: columns[id]?.from ?? [], parent: found.parent,
                                    parentColumns: columns[id]?.to ?? [], rows: found.rows))
            }
        }
        return result
    }
}
