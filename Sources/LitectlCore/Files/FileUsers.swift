// Whether another process has a file open, as /proc shows it (what `fuser`
// reads): every descriptor of every process is compared with the file by
// device and inode. A process whose descriptors this one may not list (another
// user's, unless litectl runs as root) counts as one that may have it open.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum FileUsers {
    /// What /proc says about the processes that have a file open.
    public enum Finding: Sendable, Equatable {
        /// No other process has it open, as far as this host's /proc shows.
        case none
        /// This process (pid and name) has it open.
        case process(Int32, String)
        /// Some process's descriptors cannot be listed (the reason in words).
        case unknown(String)

        /// The finding as the end of a sentence: "pid 1234 (sqlite3) has it open".
        public var words: String {
            switch self {
            case .none: "no other process has it open"
            case .process(let pid, let name): "pid \(pid) (\(name)) has it open"
            case .unknown(let why): why
            }
        }
    }

    /// Looks for processes other than this one with any of `paths` open
    /// (those that exist). Other hosts, over a network file system, and
    /// processes in another PID namespace (another container) are not seen.
    public static func others(of paths: [String]) -> Finding {
        var wanted: [(UInt64, UInt64)] = []
        for path in paths {
            var info = stat()
            if stat(path, &info) == 0 { wanted.append((UInt64(info.st_dev), UInt64(info.st_ino))) }
        }
        guard !wanted.isEmpty else { return .none }
        #if os(Linux)
        guard let proc = opendir("/proc") else { return .unknown("/proc cannot be read") }
        defer { closedir(proc) }
        let me = getpid()
        while let entry = readdir(proc) {
            let name = entryName(entry)
            guard let pid = Int32(name), pid > 0, pid != me else { continue }
            let folder = "/proc/\(name)/fd"
            guard let fds = opendir(folder) else {
                // A process that ended meanwhile is no user; one we may not look into may be.
                if errno == ENOENT || errno == ESRCH { continue }
                return .unknown("the open files of pid \(pid) (\(command(of: pid))) cannot be listed by this user")
            }
            defer { closedir(fds) }
            while let fd = readdir(fds) {
                let number = entryName(fd)
                guard number.first?.isNumber == true else { continue }
                var info = stat()
                // stat through the magic link: the open file itself.
                guard stat(folder + "/" + number, &info) == 0 else { continue }
                if wanted.contains(where: { $0.0 == UInt64(info.st_dev) && $0.1 == UInt64(info.st_ino) }) {
                    return .process(pid, command(of: pid))
                }
            }
        }
        return .none
        #else
        return .unknown("this system has no /proc to tell which processes have it open")
        #endif
    }

    private static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
    }

    /// The process's command name (/proc/PID/comm), or "?".
    static func command(of pid: Int32) -> String {
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "?" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { return "?" }
        return String(decoding: buffer[0..<n], as: UTF8.self).trimmingWhitespace()
    }
}
