// A database whose rollback journal is hot (an application stopped inside a
// write transaction) cannot be read by a read-only connection: only a writer
// may roll the journal back (SQLITE_READONLY_ROLLBACK). Read-only litectl reads
// its last committed state instead: the file and its journal are copied under
// a SHARED lock to a private place in $TMPDIR, SQLite rolls the copy back, and
// the copy is read. The source and its journal are never written.
// See https://www.sqlite.org/lockingv3.html#hot_journals and
// https://www.sqlite.org/fileformat.html#the_rollback_journal
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What was done to read the committed state of a database whose rollback
/// journal was hot: for the `-v` note, `check`'s finding and a backup's
/// strategy.
public struct HotJournalCopy: Sendable, Equatable {
    /// How the bytes were copied.
    public enum Method: String, Sendable {
        /// A reflink (FICLONE): the copy shares the source's blocks until
        /// written, and took no time and no space.
        case reflink
        /// `copy_file_range`: the kernel copied (or shared) the bytes.
        case copyFileRange = "copy_file_range"
        /// Read and written in 1 MiB chunks (another filesystem, or a kernel without the above).
        case readWrite = "read and write"
    }

    /// What the journal said about a multi-file transaction.
    public enum SuperJournal: Sendable, Equatable {
        /// The transaction concerned this database only.
        case none
        /// Its super-journal exists: the multi-file transaction did not
        /// commit, and the copy is rolled back.
        case pending(String)
        /// Its super-journal is gone: the multi-file transaction committed
        /// before the stop, and the file as it stands is its state (SQLite
        /// discards such a journal without playing it back).
        case committed(String)
    }

    /// The database as the caller named it.
    public var source: String
    /// The journal SQLite found beside it (beside the file a symbolic link names).
    public var journal: String
    public var databaseBytes: Int64
    /// Bytes of the journal copied (0 when it was not needed: `SuperJournal.committed`).
    public var journalBytes: Int64
    /// Bytes of a -wal copied with them (a WAL database whose journal is hot:
    /// a change of journal mode that was stopped); 0 when there is none.
    public var walBytes: Int64
    /// The folder the private copy was made in ($TMPDIR, else /tmp).
    public var folder: String
    public var method: Method
    public var superJournal: SuperJournal

    /// One line for `-v`: what was found, what was read, what was copied where.
    public var description: String {
        var copied = humanBytes(databaseBytes) + " database"
        if journalBytes > 0 { copied += " and \(humanBytes(journalBytes)) journal" }
        if walBytes > 0 { copied += " and \(humanBytes(walBytes)) -wal" }
        let how: String
        switch superJournal {
        case .none, .pending:
            how = "read its last committed state from a private copy rolled back by SQLite"
        case .committed:
            how = "its journal names a super-journal that is gone (the multi-file transaction committed), so the file is the committed state; read from a private copy"
        }
        var line = "\(source): the rollback journal is hot (a writer stopped inside a transaction): \(how) (\(copied) copied to \(folder) by \(method.rawValue)); "
        if case .pending(let name) = superJournal { line += "its super-journal \(name) (the multi-file transaction did not commit) was left as it is; " }
        line += "the database and its journal were not written"
        return line
    }
}

/// A private copy of a database whose journal was hot, rolled back: its
/// temporary files go when the last connection reading it lets go of it
/// (and on SIGINT/SIGTERM, through `TemporaryFiles`).
final class RolledBackCopy: @unchecked Sendable {
    let info: HotJournalCopy
    /// The copy (its `-journal`, `-wal` and `-shm` are registered with it).
    private let file: TemporaryFile
    /// The state of the source the copy was made from (see `Stamp`).
    let stamp: HotJournal.Stamp

    var path: String { file.path }

    init(info: HotJournalCopy, file: TemporaryFile, stamp: HotJournal.Stamp) {
        self.info = info
        self.file = file
        self.stamp = stamp
    }

    deinit { file.discard() }
}

public enum HotJournal {
    /// The stem of the temporary files: `.litectl-rollback.tmp-<pid>-<n>`
    /// (and its `-journal`), which a later run removes when a SIGKILL left them.
    static let stem = "litectl-rollback"

