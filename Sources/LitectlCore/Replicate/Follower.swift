// Follows one database: at each poll, a new read mark is begun (the previous
// one still held), the commits since the last state are read from the -wal
// and recorded as one state (the pages they changed, their ids, the position
// and the time), and the previous mark is let go; every interval the states
// recorded go to the shipper as a segment; every fold interval a full
// snapshot starts a new chain. It starts from the repository's own record
// (the newest chain of this database on this host), so a follower killed at
// any moment resumes with no gap and no duplicate; when frames were missed
// (the -wal restarted while none of its marks was held) it compares the whole
// database with the last state, page by page, and records the difference.
// It never writes to the database. Part of the replicate capability, built
// on Repository/ (packs, blob builder, index objects, page lists, locks,
// snapshots, segments) and on Pages/ (the -wal index, a snapshot's pages).
import Foundation
import Crypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Stop and fold requests, shared between the replicator's threads.
final class FollowerControl: @unchecked Sendable {
    private let lock = NSLock()
    private var stop = false
    private var fold = false

    var stopRequested: Bool { lock.lock(); defer { lock.unlock() }; return stop }
    func requestStop() { lock.lock(); stop = true; lock.unlock() }
    func requestFold() { lock.lock(); fold = true; lock.unlock() }
    func takeFold() -> Bool { lock.lock(); defer { lock.unlock() }; let f = fold; fold = false; return f }
}

/// A failure after which the follower starts again from the repository (reopening the database).
struct FollowerRestart: Error, CustomStringConvertible { var description: String }

final class DatabaseFollower {
    let source: String
    let path: String
    let name: String
    let hostname = RepoLock.hostname
    let repository: Repository
    let options: ReplicateOptions
    /// This database's lease in the repository (the Replicator renews it):
    /// the shipper writes nothing while it is not held; taken over, the follower stops.
    let lease: FollowerLease?
    let control: FollowerControl
    let status: FollowerStatus
    let report: (ReplicateEvent) -> Void

    private var marks: ReadMarks!
    private var pageSize = 0
    private var chain = ""
    private var chainBase: Snapshot!
    private var number: UInt64 = 0
    private var ids: [PageID] = []
    private var digest = StateDigest()
    private var position = WALPosition(salt1: 0, salt2: 0, frame: 0, checksum1: 0, checksum2: 0)
    private var lastObserved: UInt64 = 0
    private var known = KnownPages([PageID]())
    /// The full page list the next fold's list is a delta on.
    private var lastFull: (id: PageID, ids: [PageID])?
    /// Page 1's first 100 bytes (the header facts of fold snapshots).
    private var header: [UInt8] = []
    private var batch: SegmentBatch!
    private let frames = FrameBuffer()
    /// The storage of the last look's new pages, kept for the next.
    private var newPages = NewPages()
    private var shipper: Shipper!
    /// The period since the last gathering: its pages (nil when the spool
    /// failed: no gathering for it), its segments and their objects.
    private var spool: PageSpool?
    private var spoolFailed = false
    private var period = Period()
    private var gathering: Gathering?
    /// A gathering also starts once the spool holds this many bytes.
    static let spoolLimit: Int64 = 256 << 20
    /// What may wait to be shipped before the follower lets its mark go
    /// (`stall`): 16 MB (LITECTL_REPLICATE_QUEUE_BYTES, at least 64 KiB,
    /// lets a test reach it within seconds).
    static let queueLimit = Int(ProcessInfo.processInfo.environment["LITECTL_REPLICATE_QUEUE_BYTES"] ?? "").map { max(1 << 16, $0) } ?? 16 << 20

    struct Period {
        var states: [ReplicaState] = []
        var segments: [ObjectKey] = []
        var indexes: [ObjectKey] = []
        var packs: [ObjectKey] = []
    }
    private var fileID: (dev: UInt64, ino: UInt64)?
    /// While a resync reads the whole database: its pages may wait for room in the shipper's queue.
    private let resyncing = Locked(false)

    init(source: String, repository: Repository, options: ReplicateOptions, lease: FollowerLease? = nil, control: FollowerControl,
         status: FollowerStatus, report: @escaping (ReplicateEvent) -> Void) {
        self.source = source
        path = FilePaths.resolved(source)
        name = DurableFolder.baseName(of: path)
        self.repository = repository; self.options = options; self.lease = lease; self.control = control; self.status = status; self.report = report
    }

    // MARK: Running

