// UTC timestamps as litectl writes them: ISO 8601 with milliseconds in
// manifests, snapshots and reports, and a compact form in file names.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// UTC timestamps for manifests, snapshots and backup names.
public enum Timestamp {
    /// `2026-11-22T02:32:09.123Z`.
    public static func iso8601(_ seconds: Double) -> String {
        let p = parts(seconds)
        return "\(p.year)-\(pad(p.month))-\(pad(p.day))T\(pad(p.hour)):\(pad(p.minute)):\(pad(p.second)).\(pad(p.millisecond, 3))Z"
    }

    /// `20261122T023209Z`: sortable, nothing to quote in a shell.
    public static func compact(_ seconds: Double) -> String {
        let p = parts(seconds)
        return "\(p.year)\(pad(p.month))\(pad(p.day))T\(pad(p.hour))\(pad(p.minute))\(pad(p.second))Z"
    }

    struct Parts { var year, month, day, hour, minute, second, millisecond, weekday, yearDay: Int }

    static func parts(_ seconds: Double) -> Parts {
        var t = time_t(seconds.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        let ms = Int(((seconds - seconds.rounded(.down)) * 1000).rounded(.down))
        return Parts(year: Int(tm.tm_year) + 1900, month: Int(tm.tm_mon) + 1, day: Int(tm.tm_mday),
                     hour: Int(tm.tm_hour), minute: Int(tm.tm_min), second: Int(tm.tm_sec), millisecond: ms,
                     weekday: Int(tm.tm_wday), yearDay: Int(tm.tm_yday))
    }

    static func pad(_ n: Int, _ width: Int = 2) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}
