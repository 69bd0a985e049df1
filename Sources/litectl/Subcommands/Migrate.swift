// `litectl migrate DB DIR`: apply numbered SQL migrations keyed by PRAGMA
// user_version, safely (backup first, one transaction and checks per file,
// a dry run on a copy); `migrate status` lives in MigrateStatus.swift,
// `migrate lint` in MigrateLint.swift.
import ArgumentParser
import Foundation
import LitectlCore

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply numbered SQL migrations to a database, keyed by its user_version.",
        discussion: """
            `litectl migrate DB DIR` is `litectl migrate apply DB DIR`: it takes DB from its \
            user_version to the newest NNNN_name.sql of DIR, one transaction per file, after \
            a verified backup. `litectl migrate status DB DIR` lists the files applied, \
            pending, edited since they ran, or missing. `litectl migrate lint DB DIR` runs \
            the pending files on a copy and reports destructive or risky changes with the \
            rows they touch (docs/migrate-lint.md). docs/schema.md (installed as /usr/local/share/doc/litectl/schema.md) has the details.
            """,
        subcommands: [MigrateApply.self, MigrateStatus.self, MigrateLint.self],
        defaultSubcommand: MigrateApply.self)
}

struct MigrateApply: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Take DB to the newest migration of DIR (or to --to N); `litectl migrate DB DIR` for short.",
        discussion: """
            DIR holds NNNN_name.sql files (and optionally NNNN_name.down.sql): the number \
            is the PRAGMA user_version the database has once the file is applied (1 to \
            2147483647; leading zeros do not count). Files are applied in order from the \
            database's user_version up to the newest, or up or down to --to N (down runs \
            the .down.sql files, newest first; every one needed must exist). A .sql file \
            whose name does not follow the pattern, or two files of one version, is an \
            error before anything runs.

            Each file runs in its own BEGIN IMMEDIATE transaction, with foreign keys off \
            (as SQLite's 12-step table rebuild needs), statement by statement; the same \
            transaction sets user_version and records the file in litectl's table \
            _litectl_migrations (version, file, sha256, applied_at). Before COMMIT, \
            foreign_key_check must find no row without a parent that it did not find \
            before the file (rows told apart by table, rowid, parent and key columns) and \
            quick_check must pass. A file that fails, or that has BEGIN, COMMIT, \
            END or ROLLBACK in it, is rolled back: the database stays at the previous \
            version, the files before it stay applied, and one line on stderr names the \
            file, the statement (number and line) and the cause; exit status 2.

            Before the first migration of a run, a verified backup is made exactly as \
            `litectl backup DB FOLDER` makes it (a hot copy, quick_check, fsync, rename, \
            and a .json manifest) into --backup-dir (default: the database's folder); \
            --no-backup skips it. Nothing to apply means no backup.

            An applied file whose SHA-256 differs from the one recorded when it ran was \
            edited afterwards: the run refuses to start (exit status 1) unless \
            --accept-edited, which records the new checksum. A file numbered at or below \
            the database's version that never ran while a later one did (0005 applied, then \
            a merged branch brings 0004) would be passed over: the run refuses to start \
            (exit status 2, naming the file) until it is renumbered above the version. \
            `litectl migrate status` lists applied, pending and skipped files.

            The files are confined to DB as a patch is, by an authorizer SQLite consults \
            as it prepares each statement: ATTACH, DETACH, VACUUM INTO and \
            load_extension() are refused, and so is every PRAGMA but those a schema change \
            needs (foreign_keys, defer_foreign_keys, legacy_alter_table, \
            recursive_triggers, case_sensitive_like, user_version, application_id, \
            optimize, analysis_limit, and reading table_info, index_list, \
            foreign_key_check, quick_check and the like): a refused file is rolled back \
            and named (exit status 2). --allow-attach NAME=PATH (repeatable) lets the \
            files write another database: litectl attaches PATH (an existing database) \
            as NAME before the first file, backs it up as it backs up DB, and each file's \
            changes to it are in that file's transaction (the files use NAME; their own \
            ATTACH of that same file and DETACH NAME do nothing). In rollback-journal mode \
            SQLite commits a transaction over several files atomically; a WAL-mode \
            database commits apart from the others (a warning says so).

            On a full disk ("disk full") or SIGINT, SIGTERM or SIGHUP ("interrupted by \
            SIGTERM") the file in flight is rolled back before litectl exits 2: the \
            database stays at the previous version, the files before it applied. After \
            SIGKILL the file's journal stays, as SQLite leaves it for any killed writer; \
            the next run (or any write) rolls it back. See docs/safety.md (installed as \
            /usr/local/share/doc/litectl/safety.md).

            --dry-run changes nothing: it copies the database to a temporary file \
            (backup API, in $TMPDIR), runs the chain on the copy with every check, and \
            prints what would run and then the diff of the copy before and after (schema \
            changes, user_version, and per table +inserted -deleted ~updated rows, as \
            `litectl diff --summary`; _litectl_migrations left out). The databases \
            --allow-attach names are copied too, and changed only as copies (their \
            changes are not in the diff).

            Silent on success unless -v or stdout is a terminal (then one line per file \
            applied, and the backup's path); --json prints one JSON object: path, dry_run, \
            from_version, to_version, backup, attached_backups, applied [{version, file, \
            direction, to_version, seconds}], accepted_edits, error. Exit status: 0 done (or nothing \
            to do), 1 refused (edited files), 2 error.
            """)

    @Argument(help: ArgumentHelp("The database file.", valueName: "db"))
    var database: String

    @Argument(help: ArgumentHelp("The folder of NNNN_name.sql files.", valueName: "dir"))
    var folder: String

    @Option(help: ArgumentHelp("The version to go to, up or down (0 undoes every migration).", valueName: "n"))
    var to: Int64?

    @Flag(help: "Run the chain on a temporary copy and print the diff it makes; change nothing.")
    var dryRun = false

    @Option(help: ArgumentHelp("The folder for the backup before the first migration (default: the database's folder).", valueName: "dir"))
    var backupDir: String?

    @Flag(help: "Make no backup before migrating.")
    var noBackup = false

    @Flag(help: "Record the new checksums of applied files that were edited, instead of refusing to run.")
    var acceptEdited = false

    @Option(help: ArgumentHelp("Let the files write the database at PATH, attached as NAME and backed up first (repeatable).", valueName: "name=path"))
    var allowAttach: [String] = []

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }
    var json: Bool { voice.json }

    @OptionGroup var options: DatabaseOptions

    func validate() throws {
        if let to, to < 0 || to > MigrationFolder.maximumVersion {
            throw ValidationError("--to takes a version from 0 to \(MigrationFolder.maximumVersion).")
        }
        if noBackup && backupDir != nil { throw ValidationError("Give --backup-dir or --no-backup, not both.") }
        if dryRun && json { throw ValidationError("--dry-run prints the diff as text; it does not go with --json.") }
        _ = try attachable()
    }

    /// The --allow-attach databases.
    func attachable() throws -> [AttachableDatabase] {
        try allowAttach.map { given in
            guard let equals = given.firstIndex(of: "="), equals != given.startIndex, given.index(after: equals) != given.endIndex else {
                throw ValidationError("--allow-attach takes NAME=PATH (the schema name the files use, and the database file), not \(given).")
            }
            return AttachableDatabase(name: String(given[..<equals]), path: String(given[given.index(after: equals)...]))
        }
    }

    func run() throws {
        try refuseMoments([database], as: "migrated")
        noteHotJournals(voice)
        Interruption.install(naming: database)
        var request = MigrateRequest(database: database, folder: folder)
        request.attachable = try attachable()
        request.target = to
        request.backup = !noBackup
        request.backupFolder = backupDir
        request.acceptEdited = acceptEdited
        // One wait for every lock: the database's, the backup folder's (60 s by default, as backup's).
        request.busyTimeout = options.milliseconds(default: 60)
        request.backupTimeout = options.seconds(default: 60)
        let talk = !voice.quiet && (verbose || dryRun || (!json && isatty(STDOUT_FILENO) == 1))
        var appliedSoFar: [AppliedMigration] = []
        let onStep: (AppliedMigration) -> Void = { applied in
            appliedSoFar.append(applied)
            guard talk && !json else { return }
            let verb = dryRun ? "would apply" : "applied"
            let step = applied.step
            printOut("\(verb) \(step.file.name) (version \(step.fromVersion) → \(step.toVersion), \(String(format: "%.2f", applied.seconds)) s)")
        }
        let outcome: MigrateOutcome
        do {
            if dryRun {
                let sink = FileDescriptorSink()
                let colour = isatty(STDOUT_FILENO) == 1 && getenv("NO_COLOR") == nil
                // The diff comes after the steps' lines: print them before it starts.
                outcome = try MigrationRunner.dryRun(request, sink: sink, colour: colour, onStep: onStep)
                try sink.flush()
            } else {
                let quiet = voice.quiet
                outcome = try MigrationRunner.run(request, onStep: onStep, onWarning: { if !quiet { printError("warning: " + $0) } })
            }
        } catch let refusal as MigrationRefusal {
            if json { printExact(Self.json(nil, path: database, applied: [], error: refusal.description).compact) }
            printError(refusal.description)
            throw ExitStatus.findings
        } catch {
            if json { printExact(Self.json(nil, path: database, applied: appliedSoFar, error: describe(error)).compact) }
            printError(describe(error))
            throw ExitStatus.error
        }
        if json {
            printExact(Self.json(outcome, path: database, applied: outcome.applied, error: nil).compact)
            return
        }
        guard talk else { return }
        for edit in outcome.acceptedEdits {
            printOut("\(dryRun ? "would record" : "recorded") the new checksum of \(edit.file) (edited after it ran)")
        }
        if let backup = outcome.backup { printOut("backup: \(backup.backupPath)") }
        for backup in outcome.attachedBackups { printOut("backup: \(backup.backupPath)") }
        if outcome.applied.isEmpty {
            printOut("\(database): at version \(outcome.fromVersion); nothing to do")
        } else if dryRun {
            if outcome.diff?.identical == true { printOut("(the migrations change no table, index, view, trigger or setting)") }
            printOut("\(database): not changed (dry run); it would go from version \(outcome.fromVersion) to \(outcome.toVersion)")
        } else {
            printOut("\(database): version \(outcome.fromVersion) → \(outcome.toVersion)")
        }
    }

    /// The outcome; after an error, `applied` holds the files that were applied before it.
    static func json(_ outcome: MigrateOutcome?, path: String, applied: [AppliedMigration], error: String?) -> JSON {
        .object([
            ("path", .string(path)),
            ("dry_run", .bool(outcome?.dryRun ?? false)),
            ("from_version", outcome.map { .integer($0.fromVersion) } ?? .null),
            ("to_version", outcome.map { .integer($0.toVersion) } ?? applied.last.map { .integer($0.step.toVersion) } ?? .null),
            ("backup", .optional(outcome?.backup?.backupPath, JSON.string)),
            ("attached_backups", .array((outcome?.attachedBackups ?? []).map { .string($0.backupPath) })),
            ("applied", .array(applied.map { applied in
                .object([("version", .integer(applied.step.version)), ("file", .string(applied.step.file.name)),
                         ("direction", .string(applied.step.direction.rawValue)),
                         ("to_version", .integer(applied.step.toVersion)), ("seconds", .number(applied.seconds))])
            })),
            ("accepted_edits", .array((outcome?.acceptedEdits ?? []).map { .string($0.file) })),
            ("error", .optional(error, JSON.string)),
        ])
    }
}