    /// Follows until a stop is requested; returns whether every state
    /// recorded was shipped. Throws (after shipping what it recorded) when it
    /// must start again from the repository.
    func run() throws -> Bool {
        marks = try ReadMarks(path: source)
        do { pageSize = try marks.pageSize() } catch { marks.close(); throw error }
        fileID = Self.identity(source)
        let shipper = Shipper(repository: repository, database: source, lease: lease, limit: Self.queueLimit, shipped: { [status, report, source] unit, bytes in
            status.shipped(unit, bytes: bytes)
            report(.shipped(ReplicateEvent.Shipment(database: source, unit: unit, bytes: bytes)))
        }, problem: { [status, report, source] message, retrying in
            status.noteError()
            report(.problem(database: source, message: message, retrying: retrying))
        })
        self.shipper = shipper
        let done = DispatchSemaphore(value: 0)
        let shipped = Locked(false)
        let thread = Thread { shipped.withLock { $0 = shipper.run() }; done.signal() }
        thread.name = "litectl-ship"
        thread.start()
        let control = self.control
        let resyncing = self.resyncing
        batch = SegmentBatch(repository: repository, pageSize: pageSize) { item in
            shipper.enqueue(item, mayWait: { !control.stopRequested && resyncing.withLock { $0 } })
        }
        func finish() -> Bool {
            shipper.finish(giveUpAt: Clock.wall() + options.stopTimeout)
            done.wait()
            return shipped.withLock { $0 } && !shipper.failed
        }
        do {
            try follow()
        } catch {
            marks.close()
            _ = finish()
            throw error
        }
        // Every commit is recorded: the read mark goes, and the period's
        // segments are gathered (a gathering under way first), so that the
        // chain a stop leaves has no more segments for a restore to read
        // than it needs. A gathering reads no object: it takes about a
        // second for a minute of 160 commits a second.
        marks.close()
        do {
            try shipGathering(wait: true)
            startGathering(last: true)
            if gathering == nil {
                // No gathering to make: the packs the last one replaced go now.
                shipper.enqueue(.tidy)
            }
            try shipGathering(wait: true)
        } catch {
            _ = finish()
            throw error
        }
        return finish()
    }

    private func follow() throws {
        guard let first = try firstMark() else { return }
        try start(at: first)
        marks.hold(first)
        var lastCut = Clock.now(), lastFold = Clock.now(), lastIdentity = Clock.now()
        while true {
            // Another follower took the lease over (this one could not renew it): it follows the database now.
            if let lost = lease?.lost { throw lost }
            let stopping = control.stopRequested
            if stopping {
            } else if marks.checkpointRunning {
                // The checkpoint may wait for the mark held: a new one every
                // millisecond until it is done (it needs readers at the last
                // frame, then, to restart the -wal, at read lock 0).
                usleep(1000)
            } else {
                pause(until: min(lastCut + options.interval, Clock.now() + options.poll))
            }
            if !stopping, shipper.pendingBytes > shipper.limit {
                // The repository does not take what waits: the mark goes
                // until it does (the -wal then behaves as without a follower).
                try stall()
                lastCut = Clock.now()
                continue
            }
            if let next = try marks.beginNext() {
                do {
                    try advance(to: next)
                } catch let mismatch as WALMismatch {
                    try resync(at: next, reason: mismatch.description)
                } catch {
                    marks.drop(next)
                    throw error
                }
                marks.hold(next)
                if checkpointDue(next) { try checkpoint() }
            }
            let now = Clock.now()
            if stopping || now - lastCut >= options.interval {
                try cut()
                lastCut = now
            }
            if control.takeFold() || (options.foldInterval > 0 && now - lastFold >= options.foldInterval) {
                if number > 0 { try fold() }
                lastFold = now
            }
            if stopping { return }
            if now - lastIdentity >= 5 {
                lastIdentity = now
                if let id = Self.identity(source), let fileID, id != fileID {
                    try cut()
                    throw FollowerRestart(description: "\(source): the database file was replaced; following the new one")
                }
            }
        }
    }

    /// (--checkpoint-frames) Where the last checkpoint that could not restart
    /// the -wal left it: the next waits for as many frames again, so that a
    /// reader holding an old snapshot does not have every poll hold the
    /// application's commits for the checkpoint's wait.
    private var checkpointGaveUp: WALPosition?

    private func checkpointDeferral(_ header: WALIndexHeader) -> UInt32 {
        guard let gaveUp = checkpointGaveUp, header.sameGeneration(gaveUp) else { return 0 }
        return gaveUp.frame
    }

