// Values as the reports show them: the way `diff` prints them (SQL literal
// syntax, REALs in their shortest exact decimal) for changed rows, the way
// `query` prints them (text as it is, BLOB as x'..') for planner statistics;
// long TEXT and BLOB values cut to a prefix with their full length given.

/// A value ready for a report cell: its text and, when the value was cut,
/// how many bytes it had in all.
struct ShownValue: Sendable, Equatable {
    var text: String
    var fullBytes: Int?
}

enum ReportValues {
    /// TEXT and BLOB values are shown up to this many bytes.
    static let valueLimit = 256

    /// `cell` as `litectl diff` prints it: `NULL`, `42`, `1.5`, `'it''s'`,
    /// `x'00FF'`, `CAST(x'..' AS TEXT)` for TEXT with a NUL or CR or that is
    /// not UTF-8. A long TEXT or BLOB is cut at a character boundary.
    static func diffForm(_ cell: Cell, limit: Int = valueLimit) -> ShownValue {
        switch cell {
        case .real(let d):
            return ShownValue(text: exactRealText(d))
        // Control characters made visible as `diff` shows them (TerminalText).
        case .text(let bytes) where bytes.count > limit:
            let cut = boundary(bytes, limit)
            return ShownValue(text: TerminalText.visible(Value.text(Array(bytes.prefix(cut))).sqlLiteral), fullBytes: bytes.count)
        case .blob(let bytes) where bytes.count > limit:
            return ShownValue(text: Value.blob(Array(bytes.prefix(limit))).sqlLiteral, fullBytes: bytes.count)
        default:
            var out: [UInt8] = []
            cell.appendSQLLiteral(to: &out)
            return ShownValue(text: TerminalText.visible(String(decoding: out, as: UTF8.self)))
        }
    }

    /// `value` as `litectl query` prints it in its table format: `NULL`,
    /// numbers, TEXT as it is (its line breaks shown as `\n`, `\r`, `\t` by
    /// the escaping), BLOB as `x'..'`.
    static func queryForm(_ value: Value, limit: Int = valueLimit) -> ShownValue {
        switch value {
        case .null: return ShownValue(text: "NULL")
        case .integer(let v): return ShownValue(text: String(v))
        case .real(let d): return ShownValue(text: exactRealText(d))
        case .text(let bytes):
            guard bytes.count > limit else { return ShownValue(text: String(decoding: bytes, as: UTF8.self)) }
            let cut = bytes.withUnsafeBytes { boundary($0, limit) }
            return ShownValue(text: String(decoding: bytes.prefix(cut), as: UTF8.self), fullBytes: bytes.count)
        case .blob(let bytes):
            var out = Array("x'".utf8)
            bytes.prefix(limit).withUnsafeBytes { appendHexDigits($0, to: &out) }
            out.append(UInt8(ascii: "'"))
            return ShownValue(text: String(decoding: out, as: UTF8.self), fullBytes: bytes.count > limit ? bytes.count : nil)
        }
    }

    /// The largest cut at or before `limit` that does not split a UTF-8 sequence.
    static func boundary(_ bytes: UnsafeRawBufferPointer, _ limit: Int) -> Int {
        var cut = min(limit, bytes.count)
        var back = 0
        while cut > 0, cut < bytes.count, bytes[cut] & 0xC0 == 0x80, back < 3 { cut -= 1; back += 1 }
        return cut
    }
}

extension HTMLText {
    /// A value's text with the note of its full length when it was cut.
    /// `lineBreaks`: LF and TAB kept as they are (diff's literals hold them
    /// so), else shown as `\n` and `\t` (as query's table shows them).
    mutating func value(_ shown: ShownValue, lineBreaks: Bool) {
        text(shown.text, limit: Int.max, lineBreaks: lineBreaks)
        if let full = shown.fullBytes {
            markup("<span class=\"more\">… (\(full) bytes in all)</span>")
        }
    }
}
