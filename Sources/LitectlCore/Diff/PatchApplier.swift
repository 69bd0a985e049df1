// Applies a SQL patch (such as `litectl diff --format sql` writes) to a
// database in one transaction: all of it or none of it, and nothing at all
// with a dry run.
import CSQLite

/// What applying a patch did (or would do).
public struct PatchResult: Sendable {
    /// Statements run (transaction control left out).
    public var statements = 0
    /// Rows inserted, updated or deleted.
    public var rowsChanged = 0
    public var committed = false
}

public enum PatchApplier {
    /// Runs `script` on the database at `path` inside one `BEGIN IMMEDIATE`
    /// transaction, with foreign-key enforcement off (as the patch itself
    /// asks). The script's own BEGIN/COMMIT/END/ROLLBACK and
    /// `PRAGMA foreign_keys` statements are skipped: the transaction is ours.
    /// On any error the transaction rolls back and the file is unchanged;
    /// with `dryRun` it rolls back always.
    public static func apply(path: String, script: String, dryRun: Bool,
                             busyTimeout: Int = Connection.defaultBusyTimeout) throws -> PatchResult {
        let script = withoutShellCommands(script)
        let connection = try Connection(path: path, mode: .readWrite, busyTimeout: busyTimeout)
        try connection.execute("PRAGMA foreign_keys=OFF")
        var result = PatchResult()
        try connection.writeTransaction(commit: !dryRun) {
            let before = sqlite3_total_changes64(connection.rawHandle)
            try connection.forEachStatement(in: script) { statement in
                // Keywords fold like names: ASCII letters only.
                let head = String(withoutLeadingComments(statement.sql).prefix(64))
                let skipped = ["BEGIN", "COMMIT", "END", "ROLLBACK"].contains { sqlNameHasPrefix(head, $0) }
                    || sqlNameHasPrefix(head.replacingSpaces(), "PRAGMAFOREIGN_KEYS")
                if skipped { return }
                result.statements += 1
                while try statement.step() {}
            }
            result.rowsChanged = Int(sqlite3_total_changes64(connection.rawHandle) - before)
        }
        result.committed = !dryRun
        return result
    }
}

/// `script` without the sqlite3 shell's dot-commands (`.bail on`) that a
/// patch carries on lines of their own before its first statement.
func withoutShellCommands(_ script: String) -> String {
    var lines = script.split(separator: "\n", omittingEmptySubsequences: false)
    var index = 0
    while index < lines.count {
        let line = lines[index].drop { $0 == " " || $0 == "\t" }
        if line.hasPrefix(".") {
            lines[index] = ""
        } else if !(line.isEmpty || line.hasPrefix("--")) {
            break
        }
        index += 1
    }
    return lines.joined(separator: "\n")
}

/// `sql` without the `-- ...` lines and `/* ... */` blocks before its first keyword.
func withoutLeadingComments(_ sql: String) -> String {
    var rest = Substring(sql.trimmingWhitespace())
    while true {
        if rest.hasPrefix("--") {
            guard let newline = rest.firstIndex(of: "\n") else { return "" }
            rest = Substring(String(rest[rest.index(after: newline)...]).trimmingWhitespace())
        } else if rest.hasPrefix("/*") {
            guard let end = rest.range(of: "*/") else { return "" }
            rest = Substring(String(rest[end.upperBound...]).trimmingWhitespace())
        } else {
            return String(rest)
        }
    }
}

extension String {
    func replacingSpaces() -> String { String(unicodeScalars.filter { !$0.properties.isWhitespace }) }
}
