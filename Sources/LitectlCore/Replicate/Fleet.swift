// `replicate --dir`: every WAL database of a folder tree followed by one
// process with a fixed number of threads, whatever their count. A database
// holds no connection and no thread while nothing changes: one watcher
// thread looks at each -wal's stamp (size, time, inode) twice an interval,
// and a change has a worker (of a fixed pool) take a slice of it: read
// marks opened, the commits since the last state read from the -wal (or,
// when the -wal restarted meanwhile, every page compared with the last
// state: WALLoop's resume and resync), cut as a segment, shipped, the marks
// let go. What a database's chain is stays in memory between slices, so a
// slice reads nothing from the repository. One lease on the folder covers
// every database (FollowerLease's folder scope). docs/replicate.md,
// "Fleets", gives the design and its figures. Part of the replicate
// capability, built on Repository/.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What `replicate --dir` follows.
public struct FleetSettings: Sendable {
    public var folder: String
    /// Names (not paths) the databases must match, as the shell matches them (fnmatch).
    public var glob = "*"
    /// Databases created after the start are followed too (the tree is read again every few seconds).
    public var watch = false
    public init(folder: String) { self.folder = folder }
}

/// One database of the fleet. Its fields are guarded by the fleet's lock,
/// but `session`, which only the worker running its slice touches.
final class FleetEntry {
    let source: String
    let status: FollowerStatus
    var walStamp: FileStamp?
    var dbStamp: FileStamp?
    /// The database file's device and inode when it was found (another: replaced).
    var identity: (device: UInt64, inode: UInt64) = (0, 0)
    /// The database file when the last slice that shipped began (only its worker touches it).
    var dbAtSlice: FileStamp?
    /// A change seen and not yet taken by a slice.
    var dirty = true
    /// The -wal's time was too close to the look to tell a later change of the same second: look again.
    var racy = false
    /// Queued or in a slice.
    var busy = false
    /// Slices ended so far.
    var slices = 0
    /// The next slice gathers the period's segments (the database went quiet, or the fleet stops).
    var settleNext = false
    /// Every segment recorded since the last change was gathered.
    var settled = true
    var gone = false
    var lastChange = -Double.infinity
    var lastSlice = -Double.infinity
    var lastFold: Double
    var retryAt = -Double.infinity
    var delay = 5.0
    /// The repository's record for the first slice.
    var listed: (chainBase: Snapshot?, newest: Snapshot?)
    var session: FleetSession?

    init(source: String, listed: (chainBase: Snapshot?, newest: Snapshot?)) {
        self.source = source; self.listed = listed
        status = FollowerStatus(database: source)
        lastFold = Clock.now()
    }
}

/// What a database's follower keeps between slices: the chain writer (the
/// chain's last state, the period's segments) and its shipper.
final class FleetSession {
    let pageSize: Int
    let shipper: Shipper
    let chain: ChainWriter
    let resyncing = Locked(false)
    /// Where the follower's last checkpoint gave up (WALLoop.checkpointGaveUp), kept between slices.
    var checkpointGaveUp: WALPosition?

    init(pageSize: Int, shipper: Shipper, chain: (Locked<Bool>) -> ChainWriter) {
        self.pageSize = pageSize; self.shipper = shipper
        self.chain = chain(resyncing)
    }
}

final class Fleet: @unchecked Sendable {
    let settings: FleetSettings
    let root: String
    let repository: Repository
    let options: ReplicateOptions
    let events: @Sendable (ReplicateEvent) -> Void
    let control = FollowerControl()

    /// Worker threads (LITECTL_FLEET_WORKERS, 1-64; default 8: a slice mostly waits for the object store): each runs one slice at a time.
    static let workerCount = Int(ProcessInfo.processInfo.environment["LITECTL_FLEET_WORKERS"] ?? "").map { min(64, max(1, $0)) } ?? 8
    /// Seconds between reads of the tree (with --watch) and between looks at each database file (gone, replaced).
    static let rescanEvery = Double(ProcessInfo.processInfo.environment["LITECTL_FLEET_RESCAN"] ?? "").map { max(0.2, $0) } ?? 5

