// `litectl replicate`: a follower per database (Follower.swift), each on a
// thread of its own with its shipper, until a stop is requested; then each
// ships what is committed and ends. A database that fails is followed again
// after a pause (from the repository's record), without stopping the others.
// Each database is followed under a lease in the repository
// (Repository/FollowerLease.swift), taken before anything is followed and
// renewed on a thread of its own: a second follower of it is refused.
// What happens is reported through a callback (the core never prints), and
// a Prometheus textfile is written every interval. Part of the replicate
// capability, built on Repository/.
import Foundation

public struct ReplicateOptions: Sendable {
    /// Seconds between segments shipped.
    public var interval: Double = 1
    /// Seconds between looks at the -wal: a state per look that finds commits.
    public var poll: Double = 0.1
    /// Seconds between full snapshots that start a new chain (0: never, but on request).
    public var foldInterval: Double = 3600
    /// Segments after which the recent ones are gathered into one, and their
    /// pages stored again together (at least 2; Gathering.swift).
    public var mergeEvery = 60
    /// Seconds to wait for the repository's lock when a new chain starts.
    public var lockTimeout: Double = 60
    public var tags: [String] = []
    public var metricsFile: String?
    /// Files the run reads besides the databases (key, passphrase, config):
    /// never the metrics file (the same-file rule).
    public var otherInputs: [String] = []
    /// Seconds a stop waits for the repository to take what is left.
    public var stopTimeout: Double = 60
    /// When the follower runs a checkpoint of its own, so that the -wal
    /// restarts (its read mark keeps the application's automatic ones from
    /// restarting it): see `CheckpointPolicy` and docs/replicate.md.
    public var checkpoint = CheckpointPolicy.auto
    public init() {}
}

/// When the follower checkpoints the -wal itself (a PASSIVE checkpoint, then,
/// when commits came meanwhile, a RESTART one: ReadMarks.swift).
public enum CheckpointPolicy: Sendable, Equatable {
    /// Never: the -wal restarts only at the application's RESTART or
    /// TRUNCATE checkpoints, and grows until then.
    case never
    /// As the application would without the follower: once its own
    /// checkpoint (SQLite's automatic one, at 1000 frames by default) was
    /// held back by the follower's read mark, having copied some frames
    /// and not all, with the -wal at `autoFrames` frames or more; and in
    /// any case once the -wal holds `autoBytes`.
    case auto
    /// Once the -wal holds this many frames.
    case frames(Int)

    /// SQLite's default wal_autocheckpoint: below it, an application's
    /// checkpoint is its own business (an explicit one every few commits),
    /// and the follower's would only compete with it.
    public static let autoFrames = 1000
    /// The -wal's size past which the follower checkpoints whatever the application does.
    public static let autoBytes = 32 << 20
}

/// What `replicate` follows and where to: from the command line, or from a
/// host config file (`backup --config`'s TOML) with the command line's
/// options over it (`merging`).
public struct ReplicateSettings: Sendable {
    public var location = RepositoryLocation()
    public var sources: [String] = []
    /// Globs of the config file that matched no database.
    public var unmatched: [String] = []
    public var options = ReplicateOptions()
    public init() {}

    /// The config's databases, repository, tags, metrics file and lock
    /// timeout, with the command line's location parts, metrics file and
    /// timeout over them when given and its tags added (the config's jobs,
    /// verify and [keep] do not apply).
    public static func merging(config: HostConfig, commandLine: ReplicateSettings, timeoutGiven: Bool) -> ReplicateSettings {
        var s = commandLine
        s.location = commandLine.location.merging(config: config)
        let expanded = config.expandDatabases()
        s.sources = expanded.paths
        s.unmatched = expanded.unmatched
        s.options.tags = config.tags + commandLine.options.tags
        s.options.metricsFile = commandLine.options.metricsFile ?? config.metricsFile
        if !timeoutGiven, let timeout = config.timeout { s.options.lockTimeout = timeout }
        return s
    }
}

/// What a follower reports.
public enum ReplicateEvent: Sendable {
    /// Following a chain: "resumed" (at `state`) or "new chain".
    case started(database: String, chain: String, state: UInt64, how: String)
    /// Frames were missed; the whole database was compared with the last state.
    case resync(database: String, reason: String)
    case shipped(Shipment)
    /// A snapshot written: the base of a new chain, or a fold.
    case snapshot(database: String, id: String, kind: String)
    case problem(database: String, message: String, retrying: Bool)
    /// The follower ended; `complete` when everything it recorded was shipped.
    case stopped(database: String, complete: Bool)
    /// (replicate --dir) A database found, gone or replaced, or the folder's
    /// figures; `verbose`: a detail (-v), such as a file skipped.
    case note(database: String, message: String, verbose: Bool)

    public struct Shipment: Sendable {
        public var database: String
        public var kind: String
        public var chain: String
        public var segment: String?
        public var snapshot: String?
        public var states: [ReplicaState]
        public var bytes: Int64
        /// When it was durable in the repository (wall clock).
        public var durable: Double

