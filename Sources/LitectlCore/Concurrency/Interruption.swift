// Signals that stop a write into a user's database without leaving it half
// done. While such a write is in flight (`Interruption.guarding`), SIGINT,
// SIGTERM and SIGHUP only record the signal and interrupt the connections
// doing it (sqlite3_interrupt, as the sqlite3 shell's handler does); the
// write then fails, rolls back and the command exits 2 naming the signal.
// Outside one, a signal ends the process at once as before
// (TemporaryFiles.installSignalCleanup), after one line saying why.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A write stopped by a signal, after it was rolled back.
public struct Interrupted: Error, CustomStringConvertible, Sendable {
    public var signal: Int32
    /// The file the write was for.
    public var path: String?
    /// Where that leaves it ("nothing restored; the file is as it was").
    public var consequence: String?

    public init(signal: Int32, path: String? = nil, consequence: String? = nil) {
        self.signal = signal
        self.path = path
        self.consequence = consequence
    }

    public var description: String {
        (path.map { "\($0): " } ?? "") + "interrupted by \(Interruption.name(of: signal))" + (consequence.map { "; " + $0 } ?? "")
    }
}

public enum Interruption {
    /// Memory the signal handler reads and writes, set up before the handler
    /// is installed: [0] the first signal received (0: none), [1] how many
    /// guarded writes are in flight, [2] the length of `prefix`.
    nonisolated(unsafe) static let state: UnsafeMutablePointer<Int32> = {
        let p = UnsafeMutablePointer<Int32>.allocate(capacity: 4)
        p.initialize(repeating: 0, count: 4)
        return p
    }()
    static let slotCount = 8
    /// The `sqlite3*` handles of the connections a guarded write uses (nil: free slot).
    nonisolated(unsafe) static let handles: UnsafeMutablePointer<OpaquePointer?> = {
        let p = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: slotCount)
        p.initialize(repeating: nil, count: slotCount)
        return p
    }()
    static let prefixCapacity = Int(PATH_MAX) + 64
    /// "litectl: PATH: " for the line an immediate exit writes.
    nonisolated(unsafe) static let prefix: UnsafeMutablePointer<UInt8> = {
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: prefixCapacity)
        p.initialize(repeating: 0, count: prefixCapacity)
        return p
    }()

    /// Installs the signal handlers (`TemporaryFiles.installSignalCleanup`)
    /// with this takeover in front: a command that writes a database in
    /// place calls it first. `path` names the file in the line a signal
    /// outside a guarded write prints before the process exits.
    public static func install(naming path: String?) {
        prepare()
        var line = Array("litectl: ".utf8)
        if let path { line += Array(TerminalText.visible(path).utf8) + Array(": ".utf8) }
        line = Array(line.prefix(prefixCapacity))
        for (i, byte) in line.enumerated() { prefix[i] = byte }
        state[2] = Int32(line.count)
        TemporaryFiles.installSignalCleanup()
    }

    /// Sets up the memory the handler uses (lazily made globals must not be
    /// made first inside a signal handler).
    static func prepare() {
        _ = state; _ = handles; _ = prefix
    }

    /// The signal handler's first step (async-signal-safe: stores, `write`
    /// and sqlite3_interrupt only). During a guarded write it records the
    /// signal, interrupts the write's connections and returns true: the
    /// process goes on, rolls back and exits by itself. Otherwise it writes
    /// `litectl: PATH: interrupted by SIGNAL` (once `install` was called)
    /// and returns false, and the handler exits as it did before.
    static func takeOver(_ signal: Int32) -> Bool {
        if state[0] == 0 { state[0] = signal }
        if state[1] > 0 {
            for i in 0..<slotCount { if let handle = handles[i] { sqlite3_interrupt(handle) } }
            return true
        }
        if state[2] > 0 {
            _ = write(2, prefix, Int(state[2]))
            let word: StaticString = "interrupted by "
            _ = write(2, word.utf8Start, word.utf8CodeUnitCount)
            let name: StaticString = signal == SIGINT ? "SIGINT\n" : signal == SIGTERM ? "SIGTERM\n" : signal == SIGHUP ? "SIGHUP\n" : "a signal\n"
            _ = write(2, name.utf8Start, name.utf8CodeUnitCount)
        }
        return false
    }

    /// The signal that arrived, if any.
    public static var received: Int32? {
        let signal = state[0]
        return signal == 0 ? nil : signal
    }

    /// Throws `Interrupted` when a signal arrived: called between the steps
    /// of a guarded write that SQLite does not see (a statement boundary, a
    /// chunk of a backup).
    public static func check(path: String? = nil) throws {
        if let signal = received { throw Interrupted(signal: signal, path: path) }
    }

    /// "SIGINT", "SIGTERM", "SIGHUP" or "signal N".
    public static func name(of signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }

    /// Runs `body`, a write through `connections`, with signals deferred: a
    /// signal interrupts the statement running (sqlite3_interrupt), stops
    /// long statements after it (a progress handler), a wait for a lock (a
    /// busy handler that gives up) and any COMMIT (a commit hook); `body`
    /// then fails and must leave no change behind (its transaction rolled
    /// back). Loops of short statements call `check()` between them. Once `body` has returned, its work stands:
    /// a signal that came after its last statement began does not undo it.
    /// A signal already received fails at once.
    /// The connections must outlive the call.
    public static func guarding<T>(_ connections: [Connection], _ body: () throws -> T) throws -> T {
        try check()
        var slots: [Int] = []
        var waits: [BusyWait] = []
        for connection in connections {
            let wait = BusyWait(milliseconds: connection.busyTimeout)
            waits.append(wait)
            sqlite3_busy_handler(connection.rawHandle, { context, count in
                let wait = Unmanaged<BusyWait>.fromOpaque(context!).takeUnretainedValue()
                return wait.again(count) ? 1 : 0
            }, Unmanaged.passUnretained(wait).toOpaque())
            sqlite3_progress_handler(connection.rawHandle, 1000, { _ in Interruption.state[0] != 0 ? 1 : 0 }, nil)
            // The guarantee: no COMMIT after a signal, whatever the loop did
            // (a flag set between two statements is cleared by SQLite when
            // the next one starts; a commit hook that returns non-zero turns
            // the COMMIT into a ROLLBACK).
            sqlite3_commit_hook(connection.rawHandle, { _ in Interruption.state[0] != 0 ? 1 : 0 }, nil)
            if let slot = (0..<slotCount).first(where: { handles[$0] == nil }) {
                handles[slot] = connection.rawHandle
                slots.append(slot)
            }
        }
        state[1] += 1
        defer {
            // Handler first: once the count is 0 it reads no handle.
            state[1] -= 1
            for slot in slots { handles[slot] = nil }
            for connection in connections {
                sqlite3_progress_handler(connection.rawHandle, 0, nil, nil)
                sqlite3_commit_hook(connection.rawHandle, nil, nil)
                connection.setBusyTimeout(connection.busyTimeout)
            }
            withExtendedLifetime(waits) {}
        }
        return try body()
    }

    /// Runs `body` (the clean-up after a guarded write failed: its rollback)
    /// with signals only recorded, so that a second Ctrl-C does not stop the
    /// rollback of the first.
    public static func deferring<T>(_ body: () throws -> T) rethrows -> T {
        state[1] += 1
        defer { state[1] -= 1 }
        return try body()
    }

    /// A busy handler that waits like `sqlite3_busy_timeout` (short sleeps up
    /// to the connection's timeout) but gives up at once on a signal.
    final class BusyWait {
        let milliseconds: Int
        /// When the wait for the lock in hand began (SQLite counts from 0 for each).
        var started = Clock.now()
        init(milliseconds: Int) { self.milliseconds = milliseconds }

        func again(_ count: Int32) -> Bool {
            if count == 0 { started = Clock.now() }
            if Interruption.state[0] != 0 { return false }
            let waited = Int((Clock.now() - started) * 1000)
            guard waited < milliseconds else { return false }
            let nap = min(count < 10 ? Int(count) + 1 : 20, milliseconds - waited)
            usleep(UInt32(max(1, nap) * 1000))
            return Interruption.state[0] == 0
        }
    }
}
