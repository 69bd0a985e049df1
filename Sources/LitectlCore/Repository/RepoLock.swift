// Repository locks: each run writes `locks/<random id>` (host, pid, time,
// exclusive or not) and then lists the others. Backups hold shared locks, so
// several back up at once; prune holds an exclusive one. An exclusive lock
// that finds only shared ones waits with its lock in place (a shared lock
// taken meanwhile sees it and steps back), so that a prune gets in under
// followers and backups that never all pause at once. A lock whose process
// is gone (same host) or that was not refreshed for 30 minutes is stale: it
// is ignored, reported, and removed by `litectl unlock`. `list` also names
// followers' leases (FollowerLease.swift), which no lock conflicts with, so
// that `unlock` removes the stale ones too.
import Foundation

public struct RepoLockInfo: Sendable {
    public var key: String
    public var hostname: String
    public var pid: Int32
    public var time: Double
    public var exclusive: Bool
    public var command: String
    /// A follower's lease (`followers/<id>`), not a lock: its own rules say when it is stale.
    public var lease: FollowerLeaseInfo? = nil

    /// Why the lock is stale, or nil when it is held by a live run.
    public var staleReason: String? {
        if let lease { return lease.staleReason }
        if sameBytes(hostname, RepoLock.hostname) && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH {
            return "process \(pid) on \(hostname) is gone"
        }
        if Clock.wall() - time > RepoLock.staleAge { return "not refreshed for \(Int((Clock.wall() - time) / 60)) minutes" }
        return nil
    }

    public var summary: String {
        if let lease {
            return lease.path.isEmpty ? "unreadable lease of a follower" : "lease of \(lease.path) held by \(lease.summary), renewed \(Timestamp.iso8601(lease.time))"
        }
        return "\(exclusive ? "exclusive" : "shared") lock by \(command) (pid \(pid) on \(hostname), since \(Timestamp.iso8601(time)))"
    }
}

