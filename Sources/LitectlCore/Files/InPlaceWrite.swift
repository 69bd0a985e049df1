// Writes into a user's database that are all or nothing under errors, a full
// disk and signals: one mechanism for restore --force, vacuum, patch, load,
// transform and migrate. A write through SQLite runs guarded
// (`Interruption.guarding`); on any failure its transaction is rolled back,
// and so is a hot journal SQLite left (after an I/O error such as a full disk
// SQLite keeps the journal and rolls back at the next open), before the error,
// reworded to name its cause, leaves. A file rewritten whole (restore, vacuum)
// is instead built beside the target and renamed over it when no other
// process has the target open (`WholeFileReplacement`). See docs/safety.md.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if os(Linux)
/// glibc's llistxattr(2) (sys/xattr.h, which the Glibc module does not export):
/// the size of the names of a file's extended attributes, not following a link.
@_silgen_name("llistxattr")
private func listExtendedAttributes(_ path: UnsafePointer<CChar>, _ list: UnsafeMutablePointer<CChar>?, _ size: Int) -> Int
#endif

public enum InPlaceWrite {
    /// Runs `body`, which writes `target` through `connection` inside a
    /// transaction it begins and commits, guarded (`Interruption.guarding`).
    /// On any error, with signals deferred: the transaction in flight is
    /// rolled back, so is a journal an I/O error left hot (`settle`), and the
    /// error is rethrown named by its cause (`failure`) with `consequence`
    /// ("nothing applied, app.db is as it was") after it.
    public static func run<T>(_ connection: Connection, target: String, consequence: String?, _ body: () throws -> T) throws -> T {
        do {
            return try Interruption.guarding([connection]) { try body() }
        } catch {
            let left = Interruption.deferring { () -> [String] in
                if sqlite3_get_autocommit(connection.rawHandle) == 0 { try? connection.execute("ROLLBACK") }
                // A read takes the shared lock, at which SQLite rolls a hot journal back.
                _ = try? connection.scalar("SELECT 1 FROM sqlite_schema LIMIT 1")
                let settled = (try? settle(target, busyTimeout: connection.busyTimeout)) != nil
                return settled && !journalIsHot(target) ? [] : [target]
            }
            throw failure(error, target: target, consequence: consequence, journalLeft: left)
        }
    }

    /// `error` as the one line a person reads: a signal as "interrupted by
    /// SIGTERM", a write that ran out of disk space as "disk full", with
    /// `consequence` after them (other errors keep their words).
    /// `journalLeft` names files whose hot journal could not be rolled back
    /// (the next write of each rolls it back: said so rather than "as it was").
    public static func failure(_ error: any Error, target: String, consequence: String?, journalLeft: [String] = []) -> any Error {
        var consequence = consequence
        if !journalLeft.isEmpty {
            consequence = "the change is not committed, but \(journalLeft.joined(separator: ", ")) still \(journalLeft.count == 1 ? "has its" : "have their") journal, which the next write of the file rolls back"
        }
        if let signal = Interruption.received {
            return Interrupted(signal: signal, path: target, consequence: consequence)
        }
        if var error = error as? DatabaseError {
            if isDiskFull(error) {
                var message = "disk full (\(error.message))"
                if let consequence, !error.message.contains(consequence) { message += "; " + consequence }
                error.message = message
                error.path = error.path ?? target
                error.sql = nil
                return error
            }
            // Other errors keep their own words (each command's says what stays).
            if !journalLeft.isEmpty, let consequence { error.message += "; " + consequence }
            return error
        }
        return error
    }

    /// True for a write that ran out of space: SQLITE_FULL (SQLite's unix
    /// VFS says so for ENOSPC), or an I/O error whose errno was ENOSPC,
    /// EDQUOT or EFBIG.
    public static func isDiskFull(_ error: DatabaseError) -> Bool {
        if error.code.primary == .full { return true }
        return error.code.primary == .ioerr
            && [ENOSPC, EDQUOT, EFBIG].contains { error.message.contains(String(cString: strerror($0))) }
    }

    /// Rolls back a hot journal of `path` (an application or a litectl run
    /// killed inside a write transaction in rollback-journal mode) as SQLite
    /// does at the first read of a read-write connection; nothing when there
    /// is none. A write command calls it before it first reads the file, so
    /// that no read-only open meets the journal ("attempt to write a
    /// readonly database").
    public static func settle(_ path: String, busyTimeout: Int = Connection.defaultBusyTimeout) throws {
        guard journalIsHot(path) else { return }
        let connection = try Connection(path: path, mode: .readWrite, busyTimeout: busyTimeout)
        try connection.close()
    }

    /// True when `path-journal` has a journal header (a rollback SQLite has
    /// not yet done, or a write transaction of another process in flight).
    /// SQLite deletes, truncates or zeroes a journal when a transaction ends.
    public static func journalIsHot(_ path: String) -> Bool {
        let fd = open(path + "-journal", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 8)
        let n = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, 8, 0) }
        return n == 8 && header.contains { $0 != 0 }
    }
}

