// Checks made on a database path before SQLite sees it, so that a newcomer's
// mistakes (a typo, a folder, a text file, a file they cannot read) get one
// clear line instead of SQLite's generic "unable to open database file".
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum FileCheck {
    /// Fails unless `path` names an existing regular file that this process can
    /// read (and write, when `writable`). Never creates anything.
    static func requireDatabaseFile(_ path: String, writable: Bool) throws {
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
        if writable && access(path, W_OK) != 0 {
            throw DatabaseError(code: .readonly, message: "permission denied (file is not writable)", path: path)
        }
    }

    /// True for a WAL-mode database with no -wal file, in a folder this process
    /// may not write (so no -shm can be made and no writer can be active).
    static func isQuiescentWALInReadOnlyFolder(_ path: String) -> Bool {
        guard let header = try? readPrefix(of: path, count: 20), header.count == 20, header[18] == 2 else { return false }
        guard access(path + "-wal", F_OK) != 0 else { return false }
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        return access(folder.isEmpty ? "/" : folder, W_OK) != 0
    }

    /// The size in bytes of the file at `path`, or nil when there is none.
    static func size(of path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Up to `count` bytes from the start of the file (fewer when it is shorter).
    static func readPrefix(of path: String, count: Int) throws -> [UInt8] {
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
