// Two pieces of work at once on the machine's cores: backups hash while they
// copy, repository backups check while they store, recover proves b-trees
// while SQLite copies them. Plain pthreads, so that the work may hold
// SQLite connections and page buffers that are not Sendable (each piece
// touches only its own), and a failure to start a thread is never fatal.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Two pieces of work at once: one on a new thread, one on the caller's.
enum Concurrently {
    private protocol Runnable: AnyObject { func runWork() }

    private final class Box<T>: Runnable, @unchecked Sendable {
        let work: () throws -> T
        var result: Result<T, any Error>?
        init(_ work: @escaping () throws -> T) { self.work = work }
        func runWork() { result = Result { try work() } }
    }

    /// Work started on a thread of its own, whose result `wait` gives (the
    /// thread is joined then, or when the handle goes away unwaited). When
    /// no thread can be started, the work runs in `wait` (never at the start:
    /// it may wait for what the starting thread does next), or not at all.
    final class Pending<T>: @unchecked Sendable {
        private let box: Box<T>
        private var thread = pthread_t()
        private var started = false, joined = false

        fileprivate init(_ work: @escaping () throws -> T) {
            box = Box(work)
            let context = Unmanaged.passRetained(box as AnyObject).toOpaque()
            let rc = pthread_create(&thread, nil, { raw in
                let object = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue()
                (object as! any Runnable).runWork()
                return nil
            }, context)
            if rc == 0 { started = true } else { Unmanaged<AnyObject>.fromOpaque(context).release() }
        }

        func wait() throws -> T {
            if started && !joined { pthread_join(thread, nil); joined = true }
            if !started && box.result == nil { box.runWork() }
            return try box.result!.get()
        }

        deinit { if started && !joined { pthread_join(thread, nil) } }
    }

    /// Starts `work` on another thread (or, when none can be started, in `wait`).
    static func start<T>(_ work: @escaping () throws -> T) -> Pending<T> { Pending(work) }

    /// Runs `background` on another thread and `foreground` on this one, waits
    /// for both, and returns both results; an error of the foreground is
    /// thrown first, then one of the background.
    static func run<A, B>(_ background: @escaping () throws -> A, _ foreground: () throws -> B) throws -> (A, B) {
        let pending = start(background)
        let front = Result { try foreground() }
        let back = Result { try pending.wait() }
        let frontValue = try front.get()
        return (try back.get(), frontValue)
    }
}
