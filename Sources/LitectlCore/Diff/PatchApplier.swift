// Applies a SQL patch (such as `litectl diff --format sql` writes) to a
// database in one transaction: all of it or none of it (under a signal or a
// full disk too), and nothing at all with a dry run.
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
    ///
    /// The script is confined to the target (`PatchConfinement`): ATTACH,
    /// DETACH, VACUUM INTO, load_extension(), pragmas other than those a diff
    /// writes, and shell dot-commands other than a leading `.bail on` are
    /// refused (the error names `patch`, the patch file, when given).
    public static func apply(path: String, script: String, dryRun: Bool, patch: String? = nil,
                             busyTimeout: Int = Connection.defaultBusyTimeout) throws -> PatchResult {
        let script = try PatchConfinement.withoutBail(script, patch: patch, target: path)
        let connection = try Connection(path: path, mode: .readWrite, busyTimeout: busyTimeout)
        let confinement = PatchConfinement(connection)
        defer { confinement.end() }
        try connection.execute("PRAGMA foreign_keys=OFF")
        var result = PatchResult()
        do {
            // All or nothing under a signal or a full disk too (Files/InPlaceWrite.swift).
            try InPlaceWrite.run(connection, target: path, consequence: "nothing applied, \(DurableFolder.baseName(of: path)) is as it was") {
              try connection.writeTransaction(commit: !dryRun) {
                let before = sqlite3_total_changes64(connection.rawHandle)
                try connection.forEachStatement(in: script) { statement in
                    try Interruption.check()
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
            }
        } catch let error as DatabaseError {
            throw PatchConfinement.explainSyntax(confinement.explain(error, patch: patch), patch: patch, target: path)
        }
        result.committed = !dryRun
        return result
    }
}

extension PatchApplier {
    /// `bytes` as SQL text, or nil for bytes that are not: a NUL, or bytes
    /// that are not UTF-8 (litectl writes TEXT that is not UTF-8 as
    /// `CAST(x'..' AS TEXT)`, so its patches are always UTF-8).
    public static func sqlText(_ bytes: [UInt8]) -> String? {
        guard !bytes.contains(0) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
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
