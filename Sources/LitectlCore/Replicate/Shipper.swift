// The follower's writer to the repository, on a thread of its own so that
// the follower keeps reading the -wal (and taking turns with its read marks,
// so the application's checkpoints proceed) while an object store is slow
// or failing. Items come in write order through a queue bounded in bytes;
// each unit is written under a shared lock, kept from unit to unit for up to 5 s (prune waits for it, and gets in
// between units); an object that cannot be written is retried with backoff
// until it is, never skipped. Between writes it has the repository remove
// what gatherings replace and gather a closed chain's segments and index
// objects (Repository/ReplicaCollector.swift). Part of the replicate
// capability (built on Repository/'s locks, sealed objects and collector).
import Foundation

final class Shipper: @unchecked Sendable {
    let repository: Repository
    let database: String
    private let condition = NSCondition()
    private var queue: [UploadItem] = []
    private var queuedBytes = 0
    /// The follower lets its mark go while more than this many bytes wait to be written.
    let limit: Int
    private var stopDeadline: Double?
    private(set) var failed = false
    /// Called on the shipper's thread after each unit is durable, and on each failure.
    let shipped: (ShippedUnit, Int64) -> Void
    let problem: (String, Bool) -> Void
    /// The follower's own objects: what gatherings replaced, removed (Repository/ReplicaCollector.swift).
    let collector: ReplicaCollector

    /// The database's lease: no unit is written while it is not held.
    let lease: FollowerLease?
    /// (replicate --dir) The fleet's shared lock, which each unit enters
    /// rather than take a lock of its own (FleetLock.swift).
    let fleetLock: FleetLock?

    /// `indexes`: (replicate --dir) the index objects the fleet listed
    /// before its first pack, which name none of its packs: not listed again for each database.
    init(repository: Repository, database: String, lease: FollowerLease? = nil, limit: Int = 16 << 20,
         fleetLock: FleetLock? = nil, indexes: Set<ObjectKey>? = nil,
         shipped: @escaping (ShippedUnit, Int64) -> Void, problem: @escaping (String, Bool) -> Void) {
        self.repository = repository; self.database = database; self.lease = lease; self.limit = limit
        self.fleetLock = fleetLock
        self.shipped = shipped; self.problem = problem
        collector = ReplicaCollector(repository: repository)
        if let indexes { collector.listed(indexes) }
    }

    /// Queues an item. With `mayWait`, waits while the queue is over half as
    /// much again as its limit and `mayWait()` says so (a resync, which
    /// reads the whole database while it holds its mark, would otherwise
    /// queue all of it); else never: the follower lets its mark go once the
    /// queue is over the limit (Follower.stall), and must never wait for
    /// the queue while it holds a mark the application's checkpoints wait
    /// for (in the follower's own RESTART checkpoint, the write lock).
    func enqueue(_ item: UploadItem, mayWait: () -> Bool = { false }) {
        condition.lock(); defer { condition.unlock() }
        while queuedBytes > limit + limit / 2 && !failed && mayWait() { _ = condition.wait(until: Date().addingTimeInterval(0.1)) }
        queue.append(item)
        queuedBytes += item.size
        condition.broadcast()
    }

    /// The end of the queue: retries give up at `deadline` (monotonic, `Clock.now()`),
    /// and the finish is queued without waiting for room (a full queue
    /// during a store outage would otherwise hold a stop past its timeout).
    func finish(giveUpAt deadline: Double) {
        giveUp(at: deadline)
        enqueue(.finish)
    }

    var pendingBytes: Int { condition.lock(); defer { condition.unlock() }; return queuedBytes }

    /// From now on, give up retrying at `deadline` (monotonic, `Clock.now()`).
    func giveUp(at deadline: Double) {
        condition.lock(); stopDeadline = deadline; condition.broadcast(); condition.unlock()
    }

    /// The next item; nil when none came within `timeout` seconds.
    private func next(timeout: Double? = nil) -> UploadItem? {
        condition.lock(); defer { condition.unlock() }
        let deadline = timeout.map { Date().addingTimeInterval($0) }
        while queue.isEmpty {
            if let deadline {
                if !condition.wait(until: deadline) && queue.isEmpty { return nil }
            } else {
                condition.wait()
            }
        }
        let item = queue.removeFirst()
        queuedBytes -= item.size
        condition.broadcast()
        return item
    }

    private var deadlinePassed: Bool {
        condition.lock(); defer { condition.unlock() }
        return stopDeadline.map { Clock.now() >= $0 } ?? false
    }

    /// Runs `body` until it succeeds, waiting 0.5 s, 1 s, 2 s ... (at most
    /// 30 s) between tries; false once the stop deadline has passed.
    /// With `skippingPermanent` (a gathering, which is an optimisation), an
    /// error that no retry mends (a damaged or missing object, a refusal)
    /// is reported and the step skipped (true): it never blocks shipping.
    private func retrying(_ what: String, skippingPermanent: Bool = false, _ body: () throws -> Void) -> Bool {
        var delay = 0.5
        while true {
            do { try body(); return true } catch {
                if let lost = error as? FollowerLeaseLost { problem(lost.description, false); return false }
                let message = (error as? StoreError)?.description ?? (error as? DatabaseError)?.description ?? "\(error)"
                if skippingPermanent && !Self.isTransient(error) {
                    problem("\(what): \(message); skipped (the segments stay as they are)", false)
                    return true
                }
                if deadlinePassed { problem("\(what): \(message); giving up", false); return false }
                problem("\(what): \(message); retrying in \(String(format: "%.1f", delay)) s", true)
                var waited = 0.0
                while waited < delay && !deadlinePassed { Thread.sleep(forTimeInterval: 0.1); waited += 0.1 }
                delay = min(30, delay * 2)
            }
        }
    }

