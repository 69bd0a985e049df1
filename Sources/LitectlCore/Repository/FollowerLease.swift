// The lease a follower (`litectl replicate`) holds on each database it follows
// into a repository: `followers/<id>`, written when it starts and rewritten
// every 10 s, so that a second follower of the same database (host and path:
// the chains' identity), started on this host or another, by any path or URL
// to the repository, waits for the first and is refused after --timeout,
// naming it; and so that a follower started after one died takes over: at
// once when that process is gone from this host, else once its lease ran out
// (30 s without renewal). A follower whose own lease ran out (the store
// unreachable from it) ships nothing until it holds it again; one whose lease
// was taken over meanwhile stops following that database. (Two followers of
// one chain would both extend it, and their states would clash.) A fleet
// (`replicate --dir`) holds one lease on its folder, which covers every
// database under it: no lease object, no renewal per database.
import Foundation

/// A follower's lease as stored: which database, which process, since when,
/// last renewed when. The fields that tell whether the process is alive
/// (boot id, pid namespace, start time) are compared only by a reader on the
/// same host, boot and pid namespace; anywhere else the lease's age decides.
public struct FollowerLeaseInfo: Sendable {
    public var key: String
    /// The host and the database's resolved path (those of the chains it writes).
    public var hostname: String
    public var path: String
    public var pid: Int32
    public var bootID: String
    public var pidNamespace: String
    /// The process's start time in clock ticks since boot (/proc/PID/stat), so a reused pid is not taken for it.
    public var processStart: UInt64
    public var since: Double
    /// When it was last written (the follower's wall clock).
    public var time: Double
    public var leaseSeconds: Double
    /// A fleet's lease (`replicate --dir`): `path` is a folder, and it covers every database under it.
    public var folder = false

    /// Whether it is the lease of the database at `path` on `hostname` (compared as bytes).
    public func isOf(hostname: String, path: String) -> Bool {
        sameBytes(self.hostname, hostname) && sameBytes(self.path, path)
    }

    /// Whether it covers some database that a lease of `path` (a folder's
    /// when `folder`) on `hostname` covers too: the same path, or one under
    /// the other's folder.
    public func overlaps(hostname: String, path: String, folder: Bool) -> Bool {
        guard sameBytes(self.hostname, hostname) else { return false }
        if sameBytes(self.path, path) { return true }
        func under(_ inner: String, _ outer: String) -> Bool {
            let prefix = Array((outer.hasSuffix("/") ? outer : outer + "/").utf8)
            let bytes = Array(inner.utf8)
            return bytes.count > prefix.count && Array(bytes.prefix(prefix.count)) == prefix
        }
        return (self.folder && under(path, self.path)) || (folder && under(self.path, path))
    }

    /// Why the lease no longer holds, or nil while it does: its process is
    /// gone (a reader on the same host, boot and pid namespace can tell), or
    /// it was not renewed for its length, or its time is further ahead than
    /// that (by the reader's clock: hosts must keep their clocks within a few
    /// seconds of each other, as NTP does).
    public var staleReason: String? {
        let here = ProcessIdentity.current
        if sameBytes(hostname, RepoLock.hostname), !bootID.isEmpty, sameBytes(bootID, here.bootID),
           !pidNamespace.isEmpty, sameBytes(pidNamespace, here.pidNamespace), !ProcessIdentity.isAlive(pid, start: processStart) {
            return "process \(pid) on \(hostname) is gone"
        }
        let age = Clock.wall() - time
        if age > leaseSeconds { return "not renewed for \(Int(age)) s (its lease is \(Int(leaseSeconds)) s)" }
        // A time further ahead than a lease lasts is no renewal either (a
        // clock far ahead, or a hostile object): else it would hold for ever.
        if -age > leaseSeconds { return "renewed \(Int(-age)) s ahead of this host's clock (its lease is \(Int(leaseSeconds)) s)" }
        return nil
    }

