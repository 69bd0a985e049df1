// Moments as people write them: the WHEN of `restore --at WHEN` and of the
// moment reference `repo:NAME@WHEN` (RFC 3339 with Z or an offset, a time
// before now such as -10m, epoch seconds, latest, a snapshot id). The reading
// side of Timestamp, in the base so that every command reads WHEN alike.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What WHEN names: the newest state (`latest`), one snapshot (a prefix of
/// its id), or the newest state at or before a time.
public enum PointInTime: Equatable, Sendable {
    case latest
    /// Hex digits, lowercased: a snapshot id or a prefix of one.
    case snapshot(String)
    /// Seconds since the epoch (UTC).
    case time(Double)

    /// The accepted forms of a time, for error messages and help texts.
    public static let timeForms = "2026-12-07T09:00:00Z, 2026-12-07T09:00:00+01:00, 2026-12-07T09:00:00.250Z, 2026-12-07, -10m, -1h30m, 1765098000"

    /// Reads WHEN: `latest`; a time (see `MomentTime.parse`); or a snapshot
    /// id: 4 or more hex digits with a letter among them, or all 64. A run of
    /// decimal digits is epoch seconds, never an id: a snapshot whose listed
    /// prefix has only decimal digits is named by more of its digits, up to
    /// its first letter (or all 64).
    public static func parse(_ text: String, now: Double? = nil) throws -> PointInTime {
        let now = now ?? Clock.wall()
        if text == "latest" { return .latest }
        let lower = text.lowercased()
        let hex = !lower.isEmpty && lower.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
        let decimal = lower.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        if hex && (lower.count == 64 || (!decimal && lower.count >= 4)) { return .snapshot(lower) }
        do {
            return .time(try MomentTime.parse(text, now: now))
        } catch let error as ValidationErrorText {
            throw ValidationErrorText(error.description + ", latest, or a snapshot id (4 or more hex digits)")
        }
    }
}

