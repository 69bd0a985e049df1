// The limits SQLite enforces on a connection that litectl's commands meet
// with wide tables and large values, and how messages name them.
// See https://www.sqlite.org/limits.html
import CSQLite

extension Connection {
    /// The most result columns a SELECT may have on this connection
    /// (SQLITE_LIMIT_COLUMN; also the most columns of a table, an index, an
    /// ORDER BY and an UPDATE's SET list).
    public var columnLimit: Int { Int(sqlite3_limit(rawHandle, SQLITE_LIMIT_COLUMN, -1)) }

    /// The longest string or BLOB, and the largest row record, this connection
    /// reads or writes (SQLITE_LIMIT_LENGTH, 1,000,000,000 bytes by default).
    public var lengthLimit: Int { Int(sqlite3_limit(rawHandle, SQLITE_LIMIT_LENGTH, -1)) }

    /// The longest SQL statement this connection prepares (SQLITE_LIMIT_SQL_LENGTH).
    public var sqlLengthLimit: Int { Int(sqlite3_limit(rawHandle, SQLITE_LIMIT_SQL_LENGTH, -1)) }
}

/// `n` with a comma between groups of three digits (1,000,000,000), as messages name limits.
func groupedDigits(_ n: Int) -> String {
    let digits = Array(String(n.magnitude))
    var out = ""
    for (i, d) in digits.enumerated() {
        if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(d)
    }
    return (n < 0 ? "-" : "") + out
}