    /// `replicate (pid 1234 on web-1, since 2026-11-29T10:00:00.000Z)`.
    public var summary: String { "replicate\(folder ? " --dir \(path)" : "") (pid \(pid) on \(hostname), since \(Timestamp.iso8601(since)))" }

    /// The object's JSON, keys in the order docs/repository.md gives.
    var json: JSON {
        .object([("hostname", .string(hostname)), ("path", .string(path)), ("pid", .integer(Int64(pid))),
                 ("boot_id", .string(bootID)), ("pid_namespace", .string(pidNamespace)),
                 ("process_start", .integer(Int64(clamping: processStart))), ("since_unix", .number(since)),
                 ("time_unix", .number(time)), ("lease_seconds", .number(leaseSeconds)), ("command", .string("replicate"))]
                + (folder ? [("scope", .string("folder"))] : []))
    }

    /// Reads a lease object's JSON; nil when it is not one.
    static func decode(_ bytes: [UInt8], key: String) -> FollowerLeaseInfo? {
        guard let o = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              let hostname = o["hostname"] as? String, let path = o["path"] as? String,
              let time = (o["time_unix"] as? NSNumber)?.doubleValue, time.isFinite else { return nil }
        let lease = (o["lease_seconds"] as? NSNumber)?.doubleValue ?? FollowerLease.leaseSeconds
        return FollowerLeaseInfo(key: key, hostname: hostname, path: path, pid: Int32(clamping: (o["pid"] as? NSNumber)?.int64Value ?? 0),
                                 bootID: o["boot_id"] as? String ?? "", pidNamespace: o["pid_namespace"] as? String ?? "",
                                 processStart: UInt64(clamping: (o["process_start"] as? NSNumber)?.int64Value ?? 0),
                                 since: (o["since_unix"] as? NSNumber)?.doubleValue ?? time, time: time,
                                 leaseSeconds: lease.isFinite && lease > 0 ? min(lease, 3600) : FollowerLease.leaseSeconds,
                                 folder: (o["scope"] as? String) == "folder")
    }
}

/// What tells this process apart from any other on the machine (Linux's
/// /proc; empty elsewhere, and then only the lease's age decides).
struct ProcessIdentity: Sendable {
    var bootID: String
    var pidNamespace: String
    var start: UInt64

    static let current: ProcessIdentity = {
        let boot = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let namespace = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) ?? ""
        return ProcessIdentity(bootID: boot, pidNamespace: namespace, start: startTicks(getpid()) ?? 0)
    }()

    /// Field 22 of /proc/PID/stat (after the command name, which may hold spaces and parentheses).
    static func startTicks(_ pid: Int32) -> UInt64? {
        guard pid > 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    /// Whether process `pid` of this pid namespace is the one that started at `start` (0: any).
    static func isAlive(_ pid: Int32, start: UInt64) -> Bool {
        guard pid > 0 else { return false }
        if kill(pid, 0) != 0 && errno == ESRCH { return false }
        guard start != 0, let now = startTicks(pid) else { return true }
        return now == start
    }
}

/// The lease was taken over by another follower while this one could not renew it.
public struct FollowerLeaseLost: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var holder: FollowerLeaseInfo?
    public var description: String {
        "\(path): its lease in the repository was taken over\(holder.map { " by \($0.summary)" } ?? "") while this follower could not renew it; no longer following it here"
    }
}

public final class FollowerLease: @unchecked Sendable {
    /// How long a lease holds without renewal, and how often it is renewed.
    public static let leaseSeconds: Double = 30
    public static let renewEvery: Double = 10
    /// A holder counts its lease as held for this much less than its length
    /// (a renewal's request may reach the store a little after it was sent).
    static let margin: Double = 3

