// A value seen in place: the same five storage classes as `Value`, but TEXT
// and BLOB point into SQLite's buffer (valid until the next step), so writers
// can format millions of rows without copying each cell.

/// A borrowed view of one value.
public enum Cell {
    case null
    case integer(Int64)
    case real(Double)
    /// UTF-8 bytes, borrowed.
    case text(UnsafeRawBufferPointer)
    /// Bytes, borrowed.
    case blob(UnsafeRawBufferPointer)
}

extension Cell {
    /// The cell as an owned value (TEXT and BLOB bytes copied out).
    public var value: Value {
        switch self {
        case .null: .null
        case .integer(let v): .integer(v)
        case .real(let v): .real(v)
        case .text(let b): .text(Array(b))
        case .blob(let b): .blob(Array(b))
        }
    }
}

extension Row {
    /// Column `index` as a borrowed cell (no copy).
    public func cell(at index: Int) -> Cell {
        switch storageClass(at: index) {
        case .null: .null
        case .integer: .integer(int64(at: index))
        case .real: .real(double(at: index))
        case .text: .text(bytes(at: index))
        case .blob: .blob(bytes(at: index))
        }
    }
}

extension Value {
    /// Calls `body` with the value as a cell.
    public func withCell<T>(_ body: (Cell) throws -> T) rethrows -> T {
        switch self {
        case .null: return try body(.null)
        case .integer(let v): return try body(.integer(v))
        case .real(let v): return try body(.real(v))
        case .text(let b): return try b.withUnsafeBytes { try body(.text($0)) }
        case .blob(let b): return try b.withUnsafeBytes { try body(.blob($0)) }
        }
    }
}

/// The shortest decimal that reads back as the same double in a correctly
/// rounding parser (JSON, Python, Swift), always with a '.' or an exponent so
/// that it is never taken for an INTEGER; "Inf"/"-Inf" for infinities.
public func exactRealText(_ d: Double) -> String {
    if d.isInfinite { return d < 0 ? "-Inf" : "Inf" }
    if d.isNaN { return "NaN" }
    let text = "\(d)"
    // Scan the UTF-8 bytes, not Characters: this runs for every REAL written.
    return text.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") }) ? text : text + ".0"
}