    /// (--checkpoint-frames) Whether the follower checkpoints now, with
    /// `mark` just taken: never while another process checkpoints, nor while
    /// more waits to be shipped than the shipper's limit (the follower is
    /// about to let its mark go). By default (`.auto`): once the
    /// application's own checkpoint copied frames of this generation of the
    /// -wal into the database file, but not all of them (the follower's mark
    /// held it back: without the follower it would have copied them all,
    /// and its next commit would have restarted the -wal), with the -wal at
    /// 1000 frames or more, unless the application ran a FULL, RESTART or
    /// TRUNCATE checkpoint of its own in the last 30 s (it manages its -wal,
    /// and the follower's checkpoint would only make one of its own return
    /// SQLITE_BUSY); and once the -wal holds 32 MiB whatever the application
    /// does. After a checkpoint that gave up, the next waits for twice the
    /// frames (`.frames(N)`: N more).
    private func checkpointDue(_ mark: ReadMark) -> Bool {
        let header = mark.header
        guard options.checkpoint != .never, header.sameGeneration(position), !marks.checkpointRunning,
              shipper.pendingBytes <= shipper.limit else { return false }
        let frames = header.maxFrame, deferral = checkpointDeferral(header)
        switch options.checkpoint {
        case .never:
            return false
        case .frames(let n):
            return frames >= UInt32(clamping: n) + deferral
        case .auto:
            guard frames >= 2 * deferral else { return false }
            let cap = UInt32(CheckpointPolicy.autoBytes / (24 + pageSize))
            if frames >= cap { return true }
            guard frames >= min(UInt32(CheckpointPolicy.autoFrames), cap), Clock.now() - marks.lastCheckpointSeen > 30,
                  let info = WALIndexHeader.checkpointInfo(marks.connection(of: mark)) else { return false }
            return info.backfilled > 0 && info.backfilled < frames
        }
    }

    /// (--checkpoint-frames) A checkpoint that restarts the -wal at the last
    /// state. First PASSIVE ones, which hold no commit of the application:
    /// each copies every frame up to the mark just taken into the database
    /// file; when no commit came meanwhile, that is every frame, and a mark
    /// taken then is at read lock 0, which lets the application's next commit
    /// restart the -wal (and the follower continue from it). After two, a
    /// RESTART checkpoint: it holds the write lock and copies the little that
    /// came since; while it waits for readers, the follower takes a new mark
    /// each time (reading the commits that came before the checkpoint took
    /// the write lock): at the last frame, then at read lock 0 once every
    /// frame is in the database file; the -wal then restarts at the last
    /// state, which the mark at lock 0 lets the follower continue from. It
    /// gives up once it has waited 50 ms for something other than the
    /// follower's mark (another reader holds an older snapshot), or 0.5 s in
    /// all. When another process runs a checkpoint (SQLITE_BUSY at once), the
    /// next look tries again.
    private func checkpoint() throws {
        do {
            for _ in 0..<2 {
                guard let (log, copied) = marks.passiveCheckpoint() else { return }
                guard let mark = try marks.beginNext(attempts: 2) else { break }
                do { try advance(to: mark) } catch { marks.drop(mark); throw error }
                marks.hold(mark)
                if log > 0 && copied == log && mark.lockZero {
                    checkpointGaveUp = nil
                    return
                }
            }
        } catch is WALMismatch {
            // A frame that did not check is taken up again at the next look (a resync there).
            return
        }
        let started = Clock.now()
        var failure: (any Error)?
        // Since when the checkpoint waits for something other than this
        // follower's mark (its mark could go no further: at read lock 0, or
        // at the frame it already was): another reader, or the application's
        // write transaction. 50 ms of that, or 0.5 s in all, and it gives up.
        var othersSince: Double?
        let outcome = marks.restartCheckpoint { [self] in
            let now = Clock.now()
            guard failure == nil, now - started < 0.5, now - (othersSince ?? now) < 0.05 else { return false }
            let before = marks.held?.header
            do {
                if let mark = try marks.beginNext(attempts: 2) {
                    do { try advance(to: mark) } catch { marks.drop(mark); throw error }
                    marks.hold(mark)
                }
            } catch {
                failure = error
                return false
            }
            if othersSince == nil, let held = marks.held, held.lockZero || held.header == before { othersSince = Clock.now() }
            usleep(200)
            return true
        }
        switch outcome {
        case .restarted: checkpointGaveUp = nil
        case .gaveUp: checkpointGaveUp = marks.held?.header.position
        case .busy: break
        }
        // A frame that did not check is taken up again at the next poll (a
        // resync there), with the checkpoint out of the way.
        if let failure, !(failure is WALMismatch) { throw failure }
    }

