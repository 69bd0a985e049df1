// litectl's own record of the migrations applied to a database, kept in the
// database itself so that it travels with the file and changes in the same
// transaction as the migration it records:
//
//   CREATE TABLE _litectl_migrations (
//     version INTEGER PRIMARY KEY,  -- the user_version the file took the database to
//     file TEXT NOT NULL,           -- the file's name, e.g. 0003_add_email.sql
//     sha256 TEXT NOT NULL,         -- SHA-256 of the file's bytes, lowercase hex
//     applied_at TEXT NOT NULL      -- UTC, ISO 8601 with milliseconds
//   )
//
// A reverted migration's row is deleted with it. The user_version stays the
// authority on where the database is; the rows only say what ran to get there.

/// What the ledger says about one applied migration.
public struct LedgerEntry: Sendable {
    public var version: Int64
    public var file: String
    public var sha256: String
    public var appliedAt: String
}

public enum MigrationLedger {
    public static let tableName = "_litectl_migrations"

    static let createStatement = """
        CREATE TABLE IF NOT EXISTS "_litectl_migrations" (
          version INTEGER PRIMARY KEY,
          file TEXT NOT NULL,
          sha256 TEXT NOT NULL,
          applied_at TEXT NOT NULL
        )
        """

    /// The rows, by version; empty when the table does not exist (a database
    /// litectl never migrated). A table of that name with other columns is an
    /// error rather than something to overwrite.
    public static func read(_ connection: Connection) throws -> [Int64: LedgerEntry] {
        let exists = try connection.scalar("SELECT count(*) FROM main.sqlite_schema WHERE type = 'table' AND name = ?1",
                                           [.text(Array(tableName.utf8))])
        guard exists == .integer(1) else { return [:] }
        var entries: [Int64: LedgerEntry] = [:]
        do {
            let statement = try connection.prepare("SELECT version, file, sha256, applied_at FROM main.\(quoteIdentifier(tableName))")
            try statement.forEachRow { row in
                let entry = LedgerEntry(version: row.int64(at: 0), file: row.string(at: 1), sha256: row.string(at: 2),
                                        appliedAt: row.string(at: 3))
                entries[entry.version] = entry
            }
        } catch let error as DatabaseError {
            throw DatabaseError(code: error.code, message: "the table \(tableName) is not litectl's ledger of migrations: \(error.message)",
                                path: connection.path)
        }
        return entries
    }

    /// Records `file` as the migration that took the database to `version`
    /// (replacing an older row of that version). Call it inside the
    /// migration's transaction.
    static func record(_ connection: Connection, version: Int64, file: MigrationScriptFile, at time: Double) throws {
        try connection.execute(createStatement)
        let statement = try connection.prepare("""
            INSERT OR REPLACE INTO main.\(quoteIdentifier(tableName)) (version, file, sha256, applied_at) VALUES (?1, ?2, ?3, ?4)
            """)
        try statement.bind([.integer(version), .text(Array(file.name.utf8)), .text(Array(file.sha256.utf8)),
                            .text(Array(Timestamp.iso8601(time).utf8))])
        _ = try statement.step()
    }

    /// Forgets the migration of `version` (it was reverted).
    static func remove(_ connection: Connection, version: Int64) throws {
        guard try !read(connection).isEmpty else { return }
        let statement = try connection.prepare("DELETE FROM main.\(quoteIdentifier(tableName)) WHERE version = ?1")
        try statement.bind([.integer(version)])
        _ = try statement.step()
    }
}
