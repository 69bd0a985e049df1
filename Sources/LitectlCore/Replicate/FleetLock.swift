// One shared repository lock for a whole fleet (`replicate --dir`), held by
// the fleet rather than by each database's slice: a slice's unit enters it
// (taking it when none is held) and leaves it, so that a round of slices of
// many databases costs no lock request at all, where a lock of its own cost
// each slice two requests before its first object and one after its last
// (half of what a slice of a small commit sends). It is let go in a lull (no
// unit for a second) or, once 5 s old, when the last unit in it ends, so
// that a prune, which waits for shared locks, gets in between, as it did
// between one follower's units (Shipper.lockHold). Under load that never
// pauses (units of many databases overlapping), the fleet looks once a
// second, when the lock is 5 s old, for an exclusive lock waiting (a prune
// waits with its lock in place: RepoLock): then new units wait until those
// inside end, the lock goes, and the next unit's lock steps back until the
// prune is done. Part of the replicate capability, built on Repository/'s locks.
import Foundation

final class FleetLock: @unchecked Sendable {
    let repository: Repository
    private let condition = NSCondition()
    private var lock: RepoLock?
    /// A thread is taking the lock (the others wait for it, not take a second).
    private var taking = false
    /// Units inside the lock now.
    private var inside = 0
    private var takenAt = 0.0
    private var lastLeft = 0.0
    /// An exclusive lock waits: no unit enters until the lock is let go.
    private var draining = false
    /// The last refusal to take the lock (an exclusive lock there), and
    /// when: for a second after it, units are refused without asking
    /// again, so that the fleet's many units do not keep a shared lock
    /// object in the repository that the prune keeps seeing.
    private var refusal: (error: any Error, at: Double)?
    /// Locks taken so far, and times a lock was asked for (for tests and -v).
    private var takenCount = 0, askedCount = 0
    var taken: Int { condition.lock(); defer { condition.unlock() }; return takenCount }
    var asked: Int { condition.lock(); defer { condition.unlock() }; return askedCount }

    init(repository: Repository) { self.repository = repository }

    /// Enters, trying again every half second for up to `timeout` seconds
    /// while the lock cannot be taken (a prune holds the repository).
    func enter(timeout: Double) throws {
        let deadline = Deadline(seconds: timeout)
        while true {
            do { return try enter() } catch {
                if deadline.passed { throw error }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
    }

    /// A unit begins: the lock is held (taken when it is not) until `leave()`.
    /// Throws when it cannot be taken (the shipper retries, as for a lock of its own).
    func enter() throws {
        condition.lock(); defer { condition.unlock() }
        while taking || draining { condition.wait() }
        if lock == nil {
            if let refusal, Clock.now() - refusal.at < 1 { throw refusal.error }
            taking = true
            askedCount += 1
            condition.unlock()
            let result = Result { try RepoLock(repository, exclusive: false, command: "replicate", timeout: 0) }
            condition.lock()
            taking = false
            condition.broadcast()
            if case .failure(let error) = result { refusal = (error, Clock.now()) }
            let taken = try result.get()
            lock = taken
            takenAt = Clock.now()
            takenCount += 1
        }
        inside += 1
    }

    /// A unit ended (its objects durable, or given up): the lock goes when
    /// it was the last one inside and the lock is `Shipper.lockHold` old
    /// (or an exclusive lock waits).
    func leave() {
        condition.lock()
        inside = max(0, inside - 1)
        let now = Clock.now()
        lastLeft = now
        if inside == 0 && (now - takenAt >= Shipper.lockHold || draining) { letGo() }
        condition.unlock()
    }

    /// (Under the condition: a lock taken next is never written before this
    /// one is removed, so the fleet never holds two.)
    private func letGo() {
        lock?.release()
        lock = nil
        draining = false
        condition.broadcast()
    }

    /// Called every second or so (the fleet's lease keeper): the lock
    /// rewritten when it is old (RepoLock.refresh), let go after a second
    /// with no unit, and, once `Shipper.lockHold` old, let go as soon as
    /// its units end when an exclusive lock waits (one listing a second
    /// while so held: never for an idle fleet, which holds no lock).
    func tend() {
        condition.lock()
        if lock != nil, inside == 0 && !taking && Clock.now() - lastLeft >= 1 {
            letGo()
            condition.unlock()
            return
        }
        try? lock?.refresh()
        let own = lock?.name
        let look = own != nil && Clock.now() - takenAt >= Shipper.lockHold
        condition.unlock()
        guard look, let own else { return }
        // (While draining, looked at again: a prune that gave up meanwhile
        // no longer holds the fleet's units back.)
        let waiting = (try? RepoLock.exclusiveWaiting(repository, except: own)) ?? false
        condition.lock()
        if lock?.name == own {
            if waiting {
                draining = true
                if inside == 0 { letGo() }
            } else if draining {
                draining = false
                condition.broadcast()
            }
        }
        condition.unlock()
    }

    /// Lets the lock go (the fleet stops).
    func release() {
        condition.lock()
        letGo()
        condition.unlock()
    }

    var isHeld: Bool { condition.lock(); defer { condition.unlock() }; return lock != nil }
}
