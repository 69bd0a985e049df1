// `litectl migrate`: takes a database from its PRAGMA user_version to the
// newest migration of a folder (or to a chosen version, down through
// `.down.sql` files). Each file runs in its own BEGIN IMMEDIATE transaction
// that also sets user_version and records the file's SHA-256, with foreign keys
// off and foreign_key_check and quick_check before COMMIT, so a failure (a
// full disk, a signal: Files/InPlaceWrite.swift) leaves the database whole at
// the previous version. The files are confined as a patch is
// (Diff/PatchConfinement.swift): no ATTACH, VACUUM INTO, extension loading or
// pragma that changes how SQLite writes, but for the databases
// `--allow-attach` names, which litectl attaches (and backs up) itself.
// Built on Backup (a verified backup, BackupJob, before the first migration)
// and Diff (the dry run: the chain on a temporary copy, then DiffEngine's schema
// diff and row-change summary between the copy before and after).
import CSQLite

public struct MigrateRequest: Sendable {
    public var database: String
    public var folder: String
    /// The version to go to; nil for the newest migration.
    public var target: Int64?
    /// Make a backup before the first migration.
    public var backup = true
    /// Where the backup goes; nil for the database's own folder.
    public var backupFolder: String?
    /// Record the checksums of applied files that were edited, instead of refusing to run.
    public var acceptEdited = false
    public var busyTimeout = Connection.defaultBusyTimeout
    /// Seconds the backup waits for locks (the source's, its folder's).
    public var backupTimeout: Double = 60
    /// Where the dry run's copies go; nil for $TMPDIR or /tmp.
    public var temporaryFolder: String?
    /// Other databases the migration files may write (`--allow-attach
    /// NAME=PATH`): attached under their names before the first file, backed
    /// up with the database, and written in the same transactions.
    public var attachable: [AttachableDatabase] = []

    public init(database: String, folder: String) {
        self.database = database
        self.folder = folder
    }
}

/// One step that ran (or, in a dry run, ran on the copy).
public struct AppliedMigration: Sendable {
    public var step: MigrationStep
    public var seconds: Double
}

public struct MigrateOutcome: Sendable {
    public var path: String
    public var fromVersion: Int64
    public var toVersion: Int64
    public var applied: [AppliedMigration] = []
    /// The backup made before the first migration.
    public var backup: BackupOutcome?
    /// The backups of the attachable databases, in the order given.
    public var attachedBackups: [BackupOutcome] = []
    /// Limits worth a warning (a WAL-mode database among several: its
    /// changes commit apart from the others'), also told to `onWarning` as
    /// they are found.
    public var warnings: [String] = []
    /// Edited files whose new checksums were recorded (--accept-edited).
    public var acceptedEdits: [EditedMigration] = []
    /// The dry run's diff of the copy before and after the chain.
    public var diff: DiffSummary?
    public var dryRun = false
}

/// Nothing ran: applied files were edited since they ran.
public struct MigrationRefusal: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var edited: [EditedMigration]
    public var description: String {
        let names = edited.map(\.file).joined(separator: ", ")
        return "\(path): applied migration\(edited.count == 1 ? "" : "s") edited since \(edited.count == 1 ? "it" : "they") ran: "
            + "\(names) (the SHA-256 recorded in \(MigrationLedger.tableName) differs); nothing was changed "
            + "(restore the file, or record the edit with --accept-edited)"
    }
}

public enum MigrationRunner {
    static let temporaryStem = "litectl-migrate"

