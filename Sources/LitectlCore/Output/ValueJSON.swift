// The JSON encoding of exact values, shared by every command that prints rows
// or changes as JSON. Lossless: each of SQLite's five storage classes maps to a
// distinct JSON form.
//
//   NULL      null
//   INTEGER   a JSON number without '.' or exponent (64-bit; readers that
//             parse numbers as doubles lose digits above 2^53)
//   REAL      a JSON number with '.' or an exponent, the shortest that reads
//             back bit-for-bit; ±infinity as {"real": "Infinity"} / {"real": "-Infinity"}
//   TEXT      a JSON string; TEXT that is not valid UTF-8 as {"text_hex": "..."}
//   BLOB      {"blob": "HEX"} (uppercase hex of the bytes)

extension Cell {
    /// Appends the cell's JSON form to `out`.
    public func appendJSON(to out: inout [UInt8]) {
        switch self {
        case .null:
            out.append(contentsOf: "null".utf8)
        case .integer(let v):
            appendDecimal(v, to: &out)
        case .real(let d):
            if d.isFinite {
                out.append(contentsOf: exactRealText(d).utf8)
            } else {
                out.append(contentsOf: (d < 0 ? "{\"real\":\"-Infinity\"}" : "{\"real\":\"Infinity\"}").utf8)
            }
        case .text(let bytes):
            if isValidUTF8(bytes) {
                appendJSONString(bytes, to: &out)
            } else {
                out.append(contentsOf: "{\"text_hex\":\"".utf8)
                appendHexDigits(bytes, to: &out)
                out.append(contentsOf: "\"}".utf8)
            }
        case .blob(let bytes):
            out.append(contentsOf: "{\"blob\":\"".utf8)
            appendHexDigits(bytes, to: &out)
            out.append(contentsOf: "\"}".utf8)
        }
    }
}

extension Value {
    /// The value's JSON text (see the encoding above).
    public var jsonText: String {
        var out: [UInt8] = []
        withCell { $0.appendJSON(to: &out) }
        return String(decoding: out, as: UTF8.self)
    }
}

private let hex: [UInt8] = Array("0123456789ABCDEF".utf8)

func appendHexDigits(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    out.reserveCapacity(out.count + bytes.count * 2)
    for byte in bytes {
        out.append(hex[Int(byte >> 4)])
        out.append(hex[Int(byte & 0x0F)])
    }
}

/// True when `bytes` is well-formed UTF-8.
func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var iterator = bytes.makeIterator()
    var decoder = UTF8()
    while true {
        switch decoder.decode(&iterator) {
        case .scalarValue: continue
        case .emptyInput: return true
        case .error: return false
        }
    }
}

/// Appends `bytes` (valid UTF-8) as a JSON string literal.
func appendJSONString(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    for byte in bytes {
        switch byte {
        case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0x00..<0x20, 0x7F:
            out.append(contentsOf: "\\u00".utf8)
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        default: out.append(byte)
        }
    }
    out.append(UInt8(ascii: "\""))
}
