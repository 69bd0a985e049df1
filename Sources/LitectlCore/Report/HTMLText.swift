// The HTML the reports are written in: a byte buffer whose only way to take a
// name or a value is through escaping (text and attributes alike), with
// control and bidirectional-override characters made visible, and long
// strings cut with a note saying how long they were.
// See https://html.spec.whatwg.org/multipage/parsing.html#escapingString

/// A report page under construction. `markup` takes trusted, literal HTML
/// written in this module; everything read from a database goes through
/// `text` or `attribute`.
struct HTMLText {
    private(set) var bytes: [UInt8] = []

    /// Bytes written so far.
    var count: Int { bytes.count }

    init(capacity: Int = 1 << 16) { bytes.reserveCapacity(capacity) }

    /// Literal markup of the report's own.
    mutating func markup(_ html: String) { bytes.append(contentsOf: html.utf8) }

    /// `text` as element content: escaped, control characters shown as
    /// `\xNN` in a marked span, cut after `limit` characters with a note.
    /// With `lineBreaks`, LF and TAB stay as they are (for a cell styled
    /// `white-space: pre-wrap`, where they show as what they are).
    mutating func text(_ text: String, limit: Int = HTMLText.nameLimit, lineBreaks: Bool = false) {
        append(text, limit: limit, inAttribute: false, lineBreaks: lineBreaks)
    }

    /// `text` as the content of an SVG element (`text`, `title`): escaped,
    /// control characters as plain `\xNN`. Inside SVG an HTML element such
    /// as `span` would end the SVG early (the HTML parser's "breakout"
    /// elements), so no markup of ours goes there either.
    mutating func svgText(_ text: String, limit: Int = HTMLText.nameLimit) {
        append(text, limit: limit, inAttribute: true, lineBreaks: false)
    }

    /// ` name="value"` with the value escaped (control characters as plain
    /// `\xNN`), cut after `limit` characters.
    mutating func attribute(_ name: String, _ value: String, limit: Int = HTMLText.nameLimit) {
        bytes.append(0x20)
        bytes.append(contentsOf: name.utf8)
        bytes.append(contentsOf: "=\"".utf8)
        append(value, limit: limit, inAttribute: true, lineBreaks: false)
        bytes.append(0x22)
    }

    /// Names (tables, indexes, columns, files) are shown up to this many
    /// characters: a hostile 1 MB name must not make a 1 MB report line.
    static let nameLimit = 200

    private mutating func append(_ text: String, limit: Int, inAttribute: Bool, lineBreaks: Bool) {
        // Fast path: short printable ASCII without characters that need escaping.
        let utf8 = text.utf8
        if utf8.count <= limit, utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && !HTMLText.special($0) }) {
            bytes.append(contentsOf: utf8)
            return
        }
        var shown = 0
        var total = 0
        for scalar in text.unicodeScalars {
            total += 1
            if shown == limit { continue }
            shown += 1
            let v = scalar.value
            switch v {
            case 0x26: bytes.append(contentsOf: "&amp;".utf8)
            case 0x3C: bytes.append(contentsOf: "&lt;".utf8)
            case 0x3E: bytes.append(contentsOf: "&gt;".utf8)
            case 0x22: bytes.append(contentsOf: "&quot;".utf8)
            case 0x27: bytes.append(contentsOf: "&#39;".utf8)
            case 0x0A where lineBreaks, 0x09 where lineBreaks: bytes.append(UInt8(v))
            default:
                if let visible = HTMLText.visibleForm(v) {
                    if !inAttribute { bytes.append(contentsOf: "<span class=\"esc\">".utf8) }
                    bytes.append(contentsOf: visible.utf8)
                    if !inAttribute { bytes.append(contentsOf: "</span>".utf8) }
                } else {
                    bytes.append(contentsOf: String(scalar).utf8)
                }
            }
        }
        if total > shown {
            if inAttribute {
                bytes.append(contentsOf: "… (\(total) characters)".utf8)
            } else {
                bytes.append(contentsOf: "<span class=\"more\">… (\(total) characters in all)</span>".utf8)
            }
        }
    }

    static func special(_ byte: UInt8) -> Bool {
        byte == 0x26 || byte == 0x3C || byte == 0x3E || byte == 0x22 || byte == 0x27
    }

    /// How a character that would be invisible, or would act on the text
    /// around it, is shown: C0 controls (`\n`, `\r`, `\t` as the query
    /// command's table shows them, others `\xNN`), DEL, C1 controls, and the
    /// bidirectional marks and overrides and the zero-width characters that
    /// could make a name read as another (`\u202E`, `\u200B`). Nil for characters shown as they are.
    static func visibleForm(_ v: UInt32) -> String? {
        switch v {
        case 0x0A: return "\\n"
        case 0x0D: return "\\r"
        case 0x09: return "\\t"
        case 0x00..<0x20, 0x7F: return "\\x" + hex(v, digits: 2)
        case 0x80...0x9F, 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069, 0x200B...0x200D, 0x2060, 0xFEFF:
            return "\\u" + hex(v, digits: 4)
        default: return nil
        }
    }

    static func hex(_ v: UInt32, digits: Int) -> String {
        let text = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

/// Figures as the report prints them.
enum Figures {
    /// `12.5`: at most two decimals, no trailing zeros; for SVG coordinates and percentages.
    static func decimal(_ value: Double, places: Int = 2) -> String {
        guard value.isFinite else { return "0" }
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let scaled = (value * scale).rounded()
        let negative = scaled < 0
        let magnitude = Int64(abs(scaled))
        let whole = magnitude / Int64(scale), fraction = magnitude % Int64(scale)
        var text = String(whole)
        if fraction != 0 {
            var digits = String(fraction)
            digits = String(repeating: "0", count: places - digits.count) + digits
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return (negative && magnitude != 0 ? "-" : "") + text
    }

    /// `12.5%`, as `check` and `stats` print shares.
    static func percent(_ value: Double) -> String { formatPercent(value) }
}