    /// Applies the steps from the database's version to the target, each in
    /// its own transaction, after a backup; `onStep` hears of each one as it
    /// commits. A file that fails throws a `MigrationError`: that file is
    /// rolled back, the ones before it stay applied.
    public static func run(_ request: MigrateRequest, onStep: (AppliedMigration) -> Void = { _ in },
                           onWarning: (String) -> Void = { _ in }) throws -> MigrateOutcome {
        let migrations = try MigrationFolder.read(request.folder)
        try checkAttachable(request)
        // Journals a killed run (or application) left hot are rolled back
        // before anything reads the files (a backup opens them read-only).
        for path in [request.database] + request.attachable.map(\.path) {
            try? InPlaceWrite.settle(path, busyTimeout: request.busyTimeout)
        }
        let connection = try Connection(path: request.database, mode: .readWrite, busyTimeout: request.busyTimeout)
        defer { try? connection.close() }
        connection.useSorterThreads()  // a migration's CREATE INDEX sorts on every core
        // A no-op inside a transaction, so set here, once: the 12-step table
        // rebuild a migration may do needs foreign keys off
        // (https://www.sqlite.org/lang_altertable.html#otheralter); each file
        // is checked with foreign_key_check instead.
        try connection.execute("PRAGMA foreign_keys=OFF")
        let plan = try connection.readTransaction {
            try MigrationPlan(migrations: migrations, current: try userVersion(connection),
                              target: request.target, ledger: try MigrationLedger.read(connection), path: request.database)
        }
        if !plan.edited.isEmpty && !request.acceptEdited {
            throw MigrationRefusal(path: request.database, edited: plan.edited)
        }
        var outcome = MigrateOutcome(path: request.database, fromVersion: plan.currentVersion, toVersion: plan.currentVersion)
        if !plan.steps.isEmpty && request.backup {
            outcome.backup = try backup(request)
            for database in request.attachable {
                outcome.attachedBackups.append(try backup(request, of: database.path))
            }
        }
        let confinement = PatchConfinement(connection, policy: .migration, attachable: request.attachable)
        defer { confinement.end() }
        if !request.attachable.isEmpty && !plan.steps.isEmpty {
            try confinement.attachAll()
            outcome.warnings = try walWarnings(connection, request)
            outcome.warnings.forEach(onWarning)
        }
        confinement.end()  // litectl's own statements below are not the files'
        if !plan.edited.isEmpty {
            try connection.writeTransaction {
                for edit in plan.edited {
                    try MigrationLedger.record(connection, version: edit.version, file: edit.upFile, at: Clock.wall())
                }
            }
            outcome.acceptedEdits = plan.edited
        }
        for step in plan.steps {
            let seconds: Double
            do {
                seconds = try Interruption.guarding([connection]) {
                    try apply(step, on: connection, reportedPath: request.database, confinement: confinement)
                }
            } catch {
                throw Interruption.deferring { reworded(error, step: step, request: request, connection: connection) }
            }
            let applied = AppliedMigration(step: step, seconds: seconds)
            outcome.applied.append(applied)
            outcome.toVersion = step.toVersion
            onStep(applied)
        }
        return outcome
    }

    /// The databases `--allow-attach` names: each an existing database
    /// file, none the database itself or named twice, under a name that is
    /// neither main nor temp.
    static func checkAttachable(_ request: MigrateRequest) throws {
        var seen: [FileIdentity] = FileIdentity(request.database).map { [$0] } ?? []
        var names: [String] = []
        for database in request.attachable {
            if sameSQLName(database.name, "main") || sameSQLName(database.name, "temp") || database.name.isEmpty {
                throw DatabaseError(code: .misuse, message: "--allow-attach \(database.name)=...: the name must not be empty, main or temp", path: database.path)
            }
            if names.contains(where: { sameSQLName($0, database.name) }) {
                throw DatabaseError(code: .misuse, message: "--allow-attach names \(database.name) twice", path: database.path)
            }
            names.append(database.name)
            try FileCheck.requireDatabaseFile(database.path, writable: true)
            guard let identity = FileIdentity(database.path), !seen.contains(identity) else {
                throw DatabaseError(code: .misuse, message: "--allow-attach \(database.name): the same file as the database or another --allow-attach", path: database.path)
            }
            seen.append(identity)
        }
    }

    /// A warning for each database in WAL mode when a migration spans several:
    /// SQLite commits a transaction over several files atomically only in
    /// rollback-journal mode (https://www.sqlite.org/lang_attach.html).
    static func walWarnings(_ connection: Connection, _ request: MigrateRequest) throws -> [String] {
        var warnings: [String] = []
        for (schema, path) in [("main", request.database)] + request.attachable.map({ ($0.name, $0.path) })
        where try connection.journalMode(of: schema) == "wal" {
            warnings.append("\(path) is in WAL mode: a migration file's changes to it commit apart from those to the other databases (SQLite's transactions are atomic across files only in rollback-journal mode)")
        }
        return warnings
    }

    /// A failed step's error, its transaction rolled back: a signal or a
    /// full disk named as such, a refusal of the confinement in words, and
    /// journals an I/O error left hot rolled back.
    static func reworded(_ error: any Error, step: MigrationStep, request: MigrateRequest, connection: Connection) -> any Error {
        _ = try? connection.scalar("SELECT 1 FROM sqlite_schema LIMIT 1")
        var left: [String] = []
        for path in [request.database] + request.attachable.map(\.path) {
            try? InPlaceWrite.settle(path, busyTimeout: request.busyTimeout)
            if InPlaceWrite.journalIsHot(path) { left.append(path) }
        }
        let consequence = "the database stays at version \(step.fromVersion)"
        if var error = error as? MigrationError, Interruption.received == nil, left.isEmpty {
            if error.message.hasPrefix("database or disk is full") { error.message = "disk full (\(error.message))" }
            return error
        }
        return InPlaceWrite.failure(error, target: request.database, consequence: consequence, journalLeft: left)
    }

