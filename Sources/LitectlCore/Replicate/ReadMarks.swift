// The follower's read marks: two read-only connections to the database that
// take turns holding a read transaction, the next one always begun before
// the previous one ends, so that the follower holds a read mark at every
// moment and no checkpoint can lose a frame it has not read (see "How
// replicate stays correct" in docs/replicate.md). Part of the replicate
// capability (built on Repository/).
//
// What a held read transaction guarantees (wal.c): a reader that took read
// lock 1-4 holds a mark at its snapshot's last frame: no checkpoint copies a
// frame past the oldest mark into the database file, and no writer or
// checkpoint restarts the -wal while any such mark is held (the restart
// needs every one of those locks). A reader that began when every frame
// was already in the database file takes read lock 0 instead: it blocks any
// copying into the file (a checkpoint needs lock 0 to write it), but not a
// restart; so at most one restart can happen while it is held, exactly at
// its snapshot (a second would need the new frames copied first), and the
// new generation continues that snapshot.
import CSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One read transaction held by one of the two connections.
struct ReadMark {
    /// Which connection holds it (0 or 1).
    var connection: Int
    /// The wal-index header of its snapshot (`WALIndexHeader.pinned`).
    var header: WALIndexHeader
    /// When the snapshot was pinned down (wall clock, microseconds since 1970).
    var observedMicros: UInt64
    /// Whether SQLite gave it read lock 0 (every frame was in the database
    /// file when it began): see the opening comment.
    var lockZero: Bool { header.wholeInMainFile }
}

final class ReadMarks {
    let path: String
    let connections: [Connection]
    /// The mark held now, if any.
    private(set) var held: ReadMark?
    private var lastObserved: UInt64 = 0
    /// A descriptor of the -shm for `checkpointRunning`. Opened after the
    /// connections and closed after them: closing a descriptor of a file
    /// drops every POSIX lock the process holds on it (SQLite's read locks
    /// included), so it stays open as long as they do.
    private var shm: Int32 = -1

    /// Opens both connections read-only, after checking that the database
    /// is in WAL mode and that its -shm can be written (a read mark is
    /// written there; with a read-only -shm SQLite keeps none).
    init(path: String) throws {
        self.path = path
        let first = try Connection(path: path, mode: .readOnly, busyTimeout: 200)
        guard try first.journalMode() == "wal" else {
            let mode = (try? first.journalMode()) ?? "?"
            throw DatabaseError(code: .misuse, message: "not in WAL mode (journal_mode=\(mode)): replicate follows WAL databases only; switch it once with `sqlite3 DB 'PRAGMA journal_mode=wal'` (the mode persists), or back it up from cron with `litectl backup --repo`",
                                path: path)
        }
        guard !first.isImmutable else {
            throw DatabaseError(code: .readonly, message: "its folder is read-only, so no -shm can hold a read mark: replicate needs to write DB-shm (run it as the database's owner)", path: path)
        }
        for suffix in ["-shm", "-wal"] where access(path + suffix, F_OK) == 0 && access(path + suffix, W_OK) != 0 {
            throw DatabaseError(code: .readonly, message: "cannot write \(DurableFolder.baseName(of: path))\(suffix): replicate holds a read mark in the -shm, as any reader of a WAL database does (run it as the database's owner)",
                                path: path)
        }
        // (The file was checked by the first: a second check would close a
        // descriptor of it, and with it the first's SHARED lock.)
        connections = [first, try Connection(path: path, mode: .readOnly, busyTimeout: 200, checkFile: false)]
        // A first read on each, so that each has the -wal and -shm open.
        for c in connections { _ = try c.readTransaction { try c.scalar("SELECT 1 FROM sqlite_schema LIMIT 1") } }
        shm = open(path + "-shm", O_RDONLY | O_CLOEXEC)
    }