    /// SQLite's lock bytes in the database file (https://www.sqlite.org/lockingv3.html,
    /// os_unix.c): PENDING, RESERVED, then the SHARED range.
    static let pendingByte: off_t = 0x4000_0000
    static let reservedByte: off_t = pendingByte + 1
    static let sharedFirst: off_t = pendingByte + 2
    static let sharedSize: off_t = 510

    /// Linux's open file description locks (fcntl.h; not exported by the Glibc
    /// module): owned by our descriptor, not by the process, so that taking
    /// and dropping them never touches the POSIX locks SQLite's own
    /// descriptors hold, while they conflict with other processes' locks.
    static let ofdGetLock: Int32 = 36
    static let ofdSetLock: Int32 = 37

    /// SQLite's journal magic (pager.c `aJournalMagic`), which also ends a super-journal record.
    static let magic: [UInt8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]
    /// The longest path SQLite's unix VFS takes (`mxPathname`).
    static let maxPathname = 512

    /// The state of a source and its journal: a copy made from the same
    /// state serves every connection of this process that needs it (`check`'s
    /// workers, both sides of `diff A A`) while it is in use.
    struct Stamp: Hashable {
        /// Device, inode, size and modification time (ns) of the database, then of the journal.
        var database: [Int64]
        var journal: [Int64]
    }

    private struct Live {
        weak var copy: RolledBackCopy?
    }

    private static let live = Locked<[Stamp: Live]>([:])
    /// One copy is made at a time: two workers needing the same one wait for it.
    private static let making = Locked<Int>(0)
    private static let observer = Locked<(@Sendable (HotJournalCopy) -> Void)?>(nil)
    private static let signalCleanup: Void = TemporaryFiles.installSignalCleanup()
    /// The last copy made stays until the next one or the end of the process,
    /// so that a command that opens the file again (`report`, `migrate
    /// --dry-run`) reads the same copy instead of making another.
    private static let lastMade = Locked<RolledBackCopy?>(nil)
    private static let releaseAtExit: Void = { atexit { HotJournal.releaseLastMade() } }()

    /// Lets go of the copy kept for later connections (its files go once no
    /// connection reads it). Called at exit.
    static func releaseLastMade() {
        let copy = lastMade.withLock { kept -> RolledBackCopy? in
            defer { kept = nil }
            return kept
        }
        _ = copy
    }

    /// Tells `observer` of each copy made from now on (nil: no one): the
    /// executable prints the `-v` note with it.
    public static func report(to observer: (@Sendable (HotJournalCopy) -> Void)?) {
        self.observer.withLock { $0 = observer }
    }

    /// The committed state of `path`, whose journal SQLite found hot: a private
    /// copy rolled back, or nil when the journal is not hot (any more: another
    /// process rolled it back, or a writer holds RESERVED and it is that
    /// writer's live journal) and the file can be read as it is.
    ///
    /// `mayCloseSource` is false when another connection of this process has
    /// the file open: closing a descriptor of it would drop the POSIX locks
    /// that connection's SQLite may hold (a read transaction begun before the
    /// journal turned hot). The descriptor litectl opened on the file then
    /// stays open, unlocked, until the process ends, as SQLite keeps its own
    /// in that case.
    static func committedCopy(of path: String, busyTimeout: Int, mayCloseSource: Bool) throws -> RolledBackCopy? {
        // A moment of a repository has no journal: nothing beside its name is looked at.
        if PageVFS.namesSource(path) { return nil }
        let made: Result<RolledBackCopy?, any Error> = making.withLock { _ in
            Result { try makeCommittedCopy(of: path, busyTimeout: busyTimeout, mayCloseSource: mayCloseSource) }
        }
        return try made.get()
    }

    /// Descriptors of databases that could not be closed (`mayCloseSource`).
    private static let keptOpen = Locked<[Int32]>([])