/// Reads a time a person gives: the moment it names, in seconds since the epoch.
public enum MomentTime {
    /// The time `text` names, `now` being the current time (seconds since
    /// the epoch; the wall clock when nil):
    /// - RFC 3339: `2026-12-07T09:00:00Z`, `2026-12-07T09:00:00+01:00`, with a
    ///   fraction of a second (`09:00:00.25Z`); `t`, `z` and a space for the
    ///   `T` are read too, and `+0100`. Without a zone, UTC (as litectl prints
    ///   times). Shorter forms name a whole unit: `2026-12-07` (that day),
    ///   `2026-12-07T09:00` (that minute).
    /// - A time before now: `-` and a duration (`-10m`, `-2h`, `-1d`,
    ///   `-1h30m`, `-90`, `-0.5s`); `now`.
    /// - Epoch seconds: `1765098000`, `1765098000.25`.
    ///
    /// A time written to a unit (a day, a minute, a second, the last digit
    /// of a fraction) means the end of that unit, to the microsecond states
    /// are observed to: "at or before 09:00:00" includes a state observed at
    /// 09:00:00.4, and `2026-12-07` the whole day. Relative times are exact.
    public static func parse(_ text: String, now: Double? = nil) throws -> Double {
        let now = now ?? Clock.wall()
        func fail(_ why: String) -> ValidationErrorText {
            ValidationErrorText("\(text): \(why); give a time like \(PointInTime.timeForms)")
        }
        if text == "now" { return now }
        if text.hasPrefix("-") {
            let ago: Double
            do { ago = try DurationText.seconds(String(text.dropFirst())) } catch { throw fail("not a duration before now") }
            return now - ago
        }
        if text.hasPrefix("+") { throw fail("a time after now names no state yet (relative times go back: -10m)") }
        let bytes = Array(text.utf8)
        if !bytes.isEmpty, bytes.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E }) {
            return try epoch(text, fail: fail)
        }
        return try rfc3339(bytes, fail: fail)
    }

    /// `1765098000` or `1765098000.25`: up to the end of its last digit.
    static func epoch(_ text: String, fail: (String) -> ValidationErrorText) throws -> Double {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, !parts[0].isEmpty, parts.count == 1 || !parts[1].isEmpty,
              parts[0].count <= 11, let whole = Double(parts[0]) else { throw fail("not epoch seconds") }
        let fraction = parts.count == 2 ? Double("0." + parts[1]) ?? 0 : 0
        return whole + fraction + endOfUnit(fractionDigits: parts.count == 2 ? parts[1].count : 0)
    }

    /// How far the end of a unit is from its start: a whole second to its
    /// last microsecond, a fraction to the end of its last digit.
    static func endOfUnit(fractionDigits: Int) -> Double {
        if fractionDigits == 0 { return 0.999999 }
        var step = 1.0
        for _ in 0..<fractionDigits { step /= 10 }
        return max(0, step - 1e-6)
    }

    /// `YYYY-MM-DD[(T|t| )HH:MM[:SS[.fraction]]][Z|z|±HH:MM|±HHMM]`.
    static func rfc3339(_ b: [UInt8], fail: (String) -> ValidationErrorText) throws -> Double {
        var at = 0
        func digits(_ n: Int) -> Int? {
            guard at + n <= b.count else { return nil }
            var value = 0
            for i in at..<(at + n) {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            at += n
            return value
        }
        func take(_ c: UInt8) -> Bool {
            guard at < b.count, b[at] == c else { return false }
            at += 1
            return true
        }
        guard let year = digits(4), take(0x2D), let month = digits(2), take(0x2D), let day = digits(2) else {
            throw fail("not a time")
        }
        guard (1...12).contains(month), year >= 1970 else { throw fail("no such date") }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...monthDays).contains(day) else { throw fail("no such date") }
        var hour = 0, minute = 0, second = 0, fraction = 0.0
        var end = 86_399.999999  // a date alone: that whole day
        if at < b.count, b[at] == 0x54 || b[at] == 0x74 || b[at] == 0x20 {
            at += 1
            guard let h = digits(2), take(0x3A), let m = digits(2), h < 24, m < 60 else { throw fail("not a time of day (HH:MM or HH:MM:SS)") }
            hour = h; minute = m
            end = 59.999999
            if take(0x3A) {
                guard let s = digits(2), s < 60 else { throw fail("not a time of day (seconds 00 to 59)") }
                second = s
                var fractionDigits = 0
                if take(0x2E) {
                    let start = at
                    while at < b.count, b[at] >= 0x30 && b[at] <= 0x39 { at += 1 }
                    fractionDigits = at - start
                    guard fractionDigits > 0, fractionDigits <= 9 else { throw fail("a fraction of a second needs 1 to 9 digits") }
                    fraction = Double("0." + String(decoding: b[start..<at], as: UTF8.self)) ?? 0
                }
                end = fraction + endOfUnit(fractionDigits: fractionDigits)
            }
        }
        // The zone: none or Z (UTC), or an offset from UTC.
        var offset = 0
        if at < b.count {
            if b[at] == 0x5A || b[at] == 0x7A {
                at += 1
            } else if b[at] == 0x2B || b[at] == 0x2D, end < 86_399 {
                let sign = b[at] == 0x2B ? 1 : -1
                at += 1
                guard let h = digits(2), h < 24 else { throw fail("not an offset (+01:00)") }
                _ = take(0x3A)
                guard let m = digits(2), m < 60 else { throw fail("not an offset (+01:00)") }
                offset = sign * (h * 3600 + m * 60)
            }
            guard at == b.count else { throw fail("not a time") }
        }
        var tm = tm()
        tm.tm_year = Int32(year - 1900); tm.tm_mon = Int32(month - 1); tm.tm_mday = Int32(day)
        tm.tm_hour = Int32(hour); tm.tm_min = Int32(minute); tm.tm_sec = Int32(second)
        return Double(timegm(&tm) - offset) + end
    }
}