    /// Sleeps until `deadline` (monotonic), waking early on a stop request
    /// or when another process runs a checkpoint (which may be waiting for
    /// the mark held: the next one is taken at once). It looks every 6 ms:
    /// SQLite's busy handler retries a waiting checkpoint 1, 3, 8 and 18 ms
    /// after its first try, so a checkpoint seen within 6 ms goes through
    /// by the retry at 8 ms, never the one at 18 ms for want of a look. The
    /// wake-ups, two system calls each, were 7 % of the follower's CPU
    /// every 4 ms. Measured beside the test application's checkpoints
    /// (docs/replicate.md): FULL ones 2-3 ms longer on average than with a
    /// look every 4 ms, RESTART and TRUNCATE ones no longer.
    private func pause(until deadline: Double) {
        while Clock.now() < deadline && !control.stopRequested && !marks.checkpointRunning {
            usleep(UInt32(max(500, min(6000, (deadline - Clock.now()) * 1e6))))
        }
    }

    /// While more than the shipper's limit (16 MB) waits to be shipped (the
    /// repository cannot be reached, or takes less than the follower
    /// records): the read mark is let go, so that the application's
    /// checkpoints restart the -wal as they would without the follower, until
    /// the queue is down to half; then the follower takes a mark and goes on
    /// from its last state as a follower started again does (from the
    /// -wal's frames when they are still there, else with a resync: every
    /// page compared). Commits made meanwhile are not lost: the next state
    /// holds them.
    private func stall() throws {
        let waiting = shipper.pendingBytes
        report(.problem(database: source, message: "\(String(format: "%.1f", Double(waiting) / 1e6)) MB wait to be shipped: the read mark is let go until the repository takes them (the application's checkpoints proceed; following then resumes, with a resync if the -wal restarted meanwhile)", retrying: true))
        marks.release()
        while shipper.pendingBytes > shipper.limit / 2 && !control.stopRequested && !shipper.failed && lease?.lost == nil {
            usleep(100_000)
        }
        if let lost = lease?.lost { throw lost }
        guard let mark = try firstMark() else { return }
        do { try resume(at: mark) } catch { marks.drop(mark); throw error }
        marks.hold(mark)
    }

    /// The first mark, retried while commits keep it from being pinned down.
    private func firstMark() throws -> ReadMark? {
        while true {
            if let mark = try marks.beginNext() { return mark }
            if control.stopRequested { return nil }
            usleep(50_000)
        }
    }

    static func identity(_ path: String) -> (dev: UInt64, ino: UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }

    // MARK: Starting: the repository's record

    /// Continues the newest chain of this database on this host when it can
    /// be read back, else starts a new one from a full snapshot.
    private func start(at mark: ReadMark) throws {
        let snapshots = try repository.snapshots().snapshots
        let mine = Repository.chainBases(snapshots).filter { sameBytes($0.hostname, hostname) && sameBytes($0.path, path) }
        if let base = mine.max(by: { ($0.time, $0.id) < ($1.time, $1.id) }) {
            do {
                try adopt(base)
                report(.started(database: source, chain: chain, state: number, how: "resumed"))
                try resume(at: mark)
                return
            } catch let error as FollowerRestart {
                throw error
            } catch {
                report(.problem(database: source, message: "cannot continue chain \(base.shortID): \((error as? StoreError)?.description ?? "\(error)"); starting a new chain", retrying: true))
            }
        }
        try newChain(at: mark, parent: snapshots.filter { sameBytes($0.hostname, hostname) && sameBytes($0.path, path) }.max { $0.time < $1.time })
        report(.started(database: source, chain: chain, state: 0, how: "new chain"))
    }

    /// Takes the last state of `base`'s chain as the current one.
    private func adopt(_ base: Snapshot) throws {
        guard base.pageSize == pageSize else {
            throw StoreError(.other, location: repository.location, message: "its pages are \(base.pageSize) bytes, the database's \(pageSize)")
        }
        let loaded = try repository.loadChain(base)
        ids = try repository.stateIDs(loaded, upTo: loaded.last)
        digest = loaded.states.last?.digest ?? StateDigest.of(ids)
        position = loaded.states.last?.position ?? base.replica!.position
        lastObserved = loaded.states.last?.observedMicros ?? ReplicaState.micros(base.time)
        number = loaded.last
        chain = base.id
        chainBase = base
        known = KnownPages(ids)
        if let fullID = try repository.fullListID(of: base) {
            lastFull = (fullID, try repository.loadList(fullID.hex))
        }
    }

    /// After adopting a chain: its last position is continued when the
    /// -wal is still that generation and still holds that frame; else a resync.
    private func resume(at mark: ReadMark) throws {
        let h = mark.header
        readHeader(mark)
        // The same generation (its salts change at every restart) still holds
        // every frame since the state's; frame 0 is the start of the generation.
        if h.sameGeneration(position), position.frame < h.maxFrame, !mark.lockZero,
           let wal = WALFile(marks.connection(of: mark), pageSize: pageSize),
           position.frame == 0 || wal.recordedChecksum(frame: position.frame, index: h) == WALChecksum(s1: position.checksum1, s2: position.checksum2) {
            do { try readFrames(mark, newGeneration: false); return } catch let mismatch as WALMismatch {
                try resync(at: mark, reason: mismatch.description)
                return
            }
        }
        if h.sameGeneration(position) && h.maxFrame == position.frame { return }
        try resync(at: mark, reason: "the -wal is not the one the last state was read from (it was restarted, or checkpointed, since)")
    }