    private static func makeCommittedCopy(of path: String, busyTimeout: Int, mayCloseSource: Bool) throws -> RolledBackCopy? {
        // SQLite resolves symbolic links and looks for the journal beside the file itself.
        let resolved = resolvedPath(path)
        let journalPath = resolved + "-journal"
        if let stamp = stamp(database: resolved, journal: journalPath),
           let copy = live.withLock({ $0[stamp]?.copy }) {
            return copy
        }
        let folder = TemporaryFiles.folder(nil)
        TemporaryFiles.removeStale(in: folder, stem: stem)
        // The copy goes on SIGINT, SIGTERM and SIGHUP too, whatever command
        // made it (read-only commands install no handler of their own).
        signalCleanup

        let database = try openSource(path, as: path)
        defer {
            if mayCloseSource { close(database.fd) } else { keptOpen.withLock { $0.append(database.fd) } }
        }
        try lockShared(database.fd, path: path, busyTimeout: busyTimeout)
        defer { unlock(database.fd) }

        // Under the SHARED lock nobody can roll the journal back or write the
        // file (both need EXCLUSIVE): what is checked now stays true while copying.
        guard let journal = try? openSource(journalPath, as: journalPath) else { return nil }
        defer { close(journal.fd) }
        guard database.size > 0, journal.size > 0, let first = try readBytes(journal.fd, at: 0, count: 1, path: journalPath).first,
              first != 0, !reservedIsHeld(database.fd) else { return nil }
        // The stamp of what is copied; recomputed under the lock.
        guard let stamp = stamp(database: resolved, journal: journalPath) else { return nil }

        var superJournal = HotJournalCopy.SuperJournal.none
        var superRecord: (start: Int64, pageNumber: [UInt8])?
        if let record = try superJournalRecord(journal.fd, size: journal.size, path: journalPath) {
            let name = String(decoding: record.name, as: UTF8.self)
            // As SQLite's unixAccess sees it: an empty regular file does not exist.
            var info = stat()
            if stat(name, &info) == 0 && ((info.st_mode & S_IFMT) != S_IFREG || info.st_size > 0) {
                superJournal = .pending(name)
                superRecord = (record.start, record.pageNumber)
            } else {
                superJournal = .committed(name)
            }
        }
        let copyJournal: Bool
        if case .committed = superJournal { copyJournal = false } else { copyJournal = true }

        let wal = try? openSource(resolved + "-wal", as: resolved + "-wal")
        defer { if let wal { close(wal.fd) } }
        let walBytes = (wal?.size ?? 0) > 0 ? wal!.size : 0

        let copyFile = try TemporaryFile(in: folder, stem: stem, permissions: 0o600)
        var method = try copy(database.fd, size: database.size, from: path, into: copyFile, folder: folder,
                              alsoNeeded: (copyJournal ? journal.size : 0) + walBytes)
        // The companions get their final names with link(): the copy's
        // registration already covers `<copy>-journal` and `<copy>-wal`.
        var privateSuperJournal: TemporaryFile?
        defer { privateSuperJournal?.discard() }
        if copyJournal {
            let journalCopy = try TemporaryFile(in: folder, stem: stem, permissions: 0o600)
            defer { journalCopy.discard() }
            method = worse(method, try copy(journal.fd, size: journal.size, from: journalPath, into: journalCopy,
                                            folder: folder, alsoNeeded: walBytes))
            if let superRecord {
                // The copy names a private super-journal: it exists (for SQLite,
                // a file that is not empty), so SQLite plays the copy back; it
                // lists the copy's journal only, so that SQLite, looking for
                // other journals of the transaction, reads nothing of the user's,
                // and whatever it deletes is ours.
                let stand = try TemporaryFile(in: folder, stem: stem, permissions: 0o600)
                privateSuperJournal = stand
                try Array((copyFile.path + "-journal").utf8 + [0]).withUnsafeBytes { try stand.write($0) }
                try replaceSuperJournal(in: journalCopy, recordAt: superRecord.start, pageNumber: superRecord.pageNumber,
                                        name: stand.path)
            }
            try journalCopy.commit(as: copyFile.path + "-journal", replace: false)
        }
        if let wal, walBytes > 0 {
            let walCopy = try TemporaryFile(in: folder, stem: stem, permissions: 0o600)
            defer { walCopy.discard() }
            method = worse(method, try copy(wal.fd, size: walBytes, from: resolved + "-wal", into: walCopy, folder: folder, alsoNeeded: 0))
            try walCopy.commit(as: copyFile.path + "-wal", replace: false)
        }
        unlock(database.fd)

        // SQLite rolls the copy back at its first read through a connection that may write.
        do {
            let writer = try Connection(path: copyFile.path, mode: .readWrite, busyTimeout: 0, hotJournal: .fail)
            try writer.close()
        } catch var error as DatabaseError {
            error.path = path
            error.message = "the rollback journal is hot, and its private copy in \(folder) could not be rolled back: \(error.message)"
            throw error
        }
        if access(copyFile.path + "-journal", F_OK) == 0 {
            throw DatabaseError(code: .readonlyRollback,
                                message: "the rollback journal is hot, and SQLite did not roll back its private copy in \(folder)",
                                path: path)
        }
        let info = HotJournalCopy(source: path, journal: journalPath, databaseBytes: database.size,
                                  journalBytes: copyJournal ? journal.size : 0, walBytes: walBytes,
                                  folder: folder, method: method, superJournal: superJournal)
        let made = RolledBackCopy(info: info, file: copyFile, stamp: stamp)
        live.withLock { table in
            table = table.filter { $0.value.copy != nil }
            table[stamp] = Live(copy: made)
        }
        releaseAtExit
        let previous = lastMade.withLock { kept -> RolledBackCopy? in
            defer { kept = made }
            return kept
        }
        _ = previous  // released here, outside the lock
        if let observer = observer.withLock({ $0 }) { observer(info) }
        return made
    }