    /// Runs the chain on a temporary copy of the database and writes the
    /// diff of the copy before and after it (schema changes and per-table
    /// row counts, `litectl diff --summary`) to `sink`; the database is only
    /// read, once, by the backup API. The ledger table is left out of the
    /// diff (it is litectl's bookkeeping, not the application's data).
    public static func dryRun(_ request: MigrateRequest, sink: ByteSink, colour: Bool = false,
                              onStep: (AppliedMigration) -> Void = { _ in }) throws -> MigrateOutcome {
        let migrations = try MigrationFolder.read(request.folder)
        let plan: MigrationPlan
        do {
            let connection = try Connection(path: request.database, mode: .readOnly, busyTimeout: request.busyTimeout)
            defer { try? connection.close() }
            plan = try connection.readTransaction {
                try MigrationPlan(migrations: migrations, current: try userVersion(connection),
                                  target: request.target, ledger: try MigrationLedger.read(connection), path: request.database)
            }
        }
        if !plan.edited.isEmpty && !request.acceptEdited {
            throw MigrationRefusal(path: request.database, edited: plan.edited)
        }
        var outcome = MigrateOutcome(path: request.database, fromVersion: plan.currentVersion, toVersion: plan.currentVersion)
        outcome.dryRun = true
        outcome.acceptedEdits = plan.edited
        guard !plan.steps.isEmpty else { return outcome }

        let folder = request.temporaryFolder ?? TemporaryFiles.folder(nil)
        TemporaryFiles.removeStale(in: folder, stem: temporaryStem)
        let before = try TemporaryFile(in: folder, stem: temporaryStem, permissions: 0o600)
        defer { before.discard() }
        let after = try TemporaryFile(in: folder, stem: temporaryStem, permissions: 0o600)
        defer { after.discard() }
        try ScratchCopy.make(of: request.database, into: before, in: folder, timeout: request.backupTimeout, purpose: "dry run's copy")
        // Both copies in rollback-journal mode, so that neither leaves a -wal
        // behind and the diff can read them read-only; only header bytes 18-19 change.
        do {
            let copy = try Connection(path: before.path, mode: .readWrite)
            try copy.execute("PRAGMA journal_mode=DELETE")
            try copy.close()
        }
        try FileStreams.copy(before.path, into: after)
        // The databases --allow-attach names are copied too: the files run
        // on the copies, attached under the same names.
        try checkAttachable(request)
        var copies: [String: String] = [:]
        var attachedCopies: [TemporaryFile] = []
        defer { for copy in attachedCopies { copy.discard() } }
        for database in request.attachable {
            let copy = try TemporaryFile(in: folder, stem: temporaryStem, permissions: 0o600)
            attachedCopies.append(copy)
            try ScratchCopy.make(of: database.path, into: copy, in: folder, timeout: request.backupTimeout, purpose: "dry run's copy")
            copies[database.name] = copy.path
        }

        do {
            let connection = try Connection(path: after.path, mode: .readWrite, busyTimeout: request.busyTimeout)
            defer { try? connection.close() }
            connection.useSorterThreads()
            try connection.execute("PRAGMA foreign_keys=OFF")
            let confinement = PatchConfinement(connection, policy: .migration, attachable: request.attachable, attachFrom: copies)
            defer { confinement.end() }
            try confinement.attachAll()
            confinement.end()
            if !plan.edited.isEmpty {
                try connection.writeTransaction {
                    for edit in plan.edited {
                        try MigrationLedger.record(connection, version: edit.version, file: edit.upFile, at: Clock.wall())
                    }
                }
            }
            for step in plan.steps {
                let seconds: Double
                do {
                    seconds = try apply(step, on: connection, reportedPath: request.database, confinement: confinement)
                } catch var error as MigrationError {
                    error.consequence = "the real run would stop here (dry run: nothing was changed)"
                    throw error
                }
                let applied = AppliedMigration(step: step, seconds: seconds)
                outcome.applied.append(applied)
                outcome.toVersion = step.toVersion
                onStep(applied)
            }
        }

        var options = DiffOptions()
        options.excluded = [MigrationLedger.tableName]
        let writer = DiffReportWriter(sink: sink, style: .summary, colour: colour)
        outcome.diff = try DiffEngine.run(pathA: before.path, pathB: after.path, options: options, consumer: writer,
                                          busyTimeout: request.busyTimeout)
        return outcome
    }