    /// Page 1's header, as the mark's snapshot has it.
    private func readHeader(_ mark: ReadMark) {
        if let file = try? PageFile(marks.connection(of: mark), walIndex: mark.header), let page = file.page(1) {
            header = Array(UnsafeRawBufferPointer(start: page, count: min(100, file.pageSize)))
        }
    }

    // MARK: Following the -wal

    /// The commits between the held mark and `next`, from the -wal.
    private func advance(to next: ReadMark) throws {
        let h = next.header
        // (An empty -wal's index may not know the page size yet.)
        guard h.maxFrame == 0 || h.pageSize == pageSize else { throw FollowerRestart(description: "\(source): the page size changed") }
        if h.sameGeneration(position) {
            if h.maxFrame == position.frame { return }
            guard h.maxFrame > position.frame else { throw WALMismatch(description: "the -wal holds fewer frames than the last state's") }
            try readFrames(next, newGeneration: false)
        } else {
            // Only a mark at read lock 0, at the last state, lets the -wal
            // restart, once, and the new generation then continues that state.
            guard let held = marks.held, held.lockZero, held.header.sameGeneration(position), held.header.maxFrame == position.frame else {
                throw WALMismatch(description: "the -wal was restarted past frames not read")
            }
            try readFrames(next, newGeneration: true)
        }
    }

    /// The marks, the last state's position and the -shm's checkpoint info, for a resync's reason.
    private func diagnosis(_ next: ReadMark) -> String {
        func describe(_ m: ReadMark?) -> String {
            guard let m else { return "none" }
            return "\(m.header.salt1):\(m.header.salt2) frame \(m.header.maxFrame)\(m.lockZero ? " lock 0" : "")"
        }
        var text = "held \(describe(marks.held)), next \(describe(next)), last state \(position.salt1):\(position.salt2) frame \(position.frame)"
        if let info = WALIndexHeader.checkpointInfo(marks.connection(of: next)) {
            text += ", backfilled \(info.backfilled), marks \(info.marks.map { $0 == .max ? "-" : String($0) }.joined(separator: " "))"
        }
        return text
    }

    /// Reads the commits up to `mark`'s snapshot and records them as a state.
    private func readFrames(_ mark: ReadMark, newGeneration: Bool) throws {
        // Frames are read only while a mark at read lock 1-4 is held: at
        // lock 0 alone, a writer may restart the -wal under the reads.
        let unread = newGeneration ? mark.header.maxFrame > 0 : mark.header.maxFrame > position.frame
        guard !unread || !mark.lockZero || (marks.held.map { !$0.lockZero && $0.header.sameGeneration(position) } ?? false) else {
            throw WALMismatch(description: "no read mark keeps the frames from being overwritten (\(diagnosis(mark)))")
        }
        guard let wal = WALFile(marks.connection(of: mark), pageSize: pageSize) else {
            throw WALMismatch(description: "the -wal is not open")
        }
        let commits = try wal.commits(after: position, newGeneration: newGeneration, index: mark.header, buffer: frames)
        guard commits.transactions > 0 else { position = commits.end; return }
        var changes: [(page: UInt32, id: PageID)] = []
        var pages = newPages
        newPages = NewPages()
        pages.removeAll()
        defer { newPages = pages }
        var buffer = [UInt8](repeating: 0, count: pageSize)
        for (page, offset) in commits.newest.sorted(by: { $0.key < $1.key }) {
            // (Checked by the checksum chain as read: the same bytes, unless
            // read again.) Taken where the frames were read into, when there.
            func take(_ bytes: UnsafeRawBufferPointer) {
                let id = repository.pageID(bytes)
                if Int(page) <= ids.count && ids[Int(page) - 1] == id { return }
                changes.append((page, id))
                if !known.contains(id) { pages.add(page, bytes) }
            }
            try frames.withBytes(offset: offset, count: pageSize) { held in
                if let held { take(held); return }
                guard buffer.withUnsafeMutableBytes({ wal.read(into: $0.baseAddress!, count: pageSize, offset: offset) }) else {
                    throw WALMismatch(description: "page \(page)'s frame cannot be read")
                }
                buffer.withUnsafeBytes { take($0) }
            }
        }
        // Pages the database grew by with no frame (SQLite writes every new
        // page, but the lock-byte page and a page a truncation kept are read
        // as SQLite reads them).
        if Int(commits.pageCount) > ids.count {
            let missing = (ids.count + 1...Int(commits.pageCount)).filter { commits.newest[UInt32($0)] == nil }
            if !missing.isEmpty {
                guard let file = try PageFile(marks.connection(of: mark), walIndex: mark.header) else {
                    throw WALMismatch(description: "the snapshot's pages cannot be read")
                }
                for p in missing {
                    let bytes = try pageBytes(file, UInt32(p))
                    let id = bytes.withUnsafeBytes { repository.pageID($0) }
                    changes.append((UInt32(p), id))
                    if !known.contains(id) { bytes.withUnsafeBytes { pages.add(UInt32(p), $0) } }
                }
                changes.sort { $0.page < $1.page }
            }
        }
        try record(kind: .frames, observed: mark.observedMicros, position: commits.end, transactions: commits.transactions,
                   pageCount: commits.pageCount, changes: changes, pages: pages)
    }

