// Reads a schema through SQLite's own introspection: sqlite_schema for the
// objects and their SQL, the pragma table-valued functions (table_list,
// table_xinfo, index_list, index_xinfo, foreign_key_list) for the details, and
// sqlite3_table_column_metadata for collations and AUTOINCREMENT.
// See https://www.sqlite.org/pragma.html#pragfunc
import CSQLite

extension Connection {
    /// Every object of schema `schemaName` (default `main`). Names are bound,
    /// never spliced. A virtual table whose module is missing or a view that
    /// does not compile is kept, with its `problem` set.
    public func readSchema(_ schemaName: String = "main") throws -> Schema {
        let schemaTable = quoteIdentifier(schemaName) + ".sqlite_schema"
        var objects: [(type: String, name: String, table: String, sql: String?)] = []
        let list = try prepare("SELECT type, name, tbl_name, sql FROM \(schemaTable) ORDER BY name")
        try list.forEachRow { row in
            objects.append((row.string(at: 0), row.string(at: 1), row.string(at: 2),
                            row.isNull(at: 3) ? nil : row.string(at: 3)))
        }

        // Keyed by bytes: Swift String keys would merge NFC and NFD spellings.
        var tableKinds: [[UInt8]: (type: String, withoutRowid: Bool, strict: Bool)] = [:]
        let tableList = try prepare("SELECT name, type, wr, strict FROM pragma_table_list WHERE schema = ?1")
        try tableList.bind([.text(schemaName)])
        try tableList.forEachRow { row in
            tableKinds[Array(row.bytes(at: 0))] = (row.string(at: 1), row.int64(at: 2) != 0, row.int64(at: 3) != 0)
        }

        var schema = Schema(schemaName: schemaName, tables: [], indexes: [], views: [], triggers: [])
        for object in objects {
            switch object.type {
            case "table":
                let facts = tableKinds[Array(object.name.utf8)]
                let kind: Table.Kind
                if sqlNameHasPrefix(object.name, "sqlite_") {
                    kind = .internal
                } else {
                    switch facts?.type {
                    case "virtual": kind = .virtual
                    case "shadow": kind = .shadow
                    default: kind = .ordinary
                    }
                }
                schema.tables.append(readTable(object.name, kind: kind, withoutRowid: facts?.withoutRowid ?? false,
                                               strict: facts?.strict ?? false, sql: object.sql, schemaName: schemaName))
            case "index":
                do {
                    schema.indexes.append(try readIndex(object.name, table: object.table, sql: object.sql, schemaName: schemaName))
                } catch {
                    schema.indexes.append(Index(name: object.name, table: object.table, unique: false, origin: .createIndex,
                                                partial: false, parts: [], sql: object.sql, problem: "\(error)"))
                }
            case "view":
                var view = View(name: object.name, sql: object.sql ?? "", columns: [], problem: nil)
                do {
                    view.columns = try columns(of: object.name, schemaName: schemaName).map(\.name)
                } catch let error as DatabaseError {
                    view.problem = error.message
                }
                schema.views.append(view)
            case "trigger":
                schema.triggers.append(Trigger(name: object.name, table: object.table, sql: object.sql ?? ""))
            default:
                continue
            }
        }
        return schema
    }

    private func readTable(_ name: String, kind: Table.Kind, withoutRowid: Bool, strict: Bool, sql: String?,
                           schemaName: String) -> Table {
        var table = Table(name: name, kind: kind, withoutRowid: withoutRowid, strict: strict, autoincrement: false,
                          columns: [], foreignKeys: [], sql: sql, problem: nil)
        do {
            table.columns = try columns(of: name, schemaName: schemaName)
            if kind != .virtual {
                for i in table.columns.indices {
                    let facts = columnMetadata(schemaName, name, table.columns[i].name)
                    table.columns[i].collation = facts.collation
                    if facts.autoincrement { table.autoincrement = true }
                }
            }
            table.foreignKeys = try foreignKeys(of: name, schemaName: schemaName)
            if kind == .ordinary, !withoutRowid, table.primaryKey.count == 1 {
                let keyIndexes = try prepare("SELECT count(*) FROM pragma_index_list(?1, ?2) WHERE origin = 'pk'")
                try keyIndexes.bind([.text(name), .text(schemaName)])
                _ = try keyIndexes.step()
                table.hasRowidAlias = keyIndexes.currentRow.int64(at: 0) == 0
            }
        } catch let error as DatabaseError {
            table.problem = error.message
        } catch {
            table.problem = "\(error)"
        }
        return table
    }

