// The one way litectl writes sizes, shares and padded columns for people:
// sizes in IEC units (powers of 1024: bytes, KiB, MiB, GiB, TiB, one decimal),
// percentages with one decimal. docs/output.md names the choice.

/// 1536 -> "1.5 KiB".
public func humanBytes(_ bytes: Int64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1024, unit < units.count - 1 { value /= 1024; unit += 1 }
    if unit == 0 { return "\(bytes) bytes" }
    let tenths = (value * 10).rounded() / 10
    return (tenths == tenths.rounded() ? String(Int(tenths)) : String(tenths)) + " " + units[unit]
}

/// `12.5%`, `0.3%`: one decimal.
func formatPercent(_ value: Double) -> String {
    let tenths = (value * 10).rounded()
    return "\(Int64(tenths) / 10).\(abs(Int64(tenths) % 10))%"
}

extension String {
    /// The text padded with spaces to `width` characters (never cut).
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
