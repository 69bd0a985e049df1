// The target of `litectl load`, all or nothing: an existing database is
// changed inside one BEGIN IMMEDIATE transaction; a new one is built in a
// hidden temporary file beside it, fsynced and renamed into place only when
// everything loaded. The settings a new file takes before its first write
// (page size, auto_vacuum, encoding) run before the transaction begins, and
// a journal mode change after it commits (SQLite refuses both inside one).
// Into an existing database, rows a load orphans (foreign_key_check) fail it.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One load into one database.
final class LoadSession {
    /// The database as the user named it.
    let target: String
    let connection: Connection
    /// The hidden file a new database is built in (nil when loading into an existing one).
    private let temporary: TemporaryFile?
    /// True when the target had no pages before the load (a new or empty file).
    let startedEmpty: Bool
    private(set) var inTransaction = false
    /// `PRAGMA journal_mode=...` statements, run after the commit.
    var journalModeStatements: [String] = []
    /// CREATE TRIGGER statements held back until every row is in (a folder load).
    var deferredTriggers: [(sql: String, source: String, line: Int)] = []
    private let changesBefore: Int64
    /// foreign_key_check of an existing database when the load began.
    private var violationsBefore: ForeignKeyViolations?
    var statements = 0

    var createsDatabase: Bool { temporary != nil }

    init(target: String, busyTimeout: Int) throws {
        self.target = target
        if DurableFolder.exists(target) {
            temporary = nil
            connection = try Connection(path: target, mode: .readWrite, busyTimeout: busyTimeout)
        } else {
            let folder = DurableFolder.parent(of: target)
            guard DurableFolder.isFolder(folder) else {
                throw DatabaseError(code: .cantopen, message: "no such folder: \(folder)", path: target)
            }
            let stem = DurableFolder.baseName(of: target)
            TemporaryFiles.removeStale(in: folder, stem: stem)
            let file = try TemporaryFile(in: folder, stem: stem, permissions: DurableFolder.newFilePermissions)
            temporary = file
            do {
                connection = try Connection(path: file.path, mode: .readWrite, busyTimeout: busyTimeout)
                // A file nobody else sees yet, fsynced before its rename: a journal
                // in memory (for rollbacks of statements) and no syncs of its own.
                try connection.execute("PRAGMA journal_mode=MEMORY; PRAGMA synchronous=OFF")
            } catch {
                file.discard()
                throw error
            }
        }
        // Rows arrive in dump order (children before parents, possibly).
        try connection.execute("PRAGMA foreign_keys=OFF")
        connection.useSorterThreads()  // a dump's CREATE INDEX comes after its rows: a sort of every row
        // A script writes into this database and nowhere else: ATTACH would
        // create or change another file (a hostile dump can carry one), so it
        // is denied (the authorizer, with a clear message) and impossible (no
        // attached database allowed). https://www.sqlite.org/c3ref/limit.html
        sqlite3_limit(connection.rawHandle, SQLITE_LIMIT_ATTACHED, 0)
        sqlite3_set_authorizer(connection.rawHandle, { _, action, _, _, _, _ in
            action == SQLITE_ATTACH || action == SQLITE_DETACH ? SQLITE_DENY : SQLITE_OK
        }, nil)
        if case .integer(let pages)? = try connection.scalar("PRAGMA main.page_count") {
            startedEmpty = pages == 0
        } else {
            startedEmpty = false
        }
        changesBefore = sqlite3_total_changes64(connection.rawHandle)
    }

    /// Changes to count out of `rowsChanged`: rows of a dump's temporary table of value pieces.
    var uncountedChanges: Int64 = 0

    /// Rows inserted, updated or deleted so far (triggers' changes included).
    var rowsChanged: Int64 { sqlite3_total_changes64(connection.rawHandle) - changesBefore - uncountedChanges }

    /// Begins the one write transaction (once).
    func begin() throws {
        guard !inTransaction else { return }
        try connection.execute("BEGIN IMMEDIATE")
        inTransaction = true
        if !startedEmpty { violationsBefore = try ForeignKeyViolations.read(connection) }
    }

    /// Runs the held-back triggers, commits, applies the journal mode, and
    /// gives a new database its final name (never replacing a file that
    /// appeared there meanwhile).
    func finish() throws {
        try commit()
        try complete()
    }

    /// Runs the held-back triggers, checks the foreign keys and commits.
    func commit() throws {
        try begin()
        for trigger in deferredTriggers {
            do {
                try connection.execute(trigger.sql)
            } catch let error as DatabaseError {
                throw LoadError(source: trigger.source, line: trigger.line, message: error.message)
            }
        }
        // Rows load with enforcement off (a dump may hold children before
        // parents); into an existing database, a row the load leaves without
        // its parent (that was not so before) fails the load.
        if let violationsBefore {
            let added = try ForeignKeyViolations.read(connection).added(since: violationsBefore)
            if !added.isEmpty {
                throw DatabaseError(code: .constraint,
                                    message: "the load would leave \(added.count) row\(added.count == 1 ? "" : "s") without a parent (foreign_key_check: \(ForeignKeyViolations.describe(added))); nothing was loaded",
                                    path: target)
            }
        }
        try connection.execute("COMMIT")
        inTransaction = false
    }

    /// After the commit: the journal mode, and a new database's final name.
    func complete() throws {
        for sql in journalModeStatements {
            try connection.execute(sql)
        }
        try connection.close()
        if let temporary {
            try temporary.commit(as: target, replace: false)
        }
    }

    /// Rolls back and removes a new database's temporary file: the target is as it was.
    func abandon() {
        if inTransaction { try? connection.execute("ROLLBACK") }
        inTransaction = false
        try? connection.close()
        temporary?.discard()
    }
}

/// A statement or row of a load that failed: the file, the line, SQLite's message.
public struct LoadError: Error, CustomStringConvertible, Sendable {
    public var source: String
    public var line: Int
    public var message: String

    public var description: String {
        "\(source):\(line > 0 ? "\(line):" : "") \(message); nothing was loaded"
    }
}
