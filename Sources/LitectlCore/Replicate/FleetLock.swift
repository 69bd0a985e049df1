// One shared repository lock for a whole fleet (`replicate --dir`), held by
// the fleet rather than by each database's slice: a slice's unit enters it
// (taking it when none is held) and leaves it, so that a round of slices of
// many databases costs no lock request at all, where a lock of its own cost
// each slice two requests before its first object and one after its last
// (half of what a slice of a small commit sends). It is let go in a lull (no
// unit for a second) or, once 5 s old, when the last unit in it ends, so
// that a prune, which waits for shared locks, gets in between, as it did
// between one follower's units (Shipper.lockHold). Part of the replicate
// capability, built on Repository/'s locks.
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
    /// Locks taken so far (for tests and -v).
    private(set) var taken = 0

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
        while taking { condition.wait() }
        if lock == nil {
            taking = true
            condition.unlock()
            let result = Result { try RepoLock(repository, exclusive: false, command: "replicate", timeout: 0) }
            condition.lock()
            taking = false
            condition.broadcast()
            let taken = try result.get()
            lock = taken
            takenAt = Clock.now()
            self.taken += 1
        }
        inside += 1
    }

    /// A unit ended (its objects durable, or given up): the lock goes when
    /// it was the last one inside and the lock is `Shipper.lockHold` old.
    func leave() {
        condition.lock()
        inside = max(0, inside - 1)
        let now = Clock.now()
        lastLeft = now
        // (Released under the condition: a lock taken next is never written
        // before this one is removed, so the fleet never holds two.)
        if inside == 0 && now - takenAt >= Shipper.lockHold { lock?.release(); lock = nil }
        condition.unlock()
    }

    /// Called every second or so (the fleet's lease keeper): the lock
    /// rewritten when it is old (RepoLock.refresh), and let go after a second with no unit.
    func tend() {
        condition.lock()
        if let lock, inside == 0 && !taking && Clock.now() - lastLeft >= 1 {
            lock.release()
            self.lock = nil
        } else if let lock {
            try? lock.refresh()
        }
        condition.unlock()
    }

    /// Lets the lock go (the fleet stops).
    func release() {
        condition.lock()
        lock?.release()
        lock = nil
        condition.unlock()
    }

    var isHeld: Bool { condition.lock(); defer { condition.unlock() }; return lock != nil }
}
