// A value behind a lock, for state that worker threads share (the checks of
// `check -j`, a backup's bookkeeping while its copy runs).
import Foundation

/// A value behind a lock. (Synchronization's Mutex needs macOS 15; the
/// package supports macOS 13.)
final class Locked<State>: @unchecked Sendable {
    private var state: State
    private let lock = NSLock()

    init(_ state: State) { self.state = state }

    func withLock<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
}