    // MARK: Files

    private struct Source {
        var fd: Int32
        var size: Int64
    }

    /// Opens an existing regular file for reading only, never blocking (a FIFO
    /// named like a journal is refused, not waited on).
    private static func openSource(_ path: String, as name: String) throws -> Source {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            throw DatabaseError(code: .cantopen, message: String(cString: strerror(errno)), path: name)
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw DatabaseError(code: .cantopen, message: "not a regular file", path: name)
        }
        return Source(fd: fd, size: Int64(info.st_size))
    }

    static func resolvedPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func stamp(database: String, journal: String) -> Stamp? {
        var d = stat(), j = stat()
        guard stat(database, &d) == 0, stat(journal, &j) == 0 else { return nil }
        func nanoseconds(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }
        func facts(_ s: stat) -> [Int64] {
            [Int64(bitPattern: UInt64(s.st_dev)), Int64(bitPattern: UInt64(s.st_ino)), Int64(s.st_size), nanoseconds(s.st_mtim)]
        }
        return Stamp(database: facts(d), journal: facts(j))
    }

    private static func readBytes(_ fd: Int32, at offset: Int64, count: Int, path: String) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + filled, count - filled, off_t(offset) + off_t(filled)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw DatabaseError(code: .ioerr, message: "read failed: \(String(cString: strerror(errno)))", path: path)
            }
            if n == 0 { break }
            filled += n
        }
        return Array(buffer.prefix(filled))
    }

    // MARK: Locks

    private static func region(_ type: Int32, _ start: off_t, _ length: off_t) -> flock {
        var r = flock()
        r.l_type = Int16(type)
        r.l_whence = Int16(SEEK_SET)
        r.l_start = start
        r.l_len = length
        r.l_pid = 0
        return r
    }

    private static func setLock(_ fd: Int32, _ type: Int32, _ start: off_t, _ length: off_t) -> Bool {
        var r = region(type, start, length)
        return fcntl(fd, ofdSetLock, &r) == 0
    }

    /// Takes SQLite's SHARED lock as SQLite does (a read lock on PENDING while
    /// taking the SHARED range, so that a writer waiting for EXCLUSIVE goes
    /// first), waiting up to `busyTimeout` milliseconds for a writer or a
    /// process rolling the journal back.
    private static func lockShared(_ fd: Int32, path: String, busyTimeout: Int) throws {
        let deadline = Deadline(seconds: Double(busyTimeout) / 1000)
        while true {
            var err: Int32 = 0
            if setLock(fd, F_RDLCK, pendingByte, 1) {
                let shared = setLock(fd, F_RDLCK, sharedFirst, sharedSize)
                err = errno
                _ = setLock(fd, F_UNLCK, pendingByte, 1)
                if shared { return }
            } else {
                err = errno
            }
            if err != EAGAIN && err != EACCES && err != EINTR {
                throw DatabaseError(code: .ioerr, message: "cannot take a read lock: \(String(cString: strerror(err)))", path: path)
            }
            if deadline.passed {
                throw DatabaseError(code: .busy, message: DatabaseError.lockedMessage(waited: Clock.now() - deadline.start), path: path)
            }
            usleep(1_000)
        }
    }

    private static func unlock(_ fd: Int32) {
        _ = setLock(fd, F_UNLCK, 0, 0)
    }

    /// Whether a connection holds RESERVED: then the journal is that writer's,
    /// live, and not hot (os_unix.c `unixCheckReservedLock`).
    private static func reservedIsHeld(_ fd: Int32) -> Bool {
        var r = region(F_WRLCK, reservedByte, 1)
        guard fcntl(fd, ofdGetLock, &r) == 0 else { return true }
        return r.l_type != Int16(F_UNLCK)
    }

    // MARK: Super-journal

    /// The super-journal record at the end of a journal (pager.c
    /// `writeSuperJournal`/`readSuperJournal`): 4 bytes page number, the name,
    /// its length and checksum (4 bytes each), the 8-byte magic. nil when
    /// there is none or it does not check out, as SQLite reads it.
    static func superJournalRecord(_ fd: Int32, size: Int64, path: String) throws -> (start: Int64, pageNumber: [UInt8], name: [UInt8])? {
        guard size >= 16 else { return nil }
        let tail = try readBytes(fd, at: size - 16, count: 16, path: path)
        guard tail.count == 16, Array(tail[8..<16]) == magic else { return nil }
        let length = Int64(u32(tail, 0)), checksum = u32(tail, 4)
        guard length > 0, length < Int64(maxPathname + 1), length <= size - 16 else { return nil }
        let name = try readBytes(fd, at: size - 16 - length, count: Int(length), path: path)
        guard name.count == Int(length) else { return nil }
        // SQLite subtracts each byte as a signed char.
        var sum = checksum
        for byte in name { sum = sum &- UInt32(bitPattern: Int32(Int8(bitPattern: byte))) }
        guard sum == 0, !name.contains(0) else { return nil }
        let start = size - 20 - length
        guard start >= 0 else { return nil }
        return (start, try readBytes(fd, at: start, count: 4, path: path), name)
    }

    /// Rewrites the super-journal record of the journal copy to name `name`.
    private static func replaceSuperJournal(in journal: TemporaryFile, recordAt start: Int64, pageNumber: [UInt8], name: String) throws {
        let bytes = Array(name.utf8)
        guard bytes.count <= maxPathname else {
            throw DatabaseError(code: .cantopen, message: "the temporary folder's path is too long for SQLite", path: name)
        }
        var checksum: UInt32 = 0
        for byte in bytes { checksum = checksum &+ UInt32(bitPattern: Int32(Int8(bitPattern: byte))) }
        var record = pageNumber
        record += bytes
        record += be32(UInt32(bytes.count)) + be32(checksum) + magic
        guard ftruncate(journal.descriptor, off_t(start)) == 0, lseek(journal.descriptor, off_t(start), SEEK_SET) >= 0 else {
            throw DatabaseError(code: .ioerr, message: "cannot rewrite the journal copy: \(String(cString: strerror(errno)))", path: journal.path)
        }
        try record.withUnsafeBytes { try journal.write($0) }
    }

    private static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        bytes[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }

    private static func be32(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32($0))) }
    }

    // MARK: Copying

    /// The slower of two methods (for the note, which names one).
    private static func worse(_ a: HotJournalCopy.Method, _ b: HotJournalCopy.Method) -> HotJournalCopy.Method {
        let order: [HotJournalCopy.Method] = [.reflink, .copyFileRange, .readWrite]
        return order.firstIndex(of: a)! >= order.firstIndex(of: b)! ? a : b
    }

    /// Linux's FICLONE ioctl (`_IOW(0x94, 9, int)`).
    private static let ficlone: UInt = 0x4004_9409

    /// Copies the `size` bytes of `fd` into the empty `file`: a reflink where
    /// the filesystem shares blocks, else `copy_file_range`, else chunks.
    /// Before a copy that takes space, the folder must have room for it and
    /// for `alsoNeeded` bytes more (what is still to be copied).
    private static func copy(_ fd: Int32, size: Int64, from path: String, into file: TemporaryFile, folder: String,
                             alsoNeeded: Int64) throws -> HotJournalCopy.Method {
        if size > 0, ioctl(file.descriptor, ficlone, fd) == 0 { return .reflink }
        try requireRoom(size + alsoNeeded, in: folder, for: path)
        var copied: Int64 = 0
        var method = HotJournalCopy.Method.copyFileRange
        while copied < size {
            var inOffset = Int64(copied)
            let n = litectl_copy_file_range(fd, &inOffset, file.descriptor, nil, Int(min(size - copied, 1 << 30)), 0)
            if n > 0 { copied += Int64(n); continue }
            if n == 0 { break }
            let err = errno
            if err == EINTR { continue }
            if [ENOSPC, EDQUOT, EFBIG].contains(err) { throw full(folder, err, path) }
            // Not supported here (another filesystem, an old kernel): chunks.
            guard copied == 0, [ENOSYS, EXDEV, EINVAL, EOPNOTSUPP, EBADF, EPERM].contains(err) else {
                throw DatabaseError(code: .ioerr, message: "cannot copy: \(String(cString: strerror(err)))", path: path)
            }
            method = .readWrite
            break
        }
        if method == .readWrite {
            let chunk = 1 << 20
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
            defer { buffer.deallocate() }
            while copied < size {
                let n = pread(fd, buffer.baseAddress!, min(chunk, Int(size - copied)), off_t(copied))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw DatabaseError(code: .ioerr, message: "read failed: \(String(cString: strerror(errno)))", path: path)
                }
                if n == 0 { break }
                do { try file.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) } catch let error as DatabaseError where error.code.primary == .full {
                    throw full(folder, ENOSPC, path)
                }
                copied += Int64(n)
            }
        }
        guard copied == size else {
            throw DatabaseError(code: .ioerr, message: "the file ended while it was copied (\(copied) of \(size) bytes)", path: path)
        }
        return method
    }

    private static func full(_ folder: String, _ err: Int32, _ path: String) -> DatabaseError {
        DatabaseError(code: .full,
                      message: "the rollback journal is hot, and the private copy that reads its last committed state does not fit in \(folder) (\(String(cString: strerror(err)))): set TMPDIR to a folder with room",
                      path: path)
    }

    /// Fails, before anything is copied, when `folder` has less than `bytes` free.
    private static func requireRoom(_ bytes: Int64, in folder: String, for path: String) throws {
        var info = statvfs()
        guard statvfs(folder, &info) == 0 else { return }
        let free = Int64(info.f_bavail) * Int64(info.f_frsize)
        if free < bytes {
            throw DatabaseError(code: .full,
                                message: "the rollback journal is hot (a writer stopped inside a transaction): reading its last committed state needs a private copy of \(humanBytes(bytes)) in \(folder), which has \(humanBytes(free)) free: set TMPDIR to a folder with room (on the database's own filesystem, where it supports reflinks, the copy takes none)",
                                path: path)
        }
    }
}

/// glibc's copy_file_range (unistd.h with _GNU_SOURCE, which the Glibc module does not export).
@_silgen_name("copy_file_range")
private func litectl_copy_file_range(_ fdIn: Int32, _ offIn: UnsafeMutablePointer<Int64>?, _ fdOut: Int32,
                                     _ offOut: UnsafeMutablePointer<Int64>?, _ length: Int, _ flags: UInt32) -> Int
