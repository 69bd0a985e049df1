// An empty in-memory copy of a database's schema: every table, index, view and
// trigger, no rows. `transform` runs each change on it first, so that an index,
// view or trigger the change would break is found before the user's file is
// touched, and `--sql` can show the statements without writing anything.
// Each stored text must be exactly one statement (SchemaStatement), and the
// replica can attach no file.
import CSQLite

enum SchemaReplica {
    /// A new in-memory database holding the schema objects of `connection`'s
    /// main schema, created in their sqlite_schema order. SQLite's own tables
    /// and automatic indexes come back by themselves; shadow tables come back
    /// with their virtual table. A virtual table whose module this SQLite lacks
    /// is left out (it cannot be transformed anyway).
    static func make(from connection: Connection) throws -> Connection {
        let replica = try Connection(inMemory: connection.busyTimeout)
        let shadows = Set(try connection.rows("SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'shadow'")
            .compactMap { row -> [UInt8]? in if case .text(let b) = row[0] { return b.map(asciiLower) } else { return nil } })
        let objects = try connection.rows("""
            SELECT type, name, sql FROM main.sqlite_schema
            WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid
            """)
        try replica.execute("PRAGMA legacy_alter_table=OFF")
        // The replica runs stored text: it may touch no other file.
        sqlite3_limit(replica.rawHandle, SQLITE_LIMIT_ATTACHED, 0)
        for object in objects {
            guard case .text(let nameBytes) = object[1], case .text(let sqlBytes) = object[2] else { continue }
            if shadows.contains(nameBytes.map(asciiLower)) { continue }
            let sql = String(decoding: sqlBytes, as: UTF8.self)
            // SQLite parsed only the first statement of the text when it opened
            // the file; a hostile file may hide more after it (ATTACH, say).
            var type = ""
            if case .text(let typeBytes) = object[0] { type = String(decoding: typeBytes, as: UTF8.self) }
            try SchemaStatement.require(sql, object: "\(type) \(quoteIdentifier(String(decoding: nameBytes, as: UTF8.self)))",
                                        path: connection.path)
            do {
                try replica.execute(sql)
            } catch let error as DatabaseError {
                if case .text(let type) = object[0], type == Array("table".utf8), sql.uppercased().contains("VIRTUAL") { continue }
                throw DatabaseError(code: error.code, message: "cannot read the schema: \(error.message)",
                                    path: connection.path, sql: sql)
            }
        }
        return replica
    }
}
