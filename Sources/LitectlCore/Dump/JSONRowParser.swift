// Reads one JSON Lines row back into exact values: the inverse of the JSON
// value encoding every litectl command writes (Output/ValueJSON.swift). A
// number without '.' or exponent is an INTEGER (64-bit, never through a
// double), one with them a REAL (correctly rounded, so the shortest form
// gives back the very bits); {"real": "Infinity"}, {"text_hex": ..} and
// {"blob": ..} are the forms plain JSON lacks; true and false are 1 and 0.

enum JSONRowParser {
    struct Failure: Error {
        var message: String
    }

    /// The members of the JSON object on `line`, in order.
    static func parseObject(_ line: ArraySlice<UInt8>) throws -> [(key: String, value: Value)] {
        var parser = Parser(bytes: line)
        parser.skipSpace()
        guard parser.take(UInt8(ascii: "{")) else { throw Failure(message: "not a JSON object") }
        var members: [(key: String, value: Value)] = []
        parser.skipSpace()
        if !parser.take(UInt8(ascii: "}")) {
            while true {
                parser.skipSpace()
                let key = try parser.string()
                parser.skipSpace()
                guard parser.take(UInt8(ascii: ":")) else { throw Failure(message: "expected ':' after a key") }
                parser.skipSpace()
                members.append((String(decoding: key, as: UTF8.self), try parser.value()))
                parser.skipSpace()
                if parser.take(UInt8(ascii: ",")) { continue }
                guard parser.take(UInt8(ascii: "}")) else { throw Failure(message: "expected ',' or '}'") }
                break
            }
        }
        parser.skipSpace()
        guard parser.atEnd else { throw Failure(message: "text after the JSON object") }
        return members
    }

    struct Parser {
        let bytes: ArraySlice<UInt8>
        var i: Int

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            i = bytes.startIndex
        }

        var atEnd: Bool { i >= bytes.endIndex }
        var peek: UInt8? { i < bytes.endIndex ? bytes[i] : nil }

        mutating func skipSpace() {
            while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { i += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            i += 1
            return true
        }

        mutating func literal(_ word: String) -> Bool {
            let w = Array(word.utf8)
            guard bytes.endIndex - i >= w.count, bytes[i..<(i + w.count)].elementsEqual(w) else { return false }
            i += w.count
            return true
        }

        mutating func value() throws -> Value {
            guard let first = peek else { throw Failure(message: "a member without a value") }
            switch first {
            case UInt8(ascii: "\""):
                return .text(try string())
            case UInt8(ascii: "n"):
                if literal("null") { return .null }
            case UInt8(ascii: "t"):
                if literal("true") { return .integer(1) }
            case UInt8(ascii: "f"):
                if literal("false") { return .integer(0) }
            case UInt8(ascii: "{"):
                return try tagged()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try number()
            default:
                break
            }
            throw Failure(message: "not a value litectl writes (null, a number, a string or {\"blob\": ..})")
        }

        /// {"real": "Infinity" | "-Infinity"}, {"text_hex": "..."}, {"blob": "..."}.
        mutating func tagged() throws -> Value {
            _ = take(UInt8(ascii: "{"))
            skipSpace()
            let tag = String(decoding: try string(), as: UTF8.self)
            skipSpace()
            guard take(UInt8(ascii: ":")) else { throw Failure(message: "expected ':'") }
            skipSpace()
            let body = try string()
            skipSpace()
            guard take(UInt8(ascii: "}")) else { throw Failure(message: "an object value with more than one member") }
            switch tag {
            case "real":
                switch String(decoding: body, as: UTF8.self) {
                case "Infinity": return .real(.infinity)
                case "-Infinity": return .real(-.infinity)
                default: throw Failure(message: "{\"real\": ..} holds Infinity or -Infinity")
                }
            case "text_hex", "blob":
                guard let decoded = TypedCSV.hexBytes(body) else { throw Failure(message: "{\"\(tag)\": ..} holds hex digits") }
                return tag == "blob" ? .blob(decoded) : .text(decoded)
            default:
                throw Failure(message: "an object value other than {\"real\"}, {\"text_hex\"} or {\"blob\"}")
            }
        }

        mutating func number() throws -> Value {
            let start = i
            var isReal = false
            while let b = peek, b == UInt8(ascii: "-") || b == UInt8(ascii: "+") || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
                    || b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
                if b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { isReal = true }
                i += 1
            }
            let text = Array(bytes[start..<i])
            if !isReal, let integer = TypedCSV.integerValue(text) { return .integer(integer) }
            guard let real = TypedCSV.realValue(text) else { throw Failure(message: "a malformed number") }
            return .real(real)
        }

        /// A JSON string's UTF-8 bytes (escapes decoded; \u surrogate pairs joined).
        mutating func string() throws -> [UInt8] {
            guard take(UInt8(ascii: "\"")) else { throw Failure(message: "expected a string") }
            var out: [UInt8] = []
            while true {
                guard let b = peek else { throw Failure(message: "a string that never ends") }
                i += 1
                if b == UInt8(ascii: "\"") { return out }
                guard b == UInt8(ascii: "\\") else { out.append(b); continue }
                guard let e = peek else { throw Failure(message: "a string that never ends") }
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard literal("\\u") else { throw Failure(message: "a lone surrogate in a \\u escape") }
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw Failure(message: "a lone surrogate in a \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw Failure(message: "a lone surrogate in a \\u escape")
                    }
                    out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    throw Failure(message: "an unknown escape in a string")
                }
            }
        }

        mutating func hex4() throws -> UInt32 {
            guard bytes.endIndex - i >= 4, let digits = TypedCSV.hexBytes(bytes[i..<(i + 4)]) else {
                throw Failure(message: "a \\u escape without four hex digits")
            }
            i += 4
            return UInt32(digits[0]) << 8 | UInt32(digits[1])
        }
    }
}