/// A file rewritten whole (restore --force, vacuum) written beside its target
/// and renamed over it, where that harms nobody: the target is a plain file in
/// rollback-journal mode (no -wal), with one link and no extended attributes
/// (ACLs, security labels), in a folder this process may write, whose owner
/// and group the new file can take, and no other process on this host has
/// it, its journal, -wal or -shm open (`FileUsers`). Otherwise (or with `inPlace` asked for) the caller writes
/// it in place, in one transaction.
public struct WholeFileReplacement: Sendable {
    public let target: String
    /// Why the target is written in place (nil: by rename).
    public let inPlaceBecause: String?
    let owner: uid_t, group: gid_t, mode: mode_t
    /// The target's size, modification and change times when decided: a
    /// write by anyone since then falls back to writing in place.
    let fingerprint: [Int64]

    public var byRename: Bool { inPlaceBecause == nil }

    /// Decides for `target` (which exists). `inPlace` forces writing in place.
    public init(target: String, inPlace: Bool) {
        self.target = target
        var info = stat()
        let exists = lstat(target, &info) == 0
        owner = info.st_uid; group = info.st_gid; mode = info.st_mode & 0o7777
        fingerprint = WholeFileReplacement.fingerprint(info)
        inPlaceBecause = WholeFileReplacement.reasonToWriteInPlace(target, info: info, exists: exists, asked: inPlace)
    }

    static func fingerprint(_ info: stat) -> [Int64] {
        [Int64(info.st_size), Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec), Int64(info.st_ctim.tv_sec), Int64(info.st_ctim.tv_nsec)]
    }

    static func reasonToWriteInPlace(_ target: String, info: stat, exists: Bool, asked: Bool) -> String? {
        if asked { return "asked to (--in-place)" }
        if exists && (info.st_mode & S_IFMT) == S_IFLNK { return "it is a symbolic link (the file it names is written)" }
        guard exists, (info.st_mode & S_IFMT) == S_IFREG else { return "it is not a plain file" }
        if info.st_nlink != 1 { return "it has \(info.st_nlink) hard links" }
        if DurableFolder.exists(target + "-wal") { return "it has a -wal (WAL mode)" }
        if InPlaceWrite.journalIsHot(target) { return "another connection is writing it (its journal is live)" }
        // Header bytes 18 and 19: 1 for rollback journal, 2 for WAL.
        let fd = open(target, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd >= 0 {
            var header = [UInt8](repeating: 0, count: 20)
            let n = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, 20, 0) }
            close(fd)
            if n == 20 && (header[18] == 2 || header[19] == 2) { return "it is in WAL mode" }
        }
        // ACLs and security labels are extended attributes: a new file would not have them.
        #if os(Linux)
        if listExtendedAttributes(target, nil, 0) > 0 { return "it has extended attributes (an ACL, a security label...), which a new file would not have" }
        #endif
        let folder = DurableFolder.parent(of: target)
        if access(folder, W_OK | X_OK) != 0 { return "its folder is not writable" }
        let me = geteuid()
        if me != 0 {
            if info.st_uid != me { return "it belongs to another user" }
            if info.st_gid != getegid() {
                var groups = [gid_t](repeating: 0, count: 256)
                let n = getgroups(Int32(groups.count), &groups)
                if n < 0 || !groups[0..<Int(n)].contains(info.st_gid) { return "its group is not one of this user's" }
            }
        }
        switch FileUsers.others(of: companions(of: target)) {
        case .none: return nil
        case let other: return other.words
        }
    }

    static func companions(of target: String) -> [String] {
        [target, target + "-journal", target + "-wal", target + "-shm"]
    }

    /// Gives `file` (complete, built beside the target) the target's owner,
    /// group and mode, and renames it over the target while holding the
    /// target's exclusive lock, after checking once more that nobody opened
    /// or wrote the target meanwhile. Returns false, the target untouched and
    /// `file` kept, when somebody did: the caller writes in place then.
    public func swap(_ file: TemporaryFile, busyTimeout: Int) throws -> Bool {
        if fchown(file.descriptor, owner, group) != 0 {
            throw DatabaseError(code: .ioerr, message: "cannot give the new file the owner of the old: \(String(cString: strerror(errno)))", path: target)
        }
        if fchmod(file.descriptor, mode) != 0 {
            throw DatabaseError(code: .ioerr, message: "cannot give the new file the mode of the old: \(String(cString: strerror(errno)))", path: target)
        }
        try file.sync()
        // The lock: no other connection reads or writes the old file while
        // it is swapped (one that opened it just now waits, then finds it
        // replaced only if it opened it before the rename).
        let lock = try Connection(path: target, mode: .readWrite, busyTimeout: busyTimeout)
        defer { try? lock.close() }
        try lock.execute("BEGIN EXCLUSIVE")
        defer { try? lock.execute("ROLLBACK") }
        var info = stat()
        guard lstat(target, &info) == 0, WholeFileReplacement.fingerprint(info) == fingerprint,
              !DurableFolder.exists(target + "-wal"), !InPlaceWrite.journalIsHot(target),
              FileUsers.others(of: WholeFileReplacement.companions(of: target)) == .none else {
            return false
        }
        try file.commit(as: target, replace: true)
        return true
    }
}
