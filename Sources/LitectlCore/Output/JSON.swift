// A small JSON value whose objects keep their keys in the order they were
// built, so every report litectl prints has stable, documented key order
// (Foundation's JSONEncoder on Linux does not keep key order).

/// A JSON value.
public indirect enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    /// A finite double, written in the shortest form that reads back exactly.
    case number(Double)
    case string(String)
    case array([JSON])
    /// Keys in order.
    case object([(String, JSON)])

    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.integer(a), .integer(b)): a == b
        case let (.number(a), .number(b)): a.bitPattern == b.bitPattern
        case let (.string(a), .string(b)): Array(a.utf8) == Array(b.utf8)
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a.count == b.count && zip(a, b).allSatisfy { Array($0.0.utf8) == Array($1.0.utf8) && $0.1 == $1.1 }
        default: false
        }
    }

    /// An optional value, or null.
    public static func optional<T>(_ value: T?, _ wrap: (T) -> JSON) -> JSON { value.map(wrap) ?? .null }

    /// Compact text, one line.
    public var compact: String {
        var out = ""
        write(to: &out, indent: nil, level: 0)
        return out
    }

    /// Indented text (two spaces a level).
    public var pretty: String {
        var out = ""
        write(to: &out, indent: "  ", level: 0)
        return out
    }

    func write(to out: inout String, indent: String?, level: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .integer(let i): out += String(i)
        case .number(let d):
            out += d.isFinite ? exactRealText(d) : "null"
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let items):
            if items.isEmpty { out += "[]"; return }
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                JSON.newline(&out, indent, level + 1)
                item.write(to: &out, indent: indent, level: level + 1)
            }
            JSON.newline(&out, indent, level)
            out += "]"
        case .object(let members):
            if members.isEmpty { out += "{}"; return }
            out += "{"
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out += "," }
                JSON.newline(&out, indent, level + 1)
                JSON.writeString(key, to: &out)
                out += indent == nil ? ":" : ": "
                value.write(to: &out, indent: indent, level: level + 1)
            }
            JSON.newline(&out, indent, level)
            out += "}"
        }
    }

    private static func newline(_ out: inout String, _ indent: String?, _ level: Int) {
        guard let indent else { return }
        out += "\n" + String(repeating: indent, count: level)
    }

    /// Writes `s` as a JSON string: quotes, backslashes and control characters escaped.
    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029:
                out += "\\u" + String(scalar.value, radix: 16).leftPadded(to: 4)
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
