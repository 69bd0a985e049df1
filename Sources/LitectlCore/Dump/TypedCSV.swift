// The CSV a dump writes keeps SQLite's five storage classes apart, inside
// plain RFC 4180: TEXT is always quoted, everything else never is, and the
// unquoted forms say their type.
//
//   NULL      an empty field
//   INTEGER   -?[0-9]+
//   REAL      the shortest decimal that reads back bit for bit, always with
//             '.' or an exponent (1.0, -0.0, 2.5e-308); Inf and -Inf
//   TEXT      "..." with each " doubled; the bytes as they are (CR, LF, NUL
//             included); TEXT that is not UTF-8 as t'HEX' (unquoted)
//   BLOB      x'HEX' (uppercase hex; x'' is the empty BLOB)
//
// Records end with CRLF; the first record is the column names. Reading, an
// unquoted field that has none of these forms is TEXT (CSV from elsewhere).

enum TypedCSV {
    /// Appends `cell` as a field.
    static func appendField(_ cell: Cell, to out: inout [UInt8]) {
        switch cell {
        case .null:
            break
        case .integer(let v):
            appendDecimal(v, to: &out)
        case .real(let d):
            out.append(contentsOf: exactRealText(d).utf8)
        case .text(let bytes):
            if isValidUTF8(bytes) {
                appendQuotedField(bytes, to: &out)
            } else {
                out.append(contentsOf: "t'".utf8)
                appendHexDigits(bytes, to: &out)
                out.append(UInt8(ascii: "'"))
            }
        case .blob(let bytes):
            out.append(contentsOf: "x'".utf8)
            appendHexDigits(bytes, to: &out)
            out.append(UInt8(ascii: "'"))
        }
    }

    /// `"..."` with each `"` doubled.
    static func appendQuotedField(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.reserveCapacity(out.count + bytes.count + 2)
        out.append(UInt8(ascii: "\""))
        for byte in bytes {
            out.append(byte)
            if byte == UInt8(ascii: "\"") { out.append(byte) }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The value of a field read back: quoted fields are TEXT; unquoted ones
    /// by their form (see the file's opening comment).
    static func value(_ field: [UInt8], quoted: Bool) -> Value {
        if quoted { return .text(field) }
        if field.isEmpty { return .null }
        if let integer = integerValue(field) { return .integer(integer) }
        if let real = realValue(field) { return .real(real) }
        if field.count >= 3, field[1] == UInt8(ascii: "'"), field.last == UInt8(ascii: "'") {
            let kind = field[0] | 0x20
            if kind == UInt8(ascii: "x") || kind == UInt8(ascii: "t"), let bytes = hexBytes(field[2..<(field.count - 1)]) {
                return kind == UInt8(ascii: "x") ? .blob(bytes) : .text(bytes)
            }
        }
        return .text(field)
    }

    /// `-?[0-9]+` that fits in 64 bits.
    static func integerValue(_ field: [UInt8]) -> Int64? {
        var i = 0
        let negative = field.first == UInt8(ascii: "-")
        if negative || field.first == UInt8(ascii: "+") { i = 1 }
        guard i < field.count else { return nil }
        var magnitude: UInt64 = 0
        for byte in field[i...] {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            let (times, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            if o1 || o2 { return nil }
            magnitude = sum
        }
        if negative {
            if magnitude == UInt64(Int64.max) + 1 { return Int64.min }
            return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// A decimal number (`[-+]digits[.digits][e[-+]digits]`, digits on at
    /// least one side of the point), or Inf / -Inf; correctly rounded.
    static func realValue(_ field: [UInt8]) -> Double? {
        let text = String(decoding: field, as: UTF8.self)
        switch text {
        case "Inf", "+Inf": return .infinity
        case "-Inf": return -.infinity
        default: break
        }
        var i = 0
        if i < field.count, field[i] == UInt8(ascii: "-") || field[i] == UInt8(ascii: "+") { i += 1 }
        var digits = 0
        while i < field.count, isDigit(field[i]) { i += 1; digits += 1 }
        if i < field.count, field[i] == UInt8(ascii: ".") {
            i += 1
            while i < field.count, isDigit(field[i]) { i += 1; digits += 1 }
        }
        guard digits > 0 else { return nil }
        if i < field.count, field[i] | 0x20 == UInt8(ascii: "e") {
            i += 1
            if i < field.count, field[i] == UInt8(ascii: "-") || field[i] == UInt8(ascii: "+") { i += 1 }
            var exponentDigits = 0
            while i < field.count, isDigit(field[i]) { i += 1; exponentDigits += 1 }
            guard exponentDigits > 0 else { return nil }
        }
        guard i == field.count else { return nil }
        return Double(text)
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    /// The bytes of an even run of hex digits (either case).
    static func hexBytes<C: Collection>(_ hex: C) -> [UInt8]? where C.Element == UInt8 {
        guard hex.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(hex.count / 2)
        var high: UInt8? = nil
        for char in hex {
            let nibble: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = char - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = char - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = char - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high { out.append(h << 4 | nibble); high = nil } else { high = nibble }
        }
        return out
    }
}

/// Reads CSV records from lines of input: RFC 4180 (fields quoted with `"`,
/// `""` a quote inside), records ending with CRLF or LF; a quoted field may
/// span lines. Each field comes with whether it was quoted.
struct CSVRecordReader {
    let input: InputLines
    /// The line the last record started on.
    private(set) var recordLine = 0

    init(input: InputLines) { self.input = input }

    mutating func next() throws -> [(bytes: [UInt8], quoted: Bool)]? {
        guard var line = try input.next() else { return nil }
        recordLine = input.lineNumber
        var fields: [(bytes: [UInt8], quoted: Bool)] = []
        var field: [UInt8] = []
        var quoted = false
        var inQuotes = false
        var afterQuote = false
        while true {
            var i = line.startIndex
            while i < line.endIndex {
                let byte = line[i]
                if inQuotes {
                    if byte == UInt8(ascii: "\"") {
                        let n = line.index(after: i)
                        if n < line.endIndex && line[n] == UInt8(ascii: "\"") {
                            field.append(byte)
                            i = line.index(after: n)
                            continue
                        }
                        inQuotes = false
                        afterQuote = true
                    } else {
                        field.append(byte)
                    }
                    i = line.index(after: i)
                    continue
                }
                switch byte {
                case UInt8(ascii: ","):
                    fields.append((field, quoted))
                    field = []
                    quoted = false
                    afterQuote = false
                case UInt8(ascii: "\"") where field.isEmpty && !quoted:
                    inQuotes = true
                    quoted = true
                case 0x0A:
                    fields.append((field, quoted))
                    return fields
                case 0x0D where line.index(after: i) < line.endIndex && line[line.index(after: i)] == 0x0A:
                    break
                default:
                    if afterQuote {
                        throw LoadError(source: input.name, line: input.lineNumber, message: "text after the closing quote of a field")
                    }
                    field.append(byte)
                }
                i = line.index(after: i)
            }
            guard inQuotes else { break }
            // A quoted field that goes on past the line's end.
            guard let more = try input.next() else {
                throw LoadError(source: input.name, line: recordLine, message: "a quoted field that never ends")
            }
            line = more
        }
        fields.append((field, quoted))
        return fields
    }
}
