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

    /// Takes the lock of `folder`, waiting up to `timeout` seconds. The lock
    /// file is made through the write gate (`owner`: the folder's writer)
    /// and never opened through a link (`O_NOFOLLOW`: a lock file that is a
    /// link to another file is an error, not a way to create or lock it).
    public init(folder: String, timeout: Double, owner: WriteGate.Tree? = nil) throws {
        let path = (folder.hasSuffix("/") ? folder : folder + "/") + FolderLock.fileName
        try WriteGate.shared.requireWritable(path, what: "the folder's lock file", replacing: .always, owner: owner)
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
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
