// The one error type of litectl's core: a SQLite result code (primary and
// extended), a message a person can read, and the file and SQL it concerns.
import CSQLite

/// An error from SQLite or from litectl's own checks around it.
///
/// `description` is the one line the CLI prints on stderr:
/// `PATH: message` (with the SQL appended when there is one).
public struct DatabaseError: Error, CustomStringConvertible, Sendable {
    /// The extended result code (its `primary` gives the primary code).
    public var code: ResultCode
    /// What went wrong, in words (SQLite's message, or litectl's own).
    public var message: String
    /// The database file concerned, when there is one.
    public var path: String?
    /// The SQL that failed, when there is one.
    public var sql: String?

    public init(code: ResultCode, message: String, path: String? = nil, sql: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.sql = sql
    }

    /// The primary result code.
    public var primaryCode: ResultCode { code.primary }

    public var description: String {
        var line = ""
        if let path { line += "\(path): " }
        line += message
        if let sql {
            let flat = sql.split(whereSeparator: \.isNewline).joined(separator: " ")
            let shown = flat.count > 200 ? flat.prefix(200) + "…" : Substring(flat)
            line += " (in SQL: \(shown))"
        }
        return line
    }

    /// The one wording of a lock wait that ran out, with the wait really
    /// made (measured, not the timeout asked for): every command says it so.
    public static func lockedMessage(waited seconds: Double) -> String {
        let shown = seconds < 0.1 ? "\(Int((seconds * 1000).rounded())) ms" : "\((seconds * 10).rounded() / 10) s"
        return "database is locked by another process (gave up after waiting \(shown))"
    }

    /// SQLITE_READONLY_ROLLBACK in words: a read-only connection met a hot
    /// journal (read-only opens read the committed state instead, see
    /// HotJournal; this is for a journal that turned hot while a command ran).
    static let hotJournalMessage = "the rollback journal is hot (a writer stopped inside a transaction), and a read-only connection cannot roll it back: run the command again to read the last committed state, or open the database read-write once (any application, or sqlite3) to roll it back"

    /// The error the connection `db` holds right now.
    static func fromConnection(_ db: OpaquePointer?, code: Int32, path: String?, sql: String? = nil) -> DatabaseError {
        let extended = db.map { sqlite3_extended_errcode($0) } ?? code
        let message = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            ?? String(cString: sqlite3_errstr(code))
        // sqlite3_extended_errcode can lag behind for some APIs; keep the one we were given when they disagree.
        let chosen = (extended & 0xFF) == (code & 0xFF) ? extended : code
        if ResultCode(rawValue: chosen) == .readonlyRollback {
            // SQLite's words ("attempt to write a readonly database") hide the cause.
            return DatabaseError(code: .readonlyRollback, message: hotJournalMessage, path: path, sql: sql)
        }
        // A page a PageVFS source could not give: its words, not "disk I/O error".
        if (chosen & 0xFF) == SQLITE_IOERR, let db, let words = PageVFS.failure(in: db) {
            return DatabaseError(code: ResultCode(rawValue: chosen), message: words, path: path, sql: sql)
        }
        return DatabaseError(code: ResultCode(rawValue: chosen), message: message, path: path, sql: sql)
    }
}
