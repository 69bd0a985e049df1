// A child process run through /bin/sh -c (`replicate --exec CMD`): started
// with every signal at its default and none blocked, whatever this process
// ignores or blocks, signalled on request, and waited for with its exit
// status as a shell reports it.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a child ended.
public enum ChildExit: Sendable, Equatable {
    case exited(Int32)
    case signalled(Int32)

    /// The status a shell gives it: its exit code, or 128 + the signal.
    public var status: Int32 {
        switch self {
        case .exited(let code): code
        case .signalled(let signal): 128 + signal
        }
    }
}

/// A child that could not be started.
public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// A child process. Waited for once, by `wait()`.
public final class ChildProcess: Sendable {
    public let pid: pid_t
    /// The command line as given, for messages.
    public let command: String

    /// Starts `/bin/sh -c command`, with this process's environment, working
    /// folder and standard streams. Throws when it cannot start at all (a
    /// command that is not found is the shell's exit 127).
    public init(shellCommand command: String) throws {
        self.command = command
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // This process ignores SIGTERM and SIGINT (it takes them through a
        // dispatch source) and may block some: an ignored signal stays
        // ignored across exec, so the child would not stop on SIGTERM.
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        // No descriptor but the standard streams: the repository's sockets and
        // lock files stay this process's (glibc 2.34's closefrom action, when there).
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        let arguments = ["/bin/sh", "-c", command]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var child = pid_t()
        let result = posix_spawn(&child, "/bin/sh", &actions, &attributes, &argv, environ)
        guard result == 0 else {
            throw ChildProcessError(description: "cannot start /bin/sh -c \(command): \(String(cString: strerror(result)))")
        }
        pid = child
    }

    /// Sends `signal` to the child (nothing when it has ended and been waited for).
    public func signal(_ signal: Int32) {
        _ = kill(pid, signal)
    }

    /// Waits until the child ends.
    public func wait() -> ChildExit {
        var status: Int32 = 0
        while true {
            let r = waitpid(pid, &status, 0)
            if r == pid { break }
            if r < 0 && errno != EINTR { return .exited(127) }
        }
        // <sys/wait.h>'s macros, which Swift does not import.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }
}