    private func columns(of name: String, schemaName: String) throws -> [Column] {
        let statement = try prepare("""
            SELECT name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?1, ?2) ORDER BY cid
            """)
        try statement.bind([.text(name), .text(schemaName)])
        var result: [Column] = []
        try statement.forEachRow { row in
            result.append(Column(name: row.string(at: 0), declaredType: row.string(at: 1), notNull: row.int64(at: 2) != 0,
                                 defaultSQL: row.isNull(at: 3) ? nil : row.string(at: 3),
                                 primaryKeyPosition: Int(row.int64(at: 4)),
                                 hidden: Column.Hidden(rawValue: Int(row.int64(at: 5))) ?? .normal,
                                 collation: "BINARY"))
        }
        return result
    }

    /// Collation and AUTOINCREMENT of one column
    /// (https://www.sqlite.org/c3ref/table_column_metadata.html).
    private func columnMetadata(_ schemaName: String, _ table: String, _ column: String) -> (collation: String, autoincrement: Bool) {
        var declaredType: UnsafePointer<CChar>?
        var collation: UnsafePointer<CChar>?
        var notNull: Int32 = 0, primaryKey: Int32 = 0, autoincrement: Int32 = 0
        let rc = sqlite3_table_column_metadata(rawHandle, schemaName, table, column, &declaredType, &collation,
                                               &notNull, &primaryKey, &autoincrement)
        guard rc == SQLITE_OK else { return ("BINARY", false) }
        return (collation.map { String(cString: $0) } ?? "BINARY", autoincrement != 0)
    }

    private func foreignKeys(of table: String, schemaName: String) throws -> [ForeignKey] {
        let statement = try prepare("""
            SELECT id, "table", "from", "to", on_update, on_delete FROM pragma_foreign_key_list(?1, ?2) ORDER BY id, seq
            """)
        try statement.bind([.text(table), .text(schemaName)])
        var result: [ForeignKey] = []
        var currentID: Int64 = -1
        try statement.forEachRow { row in
            if row.int64(at: 0) != currentID {
                currentID = row.int64(at: 0)
                result.append(ForeignKey(parentTable: row.string(at: 1), columns: [], parentColumns: [],
                                         onUpdate: row.string(at: 4), onDelete: row.string(at: 5)))
            }
            result[result.count - 1].columns.append(row.string(at: 2))
            result[result.count - 1].parentColumns.append(row.isNull(at: 3) ? nil : row.string(at: 3))
        }
        return result
    }

    private func readIndex(_ name: String, table: String, sql: String?, schemaName: String) throws -> Index {
        let list = try prepare("""
            SELECT "unique", origin, partial FROM pragma_index_list(?1, ?2) WHERE name = ?3
            """)
        try list.bind([.text(table), .text(schemaName), .text(name)])
        var unique = false, origin = Index.Origin.createIndex, partial = false
        if try list.step() {
            unique = list.value(at: 0) == .integer(1)
            origin = Index.Origin(rawValue: list.currentRow.string(at: 1)) ?? .createIndex
            partial = list.value(at: 2) == .integer(1)
        }
        let info = try prepare("""
            SELECT cid, name, "desc", coll FROM pragma_index_xinfo(?1, ?2) WHERE "key" = 1 ORDER BY seqno
            """)
        try info.bind([.text(name), .text(schemaName)])
        var parts: [Index.Part] = []
        try info.forEachRow { row in
            parts.append(Index.Part(name: row.isNull(at: 1) ? nil : row.string(at: 1), columnID: Int(row.int64(at: 0)),
                                    descending: row.int64(at: 2) != 0, collation: row.string(at: 3)))
        }
        return Index(name: name, table: table, unique: unique, origin: origin, partial: partial, parts: parts, sql: sql,
                     problem: nil)
    }
}