    let repository: Repository
    public let path: String
    /// A fleet's lease on a folder (`replicate --dir`).
    public let folder: Bool
    public let hostname = RepoLock.hostname
    let key: String
    public let since: Double
    /// Guards the fields below; never held across a request (the follower
    /// asks `lost` at every look, holding its read mark).
    private let lock = NSLock()
    /// Makes renewals (the keeper's, the shipper's) one at a time.
    private let renewing = NSLock()
    /// Monotonic time at which the last successful renewal (or the taking) began.
    private var renewedAt: Double
    /// Monotonic time of the last renewal that failed (renewals are then tried every `renewEvery`).
    private var failedAt = -Double.infinity
    private var lostTo: FollowerLeaseLost?

    private init(repository: Repository, path: String, folder: Bool, key: String, since: Double, renewedAt: Double) {
        self.repository = repository; self.path = path; self.folder = folder; self.key = key; self.since = since; self.renewedAt = renewedAt
    }

    /// Takes the lease of the database at `path` (resolved), waiting up to
    /// `timeout` seconds for another follower's to end or go stale (nil
    /// when `cancelled` says so meanwhile); a store that cannot be reached
    /// is tried again (0.5 s, doubling to 30 s) for as long as it takes.
    /// `note` hears once that it waits, each retry, and each stale lease it
    /// takes over.
    /// With `folder`, `path` is a folder, and the lease covers every database under it.
    public static func acquire(_ repository: Repository, path: String, folder: Bool = false, timeout: Double, cancelled: () -> Bool = { false },
                               note: (String) -> Void = { _ in }) throws -> FollowerLease? {
        let key = "followers/" + Hex.encode((0..<32).map { _ in UInt8.random(in: 0...255) })
        let since = Clock.wall()
        let deadline = Deadline(seconds: timeout)
        var told = false
        var delay = 0.5
        func pause(_ seconds: Double) -> Bool {
            let until = Clock.now() + seconds
            while Clock.now() < until {
                if cancelled() { return false }
                usleep(50_000)
            }
            return true
        }
        while true {
            let started = Clock.now()
            let lease = FollowerLease(repository: repository, path: path, folder: folder, key: key, since: since, renewedAt: started)
            let found: FollowerLeaseInfo?
            do { found = try lease.claim(note: note) } catch let error as StoreError where error.kind == .unavailable || error.kind == .io {
                // A store that cannot be reached now: tried again, as the follower's writes are.
                note("cannot take its lease in the repository: \(error.description); retrying in \(String(format: "%.1f", delay)) s")
                guard pause(delay) else { return nil }
                delay = min(30, delay * 2)
                continue
            }
            if let holder = found {
                if deadline.passed {
                    throw StoreError(.other, location: repository.location,
                                     message: "\(path) is already followed into this repository by \(holder.summary); gave up after \(Self.seconds(timeout)) s (its lease is taken over once that follower is gone, or \(Int(holder.leaseSeconds)) s after its last renewal)")
                }
                if !told { note("followed into this repository by \(holder.summary); waiting up to \(Self.seconds(timeout)) s for it to stop"); told = true }
                guard pause(Double.random(in: 0.5...1.5)) else { return nil }
                continue
            }
            return lease
        }
    }

    /// `60`, `2.5`.
    static func seconds(_ s: Double) -> String { s == s.rounded() && abs(s) < 1e9 ? String(Int(s)) : String(s) }

    /// Writes this lease, then reads the others of the same database: nil
    /// when none holds (those gone stale are removed: taken over); else
    /// this lease is removed again and the holder returned. Every follower
    /// that finds another's live lease after writing its own yields, so two
    /// that start together may both yield, never both hold; they try again.
    private func claim(note: (String) -> Void) throws -> FollowerLeaseInfo? {
        try write()
        let others = try Self.list(repository).filter { $0.key != key && $0.overlaps(hostname: hostname, path: path, folder: folder) }
        if let live = others.first(where: { $0.staleReason == nil }) {
            try? repository.store.delete(key)
            return live
        }
        for stale in others {
            note("took over the lease of \(stale.summary): \(stale.staleReason ?? "stale")")
            try? repository.store.delete(stale.key)
        }
        return nil
    }

