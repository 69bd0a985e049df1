// The exact SQL-literal writer: text that, read back by any SQLite parser
// (the sqlite3 shell included), gives the very same value, bit for bit.
//
// Traps it avoids, measured with SQLite 3.40.1: its decimal-to-double parser
// misreads 0.5-2% of shortest or 17-digit decimals, so a non-integral REAL is
// written as an exact integer mantissa scaled by exact powers of two (each
// step of that arithmetic is exact in IEEE doubles); the shell drops a CR that
// precedes LF even inside a string literal, and a NUL byte ends the SQL text,
// so such TEXT is written from its bytes as CAST(x'..' AS TEXT).

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
    /// are UTF-8).
    public func appendSQLLiteral(to out: inout [UInt8]) {
        switch self {
        case .null:
            out.append(contentsOf: "NULL".utf8)
        case .integer(let v):
            appendDecimal(v, to: &out)
        case .real(let d):
            appendRealLiteral(d, to: &out)
        case .text(let bytes):
            if Self.canQuoteDirectly(bytes) {
                out.append(UInt8(ascii: "'"))
                for byte in bytes {
                    out.append(byte)
                    if byte == UInt8(ascii: "'") { out.append(byte) }
                }
                out.append(UInt8(ascii: "'"))
            } else {
                out.append(contentsOf: "CAST(".utf8)
                appendHexLiteral(bytes, to: &out)
                out.append(contentsOf: " AS TEXT)".utf8)
            }
        case .blob(let bytes):
            appendHexLiteral(bytes, to: &out)
        }
    }

    /// True when TEXT can go between single quotes and survive the shell: valid
    /// UTF-8 with neither NUL nor CR.
    static func canQuoteDirectly(_ bytes: [UInt8]) -> Bool {
        for byte in bytes where byte == 0 || byte == 0x0D { return false }
        return bytes.withUnsafeBytes(isValidUTF8)
    }
}

private let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

func appendHexLiteral(_ bytes: [UInt8], to out: inout [UInt8]) {
    out.reserveCapacity(out.count + bytes.count * 2 + 3)
    out.append(UInt8(ascii: "x"))
    out.append(UInt8(ascii: "'"))
    for byte in bytes {
        out.append(hexDigits[Int(byte >> 4)])
        out.append(hexDigits[Int(byte & 0x0F)])
    }
    out.append(UInt8(ascii: "'"))
}

func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
    if value < 0 { out.append(UInt8(ascii: "-")) }
    var magnitude = value.magnitude
    var digits: [UInt8] = []
    repeat {
        digits.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
        magnitude /= 10
    } while magnitude > 0
    out.append(contentsOf: digits.reversed())
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