public final class RepoLock: @unchecked Sendable {
    static let staleAge: Double = 30 * 60
    static let refreshAge: Double = 5 * 60
    public static let hostname: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        gethostname(&buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    let repository: Repository
    let exclusive: Bool
    let command: String
    private(set) var key: String
    private var written: Double
    /// Stale locks of others that were ignored (for a warning).
    public private(set) var ignoredStale: [RepoLockInfo] = []

    /// Takes a lock, waiting up to `timeout` seconds for conflicting ones to go.
    public init(_ repository: Repository, exclusive: Bool, command: String, timeout: Double) throws {
        self.repository = repository; self.exclusive = exclusive; self.command = command
        key = ""; written = 0
        let deadline = Deadline(seconds: timeout)
        var steppedBack = false
        while true {
            // A shared lock that stepped back for an exclusive one looks
            // before it writes again: many runs retrying would otherwise
            // keep a lock object in every listing the exclusive one makes.
            if steppedBack && !exclusive && !deadline.passed, try Self.exclusiveLock(repository, except: "") != nil {
                usleep(500_000)
                continue
            }
            try write()
            var conflicts: [RepoLockInfo] = []
            do {
                conflicts = try conflicting()
                // An exclusive lock waits in place for shared ones to go, unless
                // an exclusive lock before it is there too (`precedes`): that
                // one waits, this one steps back, so two never wait for each other.
                // (Signals meanwhile are recorded: the lock is removed before the run ends.)
                func waits() -> Bool { exclusive && !conflicts.isEmpty && !conflicts.contains { $0.exclusive && precedes($0) } }
                if waits() {
                    try Interruption.deferring {
                        while waits() && !deadline.passed && Interruption.received == nil {
                            usleep(500_000)
                            try refresh()
                            conflicts = try conflicting()
                        }
                    }
                    if let signal = Interruption.received { throw Interrupted(signal: signal, path: repository.location) }
                }
            } catch {
                release()
                throw error
            }
            if conflicts.isEmpty { return }
            release()
            if deadline.passed {
                throw StoreError(.other, location: repository.location,
                                 message: "repository is locked: \(conflicts[0].summary); gave up after \(timeout) s")
            }
            steppedBack = conflicts.contains { $0.exclusive }
            usleep(500_000)
        }
    }

    /// Whether `other`, an exclusive lock, was taken before this one: the
    /// older by the time each lock records, then by name (every run orders
    /// two locks alike).
    private func precedes(_ other: RepoLockInfo) -> Bool {
        other.time != written ? other.time < written : other.key < key
    }

    /// Whether another run's exclusive lock (not stale) waits or is held,
    /// for a holder of a shared lock that can let it go between steps (the
    /// fleet's, replicate --dir). One listing, and a read of each lock but
    /// `key` (the caller's own).
    static func exclusiveWaiting(_ repository: Repository, except key: String) throws -> Bool {
        try exclusiveLock(repository, except: key) != nil
    }

    /// Another run's exclusive lock (not stale), if one is there.
    static func exclusiveLock(_ repository: Repository, except key: String) throws -> RepoLockInfo? {
        for object in try repository.store.list(prefix: "locks/") where isLockKey(object.key) && object.key != key {
            guard let lock = try read(repository, object.key) else { continue }
            if lock.exclusive && lock.staleReason == nil { return lock }
        }
        return nil
    }

    /// This lock's name (empty once let go).
    var name: String { key }

    private func write() throws {
        let now = Clock.wall()
        let body = JSON.object([("hostname", .string(Self.hostname)), ("pid", .integer(Int64(getpid()))),
                                ("time_unix", .number(now)), ("exclusive", .bool(exclusive)),
                                ("command", .string(command))])
        let (id, _) = try repository.putObject(prefix: "locks", Array(body.compact.utf8) + randomBytes(16))
        key = "locks/" + id
        written = now
    }

    private func randomBytes(_ n: Int) -> [UInt8] {
        // Appended after the JSON so two identical lock bodies get different ids; ignored when read.
        Array(" ".utf8) + (0..<n).map { _ in UInt8(ascii: "a") + UInt8.random(in: 0..<26) }
    }

    private func conflicting() throws -> [RepoLockInfo] {
        var out: [RepoLockInfo] = []
        ignoredStale = []
        for lock in try Self.list(repository, leases: false) where lock.key != key {
            guard exclusive || lock.exclusive else { continue }
            if lock.staleReason != nil { ignoredStale.append(lock); continue }
            out.append(lock)
        }
        return out
    }

    /// Rewrites the lock when it is older than the refresh age (long runs call this between steps).
    public func refresh() throws {
        guard Clock.wall() - written > Self.refreshAge else { return }
        let old = key
        try write()
        try? repository.store.delete(old)
    }

    public func release() {
        if !key.isEmpty { try? repository.store.delete(key); key = "" }
    }

    /// A lock's JSON: its bytes without the space and random letters that
    /// follow it (`randomBytes`), found from the end, so that a `}` inside a
    /// value (a host name) does not cut the object short.
    static func lockJSON(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        // A JSON object ends with `}`: letters after it and a space are the tail.
        let letters = bytes.reversed().prefix { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }.count
        guard letters > 0, bytes.count > letters, bytes[bytes.count - letters - 1] == UInt8(ascii: " ") else { return bytes[...] }
        return bytes.dropLast(letters + 1)
    }

    /// Whether `key` is a lock's name as litectl makes it (`locks/` and 64
    /// hex digits): anything else under `locks/` is not a lock, and no
    /// command reads or removes it as one.
    static func isLockKey(_ key: String) -> Bool { isRandomKey(key, under: "locks/") }

    /// Whether `key` is `folder` and 64 lowercase hex digits, the name
    /// litectl gives the objects it makes at random (locks, leases).
    static func isRandomKey(_ key: String, under folder: String) -> Bool {
        guard key.hasPrefix(folder) else { return false }
        let name = Array(key.utf8.dropFirst(folder.utf8.count))
        return name.count == 64
            && name.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    /// The lock `key`; one whose bytes cannot be read as a lock is an
    /// exclusive lock of an unknown owner (stale); nil when it is gone
    /// meanwhile (let go). A store that cannot be reached, or a local I/O
    /// error, throws: a live lock is never taken for an unreadable one
    /// because one request failed.
    static func read(_ repository: Repository, _ key: String) throws -> RepoLockInfo? {
        let bytes: [UInt8]
        do { bytes = try repository.getObject(key) } catch let error as StoreError {
            switch error.kind {
            case .notFound: return nil
            case .unavailable, .io, .denied, .noSuchContainer: throw error
            case .other: return RepoLockInfo(key: key, hostname: "?", pid: 0, time: 0, exclusive: true, command: "unreadable lock")
            }
        } catch {
            return RepoLockInfo(key: key, hostname: "?", pid: 0, time: 0, exclusive: true, command: "unreadable lock")
        }
        guard let o = try? JSONSerialization.jsonObject(with: Data(lockJSON(bytes))) as? [String: Any] else {
            return RepoLockInfo(key: key, hostname: "?", pid: 0, time: 0, exclusive: true, command: "unreadable lock")
        }
        return RepoLockInfo(key: key, hostname: o["hostname"] as? String ?? "?",
                            pid: Int32((o["pid"] as? NSNumber)?.intValue ?? 0),
                            time: (o["time_unix"] as? NSNumber)?.doubleValue ?? 0,
                            exclusive: (o["exclusive"] as? Bool) ?? true, command: o["command"] as? String ?? "?")
    }

    /// Every lock in the repository (unreadable ones count as stale ones of
    /// unknown owner), then, with `leases`, every follower's lease. Files
    /// under `locks/` not named as litectl names locks are left out
    /// (`isLockKey`).
    public static func list(_ repository: Repository, leases: Bool = true) throws -> [RepoLockInfo] {
        var out: [RepoLockInfo] = []
        for object in try repository.store.list(prefix: "locks/") where isLockKey(object.key) {
            if let lock = try read(repository, object.key) { out.append(lock) }
        }
        if leases {
            out += try FollowerLease.list(repository).map {
                RepoLockInfo(key: $0.key, hostname: $0.hostname, pid: $0.pid, time: $0.time, exclusive: false, command: "replicate", lease: $0)
            }
        }
        return out
    }
}
