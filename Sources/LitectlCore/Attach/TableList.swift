// The tables and views of every database of a session (`litectl tables`):
// schema, name, kind, rowid/WITHOUT ROWID, STRICT, and on request the row
// count and the columns.

/// One table or view of an attached database.
public struct TableEntry: Sendable {
    /// The file as the caller named it (or as SQLite reports it; "" in memory).
    public var file: String
    /// The schema name: main, temp or an alias.
    public var schema: String
    public var name: String
    /// table, view, virtual, shadow (a virtual table's storage) or internal (sqlite_sequence, sqlite_stat1, ...).
    public var type: String
    public var withoutRowid: Bool
    public var strict: Bool
    /// `count(*)` when asked for (nil for views, or a virtual table whose module is missing).
    public var rowCount: Int64?
    /// Name and declared type of each column, in order.
    public var columns: [(name: String, declaredType: String)]
}

extension AttachedSession {
    /// Every table and view of every database of the session (temp included
    /// when it has any), by schema in `database_list` order, then by name.
    /// With `counts`, each table's rows are counted (a full scan of each).
    public func tableList(counts: Bool) throws -> [TableEntry] {
        var entries: [TableEntry] = []
        for database in try databases() {
            let schema = try connection.readSchema(database.name)
            let file = database.givenPath ?? database.file
            var found: [TableEntry] = []
            for table in schema.tables {
                var entry = TableEntry(file: file, schema: database.name, name: table.name, type: table.kind.rawValue,
                                       withoutRowid: table.withoutRowid, strict: table.strict, rowCount: nil,
                                       columns: table.columns.map { ($0.name, $0.declaredType) })
                if counts {
                    entry.rowCount = try? connection.scalar("SELECT count(*) FROM \(quoteIdentifier(database.name, table.name))")
                        .flatMap { if case .integer(let n) = $0 { n } else { nil } }
                }
                found.append(entry)
            }
            for view in schema.views {
                found.append(TableEntry(file: file, schema: database.name, name: view.name, type: "view",
                                        withoutRowid: false, strict: false, rowCount: nil,
                                        columns: view.columns.map { ($0, "") }))
            }
            found.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            entries += found
        }
        return entries
    }
}
