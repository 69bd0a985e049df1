// SQLite result codes as a small value type, so that public API never passes a
// raw CInt. See https://www.sqlite.org/rescode.html
import CSQLite

/// A SQLite result code, primary or extended.
///
/// The low 8 bits are the primary code; an extended code carries more detail in
/// the bits above (`SQLITE_BUSY_SNAPSHOT` is `SQLITE_BUSY | (2 << 8)`).
public struct ResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The primary code (the low byte).
    public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xFF) }

    /// True when `self` is `code` or an extension of it (`.busy ~= busySnapshot`).
    public func matches(_ code: ResultCode) -> Bool {
        code.rawValue == rawValue || (code.rawValue & 0xFF == code.rawValue && primary == code)
    }

    public static func ~= (pattern: ResultCode, code: ResultCode) -> Bool { code.matches(pattern) }

    /// SQLite's own English text for the code.
    public var description: String { String(cString: sqlite3_errstr(rawValue)) }

    public static let ok = ResultCode(rawValue: SQLITE_OK)
    public static let error = ResultCode(rawValue: SQLITE_ERROR)
    public static let `internal` = ResultCode(rawValue: SQLITE_INTERNAL)
    public static let perm = ResultCode(rawValue: SQLITE_PERM)
    public static let abort = ResultCode(rawValue: SQLITE_ABORT)
    public static let busy = ResultCode(rawValue: SQLITE_BUSY)
    public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
    public static let nomem = ResultCode(rawValue: SQLITE_NOMEM)
    public static let readonly = ResultCode(rawValue: SQLITE_READONLY)
    /// SQLITE_READONLY_ROLLBACK: a read-only connection met a hot journal,
    /// which only a writer may roll back (see HotJournal).
    public static let readonlyRollback = ResultCode(rawValue: SQLITE_READONLY | (3 << 8))
    public static let interrupt = ResultCode(rawValue: SQLITE_INTERRUPT)
    public static let ioerr = ResultCode(rawValue: SQLITE_IOERR)
    public static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
    /// "Internal use only" in SQLite; litectl uses it for a source that holds no data.
    public static let empty = ResultCode(rawValue: SQLITE_EMPTY)
    public static let notfound = ResultCode(rawValue: SQLITE_NOTFOUND)
    public static let full = ResultCode(rawValue: SQLITE_FULL)
    public static let cantopen = ResultCode(rawValue: SQLITE_CANTOPEN)
    public static let `protocol` = ResultCode(rawValue: SQLITE_PROTOCOL)
    public static let schema = ResultCode(rawValue: SQLITE_SCHEMA)
    public static let toobig = ResultCode(rawValue: SQLITE_TOOBIG)
    public static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
    public static let mismatch = ResultCode(rawValue: SQLITE_MISMATCH)
    public static let misuse = ResultCode(rawValue: SQLITE_MISUSE)
    public static let auth = ResultCode(rawValue: SQLITE_AUTH)
    public static let range = ResultCode(rawValue: SQLITE_RANGE)
    public static let notadb = ResultCode(rawValue: SQLITE_NOTADB)
    public static let row = ResultCode(rawValue: SQLITE_ROW)
    public static let done = ResultCode(rawValue: SQLITE_DONE)
}
