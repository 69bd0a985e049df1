// Running one piece of work on several threads at once and waiting for all
// of them: the calling thread takes a share too. Plain pthreads, so that the
// work may block and may use C handles that belong to no Swift actor.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum ParallelWork {
    /// Calls `body(0)` on this thread and `body(1)` ... `body(count - 1)` on
    /// new threads, and returns when all have returned. A thread that cannot
    /// be started leaves its share to this thread (run after its own).
    static func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        guard count > 1 else { body(0); return }
        final class Box: @unchecked Sendable {
            let body: @Sendable (Int) -> Void
            let index: Int
            init(_ body: @escaping @Sendable (Int) -> Void, _ index: Int) { self.body = body; self.index = index }
        }
        var threads: [pthread_t] = []
        var leftOver: [Int] = []
        for index in 1..<count {
            var thread = pthread_t()
            let box = Unmanaged.passRetained(Box(body, index)).toOpaque()
            let rc = pthread_create(&thread, nil, { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body(box.index)
                return nil
            }, box)
            if rc == 0 {
                threads.append(thread)
            } else {
                Unmanaged<Box>.fromOpaque(box).release()
                leftOver.append(index)
            }
        }
        body(0)
        for index in leftOver { body(index) }
        for thread in threads { pthread_join(thread, nil) }
    }
}

/// A counter that threads take numbers from, one at a time.
final class WorkCounter: @unchecked Sendable {
    private var next = 0
    private var mutex = pthread_mutex_t()

    init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }

    /// The next number (0, 1, 2, ...).
    func take() -> Int {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        next += 1
        return next - 1
    }
}
