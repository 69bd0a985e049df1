// A prepared statement: bind by index or name, step, read columns without
// copying (for the engines that read millions of rows), or as exact Values.
// See https://www.sqlite.org/c3ref/stmt.html
import CSQLite

/// One prepared statement; `deinit` finalizes it. It keeps its connection alive.
public final class Statement {
    let handle: OpaquePointer
    public let connection: Connection

    init(handle: OpaquePointer, connection: Connection) {
        self.handle = handle
        self.connection = connection
    }

    deinit { sqlite3_finalize(handle) }

    /// The SQL text the statement was prepared from.
    public var sql: String { String(cString: sqlite3_sql(handle)) }

    /// True when the statement makes no direct change to a database file
    /// (https://www.sqlite.org/c3ref/stmt_readonly.html).
    public var isReadOnly: Bool { sqlite3_stmt_readonly(handle) != 0 }

    /// True for EXPLAIN statements and statements that return no columns.
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    private func check(_ rc: Int32) throws {
        if rc != SQLITE_OK {
            throw DatabaseError.fromConnection(connection.handle, code: rc, path: connection.path, sql: sql)
        }
    }

    // MARK: Binding

    /// The number of parameters (the largest index).
    public var parameterCount: Int { Int(sqlite3_bind_parameter_count(handle)) }

    /// The name of parameter `index` (1-based) with its prefix (":a", "@a",
    /// "$a"), or nil for a nameless `?`.
    public func parameterName(at index: Int) -> String? {
        sqlite3_bind_parameter_name(handle, Int32(index)).map { String(cString: $0) }
    }

    /// Binds `value` to parameter `index` (1-based).
    public func bind(_ value: Value, at index: Int) throws {
        let i = Int32(index)
        let rc: Int32
        switch value {
        case .null:
            rc = sqlite3_bind_null(handle, i)
        case .integer(let v):
            rc = sqlite3_bind_int64(handle, i, v)
        case .real(let v):
            rc = sqlite3_bind_double(handle, i, v)
        case .text(let bytes):
            rc = bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress else {
                    return sqlite3_bind_text(handle, i, "", 0, litectl_transient())
                }
                return sqlite3_bind_text64(handle, i, base.assumingMemoryBound(to: CChar.self),
                                           sqlite3_uint64(raw.count), litectl_transient(), UInt8(SQLITE_UTF8))
            }
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { raw in
                raw.baseAddress == nil
                    ? sqlite3_bind_zeroblob(handle, i, 0)
                    : sqlite3_bind_blob64(handle, i, raw.baseAddress, sqlite3_uint64(raw.count), litectl_transient())
            }
        }
        try check(rc)
    }

    /// Binds `value` to the parameter called `name`, given with its prefix
    /// (":id", "@id" or "$id").
    public func bind(_ value: Value, named name: String) throws {
        let index = sqlite3_bind_parameter_index(handle, name)
        guard index > 0 else {
            throw DatabaseError(code: .range, message: "no parameter named \(name)", path: connection.path, sql: sql)
        }
        try bind(value, at: Int(index))
    }

    /// Binds `values` to parameters 1, 2, ...
    public func bind(_ values: [Value]) throws {
        for (offset, value) in values.enumerated() { try bind(value, at: offset + 1) }
    }

    public func clearBindings() { sqlite3_clear_bindings(handle) }

    // MARK: Stepping

    /// Steps once: true when a row is ready, false when the statement is done.
    @discardableResult
    public func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = DatabaseError.fromConnection(connection.handle, code: rc, path: connection.path, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Rewinds the statement (bindings stay).
    public func reset() { sqlite3_reset(handle) }

    /// Steps through every row, calling `body` with a view of the current row.
    /// The view allocates nothing by itself; it is valid only inside `body`.
    public func forEachRow(_ body: (Row) throws -> Void) throws {
        let row = Row(handle: handle)
        while try step() { try body(row) }
    }

    // MARK: Columns

    public func columnName(at index: Int) -> String {
        sqlite3_column_name(handle, Int32(index)).map { String(cString: $0) } ?? ""
    }

    public var columnNames: [String] { (0..<columnCount).map(columnName(at:)) }

    /// The declared type of result column `index` when it is a table column.
    public func declaredType(at index: Int) -> String? {
        sqlite3_column_decltype(handle, Int32(index)).map { String(cString: $0) }
    }

    /// A view of the current row (valid until the next step).
    public var currentRow: Row { Row(handle: handle) }

    /// Column `index` of the current row as an exact value.
    public func value(at index: Int) -> Value { Row(handle: handle).value(at: index) }

    /// All columns of the current row.
    public func values() -> [Value] {
        let row = Row(handle: handle)
        return (0..<columnCount).map { row.value(at: $0) }
    }
}

/// The current row of a statement, read in place. Byte buffers it hands out
/// are valid until the next step.
public struct Row {
    let handle: OpaquePointer

    public var count: Int { Int(sqlite3_column_count(handle)) }

    /// The storage class of column `index` in this row.
    public func storageClass(at index: Int) -> StorageClass {
        StorageClass(rawValue: sqlite3_column_type(handle, Int32(index))) ?? .null
    }

    public func int64(at index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }
    public func double(at index: Int) -> Double { sqlite3_column_double(handle, Int32(index)) }

    /// The column's bytes without a copy: TEXT as UTF-8, BLOB as is.
    public func bytes(at index: Int) -> UnsafeRawBufferPointer {
        let i = Int32(index)
        let pointer: UnsafeRawPointer?
        if sqlite3_column_type(handle, i) == SQLITE_BLOB {
            pointer = sqlite3_column_blob(handle, i)
        } else {
            pointer = sqlite3_column_text(handle, i).map { UnsafeRawPointer($0) }
        }
        let length = Int(sqlite3_column_bytes(handle, i))
        return UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : length)
    }

    /// The column as a Swift string (TEXT decoded as UTF-8, invalid bytes
    /// replaced): for names and messages, never for comparing data.
    public func string(at index: Int) -> String {
        String(decoding: bytes(at: index), as: UTF8.self)
    }

    public func isNull(at index: Int) -> Bool { sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL }

    /// The column as an exact value (TEXT and BLOB copied out).
    public func value(at index: Int) -> Value { cell(at: index).value }
}

/// SQLite's five storage classes, as `sqlite3_column_type` reports them.
public enum StorageClass: Int32, Sendable {
    case integer = 1   // SQLITE_INTEGER
    case real = 2      // SQLITE_FLOAT
    case text = 3      // SQLITE_TEXT
    case blob = 4      // SQLITE_BLOB
    case null = 5      // SQLITE_NULL
}
