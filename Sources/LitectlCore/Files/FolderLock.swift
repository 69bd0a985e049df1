// A lock per destination folder (flock on `.litectl-backup.lock` in it), so
// that overlapping cron runs take turns instead of colliding; the kernel
// releases it when the process ends, however it ends.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public final class FolderLock {
    public static let fileName = ".litectl-backup.lock"
    private var descriptor: Int32

    /// Takes the lock of `folder`, waiting up to `timeout` seconds.
    public init(folder: String, timeout: Double) throws {
        let path = (folder.hasSuffix("/") ? folder : folder + "/") + FolderLock.fileName
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DatabaseError(code: .cantopen, message: "cannot create the lock file: \(String(cString: strerror(errno)))", path: path)
        }
        let deadline = Deadline(seconds: timeout)
        let started = Clock.now()
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let err = errno
            if err != EWOULDBLOCK && err != EINTR {
                close(fd)
                throw DatabaseError(code: .ioerr, message: "cannot lock: \(String(cString: strerror(err)))", path: path)
            }
            if deadline.passed {
                close(fd)
                throw DatabaseError(code: .busy,
                                    message: "another litectl backup is writing to this folder (gave up waiting for its lock after \(Self.shown(Clock.now() - started)))",
                                    path: folder)
            }
            usleep(50_000)
        }
        descriptor = fd
    }

    /// A wait as the lock messages say it: milliseconds below 0.1 s, else tenths of seconds.
    static func shown(_ seconds: Double) -> String {
        seconds < 0.1 ? "\(Int((seconds * 1000).rounded())) ms" : "\((seconds * 10).rounded() / 10) s"
    }

    public func release() {
        if descriptor >= 0 { close(descriptor); descriptor = -1 }
    }

    deinit { release() }
}