    let lock = NSCondition()
    var entries: [String: FleetEntry] = [:]
    /// The entries in the order they were found (the watcher's round).
    var order: [FleetEntry] = []
    var ready: [FleetEntry] = []
    var readyHead = 0
    var stopping = false
    var watcherDone = false
    var allShipped = true
    /// Resolved paths this run followed: one found again (deleted and
    /// re-created, or replaced) starts a new chain.
    var followedBefore = Set<String>()
    /// The repository's record at the start, by resolved path.
    var record: [String: (chainBase: Snapshot?, newest: Snapshot?)] = [:]
    var lease: FollowerLease?
    var foldAsked = -Double.infinity
    /// Databases dropped while a slice of theirs was under way.
    var leaving = Set<String>()
    /// The repository's shared lock, held for every database's units (FleetLock.swift).
    let fleetLock: FleetLock
    /// The shared packs of new chains' pages (Repository/SharedPackBatch.swift).
    let startBatch: SharedPackBatch
    /// The index objects listed, and when (monotonic): none names a pack of
    /// a database's session made after that listing (nil: each lists them).
    let indexListing = Locked<(keys: Set<ObjectKey>?, at: Double)>((nil, -Double.infinity))

    init(settings: FleetSettings, repository: Repository, options: ReplicateOptions, events: @escaping @Sendable (ReplicateEvent) -> Void) {
        self.settings = settings
        root = FilePaths.resolved(settings.folder)
        self.repository = repository; self.options = options; self.events = events
        fleetLock = FleetLock(repository: repository)
        startBatch = SharedPackBatch(repository: repository)
    }

    func stop() {
        control.requestStop()
        lock.lock(); stopping = true; lock.broadcast(); lock.unlock()
    }

    func foldNow() { lock.lock(); foldAsked = Clock.now(); lock.unlock() }

    /// Every database's figures, for the metrics file.
    var statuses: [FollowerStatus] { lock.lock(); defer { lock.unlock() }; return order.map(\.status) }

    var isStopping: Bool { lock.lock(); defer { lock.unlock() }; return stopping }

    /// Follows the tree until `stop()`; true when every slice shipped what it recorded.
    func run() throws -> Bool {
        var info = stat()
        guard stat(root, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError(.other, location: settings.folder, message: "not a folder (replicate --dir follows the databases of a folder)")
        }
        if let file = options.metricsFile {
            try PrometheusText.requireWritable(file, apartFrom: [], what: "a database being backed up", otherInputs: options.otherInputs)
        }
        guard let lease = try FollowerLease.acquire(repository, path: root, folder: true, timeout: options.lockTimeout,
                                                    cancelled: { [self] in isStopping },
                                                    note: { [events, root] in events(.problem(database: root, message: $0, retrying: true)) }) else {
            return true
        }
        self.lease = lease
        defer { lease.release() }
        // The repository's record of every database, listed once.
        for snapshot in try repository.snapshots().snapshots where sameBytes(snapshot.hostname, RepoLock.hostname) {
            var r = record[snapshot.path] ?? (nil, nil)
            if snapshot.replica != nil, r.chainBase.map({ ($0.time, $0.id) < (snapshot.time, snapshot.id) }) ?? true { r.chainBase = snapshot }
            if r.newest.map({ $0.time < snapshot.time }) ?? true { r.newest = snapshot }
            record[snapshot.path] = r
        }
        defer { fleetLock.release() }
        let scan = FleetScan(root: root, glob: settings.glob) { [events, root] in events(.note(database: root, message: $0, verbose: true)) }
        let first = scan.scan(known: { _ in false }) ?? []
        lock.lock()
        for path in first { add(path, announce: false) }
        lock.unlock()
        events(.note(database: root, message: "following \(first.count) database\(first.count == 1 ? "" : "s") (\(Self.workerCount) workers)\(settings.watch ? "; new ones are picked up" : "")", verbose: false))

        let keeper = NamedThread("litectl-lease") { [self] in
            while !isStopping && lease.lost == nil {
                fleetLock.tend()
                do { try lease.renew() } catch is FollowerLeaseLost {
                    break
                } catch {
                    let message = (error as? StoreError)?.description ?? "\(error)"
                    events(.problem(database: root, message: "cannot renew the folder's lease in the repository: \(message); retrying", retrying: true))
                }
                sleep(while: 1)
            }
            if let lost = lease.lost {
                events(.problem(database: root, message: lost.description, retrying: false))
                stop()
            }
        }
        let metrics = options.metricsFile.map { file in
            NamedThread("litectl-metrics") { [self] in
                while !isStopping {
                    writeMetrics(to: file)
                    sleep(while: max(10, options.interval))
                }
            }
        }
        let workers = (0..<Self.workerCount).map { _ in NamedThread("litectl-fleet") { [self] in work() } }
        let watcher = NamedThread("litectl-watch") { [self] in watch(scan) }
        watcher.wait()
        for w in workers { w.wait() }
        keeper.wait()
        metrics?.wait()
        if let file = options.metricsFile { writeMetrics(to: file) }
        lock.lock(); defer { lock.unlock() }
        for e in order where e.session != nil { events(.stopped(database: e.source, complete: allShipped)) }
        return allShipped && lease.lost == nil
    }

