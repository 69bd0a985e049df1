// The check that a statement stored in sqlite_schema is one statement and
// nothing more. SQLite parses only the first statement of each stored text when
// it opens a file, so a hostile file can carry more after it (`CREATE TABLE
// t(x);ATTACH '/tmp/x.db' AS e`); whatever re-runs that text (a dump loaded, a
// schema replica) would run the rest too.
import CSQLite

public enum SchemaStatement {
    /// Why `sql`, run as written followed by `;`, is not exactly one
    /// statement; nil when it is. The end of the first statement is where
    /// SQLite's own sqlite3_complete first says "complete" (so quotes,
    /// comments and a trigger's `BEGIN … END` count as SQLite counts them);
    /// after it only blanks and semicolons may follow. Text that never
    /// completes (an open quote or `/*` comment, which would swallow what a
    /// script writes after it) and text with a NUL byte are refused too.
    /// See https://www.sqlite.org/c3ref/complete.html
    public static func problem(_ sql: String) -> String? {
        var bytes = Array(sql.utf8)
        if bytes.contains(0) { return "it holds a NUL byte" }
        // A newline first, so that a `--` comment on the last line ends before the `;`.
        bytes.append(contentsOf: Array("\n;".utf8))
        var prefix: [CChar] = []
        prefix.reserveCapacity(bytes.count + 1)
        for (i, byte) in bytes.enumerated() {
            prefix.append(CChar(bitPattern: byte))
            guard byte == UInt8(ascii: ";") else { continue }
            prefix.append(0)
            let complete = sqlite3_complete(prefix) != 0
            prefix.removeLast()
            guard complete else { continue }
            let blank: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D, 0x0C, UInt8(ascii: ";")]
            if bytes[(i + 1)...].allSatisfy({ blank.contains($0) }) { return nil }
            return "it holds more than one statement"
        }
        return "it is not a complete statement"
    }

    /// Throws when `sql`, the stored text of `object` (as "table \"t\"",
    /// say), is not exactly one statement.
    public static func require(_ sql: String, object: String, path: String?) throws {
        if let problem = problem(sql) {
            throw DatabaseError(code: .corrupt,
                                message: "the stored SQL of \(object.replacingNewlines()) is not one statement (\(problem)): not run; the file may be hostile",
                                path: path)
        }
    }
}