    private func write() throws {
        let id = ProcessIdentity.current
        let info = FollowerLeaseInfo(key: key, hostname: hostname, path: path, pid: getpid(), bootID: id.bootID,
                                     pidNamespace: id.pidNamespace, processStart: id.start, since: since, time: Clock.wall(),
                                     leaseSeconds: Self.leaseSeconds, folder: folder)
        try repository.store.put(key, try repository.keys.seal(Array(info.json.compact.utf8)))
    }

    /// Held: renewed (or taken) less than its length ago, and not taken over.
    public var isHeld: Bool {
        lock.lock(); defer { lock.unlock() }
        return lostTo == nil && Clock.now() - renewedAt < Self.leaseSeconds - Self.margin
    }

    /// The loss, once another follower took the lease over.
    public var lost: FollowerLeaseLost? { lock.lock(); defer { lock.unlock() }; return lostTo }

    /// Renews the lease when it is `renewEvery` old (always with `force`).
    /// While it is held, it is rewritten in place (after a listing shows it
    /// is still there: a follower that took it for stale removed it). Once
    /// it ran out, or was removed, it is claimed again as at the start, and
    /// a live lease of another follower makes this one lost
    /// (`FollowerLeaseLost`, thrown from then on). A store failure throws
    /// its error; the lease then runs out unless a later renewal succeeds.
    public func renew(force: Bool = false) throws {
        renewing.lock(); defer { renewing.unlock() }
        let started = Clock.now()
        let (lostTo, renewedAt, failedAt) = state
        if let lostTo { throw lostTo }
        guard force || started - max(renewedAt, failedAt) >= Self.renewEvery else { return }
        let held = started - renewedAt < Self.leaseSeconds - Self.margin
        do {
            let present = try repository.store.list(prefix: "followers/").contains { $0.key == key }
            if held && present {
                try write()
            } else if let holder = try claim(note: { _ in }) {
                let lost = FollowerLeaseLost(path: path, holder: holder)
                lock.lock(); self.lostTo = lost; lock.unlock()
                throw lost
            }
        } catch let error where !(error is FollowerLeaseLost) {
            lock.lock(); self.failedAt = started; lock.unlock()
            throw error
        }
        lock.lock(); self.renewedAt = started; lock.unlock()
    }

    private var state: (lost: FollowerLeaseLost?, renewedAt: Double, failedAt: Double) {
        lock.lock(); defer { lock.unlock() }
        return (lostTo, renewedAt, failedAt)
    }

    /// Removes the lease (best effort: a stale one is taken over anyway).
    public func release() {
        renewing.lock(); defer { renewing.unlock() }
        if lost == nil { try? repository.store.delete(key) }
    }

    /// Every follower's lease in the repository; an object that cannot be
    /// read or is not a lease is listed as one of no database (path empty),
    /// stale, so that `unlock` removes it. Files under `followers/` not named
    /// as litectl names leases (64 hex digits) are left out: no command reads
    /// or removes them.
    public static func list(_ repository: Repository) throws -> [FollowerLeaseInfo] {
        var out: [FollowerLeaseInfo] = []
        for object in try repository.store.list(prefix: "followers/") where RepoLock.isRandomKey(object.key, under: "followers/") {
            let bytes: [UInt8]
            do { bytes = try repository.getObject(object.key) } catch let error as StoreError where error.kind == .notFound {
                continue  // released since the listing
            } catch let error as StoreError where error.kind == .unavailable || error.kind == .denied {
                throw error
            } catch {
                bytes = []
            }
            out.append(FollowerLeaseInfo.decode(bytes, key: object.key)
                ?? FollowerLeaseInfo(key: object.key, hostname: "?", path: "", pid: 0, bootID: "", pidNamespace: "", processStart: 0,
                                     since: 0, time: 0, leaseSeconds: leaseSeconds))
        }
        return out
    }
}