    /// Whether another process runs a checkpoint that may wait for readers:
    /// it holds the wal-index's checkpoint lock and its write lock (bytes
    /// 121 and 120 of the -shm, as https://www.sqlite.org/walformat.html#locks
    /// lays them out). FULL, RESTART and TRUNCATE checkpoints hold both and
    /// wait for readers; the follower then takes its next mark at once rather
    /// than at its next poll. A PASSIVE checkpoint (SQLite's automatic one,
    /// after every commit once the -wal is long) holds only the first and
    /// never waits: it is let be, or the follower would record a state per
    /// commit. (A checkpoint run by this process is not seen: POSIX locks of
    /// one's own process never conflict.)
    var checkpointRunning: Bool {
        guard shm >= 0 else { return false }
        func held(_ byte: Int) -> Bool {
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            lock.l_start = off_t(byte)
            lock.l_len = 1
            return fcntl(shm, F_GETLK, &lock) == 0 && lock.l_type != Int16(F_UNLCK)
        }
        guard held(121) && held(120) else { return false }
        lastCheckpointSeen = Clock.now()
        return true
    }

    /// When `checkpointRunning` last saw another process's FULL, RESTART or
    /// TRUNCATE checkpoint (monotonic seconds): an application that runs
    /// those manages its -wal itself.
    private(set) var lastCheckpointSeen = -Double.infinity

    /// The page size (it cannot change while the database is in WAL mode).
    func pageSize() throws -> Int {
        guard case .integer(let size)? = try connections[0].scalar("PRAGMA page_size") else {
            throw DatabaseError(code: .error, message: "cannot read the page size", path: path)
        }
        return Int(size)
    }

    /// Begins a read transaction on the connection that does not hold the
    /// current mark and pins down its snapshot; the current mark stays held.
    /// nil when no snapshot could be pinned (commits kept landing as it
    /// began, or the database was busy): try again at the next poll.
    func beginNext(attempts: Int = 20) throws -> ReadMark? {
        let index = held.map { 1 - $0.connection } ?? 0
        let c = connections[index]
        for attempt in 0..<attempts {
            let before = WALIndexHeader.current(c)
            do {
                try c.execute("BEGIN DEFERRED")
                _ = try c.scalar("SELECT 1 FROM sqlite_schema LIMIT 1")
            } catch let error as DatabaseError where error.code.primary == .busy || error.code.primary == .locked {
                try? c.execute("ROLLBACK")
                usleep(UInt32(1000 * (attempt + 1)))
                continue
            }
            if let header = WALIndexHeader.pinned(c, before: before) {
                var now = UInt64(max(0, Clock.wall() * 1e6))
                // Times never go back, whatever the wall clock does.
                if now <= lastObserved { now = lastObserved + 1 }
                lastObserved = now
                return ReadMark(connection: index, header: header, observedMicros: now)
            }
            try? c.execute("COMMIT")
            if attempt > 2 { usleep(UInt32(200 * attempt)) }
        }
        return nil
    }

    /// Makes `mark` the held one and ends the previous read transaction.
    func hold(_ mark: ReadMark) {
        if let previous = held, previous.connection != mark.connection { try? connections[previous.connection].execute("COMMIT") }
        held = mark
    }

    /// Ends a mark that was begun but not kept.
    func drop(_ mark: ReadMark) {
        if held?.connection != mark.connection { try? connections[mark.connection].execute("COMMIT") }
    }

    /// Ends every read transaction: the follower holds no mark (it lets it go
    /// while the repository does not take what it recorded).
    func release() {
        for c in connections { try? c.execute("COMMIT") }
        held = nil
    }

    /// The read-write connection that runs the follower's checkpoints, opened
    /// the first time: no checkpoint, and no deletion of the -wal, when it
    /// closes as the process's last connection to the database, and no
    /// automatic checkpoint: only what was asked.
    private func checkpointConnection() -> Connection? {
        if checkpointer == nil, let c = try? Connection(path: path, mode: .readWrite, busyTimeout: 0, checkFile: false) {
            var ignored: Int32 = 0
            _ = litectl_db_config_bool(c.rawHandle, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, &ignored)
            try? c.execute("PRAGMA wal_autocheckpoint=0")
            checkpointer = c
        }
        return checkpointer
    }

