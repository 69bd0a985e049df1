// `litectl migrate status`: each migration of a folder beside what the
// database says of it (its user_version and litectl's ledger): applied,
// pending, or a problem: an applied file edited since it ran, a recorded
// migration whose file is gone, or a file numbered below the version that
// never ran (skipped). The database is only read.

public struct MigrationStatusEntry: Sendable {
    public enum State: String, Sendable {
        /// At or below the database's version, and the file is the one that ran.
        case applied
        /// At or below the database's version, with no checksum recorded (applied
        /// before litectl kept its ledger, or by another tool).
        case unrecorded
        /// Applied, but the file's SHA-256 is not the one recorded when it ran.
        case edited
        /// At or below the database's version, never recorded, while the
        /// ledger records a later migration: added after later files ran (a
        /// merge), so no run would apply it.
        case skipped
        /// Above the database's version.
        case pending
        /// Recorded in the ledger, but no file of that version is in the folder.
        case missing
    }

    public var version: Int64
    /// The file in the folder, or the recorded name when the file is missing.
    public var file: String
    public var state: State
    public var hasDown: Bool
    public var appliedAt: String?
    public var recordedSHA256: String?
    public var fileSHA256: String?

    public var isProblem: Bool { state == .edited || state == .missing || state == .skipped }
}

public struct MigrationStatusReport: Sendable {
    public var path: String
    public var folder: String
    /// The database's PRAGMA user_version.
    public var version: Int64
    /// The newest migration of the folder (0 when there is none).
    public var newest: Int64
    /// In version order.
    public var entries: [MigrationStatusEntry]

    public var pending: Int { entries.filter { $0.state == .pending }.count }
    /// True when the database is ahead of every migration of the folder.
    public var databaseIsNewer: Bool { version > newest }
    /// Problems: edited or missing files, or a database newer than the folder.
    public var hasProblems: Bool { databaseIsNewer || entries.contains(where: \.isProblem) }
}

public enum MigrationStatusReader {
    public static func read(database: String, folder: String,
                            busyTimeout: Int = Connection.defaultBusyTimeout) throws -> MigrationStatusReport {
        let migrations = try MigrationFolder.read(folder)
        let connection = try Connection(path: database, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        let (version, ledger) = try connection.readTransaction {
            (try MigrationRunner.userVersion(connection), try MigrationLedger.read(connection))
        }
        var entries: [MigrationStatusEntry] = []
        for migration in migrations {
            let recorded = ledger[migration.version]
            var entry = MigrationStatusEntry(version: migration.version, file: migration.up.name, state: .pending,
                                             hasDown: migration.down != nil, appliedAt: nil,
                                             recordedSHA256: nil, fileSHA256: migration.up.sha256)
            if migration.version <= version {
                entry.appliedAt = recorded?.appliedAt
                entry.recordedSHA256 = recorded?.sha256
                if let recorded {
                    entry.state = Array(recorded.sha256.utf8) == Array(migration.up.sha256.utf8) ? .applied : .edited
                } else if ledger.keys.contains(where: { $0 > migration.version }) {
                    entry.state = .skipped
                } else {
                    entry.state = .unrecorded
                }
            }
            entries.append(entry)
        }
        for (v, recorded) in ledger where !migrations.contains(where: { $0.version == v }) {
            entries.append(MigrationStatusEntry(version: v, file: recorded.file, state: .missing, hasDown: false,
                                                appliedAt: recorded.appliedAt, recordedSHA256: recorded.sha256, fileSHA256: nil))
        }
        entries.sort { $0.version < $1.version }
        return MigrationStatusReport(path: database, folder: folder, version: version,
                                     newest: migrations.last?.version ?? 0, entries: entries)
    }
}
