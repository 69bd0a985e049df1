// The workers of `replicate --dir` (Fleet.swift): a fixed pool of threads,
// each taking one slice at a time of a database whose -wal or file changed:
// read marks opened, the commits since the last state read (WALLoop's resume
// or resync), a segment cut and shipped, the marks let go. Part of the
// replicate capability, built on Repository/.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension Fleet {
    // MARK: The workers

    func work() {
        while true {
            lock.lock()
            while readyHead == ready.count && !(watcherDone && stopping) { lock.wait() }
            if readyHead == ready.count { lock.unlock(); return }
            let e = ready[readyHead]
            readyHead += 1
            if readyHead > 1024 && readyHead * 2 > ready.count { ready.removeFirst(readyHead); readyHead = 0 }
            let settle = e.settleNext || stopping
            e.settleNext = false
            e.dirty = false
            let fold = e.lastFold < foldAsked
            let gone = e.gone, identity = e.identity
            lock.unlock()
            // The files as the slice began: what the watcher compares with
            // next (a commit after them shows as a change; the slice's own
            // connections, which make a -wal and a -shm and remove them
            // again, do not).
            let walBefore = FileStamp(lstatOf: e.source + "-wal"), dbBefore = FileStamp(lstatOf: e.source)
            let wall = Clock.wall()
            let outcome: SliceOutcome = gone ? .done(complete: true, recorded: false) : slice(e, settle: settle, foldAsked: fold, identity: identity)
            let walAfter = FileStamp(lstatOf: e.source + "-wal")
            lock.lock()
            e.walStamp = walBefore
            e.dbStamp = dbBefore
            e.racy = [walBefore, dbBefore].contains { $0.map { wall - Double($0.mtimeNanos) / 1e9 < 0.05 } ?? false }
            // An empty -wal the slice left where there was none: no change
            // (any commit makes it longer than its header).
            if walBefore == nil, let walAfter, walAfter.size == 0 { e.walStamp = walAfter }
            e.busy = false
            e.slices += 1
            if e.gone { leaving.remove(e.source) }
            e.lastSlice = Clock.now()
            switch outcome {
            case .done(let complete, let recorded):
                if !complete { allShipped = false }
                if settle && complete { e.settled = true } else if recorded || !complete { e.settled = false }
                e.delay = 5
                // Dormant: no session kept (its batch and compressor would be
                // megabytes a database); the chain's base is adopted again at
                // the next change (its states read back from the repository).
                if e.settled, let base = e.session?.chain.base {
                    e.listed = (base, base)
                    e.session = nil
                }
            case .replaced:
                drop(e, replaced: true)
            case .busy:
                e.dirty = true
                e.retryAt = Clock.now() + 0.1
            case .retry:
                e.dirty = true
                e.settled = false
                e.retryAt = Clock.now() + e.delay
                e.delay = min(60, e.delay * 2)
                if stopping { allShipped = false }
            }
            lock.broadcast()
            lock.unlock()
        }
    }

    /// `replaced`: the file under the name is not the one found (the watcher would see it within 5 s).
    enum SliceOutcome { case done(complete: Bool, recorded: Bool), busy, retry, replaced }

    /// One slice of a database: its commits since the last state recorded
    /// and shipped (with `settle`, the period's segments gathered too).
    func slice(_ e: FleetEntry, settle: Bool, foldAsked: Bool, identity: (device: UInt64, inode: UInt64)) -> SliceOutcome {
        let marks: ReadMarks
        let pageSize: Int
        do {
            marks = try ReadMarks(path: e.source)
            do {
                if let found = FleetScan.openedElsewhere(marks, path: e.source, identity: identity) {
                    if found.replaced { marks.close(); return .replaced }
                    throw DatabaseError(code: .cantopen, message: "not followed: \(found.why); looked at again later", path: e.source)
                }
                pageSize = try marks.pageSize()
            } catch { marks.close(); throw error }
        } catch {
            if FileStamp(lstatOf: e.source) == nil { return .done(complete: true, recorded: false) }  // gone: the watcher drops it
            report(e, error)
            return .retry
        }
        if e.session?.pageSize != pageSize { e.session = makeSession(e, pageSize: pageSize) }
        let s = e.session!
        let before = (s.chain.chain, s.chain.number)
        let dbNow = FileStamp(lstatOf: e.source)
        let databaseChanged = dbNow != e.dbAtSlice
        let shipping = NamedThread("litectl-ship") { s.shipper.run() }
        var failure: (any Error)?
        do {
            let loop = WALLoop(source: e.source, marks: marks, pageSize: pageSize, options: options, control: control, lease: lease,
                               chain: s.chain, shipper: s.shipper, status: e.status, resyncing: s.resyncing, report: events)
            loop.checkpointGaveUp = s.checkpointGaveUp
            defer { s.checkpointGaveUp = loop.checkpointGaveUp }
            try loop.catchUp(databaseChanged: databaseChanged)
            let now = Clock.now()
            if s.chain.number > 0 && (foldAsked || (options.foldInterval > 0 && now - e.lastFold >= options.foldInterval)) {
                try s.chain.fold()
                e.lastFold = now
            }
        } catch {
            failure = error
        }
        marks.close()
        if failure == nil && settle { s.chain.finishPeriod() }
        s.shipper.finish(giveUpAt: Clock.now() + options.stopTimeout)
        let shipped = shipping.wait() && !s.shipper.failed
        if let failure {
            if failure is FleetBusy { return .busy }
            report(e, failure)
            e.status.restarted()
            e.session = nil  // starts again from the repository
            e.listed = (nil, nil)
            if let lost = failure as? FollowerLeaseLost { _ = lost; stop() }
            return .retry
        }
        if !shipped {
            e.session = nil
            e.listed = (nil, nil)
            return isStopping ? .done(complete: false, recorded: true) : .retry
        }
        // (States recorded, or a fold: the period has segments to gather.)
        let recorded = s.chain.number != before.1 || (before.0 != "" && before.0 != s.chain.chain)
        e.dbAtSlice = dbNow
        return .done(complete: true, recorded: recorded)
    }

    /// The index objects for a new session's collector: listed again when
    /// the listing is a minute old (one listing for every session made
    /// within a minute, where each listed them; and a gathering reads only
    /// the index objects written since, not all those since the start).
    func currentIndexes() -> Set<ObjectKey>? {
        indexListing.withLock { listing in
            if Clock.now() - listing.at >= 60 {
                listing = ((try? repository.indexObjectKeys()).map(Set.init), Clock.now())
            }
            return listing.keys
        }
    }

    /// Whether `e` makes progress (FollowerWatch: a stall said once, and
    /// raised as litectl_replicate_stalled), once an interval at most.
    func lookForStall(_ e: FleetEntry, caughtUp: Bool) {
        e.status.watch.look(shipped: e.status.statesShipped, caughtUp: caughtUp, wal: e.source + "-wal", interval: options.interval) { [events] message in
            events(.problem(database: e.source, message: message, retrying: true))
        }
    }

    func report(_ e: FleetEntry, _ error: any Error) {
        e.status.noteError()
        let message = (error as? DatabaseError)?.description ?? (error as? StoreError)?.description ?? "\(error)"
        events(.problem(database: e.source, message: message, retrying: !isStopping))
    }

    func makeSession(_ e: FleetEntry, pageSize: Int) -> FleetSession {
        let source = e.source, status = e.status, events = self.events, control = self.control
        let shipper = Shipper(repository: repository, database: source, lease: lease, limit: DatabaseFollower.queueLimit,
                              fleetLock: fleetLock, indexes: currentIndexes(), shipped: { unit, bytes in
            status.shipped(unit, bytes: bytes)
            events(.shipped(ReplicateEvent.Shipment(database: source, unit: unit, bytes: bytes)))
        }, problem: { message, retrying in
            status.noteError()
            events(.problem(database: source, message: message, retrying: retrying))
        })
        return FleetSession(pageSize: pageSize, shipper: shipper) { [repository, options, fleetLock, startBatch] resyncing in
            let chain = ChainWriter(source: source, path: FilePaths.resolved(source), repository: repository, options: options, pageSize: pageSize,
                                    shipper: shipper, status: status, report: events,
                                    mayWait: { !control.stopRequested && resyncing.withLock { $0 } })
            chain.listed = e.listed
            chain.fleet = (fleetLock, startBatch)
            return chain
        }
    }
}

