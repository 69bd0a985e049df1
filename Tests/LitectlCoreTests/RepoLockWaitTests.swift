// An exclusive lock (prune) that finds shared ones waits with its lock in
// place, so that shared locks taken meanwhile step back and it gets in once
// the holders let go (Repository/RepoLock.swift); of two exclusive locks
// waiting, the older waits and the newer steps back; and the fleet's lock
// (Replicate/FleetLock.swift), held by units that overlap without pause, is
// let go for a waiting prune and taken again once the prune is done.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct RepoLockWaitTests {
    func makeRepository(_ folder: TemporaryFolder) throws -> (Repository, FolderStore) {
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        return (try Repository.initialize(store, secret: nil, version: Repository.version), store)
    }

    /// Whether an exclusive lock object is in the repository now.
    func exclusiveLockThere(_ repository: Repository) -> Bool {
        ((try? RepoLock.list(repository, leases: false)) ?? []).contains { $0.exclusive }
    }

    /// Takes an exclusive lock on a thread of its own; the lock, or the error, once it ends.
    final class Taker: @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)
        private(set) var result: Result<RepoLock, any Error>?
        private(set) var at = 0.0
        init(_ repository: Repository, timeout: Double) {
            Thread.detachNewThread { [self] in
                result = Result { try RepoLock(repository, exclusive: true, command: "prune", timeout: timeout) }
                at = Clock.now()
                done.signal()
            }
        }
        func wait(_ seconds: Double) -> RepoLock? {
            guard done.wait(timeout: .now() + seconds) == .success else { return nil }
            return try? result?.get()
        }
    }

    @Test func anExclusiveLockWaitsInPlaceSoSharedOnesStepBackAndGetsInWhenTheyGo() throws {
        let folder = try TemporaryFolder("lock-wait")
        let (repository, _) = try makeRepository(folder)
        let backup = try RepoLock(repository, exclusive: false, command: "backup", timeout: 0)
        let prune = Taker(repository, timeout: 30)
        #expect(waitUntil(10, every: 0.02) { exclusiveLockThere(repository) }, "the prune's lock is written")
        // For a second and a half (three of the prune's looks), every shared
        // lock asked for finds the prune's in place and steps back.
        var refused = 0
        for _ in 0..<6 {
            Thread.sleep(forTimeInterval: 0.25)
            do {
                try RepoLock(repository, exclusive: false, command: "backup", timeout: 0).release()
            } catch { refused += 1 }
        }
        #expect(refused == 6, "\(6 - refused) of 6 shared locks were taken while a prune waited")
        #expect(prune.wait(0) == nil, "the prune does not get in while the backup holds its lock")
        backup.release()
        let pruneLock = try #require(prune.wait(20), "the prune got in once the backup let go: \(String(describing: prune.result))")
        #expect(throws: (any Error).self) { try RepoLock(repository, exclusive: false, command: "backup", timeout: 0) }
        pruneLock.release()
        try RepoLock(repository, exclusive: false, command: "backup", timeout: 0).release()
    }

    @Test func ofTwoExclusiveLocksWaitingTheOlderGetsInFirstAndTheNewerAfterIt() throws {
        let folder = try TemporaryFolder("lock-wait")
        let (repository, _) = try makeRepository(folder)
        let backup = try RepoLock(repository, exclusive: false, command: "backup", timeout: 0)
        let first = Taker(repository, timeout: 30)
        #expect(waitUntil(10, every: 0.02) { exclusiveLockThere(repository) })
        Thread.sleep(forTimeInterval: 0.1)
        let second = Taker(repository, timeout: 30)
        Thread.sleep(forTimeInterval: 1.5)
        backup.release()
        let firstLock = try #require(first.wait(20), "the older prune got in: \(String(describing: first.result))")
        #expect(second.wait(1.5) == nil, "the newer one waits while the older holds the repository")
        firstLock.release()
        let secondLock = try #require(second.wait(20), "the newer prune got in after: \(String(describing: second.result))")
        #expect(first.at < second.at)
        secondLock.release()
    }

    @Test func theFleetsLockHeldByOverlappingUnitsIsLetGoForAWaitingPrune() throws {
        let folder = try TemporaryFolder("lock-wait")
        let (repository, _) = try makeRepository(folder)
        let fleet = FleetLock(repository: repository)
        let stop = Locked(false), units = Locked(0), failures = Locked(0)
        // Two workers whose units overlap: one is always inside.
        let group = DispatchGroup()
        for w in 0..<2 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                if w == 1 { Thread.sleep(forTimeInterval: 0.05) }
                while !stop.withLock({ $0 }) {
                    do { try fleet.enter() } catch {
                        failures.withLock { $0 += 1 }
                        Thread.sleep(forTimeInterval: 0.1)
                        continue
                    }
                    Thread.sleep(forTimeInterval: 0.1)
                    fleet.leave()
                    units.withLock { $0 += 1 }
                }
            }
        }
        // The fleet's keeper.
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            while !stop.withLock({ $0 }) { fleet.tend(); Thread.sleep(forTimeInterval: 0.2) }
        }
        defer { stop.withLock { $0 = true }; group.wait(); fleet.release() }
        #expect(waitUntil(10, every: 0.02) { fleet.isHeld })
        let prune = Taker(repository, timeout: 30)
        // The lock is looked at for a waiting prune once 5 s old.
        let pruneLock = try #require(prune.wait(25), "the prune got in under load: \(String(describing: prune.result))")
        let during = units.withLock { $0 }, asked = fleet.asked
        Thread.sleep(forTimeInterval: 2)
        #expect(units.withLock { $0 } - during <= 2, "no unit ran while the prune held the repository")
        // Units refused for a second after a refusal, not asking again each time.
        #expect(fleet.asked - asked <= 3, "\(fleet.asked - asked) lock requests in 2 s while the prune held it")
        pruneLock.release()
        let after = units.withLock { $0 }
        #expect(waitUntil(20) { units.withLock { $0 } > after + 5 }, "units go on once the prune is done")
        #expect(failures.withLock { $0 } >= 1, "a unit's lock stepped back while the prune waited or held")
    }
}