    /// A page of a snapshot (the lock-byte page, which SQLite never writes,
    /// and a page past the file's end with no frame, as zeros, as SQLite
    /// reads them). A page that cannot be read is an error, never zeros.
    private func pageBytes(_ file: PageFile, _ p: UInt32) throws -> [UInt8] {
        if Int(p) == (1 << 30) / pageSize + 1 { return [UInt8](repeating: 0, count: pageSize) }
        if let pointer = file.page(p) { return Array(UnsafeRawBufferPointer(start: pointer, count: pageSize)) }
        if file.readsAsZeros(p) { return [UInt8](repeating: 0, count: pageSize) }
        throw FollowerRestart(description: "\(source): page \(p) cannot be read")
    }

    /// The whole snapshot of `mark` compared with the last state, page by
    /// page: what differs is recorded as one state. Used when frames were
    /// missed; never leaves a gap.
    private func resync(at mark: ReadMark, reason: String) throws {
        report(.resync(database: source, reason: reason))
        status.noteResync()
        resyncing.withLock { $0 = true }
        defer { resyncing.withLock { $0 = false } }
        guard let file = try PageFile(marks.connection(of: mark), walIndex: mark.header, cacheChunks: 16), file.seesWholeSnapshot,
              file.pageSize == pageSize else {
            throw FollowerRestart(description: "\(source): the database's pages cannot be read for a resync")
        }
        var changes: [(page: UInt32, id: PageID)] = []
        for p in 1...max(1, file.pageCount) {
            let bytes = try pageBytes(file, p)
            let id = bytes.withUnsafeBytes { repository.pageID($0) }
            if Int(p) <= ids.count && ids[Int(p) - 1] == id { continue }
            changes.append((p, id))
            // Into the batch as they come (it puts them in blobs past a few MB): memory stays flat.
            if known.insert(id) { try bytes.withUnsafeBytes { try addPage(p, number: number + 1, id: id, bytes: $0) } }
        }
        readHeader(mark)
        try record(kind: .resync, observed: mark.observedMicros, position: mark.header.position, transactions: 0,
                   pageCount: file.pageCount, changes: changes, pages: NewPages(), always: true)
    }

    /// Records a state: the ids and digest brought up to date, its new pages
    /// (those the chain does not hold yet) into the batch.
    private func record(kind: ReplicaState.Kind, observed: UInt64, position end: WALPosition, transactions: UInt32,
                        pageCount: UInt32, changes: [(page: UInt32, id: PageID)], pages: NewPages, always: Bool = false) throws {
        let oldCount = ids.count, newCount = Int(pageCount)
        position = end
        guard always || !changes.isEmpty || newCount != oldCount else { return }
        if newCount < oldCount {
            for p in newCount..<oldCount { digest.remove(UInt32(p + 1), ids[p]) }
            ids.removeLast(oldCount - newCount)
        }
        let zero = PageID(a: 0, b: 0, c: 0, d: 0)
        if newCount > oldCount { ids += [PageID](repeating: zero, count: newCount - oldCount) }
        var grown = 0
        for change in changes {
            let i = Int(change.page) - 1
            if i < oldCount { digest.remove(change.page, ids[i]) } else { grown += 1 }
            ids[i] = change.id
            digest.add(change.page, change.id)
        }
        guard grown == max(0, newCount - oldCount) else {
            throw FollowerRestart(description: "\(source): a state left pages of the grown database unread")
        }
        let n = number + 1
        for change in changes where pages.has(change.page) && known.insert(change.id) {
            try pages.withBytes(of: change.page, pageSize: pageSize) { bytes in
                try addPage(change.page, number: n, id: change.id, bytes: bytes)
                if change.page == 1 { header = Array(bytes.prefix(100)) }
            }
        }
        let observedNow = max(observed, lastObserved)
        let state = ReplicaState(number: n, observedMicros: observedNow, position: end, transactions: transactions, kind: kind,
                                 pageCount: pageCount, changes: changes, digest: digest)
        batch.addState(state)
        number = n
        lastObserved = observedNow
        status.recorded(state)
    }

