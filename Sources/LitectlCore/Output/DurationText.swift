// Durations as people write them on a command line (`90`, `0.5s`, `15m`,
// `1h30m`, `7d`): the one reading every duration option goes through. It is
// the reading side of the base's text forms (beside Timestamp), used by the
// capabilities and the executable alike, so it lives in Output/.

/// The one duration syntax: a number of seconds (`90`, `2.5`), or numbers with
/// units, largest first, each unit once (`90s`, `15m`, `1h30m`, `1d12h`,
/// `0.5s`, `250ms`). Units: `ms`, `s`, `m` (minutes), `h`, `d`, `w` (7 days),
/// `y` (365 days). No sign, no spaces, no exponent; at most 100 years.
public enum DurationText {
    /// The accepted forms, for error messages and help texts.
    public static let forms = "90 (seconds), 2.5, 90s, 0.5s, 250ms, 15m, 1h, 1h30m, 7d, 2w"

    /// The longest duration accepted: far beyond any use, and small enough
    /// that adding it to any time or converting it to nanoseconds cannot overflow.
    public static let longest = 100 * 365 * 86_400.0

    /// The units, largest first, with their length in seconds.
    static let units: [(name: String, seconds: Double)] = [
        ("y", 365 * 86_400), ("w", 7 * 86_400), ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1), ("ms", 0.001),
    ]

    /// The duration `text` names, in seconds. With `bareNumbers: false` a
    /// number without a unit is refused (where a slip would cost data: a
    /// `--keep-within 7` meant as days).
    public static func seconds(_ text: String, bareNumbers: Bool = true) throws -> Double {
        let bytes = Array(text.utf8)
        func fail(_ why: String) -> ValidationErrorText {
            ValidationErrorText("\(text): \(why); give a duration like \(forms)")
        }
        guard !bytes.isEmpty else { throw fail("empty") }
        var at = 0, total = 0.0, lastUnit = -1
        while at < bytes.count {
            // A number: digits, and at most one point with digits on one side at least.
            let start = at
            while at < bytes.count, bytes[at] >= 0x30 && bytes[at] <= 0x39 || bytes[at] == 0x2E { at += 1 }
            let number = String(decoding: bytes[start..<at], as: UTF8.self)
            guard !number.isEmpty else { throw fail(start == 0 ? "not a number" : "a unit without a number") }
            guard number.utf8.filter({ $0 == 0x2E }).count <= 1, number != ".", let value = Double(number) else {
                throw fail("\(number) is not a number")
            }
            // Its unit: letters up to the next digit or point.
            let unitStart = at
            while at < bytes.count, !(bytes[at] >= 0x30 && bytes[at] <= 0x39 || bytes[at] == 0x2E) { at += 1 }
            let unit = String(decoding: bytes[unitStart..<at], as: UTF8.self).lowercased()
            if unit.isEmpty {
                guard start == 0 else { throw fail("\(number) has no unit") }
                guard bareNumbers else { throw fail("a number needs a unit here (7d for days, 7s for seconds)") }
                total = value
                break
            }
            guard let index = units.firstIndex(where: { $0.name == unit }) else { throw fail("\(unit) is not a unit (ms, s, m, h, d, w, y)") }
            guard index > lastUnit else { throw fail("give each unit once, largest first (1h30m)") }
            lastUnit = index
            total += value * units[index].seconds
        }
        guard total.isFinite, total <= longest else { throw fail("longer than 100 years") }
        return total
    }

    /// `seconds` as the shortest text this syntax reads back the same: `90s`,
    /// `1h30m`, `0.5s`, `7d` (help texts' defaults).
    public static func text(_ seconds: Double) -> String {
        guard seconds > 0 else { return "0" }
        var rest = seconds, parts = ""
        if seconds.rounded(.down) == seconds {
            for (name, length) in units where length >= 1 && name != "y" && name != "w" {
                let n = (rest / length).rounded(.down)
                if n > 0 { parts += "\(Int(n))\(name)"; rest -= n * length }
            }
            return parts
        }
        let whole = seconds.rounded(.down)
        return (whole > 0 ? text(whole) : "") + (whole > 0 ? "\(Int(((seconds - whole) * 1000).rounded()))ms" : "\(Self.plain(seconds))s")
    }

    /// A fraction without trailing zeros: 0.5, 0.25.
    static func plain(_ value: Double) -> String {
        var s = String(value)
        while s.contains("."), s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }
}
