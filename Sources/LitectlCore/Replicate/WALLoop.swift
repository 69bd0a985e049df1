// The WAL loop of a follower: at each poll, a new read mark is begun (the
// previous one still held), the commits since the last state are read from
// the -wal and handed to the chain writer as one state (the pages they
// changed, their ids, the position and the time), and the previous mark is
// let go; every interval the chain writer cuts a segment, every fold
// interval it folds. When frames were missed (the -wal restarted while none
// of its marks was held) it compares the whole database with the last state,
// page by page, and records the difference. It never writes to the
// database. Part of the replicate capability, built on Pages/ (the -wal
// index, a snapshot's pages) and the chain writer (ChainWriter.swift).
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class WALLoop {
    let source: String
    let marks: ReadMarks
    let pageSize: Int
    let options: ReplicateOptions
    let control: FollowerControl
    /// This database's lease: taken over, the loop stops.
    let lease: FollowerLease?
    let chain: ChainWriter
    let shipper: Shipper
    let status: FollowerStatus
    let report: (ReplicateEvent) -> Void
    /// While a resync reads the whole database: its pages may wait for room in the shipper's queue.
    let resyncing: Locked<Bool>
    private let frames = FrameBuffer()
    /// The storage of the last look's new pages, kept for the next.
    private var newPages = NewPages()
    /// The database file when the loop began: another one under its name ends the chain (FollowerWatch.swift).
    private let fileID: FileIdentity?
    /// (--checkpoint-frames) Where the last checkpoint that could not restart
    /// the -wal left it: the next waits for as many frames again, so that a
    /// reader holding an old snapshot does not have every poll hold the
    /// application's commits for the checkpoint's wait (WALCheckpoint.swift).
    var checkpointGaveUp: WALPosition?

    init(source: String, marks: ReadMarks, pageSize: Int, options: ReplicateOptions, control: FollowerControl, lease: FollowerLease?,
         chain: ChainWriter, shipper: Shipper, status: FollowerStatus, resyncing: Locked<Bool>, report: @escaping (ReplicateEvent) -> Void) {
        self.source = source; self.marks = marks; self.pageSize = pageSize; self.options = options; self.control = control
        self.lease = lease; self.chain = chain; self.shipper = shipper; self.status = status; self.resyncing = resyncing; self.report = report
        fileID = FileIdentity(source)
    }

    /// Follows the -wal until a stop is requested (the last states cut),
    /// from the repository's record.
    func follow() throws {
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
                // Frames under another file's name are not this chain's (FollowerWatch.swift).
                if next.header.maxFrame != chain.position.frame || !next.header.sameGeneration(chain.position),
                   let replaced = status.watch.replacement(of: source, followed: fileID) { marks.drop(next); try chain.cut(); throw replaced }
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
                try chain.cut()
                lastCut = now
            }
            if control.takeFold() || (options.foldInterval > 0 && now - lastFold >= options.foldInterval) {
                if chain.number > 0 { try chain.fold() }
                lastFold = now
            }
            if stopping { return }
            if now - lastIdentity >= options.interval {
                lastIdentity = now
                if let replaced = status.watch.replacement(of: source, followed: fileID) ?? marks.held.flatMap(rewritten) {
                    try chain.cut(); throw replaced
                }
            }
            status.watch.look(shipped: status.statesShipped, caughtUp: status.lag == 0, wal: source + "-wal", interval: options.interval) {
                report(.problem(database: source, message: $0, retrying: true))
            }
        }
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
            status.watch.look(shipped: status.statesShipped, caughtUp: false, wal: source + "-wal", interval: options.interval) { report(.problem(database: source, message: $0, retrying: true)) }
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

    // MARK: Starting: the repository's record

    /// Continues the newest chain of this database on this host when it can
    /// be read back, else starts a new one from a full snapshot.
    func start(at mark: ReadMark) throws {
        let (base, newest) = try chain.newestOfThisDatabase()
        let replaced = status.watch.takeReplaced()  // the file the chain was of is gone: a new chain
        if let base, !replaced {
            do {
                try chain.adopt(base)
                report(.started(database: source, chain: chain.chain, state: chain.number, how: "resumed"))
                try resume(at: mark)
                return
            } catch let error as FollowerRestart {
                throw error
            } catch {
                report(.problem(database: source, message: "cannot continue chain \(base.shortID): \((error as? StoreError)?.description ?? "\(error)"); starting a new chain", retrying: true))
            }
        }
        guard let file = try PageFile(marks.connection(of: mark), walIndex: mark.header, cacheChunks: 16), file.seesWholeSnapshot,
              file.pageSize == pageSize else {
            throw FollowerRestart(description: "\(source): the database's pages cannot be read")
        }
        try chain.newChain(pageCount: file.pageCount, observed: mark.observedMicros, position: mark.header.position, parent: newest) {
            try pageBytes(file, $0)
        }
        report(.started(database: source, chain: chain.chain, state: 0, how: "new chain"))
    }

    /// After adopting a chain: its last position is continued when the
    /// -wal is still that generation and still holds that frame; else a resync.
    func resume(at mark: ReadMark) throws {
        let h = mark.header
        readHeader(mark)
        // The same generation (its salts change at every restart) still holds
        // every frame since the state's; frame 0 is the start of the generation.
        if h.sameGeneration(chain.position), chain.position.frame < h.maxFrame, !mark.lockZero,
           let wal = WALFile(marks.connection(of: mark), pageSize: pageSize),
           chain.position.frame == 0 || wal.recordedChecksum(frame: chain.position.frame, index: h) == WALChecksum(s1: chain.position.checksum1, s2: chain.position.checksum2) {
            do { try readFrames(mark, newGeneration: false); return } catch let mismatch as WALMismatch {
                try resync(at: mark, reason: mismatch.description)
                return
            }
        }
        if h.sameGeneration(chain.position) && h.maxFrame == chain.position.frame { return }
        try resync(at: mark, reason: "the -wal is not the one the last state was read from (it was restarted, or checkpointed, since)")
    }

    /// The main file written over in place (FollowerWatch.rewrite), looked
    /// for while `held` is at read lock 0 at the last state.
    private func rewritten(_ held: ReadMark) -> DatabaseReplaced? {
        guard held.lockZero, held.header.sameGeneration(chain.position), held.header.maxFrame == chain.position.frame else { return nil }
        return status.watch.rewrite(of: source, connection: marks.connection(of: held), pageSize: pageSize, expected: chain.ids.first) {
            chain.repository.pageID($0)
        }
    }

    /// Page 1's header, as the mark's snapshot has it.
    private func readHeader(_ mark: ReadMark) {
        if let file = try? PageFile(marks.connection(of: mark), walIndex: mark.header), let page = file.page(1) {
            chain.header = Array(UnsafeRawBufferPointer(start: page, count: min(100, file.pageSize)))
        }
    }

    // MARK: Following the -wal

    /// The commits between the held mark and `next`, from the -wal.
    func advance(to next: ReadMark) throws {
        let h = next.header
        // (An empty -wal's index may not know the page size yet.)
        guard h.maxFrame == 0 || h.pageSize == pageSize else { throw FollowerRestart(description: "\(source): the page size changed") }
        if h.sameGeneration(chain.position) {
            if h.maxFrame == chain.position.frame { return }
            guard h.maxFrame > chain.position.frame else { throw WALMismatch(description: "the -wal holds fewer frames than the last state's") }
            try readFrames(next, newGeneration: false)
        } else {
            // Only a mark at read lock 0, at the last state, lets the -wal
            // restart, once, and the new generation then continues that state.
            guard let held = marks.held, held.lockZero, held.header.sameGeneration(chain.position), held.header.maxFrame == chain.position.frame else {
                throw WALMismatch(description: "the -wal was restarted past frames not read")
            }
            // The new generation continues the main file, which must still be the last state's.
            if let replaced = rewritten(held) { try chain.cut(); throw replaced }
            try readFrames(next, newGeneration: true)
        }
    }

    /// The marks, the last state's position and the -shm's checkpoint info, for a resync's reason.
    private func diagnosis(_ next: ReadMark) -> String {
        func describe(_ m: ReadMark?) -> String {
            guard let m else { return "none" }
            return "\(m.header.salt1):\(m.header.salt2) frame \(m.header.maxFrame)\(m.lockZero ? " lock 0" : "")"
        }
        var text = "held \(describe(marks.held)), next \(describe(next)), last state \(chain.position.salt1):\(chain.position.salt2) frame \(chain.position.frame)"
        if let info = WALIndexHeader.checkpointInfo(marks.connection(of: next)) {
            text += ", backfilled \(info.backfilled), marks \(info.marks.map { $0 == .max ? "-" : String($0) }.joined(separator: " "))"
        }
        return text
    }

    /// Reads the commits up to `mark`'s snapshot and records them as a state.
    private func readFrames(_ mark: ReadMark, newGeneration: Bool) throws {
        // Frames are read only while a mark at read lock 1-4 is held: at
        // lock 0 alone, a writer may restart the -wal under the reads.
        let unread = newGeneration ? mark.header.maxFrame > 0 : mark.header.maxFrame > chain.position.frame
        guard !unread || !mark.lockZero || (marks.held.map { !$0.lockZero && $0.header.sameGeneration(chain.position) } ?? false) else {
            throw WALMismatch(description: "no read mark keeps the frames from being overwritten (\(diagnosis(mark)))")
        }
        guard let wal = WALFile(marks.connection(of: mark), pageSize: pageSize) else {
            throw WALMismatch(description: "the -wal is not open")
        }
        let commits = try wal.commits(after: chain.position, newGeneration: newGeneration, index: mark.header, buffer: frames)
        guard commits.transactions > 0 else { chain.moved(to: commits.end); return }
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
                let id = chain.repository.pageID(bytes)
                if Int(page) <= chain.ids.count && chain.ids[Int(page) - 1] == id { return }
                changes.append((page, id))
                if !chain.known.contains(id) { pages.add(page, bytes) }
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
        if Int(commits.pageCount) > chain.ids.count {
            let missing = (chain.ids.count + 1...Int(commits.pageCount)).filter { commits.newest[UInt32($0)] == nil }
            if !missing.isEmpty {
                guard let file = try PageFile(marks.connection(of: mark), walIndex: mark.header) else {
                    throw WALMismatch(description: "the snapshot's pages cannot be read")
                }
                for p in missing {
                    let bytes = try pageBytes(file, UInt32(p))
                    let id = bytes.withUnsafeBytes { chain.repository.pageID($0) }
                    changes.append((UInt32(p), id))
                    if !chain.known.contains(id) { bytes.withUnsafeBytes { pages.add(UInt32(p), $0) } }
                }
                changes.sort { $0.page < $1.page }
            }
        }
        try chain.record(kind: .frames, observed: mark.observedMicros, position: commits.end, transactions: commits.transactions,
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
    func resync(at mark: ReadMark, reason: String) throws {
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
            let id = bytes.withUnsafeBytes { chain.repository.pageID($0) }
            if Int(p) <= chain.ids.count && chain.ids[Int(p) - 1] == id { continue }
            changes.append((p, id))
            try bytes.withUnsafeBytes { try chain.addResyncPage(p, id: id, bytes: $0) }
        }
        readHeader(mark)
        try chain.record(kind: .resync, observed: mark.observedMicros, position: mark.header.position, transactions: 0,
                   pageCount: file.pageCount, changes: changes, pages: NewPages(), always: true)
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
