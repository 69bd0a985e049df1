// Text that reaches a terminal with its control characters made visible: a
// table or file name, a value or a path taken from a file can hold escape
// sequences (`\e]0;...\a` retitles a terminal, `\e[2J` clears it) or bytes
// that are not UTF-8. Every human-readable output passes what it took from
// data through here; machine formats (JSON, CSV, SQL, changesets) stay exact.

/// Visible escapes for control characters, invisible formatting characters
/// and bytes that are not UTF-8.
///
/// - `\n`, `\r`, `\t` for newline, carriage return and tab (in `.line`; kept
///   as they are in `.block`, see `Layout`), `\xNN` for every other C0 control
///   byte, DEL and each byte that is not part of valid UTF-8;
/// - `\u{NNNN}` for C1 controls (U+0080-U+009F, which some terminals obey as
///   escape sequences), the line and paragraph separators (U+2028, U+2029) and
///   the bidirectional controls (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069)
///   that can make a terminal show text in another order than it is stored.
///
/// A backslash is not itself escaped, so names and paths with backslashes
/// read as they are; a name that holds the four characters `\x1b` therefore
/// prints like one that holds the byte. This routine is about what a terminal
/// does with text, not an unambiguous encoding: `--json` gives the exact bytes.
public enum TerminalText {
    public enum Layout: Sendable {
        /// One line: newlines, carriage returns and tabs are escaped too
        /// (names, values, error lines).
        case line
        /// A block of lines written by litectl itself: newlines and tabs stay.
        case block
    }

    /// `text` as it may be shown on a terminal.
    public static func visible(_ text: String, _ layout: Layout = .line) -> String {
        if isPlain(text.utf8, layout) { return text }
        return visible(bytes: Array(text.utf8), layout)
    }

    /// `bytes` (UTF-8, or not) as they may be shown on a terminal.
    public static func visible<Bytes: Collection<UInt8>>(bytes: Bytes, _ layout: Layout = .line) -> String {
        if isPlain(bytes, layout) { return String(decoding: bytes, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        append(Array(bytes), layout, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the visible form of `bytes` to `out`.
    public static func append(_ bytes: [UInt8], _ layout: Layout, to out: inout [UInt8]) {
        var i = 0
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            if b < 0x80 {
                switch b {
                case 0x0A: if layout == .block { out.append(b) } else { out += [0x5C, UInt8(ascii: "n")] }
                case 0x09: if layout == .block { out.append(b) } else { out += [0x5C, UInt8(ascii: "t")] }
                case 0x0D: out += [0x5C, UInt8(ascii: "r")]
                case 0x00..<0x20, 0x7F: appendHex(b, to: &out)
                default: out.append(b)
                }
                i += 1
                continue
            }
            guard let (scalar, length) = decodeScalar(bytes, at: i) else {
                appendHex(b, to: &out)
                i += 1
                continue
            }
            if isInvisibleControl(scalar) {
                out += Array("\\u{\(String(scalar, radix: 16, uppercase: true))}".utf8)
            } else {
                out += bytes[i..<(i + length)]
            }
            i += length
        }
    }

    /// True when `bytes` are printable ASCII (with newlines and tabs in a
    /// block): the common case, returned as it is.
    static func isPlain<Bytes: Collection<UInt8>>(_ bytes: Bytes, _ layout: Layout) -> Bool {
        for b in bytes {
            if b >= 0x20 && b < 0x7F { continue }
            if layout == .block && (b == 0x0A || b == 0x09) { continue }
            return false
        }
        return true
    }

    static func appendHex(_ byte: UInt8, to out: inout [UInt8]) {
        let digits = Array("0123456789abcdef".utf8)
        out += [0x5C, UInt8(ascii: "x"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
    }

    /// C1 controls, line and paragraph separators, bidirectional controls
    /// (with U+061C, the Arabic letter mark), and the zero-width characters
    /// that make one name print as another (U+200B-U+200D, U+2060, U+FEFF).
    static func isInvisibleControl(_ scalar: UInt32) -> Bool {
        switch scalar {
        case 0x80...0x9F, 0x2028, 0x2029, 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069,
             0x200B...0x200D, 0x2060, 0xFEFF: true
        default: false
        }
    }

    /// The scalar of the well-formed UTF-8 sequence at `i` and its length, or
    /// nil (a stray continuation byte, a truncated or overlong sequence, a
    /// surrogate, a value past U+10FFFF).
    static func decodeScalar(_ bytes: [UInt8], at i: Int) -> (UInt32, Int)? {
        let b0 = bytes[i]
        let length: Int, minimum: UInt32
        var scalar: UInt32
        switch b0 {
        case 0xC2...0xDF: length = 2; minimum = 0x80; scalar = UInt32(b0 & 0x1F)
        case 0xE0...0xEF: length = 3; minimum = 0x800; scalar = UInt32(b0 & 0x0F)
        case 0xF0...0xF4: length = 4; minimum = 0x10000; scalar = UInt32(b0 & 0x07)
        default: return nil
        }
        guard i + length <= bytes.count else { return nil }
        for k in 1..<length {
            let b = bytes[i + k]
            guard b & 0xC0 == 0x80 else { return nil }
            scalar = scalar << 6 | UInt32(b & 0x3F)
        }
        guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { return nil }
        return (scalar, length)
    }
}
