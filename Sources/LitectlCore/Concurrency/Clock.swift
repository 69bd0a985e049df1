// Time as the waits and timings of every command read it: a monotonic clock
// for durations and deadlines, the wall clock for timestamps.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic seconds.
enum Clock {
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Seconds since 1970 (wall clock).
    static func wall() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// A wait that ends `seconds` after it began (on the monotonic clock); `start`
/// lets a message say how long was really waited.
struct Deadline {
    let start: Double
    let end: Double
    init(seconds: Double) { start = Clock.now(); end = start + seconds }
    var passed: Bool { Clock.now() >= end }
}
