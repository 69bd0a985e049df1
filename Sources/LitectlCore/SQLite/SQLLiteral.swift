// The exact SQL-literal writer: text that, read back by any SQLite parser
// (the sqlite3 shell included), gives the very same value, bit for bit.
//
// Traps it avoids, measured with SQLite 3.40.1: its decimal-to-double parser
// misreads 0.5-2% of shortest or 17-digit decimals, so a non-integral REAL is
// written as an exact integer mantissa scaled by exact powers of two (each
// step of that arithmetic is exact in IEEE doubles); the shell drops a CR that
// precedes LF even inside a string literal, and a NUL byte ends the SQL text,
// so such TEXT is written from its bytes as CAST(x'..' AS TEXT), those bytes
// in the target database's text encoding (CAST reads a blob's bytes as text
// in that encoding, https://www.sqlite.org/lang_expr.html#castexpr).

/// A database's text encoding, as `PRAGMA encoding` names it: how SQLite stores
/// TEXT, and how it reads the bytes of `CAST(x'..' AS TEXT)`.
public enum TextEncoding: String, Sendable {
    case utf8 = "UTF-8"
    case utf16le = "UTF-16le"
    case utf16be = "UTF-16be"
}

/// TEXT that no SQL literal writes exactly into a database of `encoding`:
/// bytes that are not UTF-8 (SQLite would turn them into other characters
/// when storing them as UTF-16).
public struct UnrepresentableTextError: Error, Sendable {
    public var bytes: [UInt8]
    public var encoding: TextEncoding
}