    // MARK: Shipping

    /// A new page into the batch, and into the spool of the period.
    private func addPage(_ page: UInt32, number: UInt64, id: PageID, bytes: UnsafeRawBufferPointer) throws {
        try batch.addPage(page, number: number, id: id, bytes: bytes)
        guard !spoolFailed else { return }
        do {
            if spool == nil { spool = try PageSpool(pageSize: pageSize) }
            try spool!.append(page: page, number: number, id: id, bytes: bytes)
        } catch {
            // No gathering for this period; the segments stay as they are.
            report(.problem(database: source, message: "\((error as? StoreError)?.description ?? "\(error)"); the segments of this minute stay as they are", retrying: false))
            spool = nil
            spoolFailed = true
        }
    }

    /// Hands the states recorded since the last cut to the shipper as one
    /// segment; every `mergeEvery` segments (or sooner when the spool is
    /// large), has the period's segments gathered on a thread of its own.
    private func cut() throws {
        guard let unit = try batch.cut(chain: chain, hostname: hostname, path: path) else {
            try shipGathering(wait: false)
            return
        }
        period.states += unit.states
        period.segments.append(unit.segment!)
        if let index = batch.lastIndex { period.indexes.append(index) }
        period.packs += batch.takePacks()
        try shipGathering(wait: false)
        guard gathering == nil, period.segments.count >= max(2, options.mergeEvery) || (spool?.size ?? 0) >= Self.spoolLimit else { return }
        startGathering()
    }

    /// Has the period's segments gathered (when there are two or more), and
    /// starts a new period. `last`: a stop's.
    private func startGathering(last: Bool = false) {
        // Every page the period's index objects name must be in the spool:
        // the gathering's index object replaces theirs.
        if let spool, !spoolFailed, spool.entries.count == batch.pagesAdded - periodStartPages, period.segments.count > 1 {
            gathering = Gathering(Gathering.Job(repository: repository, spool: spool, chain: chain, hostname: hostname, path: path,
                                                states: period.states,
                                                replaced: Replacement(segments: period.segments, indexes: period.indexes, packs: period.packs, last: last)))
        }
        newPeriod()
    }

    private var periodStartPages = 0

    /// Starts a period: the next gathering covers the segments from here.
    /// The pages known to be stored become those of the last state (a page
    /// that goes back to an older content is stored again): memory stays
    /// the database's size, not the chain's hour of changes.
    private func newPeriod() {
        known = KnownPages(ids)
        periodStartPages = batch.pagesAdded
        period = Period()
        spool = nil
        spoolFailed = false
    }

    /// Hands a finished gathering's objects to the shipper as one unit (with
    /// `wait`, once it is done); a gathering that failed is reported and
    /// let be.
    private func shipGathering(wait: Bool) throws {
        guard let g = gathering, let outcome = wait ? g.wait() : g.finished else { return }
        gathering = nil
        switch outcome {
        case .ready(let items):
            for item in items { shipper.enqueue(item) }
        case .failed(let message):
            report(.problem(database: source, message: "\(message); the segments of this minute stay as they are", retrying: false))
        }
    }

    /// A full snapshot of the last state (its page list a delta on the last
    /// full one when small), which becomes the base of a new chain; the
    /// chain it closes is gathered into one segment and one index object.
    private func fold() throws {
        try cut()
        // The chain closes: its segments and index objects are gathered
        // into one each by the shipper, those of this period with them.
        try shipGathering(wait: true)
        newPeriod()
        let started = Clock.now()
        let (sealedList, becomesFull) = try repository.sealPageList(ids, deltaOn: lastFull)
        if becomesFull { lastFull = (PageID(hex: sealedList.id)!, ids) }
        var snapshot = makeSnapshot(list: sealedList.id, parent: chainBase.id, time: Double(lastObserved) / 1e6, pagesNew: 0,
                                    follows: ReplicaInfo.Follows(chain: chain, state: number, firstTime: chainBase.time, lastTime: Double(lastObserved) / 1e6))
        snapshot.durationSeconds = Clock.now() - started
        snapshot.bytesAdded = Int64(sealedList.bytes.count + snapshot.encoded().count)
        let sealedSnapshot = try repository.sealSnapshot(&snapshot)
        shipper.enqueue(.begin)
        shipper.enqueue(.put(sealedList, role: .list))
        shipper.enqueue(.put(sealedSnapshot, role: .snapshot))
        shipper.enqueue(.closeChain(chain))
        shipper.enqueue(.end(ShippedUnit(kind: .fold, chain: snapshot.id, snapshot: snapshot.id)))
        chain = snapshot.id
        chainBase = snapshot
        number = 0
        known = KnownPages(ids)
        newPeriod()
    }

