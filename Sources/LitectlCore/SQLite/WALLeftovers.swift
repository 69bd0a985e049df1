// Reading a WAL database makes SQLite create its -wal and -shm files when they
// are missing, and a read-only connection cannot remove them when it closes.
// litectl's read-only commands leave the folder as they found it: when the last
// connection of this process to such a file closes, the two files go, under the
// same rule SQLite applies to itself (https://www.sqlite.org/walformat.html):
// no other connection holds the database (every open WAL connection keeps a
// SHARED lock on the database file, so an exclusive lock on the lock bytes
// succeeds only when none is open, and keeps new ones out meanwhile) and the
// -wal holds no frames.
import Foundation

enum WALLeftovers {
    /// A file a connection reads. `removeLeftovers` is false for a writing
    /// connection, or once its close was deferred (SQLite may still hold the file).
    struct Watch {
        var path: String
        var id: FileIdentity
        var removeLeftovers: Bool
    }

    /// Connections of this process per file, and whether the first of them
    /// found the -wal and -shm missing (later ones see the files it made).
    private struct Entry {
        var count: Int
        var leftoversAreOurs: Bool
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var entries: [FileIdentity: Entry] = [:]

    /// Starts watching `path` for a connection about to read it. Call before
    /// SQLite opens the file: the -wal and -shm must be missing now for them to
    /// be ours later.
    static func watch(_ path: String, readOnly: Bool) -> Watch? {
        // A moment of a repository has no -wal or -shm (and a file of its name is not it).
        if PageVFS.namesSource(path) { return nil }
        guard let id = FileIdentity(path) else { return nil }
        // The header is read (an open and a close of the file) only when no
        // connection of this process has the file open: closing a descriptor
        // drops every POSIX lock the process holds on the file, SQLite's too.
        lock.lock()
        defer { lock.unlock() }
        if var entry = entries[id] {
            entry.count += 1
            entries[id] = entry
        } else {
            var ours = false
            if readOnly, access(path + "-wal", F_OK) != 0, access(path + "-shm", F_OK) != 0,
               let header = try? FileCheck.readPrefix(of: path, count: 20), header.count == 20, header[18] == 2 {
                ours = true
                // Made by this run's open: the write gate lets the run remove them.
                WriteGate.shared.own(path + "-wal")
                WriteGate.shared.own(path + "-shm")
            }
            entries[id] = Entry(count: 1, leftoversAreOurs: ours)
        }
        return Watch(path: path, id: id, removeLeftovers: readOnly)
    }

    /// Ends a watch once its connection is closed; removes the leftovers when
    /// this was the last connection of the process to the file and no other
    /// process has it open. (Only then may a descriptor on the file be closed:
    /// closing one drops every POSIX lock the process holds on it.)
    static func end(_ watch: Watch) {
        lock.lock()
        defer { lock.unlock() }
        guard var entry = entries[watch.id] else { return }
        entry.count -= 1
        if entry.count > 0 {
            // A connection that could not vouch for the file (a deferred close)
            // keeps the others from removing anything.
            if !watch.removeLeftovers { entry.leftoversAreOurs = false }
            entries[watch.id] = entry
            return
        }
        entries[watch.id] = nil
        guard entry.leftoversAreOurs, watch.removeLeftovers else { return }
        removeIfIdle(watch.path)
    }

    /// SQLite's lock bytes: PENDING at 2^30, RESERVED after it, then the
    /// 510-byte SHARED range (https://www.sqlite.org/lockingv3.html).
    private static let lockBytesStart = 0x4000_0000
    private static let lockBytesLength = 512

    private static func removeIfIdle(_ path: String) {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var region = flock()
        region.l_type = Int16(F_WRLCK)
        region.l_whence = Int16(SEEK_SET)
        region.l_start = off_t(lockBytesStart)
        region.l_len = off_t(lockBytesLength)
        guard fcntl(fd, F_SETLK, &region) == 0 else { return }
        if (FileCheck.size(of: path + "-wal") ?? 0) == 0 {
            try? DurableFolder.remove(path + "-wal")
            try? DurableFolder.remove(path + "-shm")
        }
        region.l_type = Int16(F_UNLCK)
        _ = fcntl(fd, F_SETLK, &region)
    }
}