extension Value {
    /// The value as a SQL literal (UTF-8 text of the SQL).
    public var sqlLiteral: String {
        var out: [UInt8] = []
        appendSQLLiteral(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the value's exact SQL literal to `out`.
    ///
    /// TEXT that holds a NUL or CR byte, or bytes that are not valid UTF-8, is
    /// written as `CAST(x'..' AS TEXT)`: the hex is taken as the database's text
    /// encoding, so this form is exact in UTF-8 databases (litectl's text values
    /// are UTF-8); `appendSQLLiteral(to:encoding:)` writes for any encoding.
    public func appendSQLLiteral(to out: inout [UInt8]) {
        withCell { $0.appendSQLLiteral(to: &out) }
    }

    /// True when TEXT can go between single quotes and survive the shell: valid
    /// UTF-8 with neither NUL nor CR.
    static func canQuoteDirectly(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes(canQuoteDirectly)
    }

    static func canQuoteDirectly(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var ascii = true
        for byte in bytes {
            if byte == 0 || byte == 0x0D { return false }
            if byte >= 0x80 { ascii = false }
        }
        return ascii || isValidUTF8(bytes)
    }

    /// Appends the value's exact SQL literal for a database whose text is
    /// stored in `encoding` (the database the SQL will run on).
    ///
    /// In a UTF-8 database this is `appendSQLLiteral(to:)`. In a UTF-16 one,
    /// SQLite converts the UTF-8 of a quoted literal to UTF-16, turning
    /// U+FFFE and U+FFFF into U+FFFD (measured with SQLite 3.40.1), and
    /// `CAST(x'..' AS TEXT)` takes the hex as UTF-16: so TEXT holding NUL, CR,
    /// U+FFFE or U+FFFF is written as CAST of its UTF-16 code units.
    /// TEXT that is not UTF-8 has no UTF-16 form SQLite reads back as the same
    /// bytes and throws `UnrepresentableTextError`, with one exception: a
    /// lone surrogate at the very end, the one invalid sequence SQLite's own
    /// UTF-16 to UTF-8 conversion makes (as `ED A0 80`..`ED BF BF`), is
    /// written as that code unit, so text read from a UTF-16 database goes back
    /// into one unchanged.
    public func appendSQLLiteral(to out: inout [UInt8], encoding: TextEncoding) throws {
        try withCell { try $0.appendSQLLiteral(to: &out, encoding: encoding) }
    }

    /// True when valid UTF-8 `bytes` hold U+FFFE or U+FFFF (EF BF BE, EF BF BF).
    static func holdsFFFEorFFFF(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes(holdsFFFEorFFFF)
    }

    static func holdsFFFEorFFFF(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i + 2 < bytes.count {
            if bytes[i] == 0xEF && bytes[i + 1] == 0xBF && (bytes[i + 2] == 0xBE || bytes[i + 2] == 0xBF) { return true }
            i += 1
        }
        return false
    }
}

extension Cell {
    /// Appends the cell's exact SQL literal (for a UTF-8 database) to `out`,
    /// straight from SQLite's buffer: what `dump` writes for every value.
    public func appendSQLLiteral(to out: inout [UInt8]) {
        switch self {
        case .null:
            out.append(contentsOf: "NULL".utf8)
        case .integer(let v):
            appendDecimal(v, to: &out)
        case .real(let d):
            appendRealLiteral(d, to: &out)
        case .text(let bytes):
            if Value.canQuoteDirectly(bytes) {
                appendQuoted(bytes, to: &out)
            } else {
                out.append(contentsOf: "CAST(".utf8)
                appendHexLiteral(bytes, to: &out)
                out.append(contentsOf: " AS TEXT)".utf8)
            }
        case .blob(let bytes):
            appendHexLiteral(bytes, to: &out)
        }
    }

    /// Appends the cell's exact SQL literal for a database whose text is
    /// stored in `encoding`; see `Value.appendSQLLiteral(to:encoding:)`.
    public func appendSQLLiteral(to out: inout [UInt8], encoding: TextEncoding) throws {
        guard encoding != .utf8, case .text(let bytes) = self else {
            appendSQLLiteral(to: &out)
            return
        }
        if Value.canQuoteDirectly(bytes) && !Value.holdsFFFEorFFFF(bytes) {
            appendQuoted(bytes, to: &out)
            return
        }
        guard let units = utf16CodeUnits(bytes) else {
            throw UnrepresentableTextError(bytes: Array(bytes), encoding: encoding)
        }
        var encoded: [UInt8] = []
        encoded.reserveCapacity(units.count * 2)
        for unit in units {
            let low = UInt8(unit & 0xFF), high = UInt8(unit >> 8)
            if encoding == .utf16le { encoded.append(low); encoded.append(high) } else { encoded.append(high); encoded.append(low) }
        }
        out.append(contentsOf: "CAST(".utf8)
        appendHexLiteral(encoded, to: &out)
        out.append(contentsOf: " AS TEXT)".utf8)
    }
}

/// `'...'` with each quote doubled.
private func appendQuoted(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    out.reserveCapacity(out.count + bytes.count + 2)
    out.append(UInt8(ascii: "'"))
    for byte in bytes {
        out.append(byte)
        if byte == UInt8(ascii: "'") { out.append(byte) }
    }
    out.append(UInt8(ascii: "'"))
}

/// The UTF-16 code units of UTF-8 `bytes`, nil when they are not UTF-8
/// (overlong forms, stray or missing continuation bytes, values past
/// U+10FFFF, surrogates), except that one surrogate is accepted as the
/// last character (see `appendSQLLiteral(to:encoding:)`).
func utf16CodeUnits(_ bytes: [UInt8]) -> [UInt16]? {
    bytes.withUnsafeBytes(utf16CodeUnits)
}

func utf16CodeUnits(_ bytes: UnsafeRawBufferPointer) -> [UInt16]? {
    var units: [UInt16] = []
    units.reserveCapacity(bytes.count)
    var i = 0
    while i < bytes.count {
        let lead = bytes[i]
        if lead < 0x80 {
            units.append(UInt16(lead))
            i += 1
            continue
        }
        let length: Int, smallest: UInt32
        switch lead {
        case 0xC2...0xDF: length = 2; smallest = 0x80
        case 0xE0...0xEF: length = 3; smallest = 0x800
        case 0xF0...0xF4: length = 4; smallest = 0x10000
        default: return nil
        }
        guard i + length <= bytes.count else { return nil }
        var scalar = UInt32(lead) & (length == 2 ? 0x1F : (length == 3 ? 0x0F : 0x07))
        for byte in bytes[(i + 1)..<(i + length)] {
            guard byte & 0xC0 == 0x80 else { return nil }
            scalar = scalar << 6 | UInt32(byte & 0x3F)
        }
        guard scalar >= smallest, scalar <= 0x10FFFF else { return nil }
        if (0xD800...0xDFFF).contains(scalar) {
            guard i + length == bytes.count else { return nil }
            units.append(UInt16(scalar))
        } else if scalar >= 0x10000 {
            let v = scalar - 0x10000
            units.append(UInt16(0xD800 + (v >> 10)))
            units.append(UInt16(0xDC00 + (v & 0x3FF)))
        } else {
            units.append(UInt16(scalar))
        }
        i += length
    }
    return units
}

private let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

func appendHexLiteral(_ bytes: [UInt8], to out: inout [UInt8]) {
    bytes.withUnsafeBytes { appendHexLiteral($0, to: &out) }
}

func appendHexLiteral(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    out.reserveCapacity(out.count + bytes.count * 2 + 3)
    out.append(UInt8(ascii: "x"))
    out.append(UInt8(ascii: "'"))
    for byte in bytes {
        out.append(hexDigits[Int(byte >> 4)])
        out.append(hexDigits[Int(byte & 0x0F)])
    }
    out.append(UInt8(ascii: "'"))
}

/// Appends `value` in decimal, without allocating (it runs for every INTEGER a dump writes).
func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
    if value < 0 { out.append(UInt8(ascii: "-")) }
    var magnitude = value.magnitude
    var count = 1
    var probe = magnitude
    while probe >= 10 { probe /= 10; count += 1 }
    let start = out.count
    out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: count))
    var i = start + count - 1
    repeat {
        out[i] = UInt8(ascii: "0") + UInt8(magnitude % 10)
        magnitude /= 10
        i -= 1
    } while magnitude > 0
}