    /// Sleeps `seconds`, waking early on a stop.
    func sleep(while seconds: Double) {
        lock.lock()
        if !stopping { _ = lock.wait(until: Date().addingTimeInterval(seconds)) }
        lock.unlock()
    }

    /// A database found (the lock held).
    func add(_ path: String, announce: Bool) {
        if leaving.contains(path) { return }  // found again at the next look, once its last slice ended
        let resolved = FilePaths.resolved(path)
        WriteGate.shared.protect(database: path, what: "a database being replicated")
        // Found again after this run followed it: a new chain (never one
        // this run's record may no longer describe).
        let listed = followedBefore.contains(resolved) ? (nil, nil) : record.removeValue(forKey: resolved) ?? (nil, nil)
        followedBefore.insert(resolved)
        let e = FleetEntry(source: path, listed: listed)
        e.walStamp = FileStamp(lstatOf: path + "-wal")
        e.dbStamp = FileStamp(lstatOf: path)
        if let db = e.dbStamp { e.identity = (db.device, db.inode) }
        entries[path] = e
        order.append(e)
        enqueue(e)
        if announce { events(.note(database: path, message: "new database: followed", verbose: false)) }
    }

    func enqueue(_ e: FleetEntry) {
        e.busy = true
        ready.append(e)
        lock.broadcast()
    }

    // MARK: The watcher

    /// What the watcher compares a database's files with, taken under the lock.
    struct Look {
        var entry: FleetEntry
        var wal: FileStamp?
        var db: FileStamp?
        var identity: (device: UInt64, inode: UInt64)
        var racy: Bool
        var slices: Int
    }