    /// A snapshot of the current ids (the base of a chain).
    private func makeSnapshot(list: String, parent: String?, time: Double, pagesNew: Int, follows: ReplicaInfo.Follows?) -> Snapshot {
        var facts: [(String, JSON)] = []
        if header.count >= DatabaseHeader.size, let h = try? DatabaseHeader(bytes: Array(header.prefix(DatabaseHeader.size))) {
            facts += [("application_id", .integer(Int64(h.applicationID))), ("auto_vacuum", .integer(Int64(h.autoVacuum))),
                      ("reserved_bytes", .integer(Int64(h.reservedBytes))), ("schema_format", .integer(Int64(h.schemaFormat))),
                      ("sqlite_version", .string(h.sqliteVersion)), ("text_encoding", .string(h.textEncodingName ?? "unknown")),
                      ("user_version", .integer(Int64(h.userVersion)))]
        }
        facts.append(("journal_mode", .string("wal")))
        facts.sort { $0.0 < $1.0 }
        return Snapshot(database: name, path: path, hostname: hostname, time: time, tags: options.tags, pageSize: pageSize,
                        pageCount: ids.count, list: list, parent: parent, databaseSHA256: nil, pagesSHA256: PagesDigest.of(ids),
                        logicalHash: "", header: facts, pagesNew: pagesNew, bytesAdded: 0, durationSeconds: 0, strategy: "replicate",
                        verification: "skipped", replica: ReplicaInfo(position: position, follows: follows))
    }

    /// A new chain: every page of `mark`'s snapshot read, those the
    /// repository lacks stored (as a backup stores them, its index read
    /// once for that), then the list and the base snapshot, under a shared lock.
    private func newChain(at mark: ReadMark, parent: Snapshot?) throws {
        let started = Clock.now()
        guard let file = try PageFile(marks.connection(of: mark), walIndex: mark.header, cacheChunks: 16), file.seesWholeSnapshot,
              file.pageSize == pageSize else {
            throw FollowerRestart(description: "\(source): the database's pages cannot be read")
        }
        let lock = try RepoLock(repository, exclusive: false, command: "replicate", timeout: options.lockTimeout)
        defer { lock.release() }
        let stored = try repository.storePages(pageCount: file.pageCount, pageSize: pageSize, lock: lock) { p in
            let bytes = try pageBytes(file, p)
            if p == 1 { header = Array(bytes.prefix(100)) }
            return bytes
        }
        ids = stored.ids
        // The list: a delta on the parent's full list when small.
        var full: (id: PageID, ids: [PageID])?
        if let parent, let fullID = try? repository.fullListID(of: parent), let fullIDs = try? repository.loadList(fullID.hex) {
            full = (fullID, fullIDs)
        }
        let (list, isFull) = try repository.sealPageList(ids, deltaOn: full)
        try repository.put(list)
        lastFull = isFull ? (PageID(hex: list.id)!, ids) : full
        let bytesAdded = stored.bytesWritten + Int64(list.bytes.count)
        position = mark.header.position
        lastObserved = mark.observedMicros
        var snapshot = makeSnapshot(list: list.id, parent: parent?.id, time: Double(mark.observedMicros) / 1e6, pagesNew: stored.stored, follows: nil)
        snapshot.durationSeconds = Clock.now() - started
        snapshot.bytesAdded = bytesAdded + Int64(snapshot.encoded().count)
        try repository.put(try repository.sealSnapshot(&snapshot))
        let id = snapshot.id
        chain = id
        chainBase = snapshot
        number = 0
        digest = StateDigest.of(ids)
        known = KnownPages(ids)
        report(.snapshot(database: source, id: id, kind: "base"))
    }
}

/// The bytes of the new pages of a state, one after another in one array
/// (no array per page: the follower meets a few hundred a second).
struct NewPages {
    private var bytes: [UInt8] = []
    private var at: [UInt32: Int] = [:]

    mutating func add(_ page: UInt32, _ content: UnsafeRawBufferPointer) {
        at[page] = bytes.count
        bytes.append(contentsOf: content)
    }

    func has(_ page: UInt32) -> Bool { at[page] != nil }

    func withBytes<T>(of page: UInt32, pageSize: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T? {
        guard let start = at[page] else { return nil }
        return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<start + pageSize])) }
    }

    /// Empties it, keeping its storage.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        at.removeAll(keepingCapacity: true)
    }
}