    /// A PASSIVE checkpoint (https://www.sqlite.org/c3ref/wal_checkpoint_v2.html):
    /// it copies frames into the database file up to the oldest read mark
    /// (the follower's, when the application holds none), holds no lock that
    /// the application's commits wait for, and never waits. The -wal's
    /// frames and how many of them are now in the database file; nil when
    /// it could not run (another checkpoint kept running: SQLITE_BUSY, tried
    /// again for up to 10 ms, since an application that commits past its
    /// automatic checkpoint's size runs one, short, after every commit).
    func passiveCheckpoint() -> (log: Int32, copied: Int32)? {
        guard let checkpointer = checkpointConnection() else { return nil }
        for attempt in 0..<20 {
            var log: Int32 = 0, done: Int32 = 0
            let rc = sqlite3_wal_checkpoint_v2(checkpointer.rawHandle, "main", SQLITE_CHECKPOINT_PASSIVE, &log, &done)
            if rc == SQLITE_OK { return (log, done) }
            guard rc & 0xFF == SQLITE_BUSY, attempt < 19 else { return nil }
            usleep(500)
        }
        return nil
    }

    /// The follower's checkpoint when the PASSIVE one could not copy every
    /// frame (`replicate --checkpoint-frames`): a RESTART checkpoint, through a
    /// read-write connection opened for that alone (a read-only one cannot
    /// write the database file). A PASSIVE one alone cannot do it while
    /// commits keep coming: it copies no further than the follower's mark,
    /// and a commit lands between that mark and the next, so the next is not
    /// at lock 0 and the -wal does not restart (measured: at 280 commits/s,
    /// nBackfill never once reached mxFrame in 2 s of tries); the follower
    /// runs one first all the same, which copies most frames without holding
    /// the application's commits. A RESTART checkpoint holds
    /// the write lock, so no commit lands while it waits for readers (the
    /// application's commits wait, as for its own checkpoints other than
    /// PASSIVE). `waiting` is called each time it waits (the follower takes
    /// its next mark there: at the last frame, then, once every frame is in
    /// the file, at read lock 0, which the restart does not wait for; the
    /// restart then happens exactly at the follower's last state); it
    /// returns false to give up. https://www.sqlite.org/c3ref/wal_checkpoint_v2.html
    func restartCheckpoint(waiting: @escaping () -> Bool) -> RestartOutcome {
        guard let checkpointer = checkpointConnection() else { return .busy }
        final class Box {
            let call: () -> Bool
            var waited = false
            init(_ c: @escaping () -> Bool) { call = c }
        }
        let box = Unmanaged.passRetained(Box(waiting))
        defer { box.release() }
        sqlite3_busy_handler(checkpointer.rawHandle, { context, _ in
            let box = Unmanaged<Box>.fromOpaque(context!).takeUnretainedValue()
            box.waited = true
            return box.call() ? 1 : 0
        }, box.toOpaque())
        defer { sqlite3_busy_timeout(checkpointer.rawHandle, 0) }
        var log: Int32 = 0, done: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(checkpointer.rawHandle, "main", SQLITE_CHECKPOINT_RESTART, &log, &done)
        if rc == SQLITE_OK { return .restarted }
        // SQLite calls no busy handler when another connection holds the
        // checkpoint lock: the checkpoint never began.
        return box.takeUnretainedValue().waited ? .gaveUp : .busy
    }

    enum RestartOutcome {
        /// Every frame is in the database file, and no reader at lock 1-4 is left: the next commit restarts the -wal.
        case restarted
        /// It waited, and `waiting` gave up (a reader holds an older snapshot).
        case gaveUp
        /// Another process runs a checkpoint: it did not begin.
        case busy
    }
    private var checkpointer: Connection?

    /// Ends every read transaction and closes the connections.
    func close() {
        for c in connections {
            try? c.execute("COMMIT")
            try? c.close()
        }
        held = nil
        try? checkpointer?.close()
        checkpointer = nil
        if shm >= 0 { Glibc.close(shm); shm = -1 }
    }

    /// The connection of a mark.
    func connection(of mark: ReadMark) -> Connection { connections[mark.connection] }
}
