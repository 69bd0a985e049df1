// Which files a migration run applies, in which order, from the database's
// PRAGMA user_version to the newest migration of the folder or to a chosen
// version (down through `.down.sql` files); and which already-applied files
// were edited since they ran. Pure: no file and no database is touched here.

/// One file to run and the versions it takes the database from and to.
public struct MigrationStep: Sendable {
    public enum Direction: String, Sendable { case up, down }
    public var direction: Direction
    /// The migration's version (for a down step, the one it reverts).
    public var version: Int64
    /// The file that runs: the up file, or the down file.
    public var file: MigrationScriptFile
    /// For an up step, the file the ledger records.
    public var upFile: MigrationScriptFile
    public var fromVersion: Int64
    public var toVersion: Int64
}

/// An applied migration whose file is no longer the file that ran.
public struct EditedMigration: Sendable {
    public var version: Int64
    public var file: String
    public var recordedSHA256: String
    public var currentSHA256: String
    public var upFile: MigrationScriptFile
}

public struct MigrationPlan: Sendable {
    public var currentVersion: Int64
    public var targetVersion: Int64
    public var steps: [MigrationStep]
    public var edited: [EditedMigration]

    /// Works out the steps from `current` to `target` (default: the newest
    /// migration). Errors, before anything runs: a target that is not 0 or
    /// a migration's version, a database newer than every migration when no
    /// target is given, a file numbered below the version that never ran
    /// (`skipped`), and a down step without its `.down.sql`.
    public init(migrations: [Migration], current: Int64, target requested: Int64?,
                ledger: [Int64: LedgerEntry], path: String) throws {
        func fail(_ message: String) -> DatabaseError { DatabaseError(code: .misuse, message: message, path: path) }
        let newest = migrations.last?.version ?? 0
        let target: Int64
        if let requested {
            guard requested == 0 || migrations.contains(where: { $0.version == requested }) else {
                throw fail("no migration has version \(requested) (--to takes 0 or the number of a migration file)")
            }
            target = requested
        } else {
            guard current <= newest else {
                throw fail("the database is at version \(current), newer than the newest migration (\(newest)); give --to to go down")
            }
            target = newest
        }
        if let skipped = MigrationPlan.skipped(migrations, current: current, ledger: ledger).first {
            throw fail("\(skipped.up.name) is numbered below the database's version \(current) but never ran (the ledger records later migrations, not it: it came after them, from a merge say); renumber it above \(current)")
        }
        currentVersion = current
        targetVersion = target
        steps = []
        if target > current {
            var from = current
            for migration in migrations where migration.version > current && migration.version <= target {
                steps.append(MigrationStep(direction: .up, version: migration.version, file: migration.up,
                                           upFile: migration.up, fromVersion: from, toVersion: migration.version))
                from = migration.version
            }
        } else if target < current {
            let reverted = migrations.filter { $0.version > target && $0.version <= current }.reversed()
            let missing = reverted.filter { $0.down == nil }.map(\.up.name)
            guard missing.isEmpty else {
                throw fail("cannot go down to version \(target): no .down.sql for \(missing.joined(separator: ", "))")
            }
            var from = current
            for migration in reverted {
                // Down to the migration below, or to the target when none is above it.
                let below = migrations.last { $0.version < migration.version }?.version ?? 0
                let to = max(below, target)
                steps.append(MigrationStep(direction: .down, version: migration.version, file: migration.down!,
                                           upFile: migration.up, fromVersion: from, toVersion: to))
                from = to
            }
        }
        edited = migrations.compactMap { migration in
            guard migration.version <= current, let entry = ledger[migration.version],
                  Array(entry.sha256.utf8) != Array(migration.up.sha256.utf8) else { return nil }
            return EditedMigration(version: migration.version, file: migration.up.name, recordedSHA256: entry.sha256,
                                   currentSHA256: migration.up.sha256, upFile: migration.up)
        }
    }

    /// Migrations at or below the database's version that the ledger never
    /// recorded although it recorded a later one: added after later files ran
    /// (0005 applied, then a merged branch brings 0004), so a run from the
    /// version would pass over them. Files below every recorded version are
    /// not counted: they ran before litectl kept its ledger (an adopted database).
    static func skipped(_ migrations: [Migration], current: Int64, ledger: [Int64: LedgerEntry]) -> [Migration] {
        migrations.filter { migration in
            migration.version <= current && ledger[migration.version] == nil
                && ledger.keys.contains { $0 > migration.version }
        }
    }
}
