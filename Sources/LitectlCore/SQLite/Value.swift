// The exact value type: one of SQLite's five storage classes, compared strictly.
// 1, 1.0, '1' and x'31' are four different values; TEXT compares as bytes
// (never through Swift's String ==, which folds Unicode equivalents); REALs
// compare by bit pattern. See https://www.sqlite.org/datatype3.html
/// A value as SQLite stores it.
public enum Value: Sendable {
    case null
    case integer(Int64)
    case real(Double)
    /// TEXT as its raw UTF-8 bytes, exactly as SQLite returned them.
    case text([UInt8])
    case blob([UInt8])

    /// A TEXT value from a Swift string (its UTF-8 bytes).
    public static func text(_ string: String) -> Value { .text(Array(string.utf8)) }

    /// SQLite's name for the storage class, as `typeof()` reports it.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }

    /// The storage class rank in SQLite's sort order: NULL < numbers < TEXT < BLOB.
    var classRank: Int {
        switch self {
        case .null: 0
        case .integer, .real: 1
        case .text: 2
        case .blob: 3
        }
    }
}

// MARK: - Exact equality and ordering

extension Value: Hashable {
    /// Exact equality: same storage class and same content. REALs are equal only
    /// when their bit patterns are (so -0.0 != 0.0); TEXT and BLOB compare bytes.
    public static func == (lhs: Value, rhs: Value) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.integer(a), .integer(b)): a == b
        case let (.real(a), .real(b)): a.bitPattern == b.bitPattern
        case let (.text(a), .text(b)): a == b
        case let (.blob(a), .blob(b)): a == b
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .integer(let v): hasher.combine(1 as UInt8); hasher.combine(v)
        case .real(let v): hasher.combine(2 as UInt8); hasher.combine(v.bitPattern)
        case .text(let v): hasher.combine(3 as UInt8); hasher.combine(v)
        case .blob(let v): hasher.combine(4 as UInt8); hasher.combine(v)
        }
    }
}

extension Value: Comparable {
    /// A total order that agrees with SQLite's `ORDER BY` under the BINARY
    /// collation (NULL, then numbers by value, then TEXT and BLOB by memcmp), and
    /// breaks SQLite's ties so that it is consistent with `==`: an INTEGER sorts
    /// before an equal REAL, and -0.0 before 0.0.
    public static func < (lhs: Value, rhs: Value) -> Bool { compare(lhs, rhs) < 0 }

    /// -1, 0 or 1 as `lhs` sorts before, equal to, or after `rhs`.
    public static func compare(_ lhs: Value, _ rhs: Value) -> Int {
        switch (lhs, rhs) {
        case (.null, .null): return 0
        case let (.integer(a), .integer(b)): return a < b ? -1 : (a == b ? 0 : 1)
        case let (.real(a), .real(b)):
            if a < b { return -1 }
            if a > b { return 1 }
            if a.bitPattern == b.bitPattern { return 0 }
            return a.sign == .minus ? -1 : 1
        case let (.integer(a), .real(b)):
            let c = compareExactly(a, b)
            return c != 0 ? c : -1
        case let (.real(a), .integer(b)):
            let c = compareExactly(b, a)
            return c != 0 ? -c : 1
        case let (.text(a), .text(b)), let (.blob(a), .blob(b)):
            return compareBytes(a, b)
        default:
            return lhs.classRank < rhs.classRank ? -1 : 1
        }
    }
}

/// Compares an integer and a double by exact mathematical value, without the
/// rounding that converting the Int64 to a Double would bring.
func compareExactly(_ i: Int64, _ d: Double) -> Int {
    if d.isNaN { return 1 }
    if d < -9_223_372_036_854_775_808.0 { return 1 }
    if d >= 9_223_372_036_854_775_808.0 { return -1 }
    let truncated = d.rounded(.towardZero)
    let t = Int64(truncated)
    if i != t { return i < t ? -1 : 1 }
    let fraction = d - truncated
    return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
}

/// memcmp order, then shorter first: SQLite's BINARY collation.
func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBufferPointer { pa in
        b.withUnsafeBufferPointer { pb in compareBytes(UnsafeRawBufferPointer(pa), UnsafeRawBufferPointer(pb)) }
    }
}

func compareBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
    let n = min(a.count, b.count)
    if n > 0, let pa = a.baseAddress, let pb = b.baseAddress {
        let c = memcmp(pa, pb, n)
        if c != 0 { return c < 0 ? -1 : 1 }
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
