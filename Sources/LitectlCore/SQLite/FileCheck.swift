// Checks made on a database path before SQLite sees it, so that a newcomer's
// mistakes (a typo, a folder, a text file, a file they cannot read) get one
// clear line instead of SQLite's generic "unable to open database file".
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A path that names a page source (a moment of a repository: see PageVFS's
/// names) is never looked up on disk here: its checks pass when it is bound,
/// its size and bytes are the image's, and anything beside it (-wal,
/// -journal) does not exist.
enum FileCheck {
    /// Fails unless `path` names an existing regular file that this process can
    /// read (and write, when `writable`), and, unless `whole` is false (a
    /// damaged file that `recover` reads), one that is a complete database
    /// (`shapeProblem`). Never creates anything.
    /// `shape: false` makes only the checks that do not open the file (for a
    /// file this process already has open: see Connection).
    static func requireDatabaseFile(_ path: String, writable: Bool, whole: Bool = true, shape: Bool = true) throws {
        if PageVFS.namesSource(path) { _ = try PageVFS.requireSource(named: path, writing: writable); return }
        var info = stat()
        if stat(path, &info) != 0 {
            let err = errno
            switch err {
            case ENOENT:
                throw DatabaseError(code: .cantopen, message: "no such file", path: path)
            case ENOTDIR:
                throw DatabaseError(code: .cantopen, message: "no such file (a parent is not a folder)", path: path)
            case EACCES:
                throw DatabaseError(code: .cantopen, message: "permission denied (cannot reach the file)", path: path)
            default:
                throw DatabaseError(code: .cantopen, message: String(cString: strerror(err)), path: path)
            }
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFDIR {
            throw DatabaseError(code: .cantopen, message: "is a directory, not a database file", path: path)
        }
        if type != S_IFREG {
            throw DatabaseError(code: .cantopen, message: "not a regular file", path: path)
        }
        if access(path, R_OK) != 0 {
            throw DatabaseError(code: .cantopen, message: "permission denied (file is not readable)", path: path)
        }
        try requireRegularCompanions(path)
        if writable && access(path, W_OK) != 0 {
            throw DatabaseError(code: .readonly, message: "permission denied (file is not writable)", path: path)
        }
        if shape, whole, let problem = shapeProblem(path, size: Int64(info.st_size)) {
            throw DatabaseError(code: .notadb, message: problem, path: path)
        }
    }

    /// Fails when the database's `-journal` exists and is not a regular file
    /// (a FIFO, a device, a socket): SQLite opens it to see whether it is hot,
    /// whatever the journal mode, and the open of a FIFO waits for a writer
    /// forever. SQLite only ever makes a regular file there, so such a file
    /// was put there by hand or by someone hostile. Looked at with stat(),
    /// which never blocks, beside the file a symbolic link names (where
    /// SQLite looks). (A FIFO `-wal` does not stop SQLite: left alone.)
    static func requireRegularCompanions(_ path: String) throws {
        if PageVFS.namesSource(path) { return }
        var resolved = path
        if let real = realpath(path, nil) {
            resolved = String(cString: real)
            free(real)
        }
        for suffix in ["-journal"] {
            var info = stat()
            guard stat(resolved + suffix, &info) == 0 else { continue }
            let kind: String
            switch info.st_mode & S_IFMT {
            case S_IFREG: continue
            case S_IFIFO: kind = "a FIFO"
            case S_IFDIR: kind = "a folder"
            case S_IFCHR, S_IFBLK: kind = "a device"
            case S_IFSOCK: kind = "a socket"
            default: kind = "not a regular file"
            }
            throw DatabaseError(code: .cantopen,
                                message: "its \(suffix) file \(resolved + suffix) is \(kind), not a file SQLite made: SQLite would wait on it or fail; move it away",
                                path: path)
        }
    }

    /// The SQLite header's first 16 bytes.
    static let magic: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// Why the file at `path` (`size` bytes) is not a complete database, in
    /// the words every command uses, or nil. Checked before SQLite opens it,
    /// so that `info`, `check`, `hash` and the rest say the same thing:
    /// - a file that does not start with SQLite's header is "not a SQLite
    ///   database" (a 0-byte file is an empty database, as SQLite reads it);
    /// - one cut short inside its 100-byte header or first page, or shorter
    ///   than the page count its header gives (when that count is valid and
    ///   no -wal or -journal could supply the rest: SQLite itself then reports
    ///   the file as corrupt), is "truncated".
    static func shapeProblem(_ path: String, size: Int64) -> String? {
        guard size > 0, let head = try? readPrefix(of: path, count: 100) else { return nil }
        let sizeText = "the file is \(size) bytes"
        if head.count < 100 {
            let n = min(head.count, magic.count)
            return head.prefix(n).elementsEqual(magic.prefix(n))
                ? "truncated: not a complete SQLite database (\(sizeText), shorter than the 100-byte header)"
                : "not a SQLite database (\(sizeText), shorter than the 100-byte header)"
        }
        guard head.prefix(16).elementsEqual(magic) else {
            return "not a SQLite database (no \"SQLite format 3\" header)"
        }
        func u32(_ at: Int) -> UInt32 { head[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
        let stored = Int64(head[16]) << 8 | Int64(head[17])
        let pageSize = stored == 1 ? 65536 : stored
        // A page size SQLite would not accept is for SQLite to report.
        guard pageSize >= 512, pageSize & (pageSize - 1) == 0 else { return nil }
        if size < pageSize {
            return "truncated: not a complete SQLite database (\(sizeText), shorter than its first page of \(pageSize) bytes)"
        }
        let pages = Int64(u32(28))
        let countValid = pages > 0 && u32(24) == u32(92)
        let companions = ["-wal", "-journal"].contains { (Self.size(of: path + $0) ?? 0) > 0 }
        // The size again, read after the header and the companions: a
        // rollback-journal writer's commit that ended meanwhile (its header
        // read, its -journal gone) has written every page by now, where the
        // size read before it may predate the pages it added.
        let sizeNow = Self.size(of: path) ?? size
        if countValid && !companions && pages * pageSize > sizeNow {
            return "truncated: not a complete SQLite database (its header gives \(pages) pages of \(pageSize) bytes, \(pages * pageSize) bytes; the file is \(sizeNow) bytes)"
        }
        return nil
    }

    /// True for a WAL-mode database with no -wal file, in a folder this process
    /// may not write (so no -shm can be made and no writer can be active).
    static func isQuiescentWALInReadOnlyFolder(_ path: String) -> Bool {
        if PageVFS.namesSource(path) { return false }
        guard let header = try? readPrefix(of: path, count: 20), header.count == 20, header[18] == 2 else { return false }
        guard access(path + "-wal", F_OK) != 0 else { return false }
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        return access(folder.isEmpty ? "/" : folder, W_OK) != 0
    }

    /// The size in bytes of the file at `path`, or nil when there is none.
    static func size(of path: String) -> Int64? {
        if PageVFS.namesSource(path) {
            return PageVFS.source(named: path).map { Int64($0.source.pageSize) * Int64($0.source.pageCount) }
        }
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Up to `count` bytes from the start of the file (fewer when it is shorter).
    static func readPrefix(of path: String, count: Int) throws -> [UInt8] {
        if PageVFS.namesSource(path) { return try PageVFS.prefix(of: try PageVFS.requireSource(named: path), count: count) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            throw DatabaseError(code: .cantopen, message: String(cString: strerror(errno)), path: path)
        }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = buffer.withUnsafeMutableBytes { raw in
                read(fd, raw.baseAddress! + filled, count - filled)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw DatabaseError(code: .ioerr, message: String(cString: strerror(errno)), path: path)
            }
            if n == 0 { break }
            filled += n
        }
        return Array(buffer.prefix(filled))
    }
}
