// Applies a changeset (the session extension's format) to a database in one
// transaction with sqlite3changeset_apply, and finishes the changes it cannot
// apply one at a time: rows that swap a UNIQUE value, or pass one along a
// cycle, each collide with another row of the changeset that still holds it.
// See https://www.sqlite.org/session/sqlite3changeset_apply.html
import CSQLite

/// What to do when a change in a changeset meets a conflict
/// (https://www.sqlite.org/session/sqlite3changeset_apply.html).
public enum ConflictPolicy: String, Sendable, CaseIterable {
    /// Roll everything back.
    case abort
    /// Skip the conflicting change.
    case omit
    /// Overwrite the conflicting row (where SQLite allows it; otherwise omit).
    case replace
}

extension PatchApplier {
    /// True when `data` is a changeset rather than SQL text (a changeset starts
    /// with 'T' and holds a NUL after the table name; SQL text holds none).
    public static func isChangeset(_ data: [UInt8]) -> Bool {
        data.first == UInt8(ascii: "T") && data.contains(0)
    }

    /// Applies a changeset to the database at `path` in one transaction.
    ///
    /// sqlite3changeset_apply puts a change that violates a constraint aside
    /// and tries it again after the others; what still fails then (a swap, a
    /// cycle: every row waits for another) it reports as a CONSTRAINT
    /// conflict. Those changes are kept and applied together once it is done,
    /// as rows deleted first and inserted after (foreign keys are off, so no
    /// DELETE cascades): the rows that free a value are gone before any takes
    /// it. Only if that fails too does `policy` decide (abort: roll back;
    /// omit or replace: leave them out, as SQLite would).
    public static func applyChangeset(path: String, changeset: [UInt8], policy: ConflictPolicy, invert: Bool, dryRun: Bool,
                                      busyTimeout: Int = Connection.defaultBusyTimeout) throws -> PatchResult {
        var data = changeset
        if invert {
            var size: Int32 = 0
            var inverted: UnsafeMutableRawPointer?
            let rc = data.withUnsafeMutableBytes { sqlite3changeset_invert(Int32($0.count), $0.baseAddress, &size, &inverted) }
            guard rc == SQLITE_OK, let inverted else {
                throw DatabaseError(code: ResultCode(rawValue: rc), message: "cannot invert the changeset (not a valid changeset?)")
            }
            data = Array(UnsafeRawBufferPointer(start: inverted, count: Int(size)))
            sqlite3_free(inverted)
        }
        let connection = try Connection(path: path, mode: .readWrite, busyTimeout: busyTimeout)
        try connection.execute("PRAGMA foreign_keys=OFF")
        var result = PatchResult()
        let conflictMessage = "a change conflicts with the database (use --on-conflict omit or replace)"
        try InPlaceWrite.run(connection, target: path, consequence: "nothing applied, \(DurableFolder.baseName(of: path)) is as it was") {
        try connection.writeTransaction(commit: !dryRun) {
            let before = sqlite3_total_changes64(connection.rawHandle)
            let context = ApplyContext(policy: policy)
            let rc = withExtendedLifetime(context) {
                data.withUnsafeMutableBytes { raw in
                    sqlite3changeset_apply(connection.rawHandle, Int32(raw.count), raw.baseAddress, nil, { pointer, conflict, iterator in
                        let context = Unmanaged<ApplyContext>.fromOpaque(pointer!).takeUnretainedValue()
                        if conflict == SQLITE_CHANGESET_CONSTRAINT, let iterator, context.keep(iterator) {
                            return SQLITE_CHANGESET_OMIT
                        }
                        switch context.policy {
                        case .abort: return SQLITE_CHANGESET_ABORT
                        case .replace where conflict == SQLITE_CHANGESET_DATA || conflict == SQLITE_CHANGESET_CONFLICT:
                            return SQLITE_CHANGESET_REPLACE
                        default: return SQLITE_CHANGESET_OMIT
                        }
                    }, Unmanaged.passUnretained(context).toOpaque())
                }
            }
            if rc != SQLITE_OK {
                var message = rc == SQLITE_ABORT ? conflictMessage : String(cString: sqlite3_errmsg(connection.rawHandle))
                if rc != SQLITE_ABORT, let wide = widestTable(data), wide.columns >= wideTableColumns {
                    message = "table \(wide.name) has \(groupedDigits(wide.columns)) columns: SQLite's session extension cannot apply "
                        + "changes to a table this wide (the statements it prepares test every column in one expression, deeper "
                        + "than SQLite's limit, SQLITE_MAX_EXPR_DEPTH, 1,000); apply the diff as SQL (litectl diff --format sql)"
                        + (message == "not an error" ? "" : " (SQLite: \(message))")
                }
                throw DatabaseError(code: ResultCode(rawValue: rc), message: message, path: path)
            }
            let applied = sqlite3_total_changes64(connection.rawHandle) - before
            var finished = 0
            if !context.kept.isEmpty {
                do {
                    try connection.execute("SAVEPOINT litectl_kept_changes")
                    do {
                        try context.applyKept(connection)
                        try connection.execute("RELEASE litectl_kept_changes")
                        finished = context.kept.count
                    } catch {
                        try? connection.execute("ROLLBACK TO litectl_kept_changes")
                        try? connection.execute("RELEASE litectl_kept_changes")
                        throw error
                    }
                } catch let error as DatabaseError where policy == .abort {
                    throw DatabaseError(code: error.code, message: "\(conflictMessage): \(error.message)", path: path)
                } catch where policy != .abort && Interruption.received == nil {
                    // Left out, as sqlite3changeset_apply leaves out what conflicts under omit.
                }
            }
            result.rowsChanged = Int(applied) + finished
        }
        }
        result.committed = !dryRun
        return result
    }
}

