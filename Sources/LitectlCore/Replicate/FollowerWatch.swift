// What a follower watches besides the -wal's frames, kept across its
// restarts (one per database, held by its FollowerStatus): the database file
// replaced under it (another inode under its name: `mv` over it, or deleted
// and created again; or the same file written over outside SQLite, seen by
// its page 1 while nothing waits to be checkpointed), which ends the chain at
// once and has the next start begin a new chain; and a follower that makes no progress for 3 intervals
// while the -wal is written to (stalled), said once as a problem and raised
// as `litectl_replicate_stalled` in the metrics file. Part of the replicate
// capability; the WAL loop calls it (WALLoop.swift).
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The database file was replaced under the follower: it starts again at
/// once (not after the pause other failures get), on a new chain.
struct DatabaseReplaced: Error, CustomStringConvertible { var description: String }

public final class FollowerWatch: @unchecked Sendable {
    private let lock = NSLock()
    /// The next start begins a new chain (the file it continued was replaced).
    private var replaced = false
    private var isStalled = false
    /// The stall's clock: states shipped when last looked, the -wal's size
    /// and change time then, since when the -wal was written to with no
    /// progress, and when it last looked.
    private var shippedSeen = -1
    private var walSeen: [Int64] = []
    private var pendingSince: Double?
    private var lastLook = -Double.infinity

    init() {}

    /// 1 while stalled (litectl_replicate_stalled).
    public var stalled: Bool { lock.lock(); defer { lock.unlock() }; return isStalled }

    // MARK: The database file replaced

    /// Whether the file `source` names is another one than `followed` (the
    /// one the follower opened, which it holds open, so its inode is not
    /// reused): when so, the next start begins a new chain, and the error
    /// to throw, which says it.
    func replacement(of source: String, followed: FileIdentity?) -> DatabaseReplaced? {
        guard let followed, let now = FileIdentity(source), now != followed else { return nil }
        lock.lock(); replaced = true; lock.unlock()
        return DatabaseReplaced(description: "\(source): the database file was replaced (another file under its name: inode \(now.inode), was \(followed.inode)); the chain ends at the old file's last state, and a new chain starts from the new file now")
    }

    /// Whether the main file was written over in place (`cp new.db app.db`
    /// keeps the inode), seen by its page 1. Call only while the follower
    /// holds a mark at read lock 0 at the last state: the main file then is
    /// that state's (no checkpoint writes to it under such a reader), so a
    /// page 1 other than the state's (`expected`) was written outside
    /// SQLite. Read through `connection`'s own handle, never a second open
    /// (closing one would drop SQLite's locks). When so, the next start
    /// begins a new chain, and the error to throw, which says it.
    func rewrite(of source: String, connection: Connection, pageSize: Int, expected: PageID?,
                 id: (UnsafeRawBufferPointer) -> PageID) -> DatabaseReplaced? {
        guard let expected, let page = PageFile.mainFileBytes(connection, count: pageSize, offset: 0),
              page.withUnsafeBytes(id) != expected else { return nil }
        lock.lock(); replaced = true; lock.unlock()
        return DatabaseReplaced(description: "\(source): the database file was written over in place (its page 1 is not the last state's, and SQLite did not write it); the chain ends at the old file's last state, and a new chain starts from the file as it is now")
    }

    /// Whether this start must begin a new chain (and no longer after it).
    func takeReplaced() -> Bool {
        lock.lock(); defer { lock.unlock() }
        let r = replaced
        replaced = false
        return r
    }

    // MARK: Stalled

    /// Looks, once an interval, at the follower's progress: states shipped,
    /// or nothing recorded waiting (`caughtUp`: the loop read the -wal to its
    /// end). When the -wal (`wal`) was written to and no progress came for 3
    /// intervals since, the follower is stalled: `report` says so once, and
    /// once more when progress comes again.
    func look(shipped: Int, caughtUp: Bool, wal: String, interval: Double, report: (String) -> Void) {
        let now = Clock.now()
        lock.lock(); defer { lock.unlock() }
        guard now - lastLook >= interval else { return }
        lastLook = now
        let stamp = Self.stamp(wal)
        if shipped != shippedSeen || caughtUp {
            let since = pendingSince
            shippedSeen = shipped; walSeen = stamp; pendingSince = nil
            if isStalled {
                isStalled = false
                report("making progress again (stalled for \(String(format: "%.1f", now - (since ?? now))) s)")
            }
            return
        }
        if stamp != walSeen && pendingSince == nil { pendingSince = now }
        if let since = pendingSince, !isStalled, now - since >= 3 * interval {
            isStalled = true
            let size = stamp.first.map { " (\(humanBytes($0)))" } ?? ""
            report("stalled: no progress for \(String(format: "%.1f", now - since)) s (3 intervals or more) while the -wal\(size) is written to: states wait to be shipped, or the follower cannot read the -wal (litectl_replicate_stalled is 1 until it makes progress again)")
        }
    }

    /// The -wal's size and change time (ns); empty when there is none.
    static func stamp(_ path: String) -> [Int64] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [] }
        return [Int64(info.st_size), Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)]
    }

    /// The metrics family of the stall, one series per database.
    static func metrics(_ statuses: [FollowerStatus], label: (FollowerStatus) -> String) -> String {
        var out = "# HELP litectl_replicate_stalled 1 while the follower has made no progress for 3 intervals while the -wal is written to, else 0.\n# TYPE litectl_replicate_stalled gauge\n"
        for s in statuses { out += "litectl_replicate_stalled{database=\"\(label(s))\"} \(s.watch.stalled ? 1 : 0)\n" }
        return out
    }
}
