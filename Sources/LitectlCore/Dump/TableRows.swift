// Reads one table's rows for a dump, in its b-tree's order, and stops with a
// `DumpStopped` error naming the table and the row where reading failed: a
// dump is complete or it is an error, never silently short (the sqlite3
// shell's .dump notes the damage in a comment, skips rows and exits 0).
import CSQLite

/// A dump that could not read a table to its end.
public struct DumpStopped: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var table: String
    /// Rows read (and written) before the failure; the failing row is the next one.
    public var rowsRead: Int64
    /// The rowid of the last row read, when the table's rows carry one.
    public var lastRowid: Int64?
    /// Set when the dump refused the next row rather than failed to read it
    /// (no SQL can insert it): `.some` of its rowid, when the dump reads one.
    public var refusedRowid: Int64?? = nil
    /// SQLite's error, or what litectl saw.
    public var cause: DatabaseError
    /// True when the cause says the file is damaged (not, say, a lock).
    public var isDamage: Bool {
        [.corrupt, .notadb, .ioerr].contains(cause.code.primary)
    }

    public init(path: String, table: String, rowsRead: Int64, lastRowid: Int64?, refusedRowid: Int64?? = nil,
                cause: DatabaseError) {
        self.path = path
        self.table = table
        self.rowsRead = rowsRead
        self.lastRowid = lastRowid
        self.refusedRowid = refusedRowid
        self.cause = cause
    }

    public var description: String {
        if let refused = refusedRowid {
            return "\(path): table \(quoteIdentifier(table)): row \(rowsRead + 1)\(refused.map { " (rowid \($0))" } ?? ""): "
                + "\(cause.message); the dump stopped before it"
        }
        var line = "\(path): table \(quoteIdentifier(table)): row \(rowsRead + 1) could not be read"
        if let lastRowid { line += " (the row after rowid \(lastRowid))" }
        line += ": \(cause.message)"
        if cause.code.primary == .toobig {
            // A value written by a SQLite built with a larger limit.
            line += " (a value longer than this SQLite reads: its limit on a string or BLOB, SQLITE_MAX_LENGTH)"
        }
        if isDamage {
            line += "; the dump stopped there: the database is damaged (litectl recover salvages what can be read)"
        }
        return line
    }
}

enum TableRows {
    /// The SELECT that reads `table`'s written columns: its result columns,
    /// and what follows them. Ordinary tables are read `NOT INDEXED`: a
    /// covering index would hand rows out in another order, and would hide a
    /// damaged table b-tree. A row wider than SQLite returns at once (the
    /// rowid and 2,000 columns) is read in parts (`WideSelect`), in rowid
    /// order (a virtual table's too).
    static func select(_ table: DumpTable, connection: Connection) throws -> WideSelect {
        let names = table.writtenColumns.enumerated().map { i, name in
            i == 0 && table.rowidAlias != nil ? name : quoteIdentifier(name)
        }
        let hint = table.role == .virtual ? "" : " NOT INDEXED"
        var tail = " FROM main.\(quoteIdentifier(table.name))\(hint)"
        if names.count > connection.columnLimit, table.role == .virtual, let rowid = table.rowidAlias {
            tail += " ORDER BY \(rowid)"
        }
        return try WideSelect(connection, columns: names, tail: tail)
    }

    /// Calls `body` with each row of `table` (a view valid during the call),
    /// and returns how many rows there were. Any failure to read becomes
    /// `DumpStopped`; so does a rowid that does not grow, which a b-tree
    /// gives only when a damaged page points at the wrong child.
    static func forEach(_ table: DumpTable, connection: Connection, _ body: (WideRow) throws -> Void) throws -> Int64 {
        let statement: WideSelect
        do {
            statement = try select(table, connection: connection)
        } catch let error as DatabaseError {
            throw DumpStopped(path: connection.path, table: table.name, rowsRead: 0, lastRowid: nil, cause: error)
        }
        var rows: Int64 = 0
        var lastRowid: Int64? = nil
        let position = table.rowidPosition
        let row = statement.currentRow
        while true {
            let more: Bool
            do {
                more = try statement.step()
            } catch let error as DatabaseError {
                throw DumpStopped(path: connection.path, table: table.name, rowsRead: rows, lastRowid: lastRowid, cause: error)
            }
            guard more else { break }
            if let position {
                let rowid = row.int64(at: position)
                if let last = lastRowid, rowid <= last {
                    throw DumpStopped(path: connection.path, table: table.name, rowsRead: rows, lastRowid: lastRowid,
                                      cause: DatabaseError(code: .corrupt, message: "rowid \(rowid) out of order (database disk image is malformed)"))
                }
                lastRowid = rowid
            }
            try body(row)
            rows += 1
        }
        return rows
    }
}
