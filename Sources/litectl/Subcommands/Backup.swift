// `litectl backup SRC... DEST`: hot, verified, atomic backups made for cron.
import ArgumentParser
import Foundation
import LitectlCore

struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy live databases into verified, atomically written backups.",
        discussion: """
            Each SRC is copied while other processes keep using it, through SQLite's online \
            backup API, as one committed state of the database. In WAL mode the copy reads \
            one snapshot and never blocks writers. In rollback-journal mode it copies in \
            steps between which writers may commit; after 3 restarts caused by commits it \
            finishes holding the read lock, so writers wait for at most the time the copy \
            takes (about the time to read the file; the manifest records it as \
            writers_blocked_seconds). A lock held by another process is retried until \
            --timeout.

            DEST is a folder (each copy is named <source name>-<UTC timestamp>.db, or \
            .db.gz, the name without a .db, .sqlite, .sqlite3 or .db3 extension) or, with one SRC, a file (an existing one is replaced only with \
            --force). The copy is written to a hidden temporary file in the destination \
            folder with the source's permission bits (whatever the umask), checked \
            (--verify, quick_check by default), fsynced, renamed into place, and the folder \
            fsynced. On any error, SIGINT, SIGTERM or SIGHUP the temporary file is removed, \
            nothing appears under the final name, and the exit status is 2 (after SIGKILL \
            the hidden temporary file stays until the next backup into that folder removes \
            it; a SIGKILL just between the manifest's rename and the backup's leaves the \
            manifest without its backup: verify reports it, retention removes it). The \
            source is only read. A file-size limit or a full disk is reported \
            as such, with nothing kept.

            Beside each backup, <backup file>.json is its manifest: format, backup, source, \
            started_at, finished_at, started_at_unix, duration_seconds, method, strategy, \
            restarts, writers_blocked_seconds, journal_mode, page_size, page_count, bytes, \
            compressed_bytes, gzip_level, sha256 (of the file as stored), database_sha256 \
            (of the database bytes), user_version, schema_hash, sqlite_version, \
            verification {mode, result}. `litectl verify` checks a backup against it.

            Retention (--keep-*, folder DEST only) works like restic's forget: keep the \
            newest N backups, and the newest backup of each of the last H hours, D days, W \
            weeks (Monday first), M months (UTC) that have one; a backup kept by any rule \
            stays. Only backups named by a litectl manifest for the same source (same \
            resolved path) are ever removed, with their manifests, after a successful \
            backup. A manifest of that source whose backup file does not exist (left by \
            a run killed between writing the manifest and renaming the backup into \
            place) is removed too. --dry-run makes no backup and prints the backups and \
            manifests that would be removed if one were made now.

            Runs are silent on success. -v prints a summary line per source on stdout; \
            --json prints one JSON object per source (JSON Lines: source, ok, error, \
            backup, manifest (the manifest's fields or null), pruned, pruned_manifests). \
            -v and --json name what retention removed. A lock per \
            destination folder (.litectl-backup.lock, flock) makes an overlapping run wait \
            up to --timeout, then fail. --metrics-file writes a Prometheus textfile (for \
            node_exporter's textfile collector) atomically: \
            litectl_backup_last_success_timestamp_seconds, litectl_backup_success, \
            litectl_backup_duration_seconds, litectl_backup_bytes, litectl_backup_verified, \
            litectl_backup_shrunk, labelled by source.

            A source that shrank to nothing is not a backup: a source that holds no table \
            (a 0-byte file, which SQLite opens as an empty database, or an empty schema) \
            is refused with exit status 2 unless --allow-empty. One whose page count fell \
            by more than --warn-shrink percent (default 90) since its last backup is \
            backed up and flagged: a warning line on stderr, "shrunk" in --json, \
            litectl_backup_shrunk 1 in the metrics file; that run removes none of its \
            older backups. Retention never removes the newest backup of a database that \
            holds data while the backups it keeps hold none. The destination (and \
            --metrics-file) is never the source, its -wal or -journal, or a link to them. \
            See docs/safety.md (installed as /usr/local/share/doc/litectl/safety.md).

            Several sources are each backed up independently; a failure is reported on \
            stderr and the others still run. A progress bar is drawn on stderr only when \
            it is a terminal.

            With --repo URL (a folder or s3://BUCKET/PREFIX; see litectl repo init), each \
            SRC becomes a snapshot in that repository: the same hot copy (into a temporary \
            file under $TMPDIR; of a WAL database, only page 1 is kept there and the pages \
            are read again from its snapshot, so it needs no space for a copy unless the \
            snapshot's -wal frames cannot be pinned down), then each \
            page hashed and only the pages the repository lacks compressed into pack files; the snapshot records the page list, the \
            SHA-256 of its page ids (of the file, in repositories before version 3) and \
            the logical hash (litectl hash). --tag labels snapshots; \
            --keep-* forgets older snapshots of the databases just backed up (prune frees \
            their pages); -j backs up several databases at once. -v (or a terminal on \
            stdout) prints pages read, new pages, bytes added and time per database; --json \
            one object per database.

            With --config FILE (TOML) the file names the databases (paths and globs, \
            exclude globs), the repository and its settings, tags, retention ([keep]), jobs \
            and the metrics file: one crontab line backs up a whole host. A database that \
            fails (and a glob that matches nothing) gets one line on stderr and exit status \
            1; the others are still backed up (a source refused as empty is exit status \
            2 even so). docs/repo.md (installed as /usr/local/share/doc/litectl/repo.md) \
            has an example.

            Exit status: 0 all backed up; 1 with --config, a database failed (the others \
            are backed up); 2 a backup failed, a source was refused as empty, or an error.
            """)

    @Argument(help: ArgumentHelp("Source databases, then the destination folder or file (with --repo: only the sources).", valueName: "src... dest"))
    var paths: [String] = []

    @OptionGroup(title: "Repository") var repository: RepoOptions

    @Option(help: ArgumentHelp("With --repo: tag the snapshots (repeatable).", valueName: "tag"))
    var tag: [String] = []

    @Option(help: ArgumentHelp("Back up every database a config file names, into its repository (TOML; see docs/repo.md, installed in /usr/local/share/doc/litectl).", valueName: "file"))
    var config: String?

    @Option(name: .shortAndLong, help: ArgumentHelp("With --repo or --config: databases backed up at once (default: the config's jobs, else 1).", valueName: "n"))
    var jobs: Int?

    @Flag(help: "Compress the backup with gzip into .db.gz (streamed, flat memory).")
    var gzip = false

    @Option(help: ArgumentHelp("gzip level, 1 (fastest) to 9 (smallest); implies --gzip.", valueName: "level"))
    var gzipLevel: Int?

    @Option(help: "Check the copy before it gets its final name: quick (quick_check), full (integrity_check) or none.")
    var verify: VerifyChoice = .quick

    @Flag(help: "Make a compacted copy with VACUUM INTO instead of the backup API.")
    var vacuum = false

    @OptionGroup var lockWait: DatabaseOptions
    var timeout: Double { lockWait.seconds(default: 60) }

    @OptionGroup(title: "Retention") var keep: KeepOptions

    @Flag(help: "Make no backup; list what the retention options would remove.")
    var dryRun = false

    @Flag(help: "Back up a source that holds no tables (a 0-byte file included), which is refused otherwise.")
    var allowEmpty = false

    @Option(help: ArgumentHelp("Flag a source whose page count fell by more than this percentage since its last backup (on stderr, in --json and in the metrics file; 100 never flags). (default: 90)", valueName: "percent"))
    var warnShrink: Double?

    @Flag(help: "Replace an existing destination file.")
    var force = false

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }
    var json: Bool { voice.json }

    @Option(help: ArgumentHelp("Write a Prometheus textfile with the run's metrics here.", valueName: "path"))
    var metricsFile: String?

    enum VerifyChoice: String, ExpressibleByArgument, CaseIterable {
        case quick, full, none
        var level: VerifyLevel { VerifyLevel(rawValue: rawValue)! }
    }

    var policy: RetentionPolicy { keep.policy }

    /// The empty-source and shrink rules the options (or, under --config,
    /// the file, which the options override) ask for.
    func shrinkPolicy(default base: SourceShrinkPolicy = SourceShrinkPolicy()) -> SourceShrinkPolicy {
        var policy = base
        if allowEmpty { policy.allowEmpty = true }
        if let warnShrink { policy.warnFraction = warnShrink / 100 }
        return policy
    }

    func validate() throws {
        if config != nil {
            guard paths.isEmpty, !repository.isGiven else { throw ValidationError("--config names the databases and the repository: give no sources and no --repo.") }
        } else if repository.isGiven {
            guard !paths.isEmpty else { throw ValidationError("Give at least one source database.") }
            if gzip || gzipLevel != nil || vacuum || force { throw ValidationError("--gzip, --vacuum and --force apply to folder and file backups, not to --repo.") }
        } else {
            guard paths.count >= 2 else { throw ValidationError("Give at least one source and a destination.") }
            try repository.requireNoRepositoryOptions(with: "--repo or --config")
            if !tag.isEmpty || jobs != nil { throw ValidationError("--tag and --jobs apply with --repo or --config.") }
        }
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be 1 or more.") }
        if let gzipLevel, !(1...9).contains(gzipLevel) { throw ValidationError("--gzip-level must be 1 to 9.") }
        try keep.check()
        if dryRun && policy.isEmpty { throw ValidationError("--dry-run lists what retention would remove: give a --keep-* option.") }
        if let warnShrink, !(0...100).contains(warnShrink) { throw ValidationError("--warn-shrink must be a percentage, 0 to 100.") }
    }

    func run() throws {
        try refuseMoments(paths, as: "backed up or written")
        noteHotJournals(voice)
        TemporaryFiles.installSignalCleanup()
        if config != nil || repository.isGiven { return try runRepository() }
        var request = BackupRunRequest(sources: Array(paths.dropLast()), destination: paths.last!)
        if gzip || gzipLevel != nil { request.gzipLevel = gzipLevel ?? 6 }
        request.verify = verify.level
        request.vacuum = vacuum
        request.timeout = timeout
        request.replaceExisting = force
        request.retention = policy
        request.shrink = shrinkPolicy()
        request.metricsFile = metricsFile

        if dryRun {
            do {
                for preview in try BackupRun.preview(request) {
                    for path in preview.backups { printOut("would remove \(path)") }
                    for path in preview.danglingManifests { printOut("would remove \(path) (a manifest whose backup does not exist)") }
                }
            } catch {
                printError(describe(error)); throw ExitStatus.error
            }
            return
        }

        let bar = ProgressBar(label: "")
        let outcome: (results: [BackupRunResult], metricsError: DatabaseError?)
        do {
            outcome = try BackupRun.run(request, progress: { source, progress in
                bar.label = DurableFolder.baseName(of: source)
                bar.update(progress)
            }, report: { result in
                bar.clear()
                show(result)
            })
        } catch {
            bar.clear()
            printError(describe(error)); throw ExitStatus.error
        }
        if let metricsError = outcome.metricsError { printError(describe(metricsError)) }
        if outcome.metricsError != nil || outcome.results.contains(where: { $0.error != nil }) { throw ExitStatus.error }
    }

    /// One source's result, as -v, --json or (for errors and warnings) stderr say it.
    func show(_ result: BackupRunResult) {
        let source = result.source
        guard let outcome = result.outcome else {
            let error = result.error.map(describe) ?? "\(source): failed"
            printError(error)
            if json {
                printExact(JSON.object([("source", .string(source)), ("ok", .bool(false)), ("error", .string(error)),
                                        ("backup", .null), ("manifest", .null), ("shrunk", .null), ("pruned", .array([])),
                                        ("pruned_manifests", .array([]))]).compact)
            }
            return
        }
        let m = outcome.manifest
        if let shrink = outcome.shrink, !voice.quiet { printError("warning: " + shrink.message(source: source, retention: !policy.isEmpty)) }
        if json {
            printExact(JSON.object([("source", .string(source)), ("ok", .bool(true)), ("error", .null),
                                    ("backup", .string(outcome.backupPath)), ("manifest", m.json),
                                    ("shrunk", outcome.shrink?.json ?? .null),
                                    ("pruned", .array(result.pruned.map { .string($0) })),
                                    ("pruned_manifests", .array(result.prunedManifests.map { .string($0) }))]).compact)
        } else if verbose {
            let size = m.compressedBytes.map { "\(humanBytes(m.bytes)), \(humanBytes($0)) compressed" } ?? humanBytes(m.bytes)
            let verdict = m.verification.mode == "none" ? "not verified"
                : "\(m.verification.mode == "full" ? "integrity_check" : "quick_check") \(m.verification.result)"
            printOut("\(source) -> \(outcome.backupPath) (\(size), \(String(format: "%.2f", m.durationSeconds)) s, \(verdict), \(m.strategy))")
            for path in result.pruned { printOut("pruned \(path)") }
            for path in result.prunedManifests { printOut("pruned \(path) (a manifest whose backup does not exist)") }
        }
    }
}
