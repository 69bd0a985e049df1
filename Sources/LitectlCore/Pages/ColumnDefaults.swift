// The value SQLite reads for a column that a record is too short to hold (a
// row written before ALTER TABLE ADD COLUMN added the column). That is not
// what the DEFAULT clause gives an INSERT: SQLite turns the clause's text into
// a constant by its own rules (sqlite3ValueFromExpr: `DEFAULT 1.0` in a column
// without a type reads as the integer 1, a non-constant default as NULL), then
// applies the column's affinity, then REAL affinity on the way out. Rather
// than copy those rules, the decoder asks SQLite: in a private in-memory
// database of the same text encoding, a one-row table is given a column of
// the same declared type and DEFAULT by ADD COLUMN, and the value its short
// row reads as is the answer.
import CSQLite

/// Short-record values for the columns of one table, computed on first need.
/// Safe to use from several threads.
final class ColumnDefaults: @unchecked Sendable {
    private let encoding: TextEncoding
    /// The table is STRICT.
    let strict: Bool
    private var cache: [Int: Value] = [:]
    private var scratch: OpaquePointer?
    private var added = 0
    private var mutex = pthread_mutex_t()

    init(encoding: TextEncoding, strict: Bool) {
        self.encoding = encoding
        self.strict = strict
        pthread_mutex_init(&mutex, nil)
    }

    deinit {
        if let scratch { sqlite3_close_v2(scratch) }
        pthread_mutex_destroy(&mutex)
    }

    /// What SQLite reads for column `key` (any number naming the column)
    /// declared with `declaredType` and `defaultSQL` when a record lacks it.
    func value(_ key: Int, declaredType: String, defaultSQL: String?) throws -> Value {
        guard let defaultSQL else { return .null }
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        if let known = cache[key] { return known }
        let value = try compute(declaredType: declaredType, defaultSQL: defaultSQL)
        cache[key] = value
        return value
    }

    private func compute(declaredType: String, defaultSQL: String) throws -> Value {
        let db = try open()
        added += 1
        let name = "c\(added)"
        let type = declaredType.isEmpty ? "" : " " + quoteIdentifier(declaredType)
        var rc = exec(db, "ALTER TABLE s ADD COLUMN \(name)\(type) DEFAULT \(defaultSQL)")
        if rc != SQLITE_OK {
            // `DEFAULT (expr)` keeps only the expression as its text.
            rc = exec(db, "ALTER TABLE s ADD COLUMN \(name)\(type) DEFAULT (\(defaultSQL))")
        }
        if rc != SQLITE_OK {
            let message = String(cString: sqlite3_errmsg(db))
            // SQLite has no constant for it: a short record reads NULL.
            if message.contains("non-constant default") { return .null }
            throw PageError(.unsupported, "cannot work out the default of a column (\(message))")
        }
        // The column must be what the table declares, to the byte.
        let facts = try rows(db, "SELECT type, dflt_value FROM pragma_table_xinfo('s') WHERE name = '\(name)'")
        guard facts.count == 1, facts[0][0] == .text(declaredType), facts[0][1] == .text(defaultSQL) else {
            throw PageError(.unsupported, "cannot reproduce the default of a column")
        }
        let values = try rows(db, "SELECT \(name) FROM s")
        guard values.count == 1 else { throw PageError(.unsupported, "cannot read the default of a column") }
        return values[0][0]
    }

    private func open() throws -> OpaquePointer {
        if let scratch { return scratch }
        var db: OpaquePointer?
        guard sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
              let db else {
            sqlite3_close_v2(db)
            throw PageError(.unsupported, "cannot open an in-memory database")
        }
        let pragma: String
        switch encoding {
        case .utf8: pragma = "UTF-8"
        case .utf16le: pragma = "UTF-16le"
        case .utf16be: pragma = "UTF-16be"
        }
        guard exec(db, "PRAGMA encoding = '\(pragma)'") == SQLITE_OK,
              exec(db, strict ? "CREATE TABLE s(x ANY) STRICT" : "CREATE TABLE s(x)") == SQLITE_OK,
              exec(db, "INSERT INTO s VALUES (0)") == SQLITE_OK else {
            sqlite3_close_v2(db)
            throw PageError(.unsupported, "cannot prepare an in-memory database")
        }
        scratch = db
        return db
    }

    private func exec(_ db: OpaquePointer, _ sql: String) -> Int32 {
        sqlite3_exec(db, sql, nil, nil, nil)
    }

    private func rows(_ db: OpaquePointer, _ sql: String) throws -> [[Value]] {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw PageError(.unsupported, String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(statement) }
        var result: [[Value]] = []
        let row = Row(handle: statement)
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw PageError(.unsupported, String(cString: sqlite3_errmsg(db))) }
            result.append((0..<Int(sqlite3_column_count(statement))).map { row.value(at: $0) })
        }
        return result
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