    /// The verified backup before the first migration: the folder backup of
    /// `litectl backup DB FOLDER` (hot copy, quick_check, fsync, rename, a
    /// manifest), under that folder's lock, after removing what a killed
    /// earlier run left there.
    static func backup(_ request: MigrateRequest, of database: String? = nil) throws -> BackupOutcome {
        let database = database ?? request.database
        let folder = request.backupFolder ?? DurableFolder.parent(of: database)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder for the backup", path: folder)
        }
        let lock = try FolderLock(folder: folder, timeout: request.backupTimeout)
        defer { lock.release() }
        TemporaryFiles.removeStale(in: folder)
        var backup = BackupRequest(source: database, destination: folder, destinationIsFolder: true)
        backup.copy.timeout = request.backupTimeout
        backup.verify = .quick
        // A first migration often runs on an empty database: it is backed up as it is.
        backup.shrink = SourceShrinkPolicy(allowEmpty: true, warnFraction: nil)
        do {
            return try BackupJob.run(backup)
        } catch var error as DatabaseError {
            error.message = "the backup before migrating failed, so nothing was migrated: " + error.message
            throw error
        }
    }

    /// Runs one step in its own transaction; returns the seconds it took.
    static func apply(_ step: MigrationStep, on connection: Connection, reportedPath: String,
                      confinement: PatchConfinement? = nil) throws -> Double {
        let started = Clock.now()
        func fail(_ message: String) -> MigrationError {
            MigrationError(path: reportedPath, file: step.file.name, statement: nil, line: nil, message: message, sql: nil,
                           consequence: "the database stays at version \(step.fromVersion)")
        }
        do {
            try connection.execute("BEGIN IMMEDIATE")
        } catch var error as DatabaseError {
            error.path = reportedPath
            error.message = "cannot start \(step.file.name): " + error.message
            throw error
        }
        do {
            let version = try userVersion(connection)
            guard version == step.fromVersion else {
                throw fail("the database went to version \(version) while this run was at work (another migrate?)")
            }
            let problemsBefore = try? ForeignKeyViolations.read(connection)
            do {
                confinement?.reset()
                confinement?.resume()
                defer { confinement?.end() }
                try MigrationScript.run(step.file, on: connection)
            } catch var error as MigrationError {
                error.path = reportedPath
                if let reason = confinement?.reason(for: error.message) {
                    error.message = "not allowed in a migration: \(reason)"
                }
                error.consequence = "the database stays at version \(step.fromVersion)"
                throw error
            }
            try connection.execute("PRAGMA user_version = \(step.toVersion)")
            switch step.direction {
            case .up: try MigrationLedger.record(connection, version: step.version, file: step.upFile, at: Clock.wall())
            case .down: try MigrationLedger.remove(connection, version: step.version)
            }

            let problemsAfter: ForeignKeyViolations
            do { problemsAfter = try ForeignKeyViolations.read(connection) } catch let error as DatabaseError {
                throw fail("foreign_key_check fails after the file: \(error.message)")
            }
            // Which rows, not how many: a file that fixes one orphan and makes another fails.
            if let problemsBefore {
                let added = problemsAfter.added(since: problemsBefore)
                if !added.isEmpty {
                    throw fail("foreign_key_check finds \(added.count) new row\(added.count == 1 ? "" : "s") without a parent after the file (\(ForeignKeyViolations.describe(added)))")
                }
            }
            let check = try connection.rows("PRAGMA quick_check(20)").map { row -> String in
                if case .text(let bytes) = row.first { return String(decoding: bytes, as: UTF8.self) }
                return ""
            }
            guard check == ["ok"] else {
                throw fail("quick_check fails after the file: \(check.prefix(3).joined(separator: "; "))")
            }
            do {
                try connection.execute("COMMIT")
            } catch let error as DatabaseError {
                throw fail("cannot commit: \(error.message)")
            }
        } catch {
            if sqlite3_get_autocommit(connection.rawHandle) == 0 { try? connection.execute("ROLLBACK") }
            throw error
        }
        return Clock.now() - started
    }

    static func userVersion(_ connection: Connection) throws -> Int64 {
        if case .integer(let v)? = try connection.scalar("PRAGMA user_version") { return v }
        return 0
    }
}
