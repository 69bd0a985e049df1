// `litectl replicate DB... --repo URL`: follow databases into a repository
// until SIGTERM or SIGINT, a segment every --interval (LitectlCore's Replicator).
import ArgumentParser
import Dispatch
import Foundation
import LitectlCore

struct Replicate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow WAL databases into a repository, so that any moment can be restored.",
        discussion: """
            A foreground process (for systemd: scripts/litectl-replicate.service). For each \
            database it holds a read mark (a read transaction on a read-only connection, \
            taken again at every look so that the application's checkpoints proceed), reads \
            the commits from the -wal (checksums and salts checked, up to the last commit \
            frame), and records each look that finds commits as one state: the pages they \
            changed, the -wal position and the time. Every --interval the states go to the \
            repository as a segment (their new pages in packs, deduplicated and compressed \
            as backups' are); every --fold-interval (and on SIGUSR1) a full snapshot starts a \
            new chain so that restores stay quick. `litectl restore --repo URL latest --db \
            NAME --at TIME TARGET` then lands on the last state observed at or before TIME, \
            checked end to end; `litectl snapshots` lists the range of times each database \
            can be restored to.

            It writes nothing to the databases (no helper table, no pragma) but its own \
            checkpoints: its read mark keeps the application's automatic (PASSIVE) \
            checkpoint from catching up with the last commit while commits keep coming, so \
            when that checkpoint was held back (the -wal at 1000 frames or more), or once the \
            -wal holds 32 MiB, the follower checkpoints (PASSIVE, then RESTART when commits \
            came meanwhile) and the -wal restarts at its last state, about as small as \
            without a follower (--checkpoint-frames). When it finds frames it missed (the \
            -wal restarted while it was not running), it compares the whole database with \
            the last state, page by page, and records the difference: never a gap. Killed at \
            any moment, it resumes from the repository's record with no gap and no \
            duplicate. On SIGTERM or SIGINT it ships what is committed and exits 0 (2 when \
            the repository could not take it within --stop-timeout). Object store failures \
            are retried with backoff; once 16 MB wait to be shipped, the read mark is let \
            go until the store takes them (then a resync, if the -wal restarted meanwhile). \
            Databases in rollback-journal mode are refused (switch them with PRAGMA \
            journal_mode=wal, or back them up with backup --repo). The repository must be \
            format version 4 (`litectl repo upgrade URL` upgrades a version-3 one).

            --exec CMD runs the application as replicate's child, as Litestream's -exec \
            does: CMD (through /bin/sh -c, with replicate's environment, folder and \
            streams, every signal at its default) starts once every database is followed \
            (a start that fails, such as a database not in WAL mode or another follower's \
            lease, never runs it: exit 2). SIGTERM and SIGINT go to CMD; when CMD exits, \
            whatever is committed is shipped and replicate exits with CMD's status (128 + N \
            when a signal N ended it), or 2 when CMD exited 0 but not everything could be \
            shipped within --stop-timeout. Replication that ends while CMD runs (every \
            follower's lease taken over) leaves CMD running, said on stderr, as Litestream \
            does. With a restore at boot (restore --if-db-not-exists --if-replica-exists) \
            it is a container's whole entry point (docs/replicate.md).

            Durations (--interval, --poll-interval, --fold-interval, --stop-timeout, \
            --timeout) are seconds (0.5, 90) or numbers with units, largest first: 90s, \
            250ms, 15m, 1h30m, 1d.

            One follower per database: each one's lease in the repository (30 s, renewed \
            every 10 s) is taken first; a second replicate of the same database waits up to \
            --timeout for it and exits 2 naming the running one (host, pid, since when). A \
            lease whose process is gone from this host, or not renewed for 30 s, is taken \
            over; a follower whose lease was taken over stops following that database.

            --dir DIR follows every WAL database of a folder tree with one process and a \
            fixed number of threads, however many there are (docs/replicate.md, "Fleets"): \
            regular files whose name matches --glob (default: every name) and whose header \
            says SQLite in WAL mode; -wal, -shm and -journal files, other files, symbolic \
            links (never followed), FIFOs and devices are skipped (-v names each skipped \
            file once). A database holds no connection and no thread while nothing changes: \
            its -wal is looked at twice an interval, and a change has one of a few workers \
            read its commits (with a resync when the -wal restarted meanwhile), ship them \
            and let the read mark go. One lease on the folder (renewed every 10 s) covers \
            every database under it: a replicate of one of them is refused while it holds. \
            An idle database costs no request to the repository: no lease of its own, no \
            fold until it changes. With --watch the tree is read again every 5 s: a new \
            database is followed within 10 s, and a deleted one is dropped (both said on \
            stderr); without it, the databases present at the start are followed, and a \
            deleted one is dropped. --metrics-file is written every 10 s.

            --config FILE takes the databases, repository and settings from the TOML of \
            backup --config (jobs, verify and [keep] do not apply; its timeout is the wait \
            for another follower's lease and for the repository's lock when a chain starts, \
            60 s by default). -v reports \
            each segment on stderr (problems and resyncs are reported unless -q, which \
            keeps only problems that are not retried); --json prints every event as one \
            JSON object per line on stdout. --metrics-file writes a \
            Prometheus textfile every interval: litectl_replicate_lag_seconds, \
            litectl_replicate_last_shipped_commit_timestamp_seconds, \
            litectl_replicate_shipped_bytes_total, litectl_replicate_shipped_states_total, \
            litectl_replicate_errors_total, litectl_replicate_resyncs_total, \
            litectl_replicate_stalled (1 while no progress came for 3 intervals as the -wal \
            was written to, said once on stderr). A database file replaced under the follower \
            (another inode under its name, or the file written over in place while nothing \
            waits to be checkpointed) ends its chain and starts a new one within an \
            interval, said on stderr. docs/replicate.md \
            says how it stays correct.
            """)

    @Argument(help: ArgumentHelp("WAL databases to follow.", valueName: "db"))
    var paths: [String] = []

    @OptionGroup(title: "Repository") var repository: RepoOptions

    @Option(help: ArgumentHelp("Read the databases, repository and settings from this TOML file (the format of backup --config).", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("Follow every WAL database of this folder tree (one process, a fixed number of threads).", valueName: "dir"))
    var dir: String?

    @Option(help: ArgumentHelp("With --dir: only databases whose file name matches this shell pattern (default: every name).", valueName: "pattern"))
    var glob = "*"

    @Flag(help: "With --dir: follow databases created after the start too (the tree is read again every 5 s), and drop deleted ones.")
    var watch = false

    @Option(help: ArgumentHelp("Time between segments shipped: seconds (0.5) or a duration (2s, 1m) (default: 1s).", valueName: "duration"),
            transform: DurationArgument.parse)
    var interval = DurationArgument(seconds: 1)

    @Option(help: ArgumentHelp("Time between looks at each -wal (seconds or a duration: 0.1, 100ms): the resolution of restores, and about half the longest an application's RESTART or TRUNCATE checkpoint waits for the read mark (default: 100ms).", valueName: "duration"),
            transform: DurationArgument.parse)
    var pollInterval = DurationArgument(seconds: 0.1)

    @Option(help: ArgumentHelp("Time between full snapshots that start a new chain (seconds or a duration: 3600, 1h, 1d; 0: only on SIGUSR1) (default: 1h).", valueName: "duration"),
            transform: DurationArgument.parse)
    var foldInterval = DurationArgument(seconds: 3600)

    @Option(help: ArgumentHelp("Tag the snapshots it writes (repeatable).", valueName: "tag"))
    var tag: [String] = []

    @Option(help: ArgumentHelp("Write a Prometheus textfile here every interval.", valueName: "path"))
    var metricsFile: String?

    @Option(help: ArgumentHelp("How long a stop waits for the repository to take what is committed (seconds or a duration: 60, 5m) (default: 60s).", valueName: "duration"),
            transform: DurationArgument.parse)
    var stopTimeout = DurationArgument(seconds: 60)

    @Option(help: ArgumentHelp("When the follower checkpoints the -wal itself so that it restarts: auto, as the application's own checkpoints would without the follower (once one was held back by the read mark with the -wal at 1000 frames or more, and at 32 MiB in any case); N, once it holds N frames; 0, never (the -wal then grows until the application runs a RESTART or TRUNCATE checkpoint).", valueName: "auto|frames"))
    var checkpointFrames = CheckpointFrames.auto

    @Option(help: ArgumentHelp("Segments after which the recent ones are gathered into one (and at a stop, those since the last), their pages stored again side by side from a spool in $TMPDIR, on a thread of its own (2 or more).", valueName: "n"))
    var gatherEvery = 60

    @Option(name: .customLong("exec"), help: ArgumentHelp("Run CMD (through /bin/sh -c) once every database is followed, forward SIGTERM and SIGINT to it, and when it exits ship what is committed and exit with its status.", valueName: "cmd"))
    var execCommand: String?

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var lockWait: DatabaseOptions

    func validate() throws {
        if config == nil && paths.isEmpty && dir == nil { throw ValidationError("Give the databases to follow, --dir DIR, or --config FILE.") }
        if [config != nil, !paths.isEmpty, dir != nil].filter({ $0 }).count > 1 { throw ValidationError("Give databases, --dir or --config, only one of them.") }
        if dir == nil && (watch || glob != "*") { throw ValidationError("--watch and --glob go with --dir.") }
        if config == nil && !repository.isGiven { throw ValidationError("Give --repo URL (or set LITECTL_REPO).") }
        guard interval.seconds > 0, pollInterval.seconds > 0, pollInterval.seconds <= interval.seconds else {
            throw ValidationError("--interval and --poll-interval must be above 0, the poll interval at most the interval.")
        }
        guard gatherEvery >= 2 else { throw ValidationError("--gather-every must be 2 or more.") }
    }

    func run() throws {
        try refuseMoments(paths, as: "replicated")
        var settings = ReplicateSettings()
        settings.location = repository.location
        settings.sources = paths
        settings.options.interval = interval.seconds
        settings.options.poll = pollInterval.seconds
        settings.options.foldInterval = foldInterval.seconds
        settings.options.tags = tag
        settings.options.metricsFile = metricsFile
        settings.options.stopTimeout = stopTimeout.seconds
        settings.options.checkpoint = checkpointFrames.policy
        settings.options.mergeEvery = gatherEvery
        settings.options.lockTimeout = lockWait.seconds(default: 60)
        let replicator: Replicator
        var supervisor: ExecSupervisor?
        do {
            if let config {
                settings = ReplicateSettings.merging(config: try HostConfig.load(path: config), commandLine: settings,
                                                     timeoutGiven: lockWait.timeout != nil || lockWait.busyTimeoutMilliseconds != nil)
                for pattern in settings.unmatched { printError("\(config): \(pattern): no database matches") }
                if settings.sources.isEmpty { throw StoreError(.other, location: config, message: "no database to follow") }
            }
            supervisor = execCommand.map { ExecSupervisor(command: $0, sources: settings.sources) }
            settings.options.otherInputs = [settings.location.keyFile, settings.location.passphraseFile, config].compactMap { $0 }
            let repo = try RepoOptions.open(settings.location, quiet: voice.quiet)
            let voice = self.voice
            let observer = supervisor
            let events: @Sendable (ReplicateEvent) -> Void = { event in
                observer?.observe(event)
                Self.report(event, voice: voice)
            }
            if let dir {
                var fleet = FleetSettings(folder: dir)
                fleet.glob = glob
                fleet.watch = watch
                replicator = Replicator(fleet: fleet, repository: repo, options: settings.options, events: events)
            } else {
                replicator = Replicator(sources: settings.sources, repository: repo, options: settings.options, events: events)
            }
        } catch {
            throw fail(error)
        }
        // SIGTERM and SIGINT ask for a clean stop (with --exec: go to the
        // child, whose exit stops replicate); SIGUSR1 for a fold. (A parent
        // may have left them blocked, which a child inherits.)
        var handled = sigset_t()
        sigemptyset(&handled)
        for s in [SIGTERM, SIGINT, SIGUSR1] { sigaddset(&handled, s) }
        pthread_sigmask(SIG_UNBLOCK, &handled, nil)
        let queue = DispatchQueue(label: "litectl-signals")
        var sources_: [DispatchSourceSignal] = []
        let child = supervisor
        let stop: @Sendable (Int32) -> Void = { signal in if child?.forward(signal) != true { replicator.stop() } }
        for (signal, action) in [(SIGTERM, { stop(SIGTERM) }), (SIGINT, { stop(SIGINT) }), (SIGUSR1, { replicator.foldNow() })] {
            Foundation.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler(handler: action)
            source.resume()
            sources_.append(source)
        }
        if let supervisor {
            let status = supervisor.run(replicator, voice: voice)
            withExtendedLifetime(sources_) {}
            if status != 0 { throw ExitCode(status) }
            return
        }
        let complete: Bool
        do { complete = try replicator.run() } catch { throw fail(error) }
        withExtendedLifetime(sources_) {}
        if !complete { throw ExitStatus.error }
    }

    /// One event: problems, resyncs, starts and ends on stderr; segments with
    /// -v; everything as JSON with --json; with -q only what is not retried
    /// and a stop with states not shipped.
    static func report(_ event: ReplicateEvent, voice: VoiceOptions) {
        if voice.json {
            printExact(eventJSON(event).compact)
            return
        }
        let verbose = voice.verbose, quiet = voice.quiet
        switch event {
        case .started(let db, let chain, let state, let how):
            if verbose { printError("\(db): \(how), chain \(chain.prefix(8)) at state \(state)") }
        case .resync(let db, let reason):
            if !quiet { printError("\(db): resync (every page compared with the last state): \(reason)") }
        case .shipped(let s):
            guard verbose, let last = s.states.last else { return }
            printError("\(s.database): shipped states \(s.states[0].number)...\(last.number) of chain \(s.chain.prefix(8)) (\(humanBytes(s.bytes))), observed until \(Timestamp.iso8601(last.observed)), lag \(String(format: "%.2f", s.durable - s.states[0].observed)) s")
        case .snapshot(let db, let id, let kind):
            if verbose { printError("\(db): \(kind) snapshot \(id.prefix(8))") }
        case .problem(let db, let message, let retrying):
            if !quiet || !retrying { printError("\(db): \(message)") }
        case .stopped(let db, let complete):
            if !complete { printError("\(db): stopped with states not shipped") } else if verbose { printError("\(db): stopped, everything shipped") }
        case .note(let db, let message, let detail):
            if detail ? verbose : !quiet { printError("\(db): \(message)") }
        }
    }

    static func eventJSON(_ event: ReplicateEvent) -> JSON {
        switch event {
        case .started(let db, let chain, let state, let how):
            return .object([("event", .string("started")), ("database", .string(db)), ("chain", .string(chain)),
                            ("state", .integer(Int64(state))), ("how", .string(how))])
        case .resync(let db, let reason):
            return .object([("event", .string("resync")), ("database", .string(db)), ("reason", .string(reason))])
        case .shipped(let s):
            return .object([("event", .string("shipped")), ("database", .string(s.database)), ("kind", .string(s.kind)),
                            ("chain", .string(s.chain)), ("segment", .optional(s.segment) { .string($0) }),
                            ("snapshot", .optional(s.snapshot) { .string($0) }), ("bytes", .integer(s.bytes)),
                            ("durable_unix", .number(s.durable)),
                            ("states", .array(s.states.map { state in
                                .object([("number", .integer(Int64(state.number))), ("observed_unix", .number(state.observed)),
                                         ("salt1", .integer(Int64(state.position.salt1))), ("salt2", .integer(Int64(state.position.salt2))),
                                         ("frame", .integer(Int64(state.position.frame))), ("transactions", .integer(Int64(state.transactions))),
                                         ("kind", .string(state.kind == .frames ? "frames" : "resync")), ("pages", .integer(Int64(state.pageCount))),
                                         ("changed", .integer(Int64(state.changes.count)))])
                            }))])
        case .snapshot(let db, let id, let kind):
            return .object([("event", .string("snapshot")), ("database", .string(db)), ("id", .string(id)), ("kind", .string(kind))])
        case .problem(let db, let message, let retrying):
            return .object([("event", .string("problem")), ("database", .string(db)), ("message", .string(message)), ("retrying", .bool(retrying))])
        case .stopped(let db, let complete):
            return .object([("event", .string("stopped")), ("database", .string(db)), ("complete", .bool(complete))])
        case .note(let db, let message, let detail):
            return .object([("event", .string("note")), ("database", .string(db)), ("message", .string(message)), ("detail", .bool(detail))])
        }
    }
}

/// `--checkpoint-frames auto|N` (0: never).
struct CheckpointFrames: ExpressibleByArgument {
    var policy: CheckpointPolicy
    static let auto = CheckpointFrames(policy: .auto)

    init(policy: CheckpointPolicy) { self.policy = policy }

    init?(argument: String) {
        if argument == "auto" { policy = .auto; return }
        guard let n = Int(argument), n >= 0 else { return nil }
        policy = n == 0 ? .never : .frames(n)
    }

    var defaultValueDescription: String { "auto" }
}