    /// Looks at every -wal twice an interval, and at those of databases that
    /// changed in the last `settleAfter` seconds ten times an interval (their
    /// next commit is taken up within a tenth of an interval of the slice
    /// they are due, not half an interval after); every `rescanEvery` at
    /// every database file (gone, replaced), and with --watch reads the tree again.
    func watch(_ scan: FleetScan) {
        var lastRescan = Clock.now(), lastFull = -Double.infinity
        let tick = max(0.05, options.interval / 10), fullTick = max(0.05, options.interval / 2)
        let settleAfter = max(10, options.interval * 10)
        // The databases looked at between full rounds (those that changed
        // lately, or have work pending), chosen again at each full round: a
        // quick round costs nothing per idle database.
        var hot: [FleetEntry] = []
        while true {
            let started = Clock.now()
            let full = started - lastFull >= fullTick * 0.95
            if full { lastFull = started }
            // (The entries' fields are read under the lock: a worker writes them.)
            lock.lock()
            if full {
                hot = order.filter { $0.busy || $0.dirty || $0.racy || !$0.settled || started - $0.lastChange < settleAfter || $0.retryAt > started }
            }
            let round = (full ? order : hot).compactMap { e -> Look? in
                guard !e.busy && !e.gone else { return nil }
                return Look(entry: e, wal: e.walStamp, db: e.dbStamp, identity: e.identity, racy: e.racy, slices: e.slices)
            }
            let stop = stopping
            lock.unlock()
            if stop { break }
            let checkFiles = full && started - lastRescan >= Self.rescanEvery
            var found: Set<String>?
            if checkFiles {
                lastRescan = started
                if settings.watch {
                    lock.lock(); let known = Set(entries.keys); lock.unlock()
                    found = scan.scan(known: { known.contains($0) }).map(Set.init)
                }
            }
            let wall = Clock.wall()
            var changed: [(FleetEntry, FileStamp?, FileStamp?, Int)] = []
            var gone: [FleetEntry] = []
            for look in round {
                let e = look.entry
                // The -wal (commits), and the database file (a commit the
                // application's last connection checkpointed, and whose -wal
                // it removed, between two looks).
                let stamp = FileStamp(lstatOf: e.source + "-wal")
                let db = FileStamp(lstatOf: e.source)
                if checkFiles && full {
                    if db == nil { gone.append(e); continue }
                    if let db, db.inode != look.identity.inode || db.device != look.identity.device { gone.append(e); continue }
                }
                if stamp != look.wal || db != look.db || look.racy { changed.append((e, stamp, db, look.slices)) }
            }
            lock.lock()
            let now = Clock.now()
            // (Not when a slice began and ended meanwhile: the files may have
            // been looked at while its own connections were open.)
            for (e, stamp, db, slices) in changed where !e.busy && e.slices == slices {
                e.walStamp = stamp
                e.dbStamp = db
                // The time has the kernel's coarse resolution: a write within
                // it of the look leaves the same stamp; looked at again.
                e.racy = [stamp, db].contains { $0.map { wall - Double($0.mtimeNanos) / 1e9 < 0.05 } ?? false }
                e.dirty = true
                e.lastChange = now
            }
            for e in gone { drop(e, replaced: FileStamp(lstatOf: e.source) != nil) }
            if let found {
                for path in found.sorted() where entries[path] == nil { add(path, announce: true) }
            }
            // Those whose change waits (or whose slice runs), to tell a stall (FollowerWatch).
            var pending: [(FleetEntry, Bool)] = []
            let candidates = full ? order : hot
            for e in candidates where !e.gone && (e.dirty || e.busy || now - e.lastChange < 5 * options.interval || (full && e.status.watch.stalled)) {
                pending.append((e, !e.dirty && !e.busy))
            }
            for e in candidates where !e.busy && !e.gone && now >= e.retryAt {
                if e.dirty && now - e.lastSlice >= options.interval * 0.9 {
                    enqueue(e)
                } else if !e.dirty && !e.settled && now - e.lastChange >= settleAfter {
                    e.settleNext = true
                    enqueue(e)
                }
            }
            lock.unlock()
            for (e, idle) in pending { lookForStall(e, caughtUp: idle && e.status.lag == 0) }
            let spent = Clock.now() - started
            sleep(while: max(0.01, tick - spent))
        }
        // The stop: every database with segments since its last gathering
        // gets a last slice (what is committed, shipped, then gathered).
        lock.lock()
        for e in order where !e.gone && (!e.settled || e.dirty) {
            e.settleNext = true
            if !e.busy { enqueue(e) }
        }
        watcherDone = true
        lock.broadcast()
        lock.unlock()
    }

    /// A database gone (or replaced by another file: found again as a new one), the lock held.
    func drop(_ e: FleetEntry, replaced: Bool) {
        guard entries[e.source] === e else { return }
        // (A slice under way ends first: two sets of read marks on one -shm
        // in one process would drop each other's locks. Looked at again in 5 s.)
        if replaced && e.busy { return }
        e.gone = true
        entries[e.source] = nil
        order.removeAll { $0 === e }
        if e.busy { leaving.insert(e.source) }
        events(.note(database: e.source, message: replaced ? "the database file was replaced: following the new one (a new chain)"
                                                          : "no longer there: no longer followed", verbose: false))
        if replaced { add(e.source, announce: false) }
    }

    func writeMetrics(to file: String) {
        try? AtomicFile.write(Array(ReplicateMetrics.text(statuses).utf8), to: file, permissions: 0o644,
                              what: "the metrics file", replacing: PrometheusText.replaceRule)
    }
}
