// Long-lived work on a thread of its own with a name (`top -H`, gdb and
// /proc/PID/task/*/comm show it): the replicate follower's shipper, each
// database's follower, a gathering. Its result can be asked for without
// waiting (`result`) or waited for (`wait`).
import Foundation

final class NamedThread<T>: @unchecked Sendable {
    private let outcome = Locked<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    /// The work, handed to the new thread (which alone calls it).
    private final class Work: @unchecked Sendable {
        let body: () -> T
        init(_ body: @escaping () -> T) { self.body = body }
    }

    /// Starts `work` on a new thread named `name` (at most 15 bytes show).
    init(_ name: String, _ work: @escaping () -> T) {
        let work = Work(work)
        let thread = Thread { [outcome, done] in
            let value = work.body()
            outcome.withLock { $0 = value }
            done.signal()
        }
        thread.name = name
        thread.start()
    }

    /// The result, once the work is done (nil before).
    var result: T? { outcome.withLock { $0 } }

    /// Waits for the work to end; returns its result (again on each call).
    func wait() -> T {
        done.wait(); done.signal()
        return outcome.withLock { $0! }
    }
}