        init(database: String, unit: ShippedUnit, bytes: Int64) {
            self.database = database
            kind = switch unit.kind { case .states: "segment"; case .base: "base"; case .fold: "fold"; case .merge: "merge" }
            chain = unit.chain; segment = unit.segment?.name; snapshot = unit.snapshot; states = unit.states
            self.bytes = bytes
            durable = Clock.wall()
        }
    }
}

/// A follower's figures for the metrics file and the lag, shared between its threads.
public final class FollowerStatus: @unchecked Sendable {
    public let database: String
    private let lock = NSLock()
    /// Observed times (µs) of the states recorded and not yet durable, oldest first.
    private var pending: [UInt64] = []
    public private(set) var lastShipped: Double?
    public private(set) var bytesShipped: Int64 = 0
    public private(set) var errors = 0
    public private(set) var resyncs = 0
    public private(set) var statesShipped = 0
    /// The file replaced, a stall (FollowerWatch.swift).
    let watch = FollowerWatch()

    init(database: String) { self.database = database }

    func recorded(_ state: ReplicaState) {
        lock.lock(); pending.append(state.observedMicros); lock.unlock()
    }

    func shipped(_ unit: ShippedUnit, bytes: Int64) {
        lock.lock(); defer { lock.unlock() }
        bytesShipped += bytes
        guard let last = unit.states.last else { return }
        let drop = min(pending.count, unit.states.count)
        pending.removeFirst(drop)
        statesShipped += unit.states.count
        lastShipped = last.observed
    }

    /// The follower starts again from the repository: the states it had
    /// not shipped are recorded anew (else the lag would count from them for ever).
    func restarted() { lock.lock(); pending.removeAll(); lock.unlock() }

    func noteError() { lock.lock(); errors += 1; lock.unlock() }
    func noteResync() { lock.lock(); resyncs += 1; lock.unlock() }

    /// Seconds since the oldest commit observed but not yet durable (0 when none).
    public var lag: Double {
        lock.lock(); defer { lock.unlock() }
        guard let first = pending.first else { return 0 }
        return max(0, Clock.wall() - Double(first) / 1e6)
    }
}

public final class Replicator: @unchecked Sendable {
    let sources: [String]
    let repository: Repository
    let options: ReplicateOptions
    let events: @Sendable (ReplicateEvent) -> Void
    private let controls: [FollowerControl]
    public let statuses: [FollowerStatus]
    private let stopped = NSCondition()
    private var stopRequested = false
    /// (replicate --dir) The fleet that follows a folder's databases instead (Fleet.swift).
    private let fleet: Fleet?

    public init(sources: [String], repository: Repository, options: ReplicateOptions,
                events: @escaping @Sendable (ReplicateEvent) -> Void) {
        // One follower per file, however it is named (`a.db ./a.db`): two
        // sets of read marks on one -shm in one process would each drop the
        // other's POSIX locks when they close a descriptor of it.
        var seen = Set<String>()
        let sources = sources.filter { seen.insert(FilePaths.resolved($0)).inserted }
        self.sources = sources; self.repository = repository; self.options = options; self.events = events
        controls = sources.map { _ in FollowerControl() }
        statuses = sources.map { FollowerStatus(database: $0) }
        fleet = nil
    }

    /// Follows every WAL database of a folder tree (`replicate --dir`).
    public init(fleet settings: FleetSettings, repository: Repository, options: ReplicateOptions,
                events: @escaping @Sendable (ReplicateEvent) -> Void) {
        sources = []; self.repository = repository; self.options = options; self.events = events
        controls = []; statuses = []
        fleet = Fleet(settings: settings, repository: repository, options: options, events: events)
    }

    /// Asks every follower to ship what is committed and end (from any thread).
    public func stop() {
        for c in controls { c.requestStop() }
        fleet?.stop()
        stopped.lock(); stopRequested = true; stopped.broadcast(); stopped.unlock()
    }

    /// Asks every follower to fold its chain into a full snapshot now.
    public func foldNow() { for c in controls { c.requestFold() }; fleet?.foldNow() }

    private var isStopping: Bool { stopped.lock(); defer { stopped.unlock() }; return stopRequested }

