// The sqlite3 shell with sqlite_dbpage, whose `.recover` is the oracle the
// recover tests measure litectl against (Debian's shell lacks sqlite_dbpage),
// built once by scripts/build-sqlite-shell into a cache folder outside git;
// and a runner that watches a child's time and peak memory, for fuzzing.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The shell's path, or nil when it cannot be built here (no network, no
/// compiler): the comparisons with `.recover` are then skipped. Set
/// LITECTL_SQLITE_SHELL to use a shell built elsewhere.
public let recoverShell: String? = {
    let environment = ProcessInfo.processInfo.environment
    if let given = environment["LITECTL_SQLITE_SHELL"], !given.isEmpty {
        return FileManager.default.isExecutableFile(atPath: given) ? given : nil
    }
    guard let result = try? runProcess(packageRoot + "/scripts/build-sqlite-shell", []), result.status == 0 else { return nil }
    let path = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}()

/// How a child process ended under `runWatched`.
public struct WatchedResult: Sendable {
    public var status: Int32
    /// The signal that ended it, if one did.
    public var signal: Int32?
    public var timedOut: Bool
    /// Its peak resident memory, in KiB.
    public var peakKiB: Int
    public var stderr: String
}

/// A running process's peak resident memory so far (VmHWM), in KiB; 0 once it has exited.
func highWaterKiB(of pid: pid_t) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// Runs `executable` with `arguments` (stdout discarded), killing it after
/// `timeout` seconds; reports how it ended and its peak memory (sampled every
/// 10 ms, so a spike shorter than that may be missed; filling hundreds of MB
/// takes longer).
public func runWatched(_ executable: String, _ arguments: [String], timeout: Double) throws -> WatchedResult {
    let errPath = NSTemporaryDirectory() + "litectl-watched-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).err"
    defer { unlink(errPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    // Tests run in parallel: the child must not keep other tests' descriptors
    // (pipes, held locks) open. glibc's closefrom action is not in Swift's
    // view of spawn.h (it needs _GNU_SOURCE), so it is looked up.
    if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }
    let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
    guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32 = 0
    var usage = rusage()
    var timedOut = false
    var peakKiB = 0
    while true {
        // The peak is polled from /proc (VmHWM) while the program runs: wait4's
        // ru_maxrss is useless here, since posix_spawn's child shares the test
        // runner's memory until exec, and the kernel counts that as its peak.
        peakKiB = max(peakKiB, highWaterKiB(of: pid))
        let done = wait4(pid, &status, WNOHANG, &usage)
        if done == pid { break }
        if done < 0 && errno != EINTR { throw POSIXError(.ECHILD) }
        if Date() > deadline && !timedOut {
            timedOut = true
            kill(pid, SIGKILL)
        }
        usleep(10_000)
    }
    let signaled = status & 0x7F != 0 && status & 0x7F != 0x7F
    let errText = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return WatchedResult(status: signaled ? -1 : (status >> 8) & 0xFF, signal: signaled ? status & 0x7F : nil,
                         timedOut: timedOut, peakKiB: peakKiB, stderr: errText)
}
