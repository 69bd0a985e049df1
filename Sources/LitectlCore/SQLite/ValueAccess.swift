// What a value holds, read without a switch: an INTEGER's integer, TEXT or
// BLOB bytes for display. Several capabilities use them (info, stats,
// reports), so they live beside the value type.

extension Value {
    /// The integer of an INTEGER value.
    public var integerValue: Int64? {
        if case .integer(let v) = self { return v }
        return nil
    }

    /// TEXT or BLOB bytes; other values as their SQL literal (for display only).
    var bytesForDisplay: [UInt8] {
        switch self {
        case .text(let b), .blob(let b): b
        default: Array(sqlLiteral.utf8)
        }
    }
}
