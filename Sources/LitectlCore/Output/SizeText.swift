// Sizes as options take them, in the one unit family litectl prints
// (Format's IEC units, powers of 1024): `65536`, `512K`, `64M`, `64MiB`,
// `1.5G`. A bare number is bytes.

public enum SizeText {
    /// The accepted forms, for a usage error.
    public static let forms = "bytes (65536) or a number with K, M, G or T (KiB, MiB, GiB, TiB: powers of 1024), e.g. 64M, 1.5GiB"

    public struct Invalid: Error, CustomStringConvertible {
        public var text: String
        public var description: String { "'\(text)' is not a size: give \(SizeText.forms)" }
    }

    /// The bytes `text` names (whole bytes, rounded down); throws `Invalid`.
    public static func bytes(_ text: String) throws -> Int64 {
        let trimmed = text.trimmingWhitespace()
        var number = Substring(trimmed)
        var unit = ""
        while let last = number.last, last.isLetter { unit = String(last) + unit; number = number.dropLast() }
        let kib = 1024.0
        let multipliers: [String: Double] = ["": 1, "b": 1, "k": kib, "kib": kib, "m": kib * kib, "mib": kib * kib,
                                             "g": kib * kib * kib, "gib": kib * kib * kib, "t": kib * kib * kib * kib, "tib": kib * kib * kib * kib]
        guard let multiplier = multipliers[unit.lowercased()],
              !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(number), value.isFinite, value >= 0 else { throw Invalid(text: text) }
        let bytes = (value * multiplier).rounded(.down)
        guard bytes < Double(Int64.max) else { throw Invalid(text: text) }
        return Int64(bytes)
    }
}