    /// A store that could not be reached or a local I/O error: worth retrying.
    static func isTransient(_ error: any Error) -> Bool {
        guard let error = error as? StoreError else { return false }
        return error.kind == .unavailable || error.kind == .io
    }

    /// How long the shared lock is kept from unit to unit.
    static let lockHold = 5.0

    /// Writes items until `.finish`. Returns false when something could not be written.
    func run() -> Bool {
        var lock: RepoLock?
        var lockTaken = 0.0
        var unitBytes: Int64 = 0
        var inUnit = false
        // A unit whose spooled pack could not be read: the rest of it is let
        // be, up to its end (its index object must not be written, nor what
        // it replaces removed).
        var abandoned = false
        // Inside the fleet's lock (replicate --dir), from a unit's begin to its end.
        var entered = false
        func leave() { if entered { entered = false; fleetLock?.leave() } }
        defer { lock?.release(); leave() }
        while true {
            // The shared lock is kept from unit to unit (each lock is two
            // requests more, and a delete), but let go when, between units,
            // none comes for a second, and after each unit once it is 5 s
            // old: a prune, which retries every 0.5 s, gets in between. It is
            // never let go inside a unit (a prune would take the unit's packs,
            // which no index object names yet, for garbage).
            guard let item = next(timeout: lock != nil && !inUnit ? 1 : nil) else {
                lock?.release(); lock = nil
                continue
            }
            if failed { leave(); if case .finish = item { return false }; continue }
            if abandoned {
                if case .end = item { abandoned = false; inUnit = false; leave() }
                continue
            }
            switch item {
            case .begin:
                unitBytes = 0
                inUnit = true
                if !leaseHeld() { fail(); continue }
                if let fleetLock {
                    if !entered {
                        if !retrying("\(repository.location): cannot take a shared lock", { try fleetLock.enter() }) { fail(); continue }
                        entered = true
                    }
                } else {
                    if lock != nil { continue }
                    if !retrying("\(repository.location): cannot take a shared lock", {
                        lock = try RepoLock(repository, exclusive: false, command: "replicate", timeout: 0)
                        lockTaken = Clock.now()
                    }) { fail(); continue }
                }
                // (When they cannot be listed, no pack is ever removed: prune does it.)
                if !collector.listedIndexes, !retrying("\(repository.location): cannot list index objects", skippingPermanent: true, {
                    try collector.listIndexes()
                }) { fail() }
            case .put(let object, let role):
                if !leaseHeld() { fail(); continue }
                if !retrying("\(repository.objectName(object.key)): cannot write", {
                    try lock?.refresh()
                    try repository.put(object)
                }) { fail(); continue }
                unitBytes += Int64(object.bytes.count)
                switch role {
                case .segment: collector.wroteSegment(object.key)
                case .pack: collector.wrotePack(object.key)
                case .index: collector.wroteIndex(object.key, gathered: false)
                case .gatheredIndex: collector.wroteIndex(object.key, gathered: true)
                default: break
                }
            case .putSpooled(let key, let file, let offset, let count):
                let bytes: [UInt8]
                do { bytes = try file.read(offset: offset, count: count) } catch {
                    problem("\((error as? StoreError)?.description ?? "\(error)"); the gathering is let be (the segments stay as they are)", false)
                    abandoned = true
                    continue
                }
                if !retrying("\(repository.objectName(key)): cannot write", {
                    try lock?.refresh()
                    try repository.put(key, bytes)
                }) { fail(); continue }
                unitBytes += Int64(count)
            case .replace(let replaced):
                if !retrying("\(repository.location): cannot remove what a gathering replaced", skippingPermanent: true, {
                    try collector.replace(replaced)
                }) { fail() }
            case .closeChain(let chain):
                if !retrying("\(repository.location): cannot gather the segments of chain \(chain.prefix(8))", skippingPermanent: true, {
                    unitBytes += try collector.closeChain(chain)
                }) { fail() }
            case .end(let unit):
                inUnit = false
                leave()
                if Clock.now() - lockTaken >= Self.lockHold { lock?.release(); lock = nil }
                shipped(unit, unitBytes)
            case .tidy:
                guard collector.hasReplacedPacks else { continue }
                do {
                    if let fleetLock {
                        try fleetLock.enter()
                        defer { fleetLock.leave() }
                        try collector.reclaim()
                        continue
                    }
                    if lock == nil {
                        lock = try RepoLock(repository, exclusive: false, command: "replicate", timeout: 0)
                        lockTaken = Clock.now()
                    }
                    try collector.reclaim()
                } catch {
                    let message = (error as? StoreError)?.description ?? (error as? DatabaseError)?.description ?? "\(error)"
                    problem("\(repository.location): cannot remove the packs the last gathering replaced: \(message); they are left to prune", false)
                }
            case .finish:
                return true
            }
        }
    }

    /// Whether the database's lease is held, renewed first when it ran out
    /// (the store was unreachable: retried as any write is); false once
    /// another follower took it over, or at the stop deadline. Asked before
    /// each unit and each object written: nothing is written for a database
    /// this follower does not hold.
    private func leaseHeld() -> Bool {
        guard let lease, !lease.isHeld else { return true }
        return retrying("\(repository.location): cannot renew the lease of \(database)") { try lease.renew(force: true) }
    }

    private func fail() {
        condition.lock(); failed = true; condition.broadcast(); condition.unlock()
    }
}