/// 2^62, the largest power of two that is an INTEGER literal with room to spare.
private let twoToThe62: [UInt8] = Array("4611686018427387904".utf8)

/// Writes a double so that SQLite computes exactly it:
/// - NaN (SQLite stores none; it turns NaN into NULL) as NULL;
/// - ±infinity as ±9e999 (the parser saturates to infinity);
/// - ±0.0 as `0.0` / `-0.0` (the unary minus of 0.0 is -0.0);
/// - an integral value of magnitude ≤ 2^53 as `N.0`, whose digits the parser
///   accumulates exactly in a 64-bit integer;
/// - anything else as `(M.0*2^k...)` or `(M.0/2^k...)`, with M the odd integer
///   mantissa (≤ 2^53) and the power of two in exact factors of at most 2^62.
///   Each multiplication or division by a power of two is exact in IEEE
///   arithmetic whenever its result is representable, and every intermediate lies
///   between M and the final value, so it is.
func appendRealLiteral(_ d: Double, to out: inout [UInt8]) {
    if d.isNaN { out.append(contentsOf: "NULL".utf8); return }
    if d.isInfinite {
        out.append(contentsOf: (d < 0 ? "-9e999" : "9e999").utf8)
        return
    }
    if d == 0 {
        out.append(contentsOf: (d.sign == .minus ? "-0.0" : "0.0").utf8)
        return
    }
    if d.magnitude <= 9_007_199_254_740_992.0, d == d.rounded(.towardZero) {
        appendDecimal(Int64(d), to: &out)
        out.append(contentsOf: ".0".utf8)
        return
    }
    var mantissa: UInt64
    var exponent: Int
    if d.exponentBitPattern == 0 {
        mantissa = d.significandBitPattern
        exponent = -1074
    } else {
        mantissa = d.significandBitPattern | (1 << 52)
        exponent = Int(d.exponentBitPattern) - 1075
    }
    let zeros = mantissa.trailingZeroBitCount
    mantissa >>= UInt64(zeros)
    exponent += zeros

    out.append(UInt8(ascii: "("))
    if d.sign == .minus { out.append(UInt8(ascii: "-")) }
    appendDecimal(Int64(mantissa), to: &out)
    out.append(contentsOf: ".0".utf8)
    let op = exponent > 0 ? UInt8(ascii: "*") : UInt8(ascii: "/")
    var remaining = exponent.magnitude
    while remaining > 0 {
        let step = min(remaining, 62)
        out.append(op)
        if step == 62 {
            out.append(contentsOf: twoToThe62)
        } else {
            appendDecimal(Int64(1) << Int64(step), to: &out)
        }
        remaining -= step
    }
    out.append(UInt8(ascii: ")"))
}