/// A folder store whose reads of one key fail as a store that cannot be
/// reached fails (fault injection over a real store, for the lock reader).
final class UnreachableKeyStore: ObjectStore, @unchecked Sendable {
    let inner: FolderStore
    let failing: Locked<String?> = Locked(nil)
    init(_ inner: FolderStore) { self.inner = inner }
    var location: String { inner.location }
    func put(_ key: String, _ bytes: [UInt8]) throws { try inner.put(key, bytes) }
    func get(_ key: String) throws -> [UInt8] {
        if failing.withLock({ $0 }) == key { throw StoreError(.unavailable, location: key, message: "503 Slow Down, after retries") }
        return try inner.get(key)
    }
    func get(_ key: String, offset: Int64, length: Int) throws -> [UInt8] { try inner.get(key, offset: offset, length: length) }
    func list(prefix: String) throws -> [StoredObject] { try inner.list(prefix: prefix) }
    func delete(_ key: String) throws { try inner.delete(key) }
}

extension RepoLockWaitTests {
    @Test func aLiveLockThatCannotBeReadForAMomentIsNeverTakenForAStaleOne() throws {
        let folder = try TemporaryFolder("lock-wait")
        let (_, folderStore) = try makeRepository(folder)
        let store = UnreachableKeyStore(folderStore)
        let repository = try Repository.open(store, secret: nil)
        let backup = try RepoLock(repository, exclusive: false, command: "backup", timeout: 0)
        defer { backup.release() }
        store.failing.withLock { $0 = backup.name }
        // The prune cannot read the backup's lock: it fails, never goes ahead, and leaves no lock.
        #expect(throws: StoreError.self) { try RepoLock(repository, exclusive: true, command: "prune", timeout: 2) }
        #expect(try folderStore.list(prefix: "locks/").map(\.key) == [backup.name])
        // Readable again: the prune waits for it as for any live lock.
        store.failing.withLock { $0 = nil }
        #expect(throws: StoreError.self) { try RepoLock(repository, exclusive: true, command: "prune", timeout: 1) }
        #expect(try folderStore.list(prefix: "locks/").map(\.key) == [backup.name])
    }
}

extension RepoLockWaitTests {
    @Test func aPruneThatGivesUpWhileTheFleetDrainsHoldsNoUnitBack() throws {
        let folder = try TemporaryFolder("lock-wait")
        let (repository, _) = try makeRepository(folder)
        let fleet = FleetLock(repository: repository)
        let stop = Locked(false)
        let keeper = Thread { while !stop.withLock({ $0 }) { fleet.tend(); Thread.sleep(forTimeInterval: 0.2) } }
        keeper.start()
        defer { stop.withLock { $0 = true }; fleet.release() }
        // A long unit (a large first copy) holds the fleet's lock past 5 s.
        try fleet.enter()
        let longUnitEnds = Clock.now() + 14
        Thread.sleep(forTimeInterval: 5.5)
        // A prune asks, the fleet drains, and the prune gives up before the long unit ends.
        #expect(throws: StoreError.self) { try RepoLock(repository, exclusive: true, command: "prune", timeout: 2.5) }
        // Another database's unit gets in once the prune is gone, not only when the long unit ends.
        let entered = Locked<Double?>(nil)
        Thread.detachNewThread { if (try? fleet.enter()) != nil { entered.withLock { $0 = Clock.now() }; fleet.leave() } }
        #expect(waitUntil(6) { entered.withLock { $0 } != nil }, "a unit entered while the long one was still inside")
        #expect((entered.withLock { $0 } ?? .infinity) < longUnitEnds - 2)
        fleet.leave()
    }
}