/// Tables of at least this many columns are past what sqlite3changeset_apply
/// applies: it prepares a DELETE whose WHERE tests every column, joined by
/// AND, which SQLite parses into a tree as deep as the columns are many
/// (measured with SQLite 3.40.1: 990 columns apply, 1,000 do not).
let wideTableColumns = 990

/// The table of `changeset` with the most columns (nil when none can be read).
func widestTable(_ changeset: [UInt8]) -> (name: String, columns: Int)? {
    var data = changeset
    return data.withUnsafeMutableBytes { raw -> (name: String, columns: Int)? in
        var iterator: OpaquePointer?
        guard sqlite3changeset_start(&iterator, Int32(raw.count), raw.baseAddress) == SQLITE_OK, let iterator else { return nil }
        defer { sqlite3changeset_finalize(iterator) }
        var widest: (name: String, columns: Int)?
        while sqlite3changeset_next(iterator) == SQLITE_ROW {
            var name: UnsafePointer<CChar>?
            var columns: Int32 = 0, operation: Int32 = 0, indirect: Int32 = 0
            guard sqlite3changeset_op(iterator, &name, &columns, &operation, &indirect) == SQLITE_OK, let name else { break }
            if Int(columns) > widest?.columns ?? -1 { widest = (String(cString: name), Int(columns)) }
        }
        return widest
    }
}

/// The conflict handler's state: the policy, and the changes it kept aside
/// (values copied with sqlite3_value_dup, in the database's own encoding).
final class ApplyContext {
    struct Change {
        var table: String
        var operation: Int32
        /// Per column: part of the primary key?
        var primaryKey: [Bool]
        /// Per column; nil where the changeset holds no value (an UPDATE's unchanged columns).
        var old: [OpaquePointer?]
        var new: [OpaquePointer?]
    }

    let policy: ConflictPolicy
    var kept: [Change] = []

    init(policy: ConflictPolicy) { self.policy = policy }

    deinit {
        for change in kept {
            for value in change.old + change.new { sqlite3_value_free(value) }
        }
    }

    /// Keeps the change `iterator` is at; false when it cannot be read.
    func keep(_ iterator: OpaquePointer) -> Bool {
        var name: UnsafePointer<CChar>?
        var columns: Int32 = 0, operation: Int32 = 0, indirect: Int32 = 0
        guard sqlite3changeset_op(iterator, &name, &columns, &operation, &indirect) == SQLITE_OK, let name else { return false }
        var flags: UnsafeMutablePointer<UInt8>?
        guard sqlite3changeset_pk(iterator, &flags, nil) == SQLITE_OK, let flags else { return false }
        var change = Change(table: String(cString: name), operation: operation,
                            primaryKey: (0..<Int(columns)).map { flags[$0] != 0 }, old: [], new: [])
        for i in 0..<columns {
            var value: OpaquePointer?
            if operation != SQLITE_INSERT, sqlite3changeset_old(iterator, i, &value) == SQLITE_OK, let value {
                change.old.append(sqlite3_value_dup(value))
            } else {
                change.old.append(nil)
            }
            value = nil
            if operation != SQLITE_DELETE, sqlite3changeset_new(iterator, i, &value) == SQLITE_OK, let value {
                change.new.append(sqlite3_value_dup(value))
            } else {
                change.new.append(nil)
            }
        }
        kept.append(change)
        return true
    }