    /// Follows every database until `stop()`. Returns true when each one
    /// ended with everything it recorded shipped.
    public func run() throws -> Bool {
        guard repository.holdsSegments else {
            throw StoreError(.other, location: repository.location,
                             message: "repository format version \(repository.version): replicate stores segments, which need version 4 (an older litectl would not know that they use packs, and its prune would delete them); upgrade it with `litectl repo upgrade \(repository.location)` once every litectl that uses it is this version or later")
        }
        if let fleet { return try fleet.run() }
        for source in sources { WriteGate.shared.protect(database: source, what: "a database being replicated") }
        if let file = options.metricsFile {
            try PrometheusText.requireWritable(file, apartFrom: sources.map { FilePaths.resolved($0) }, what: "a database being backed up",
                                               otherInputs: options.otherInputs)
        }
        // Each database is checked once first (WAL mode, a -shm it can write):
        // a misconfiguration stops the start, with its one line.
        for source in sources {
            let marks = try ReadMarks(path: source)
            marks.close()
        }
        // One follower per database: each one's lease, waiting up to the
        // lock timeout for another follower's to go (a unit started again
        // while the old process still ships); refused after it.
        var acquired: [FollowerLease] = []
        do {
            for source in sources {
                guard let lease = try FollowerLease.acquire(repository, path: FilePaths.resolved(source), timeout: options.lockTimeout,
                                                            cancelled: { [self] in isStopping },
                                                            note: { [events] in events(.problem(database: source, message: $0, retrying: true)) }) else {
                    for l in acquired { l.release() }
                    return true
                }
                acquired.append(lease)
            }
        } catch {
            for l in acquired { l.release() }
            throw error
        }
        let leases = acquired
        defer { for l in leases { l.release() } }
        let keeper = Concurrently.start { [self] in
            while !isStopping {
                for (source, lease) in zip(sources, leases) where lease.lost == nil {
                    do { try lease.renew() } catch let error as FollowerLeaseLost {
                        _ = error  // the follower stops on it and says so
                    } catch {
                        let message = (error as? StoreError)?.description ?? "\(error)"
                        events(.problem(database: source, message: "cannot renew its lease in the repository: \(message); retrying", retrying: true))
                    }
                }
                stopped.lock()
                if !stopRequested { _ = stopped.wait(until: Date().addingTimeInterval(1)) }
                stopped.unlock()
            }
        }
        let followers = sources.enumerated().map { i, source in
            NamedThread("litectl-follow") { [self] in follow(source, lease: leases[i], control: controls[i], status: statuses[i]) }
        }
        let metrics = options.metricsFile.map { file in
            Concurrently.start { [self] in
                while !isStopping {
                    writeMetrics(to: file)
                    stopped.lock()
                    if !stopRequested { _ = stopped.wait(until: Date().addingTimeInterval(max(0.2, options.interval))) }
                    stopped.unlock()
                }
            }
        }
        let results = followers.map { $0.wait() }
        stop()
        _ = try? keeper.wait()
        _ = try? metrics?.wait()
        if let file = options.metricsFile { writeMetrics(to: file) }
        return results.allSatisfy { $0 }
    }

    /// One database, followed again after a failure (5 s, doubling to 60
    /// s), but one whose lease another follower took over.
    private func follow(_ source: String, lease: FollowerLease, control: FollowerControl, status: FollowerStatus) -> Bool {
        var delay = 5.0
        while true {
            let follower = DatabaseFollower(source: source, repository: repository, options: options, lease: lease, control: control,
                                            status: status, report: events)
            do {
                let complete = try follower.run()
                events(.stopped(database: source, complete: complete))
                return complete
            } catch let lost as FollowerLeaseLost {
                status.noteError()
                events(.problem(database: source, message: lost.description, retrying: false))
                events(.stopped(database: source, complete: false))
                return false
            } catch {
                status.restarted()
                status.noteError()
                let message = (error as? DatabaseError)?.description ?? (error as? StoreError)?.description ?? "\(error)"
                let stopping = control.stopRequested
                events(.problem(database: source, message: message, retrying: !stopping))
                if stopping { events(.stopped(database: source, complete: false)); return false }
                let until = Clock.now() + (error is DatabaseReplaced ? 0 : delay)  // a replaced file: its new chain at once
                while Clock.now() < until && !control.stopRequested { usleep(50_000) }
                delay = min(60, delay * 2)
            }
        }
    }

    /// The Prometheus textfile (node_exporter's textfile collector), atomically.
    func writeMetrics(to file: String) {
        try? AtomicFile.write(Array(ReplicateMetrics.text(statuses).utf8), to: file, permissions: 0o644,
                              what: "the metrics file", replacing: PrometheusText.replaceRule)
    }
}

enum ReplicateMetrics {
    static func text(_ statuses: [FollowerStatus]) -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String, _ value: (FollowerStatus) -> String?) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for s in statuses {
                if let v = value(s) { out += "\(name){database=\"\(PrometheusText.escapeLabel(FilePaths.resolved(s.database)))\"} \(v)\n" }
            }
        }
        family("litectl_replicate_lag_seconds", "gauge", "Seconds since the oldest commit observed and not yet durable in the repository (0 when none).") {
            PrometheusText.number($0.lag)
        }
        family("litectl_replicate_last_shipped_commit_timestamp_seconds", "gauge", "When the newest state durable in the repository was observed (seconds since 1970).") {
            $0.lastShipped.map { PrometheusText.number($0) }
        }
        family("litectl_replicate_shipped_bytes_total", "counter", "Bytes written to the repository since the follower started.") { String($0.bytesShipped) }
        family("litectl_replicate_shipped_states_total", "counter", "States made durable since the follower started.") { String($0.statesShipped) }
        family("litectl_replicate_errors_total", "counter", "Failures (each retried) since the follower started.") { String($0.errors) }
        family("litectl_replicate_resyncs_total", "counter", "Page-by-page comparisons made because frames were missed.") { String($0.resyncs) }
        out += FollowerWatch.metrics(statuses) { PrometheusText.escapeLabel(FilePaths.resolved($0.database)) }
        return out
    }
}
