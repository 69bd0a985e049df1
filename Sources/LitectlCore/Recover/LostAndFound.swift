// The lost_and_found table of a recovered database, as the shell's .recover
// makes it, with two more columns: rows that could be read but not placed in
// their table (on pages no b-tree reaches that fit no known table, out of
// place on a damaged page, refused by the new schema, or with a value lost to
// a broken overflow chain), each with where it was found and why. Made on
// the first such row; a column is added when a wider row comes.
import CSQLite

/// Rows salvage could read but not put in a table.
final class LostAndFound {
    private let database: RecoveredDatabase
    private(set) var name: String?
    private(set) var rows = 0
    private var width = 0
    private var statement: Statement?
    /// The fixed columns before the values c0, c1, ...
    static let fixedColumns = ["rootpgno", "pgno", "cell", "nfield", "id", "reason"]

    init(database: RecoveredDatabase) { self.database = database }

    /// Finalizes the INSERT (before the database closes).
    func close() { statement = nil }

    /// Adds `record`'s fields (NULL for any whose bytes were lost), found in
    /// cell `cell` of page `page` of the b-tree rooted at `root` (0 when not
    /// known), with its rowid when it had one.
    func add(root: UInt32, page: UInt32, cell: Int, rowid: Int64?, record: SalvagedRecord, reason: String) throws {
        let db = database.db
        if name == nil {
            var candidate = "lost_and_found"
            var n = 0
            while try database.hasObject(candidate) {
                candidate = "lost_and_found_\(n)"
                n += 1
            }
            try db.execute("CREATE TABLE main.\(quoteIdentifier(candidate))(rootpgno INTEGER, pgno INTEGER, cell INTEGER, "
                           + "nfield INTEGER, id INTEGER, reason TEXT)")
            name = candidate
        }
        guard let name else { return }
        let kept = min(record.count, SalvagedRecord.maxColumns)
        if kept > width || statement == nil {
            while width < kept {
                try db.execute("ALTER TABLE main.\(quoteIdentifier(name)) ADD COLUMN c\(width)")
                width += 1
            }
            let columns = (LostAndFound.fixedColumns + (0..<width).map { "c\($0)" }).joined(separator: ", ")
            let values = (1...(LostAndFound.fixedColumns.count + width)).map { "?\($0)" }.joined(separator: ", ")
            statement = try db.prepare("INSERT INTO main.\(quoteIdentifier(name))(\(columns)) VALUES (\(values))")
        }
        guard let statement else { return }
        let handle = statement.handle
        sqlite3_clear_bindings(handle)
        sqlite3_bind_int64(handle, 1, Int64(root))
        sqlite3_bind_int64(handle, 2, Int64(page))
        sqlite3_bind_int64(handle, 3, Int64(cell))
        sqlite3_bind_int64(handle, 4, Int64(record.count))
        if let rowid { sqlite3_bind_int64(handle, 5, rowid) }
        bindOwned(handle, 6, .text(reason))
        for f in 0..<kept {
            if let cell = record.cell(f) { bindRaw(handle, Int32(7 + f), cell, encoding: database.settings.encoding) }
        }
        try statement.step()
        statement.reset()
        rows += 1
    }
}