    /// Applies the kept changes together: every row an UPDATE or DELETE
    /// names is deleted first (an UPDATE's row read in full beforehand), then
    /// the new rows of the UPDATEs and INSERTs are inserted. Triggers are off
    /// meanwhile: a DELETE and an INSERT are not the UPDATE a trigger would
    /// expect to see, so none fires for these rows.
    func applyKept(_ connection: Connection) throws {
        let db = connection.rawHandle
        var triggers: Int32 = 1
        _ = litectl_db_config_bool(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, -1, &triggers)
        var ignored: Int32 = 0
        let rc = litectl_db_config_bool(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, &ignored)
        guard rc == SQLITE_OK else { throw DatabaseError(code: ResultCode(rawValue: rc), message: "cannot turn triggers off") }
        defer { _ = litectl_db_config_bool(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, triggers, &ignored) }
        var rows: [(table: String, values: [OpaquePointer?])] = []
        defer { for row in rows { for value in row.values { sqlite3_value_free(value) } } }
        for change in kept where change.operation != SQLITE_INSERT {
            let columns = try columnNames(connection, change.table, count: change.primaryKey.count)
            let key = change.primaryKey.indices.filter { change.primaryKey[$0] }
            let condition = key.enumerated().map { n, i in "\(quoteIdentifier(columns[i])) = ?\(n + 1)" }.joined(separator: " AND ")
            if change.operation == SQLITE_UPDATE {
                let select = try connection.prepare("SELECT \(columns.map(quoteIdentifier).joined(separator: ", ")) FROM "
                                                    + "\(quoteIdentifier("main", change.table)) WHERE \(condition)")
                try bind(select, key.map { change.old[$0] })
                guard try select.step() else {
                    throw DatabaseError(code: .constraint, message: "a row of table \(change.table) the changeset updates is gone")
                }
                rows.append((change.table, columns.indices.map { i in
                    sqlite3_value_dup(change.new[i] ?? sqlite3_column_value(select.handle, Int32(i)))
                }))
            }
            let delete = try connection.prepare("DELETE FROM \(quoteIdentifier("main", change.table)) WHERE \(condition)")
            try bind(delete, key.map { change.old[$0] })
            _ = try delete.step()
            guard sqlite3_changes(connection.rawHandle) == 1 else {
                throw DatabaseError(code: .constraint, message: "a row of table \(change.table) the changeset changes is gone")
            }
        }
        for change in kept where change.operation == SQLITE_INSERT {
            rows.append((change.table, change.new.map { $0.flatMap(sqlite3_value_dup) }))
        }
        for row in rows {
            let columns = try columnNames(connection, row.table, count: row.values.count)
            let insert = try connection.prepare("INSERT INTO \(quoteIdentifier("main", row.table))("
                                                + columns.map(quoteIdentifier).joined(separator: ", ") + ") VALUES("
                                                + columns.indices.map { "?\($0 + 1)" }.joined(separator: ", ") + ")")
            try bind(insert, row.values)
            _ = try insert.step()
        }
    }

    /// The table's columns as the session extension counts them
    /// (`PRAGMA table_info`: no generated or hidden columns), which must be
    /// as many as the change holds.
    func columnNames(_ connection: Connection, _ table: String, count: Int) throws -> [String] {
        let names = try connection.rows("SELECT name FROM pragma_table_info(?1, 'main')", [.text(table)]).map { row -> String in
            if case .text(let bytes) = row[0] { return String(decoding: bytes, as: UTF8.self) }
            return ""
        }
        guard names.count == count else {
            throw DatabaseError(code: .schema, message: "table \(table) has \(names.count) columns; the changeset has \(count)")
        }
        return names
    }

    func bind(_ statement: Statement, _ values: [OpaquePointer?]) throws {
        for (i, value) in values.enumerated() {
            let rc = value.map { sqlite3_bind_value(statement.handle, Int32(i + 1), $0) } ?? sqlite3_bind_null(statement.handle, Int32(i + 1))
            guard rc == SQLITE_OK else { throw DatabaseError(code: ResultCode(rawValue: rc), message: "cannot bind a value") }
        }
    }
}