/// No snapshot could be pinned down (commits kept landing): the slice is tried again.
struct FleetBusy: Error {}

extension WALLoop {
    /// A fleet's slice: a read mark, the commits since the last state (from
    /// the -wal when it still holds them, else a resync), or the chain's start
    /// when there is none yet; then a segment cut. The caller lets the marks go.
    /// `databaseChanged`: the database file changed since the last slice.
    /// With no frame in the -wal then, and none at the last state, the -wal
    /// position tells nothing (the application's last connection checkpointed
    /// and removed the -wal meanwhile, and a new one starts with the same
    /// empty header): every page is compared.
    func catchUp(databaseChanged: Bool) throws {
        guard let mark = try marks.beginNext() else { throw FleetBusy() }
        do {
            let wasEmpty = chain.chain.isEmpty
            let resyncs = status.resyncs
            if wasEmpty { try start(at: mark) } else { try resume(at: mark) }
            let continued = !wasEmpty || chain.listed?.chainBase?.id == chain.chain
            if databaseChanged && continued && status.resyncs == resyncs && mark.header.maxFrame == 0 && chain.position.frame == 0 {
                try resync(at: mark, reason: "the database file changed and the -wal holds no frame (checkpointed and removed meanwhile)")
            }
        } catch {
            marks.drop(mark)
            throw error
        }
        marks.hold(mark)
        // The follower's own checkpoint, as a single database's follower
        // makes (--checkpoint-frames, WALCheckpoint.swift): its -wal stays bounded.
        if checkpointDue(mark) { try checkpoint() }
        try chain.cut()
    }
}
