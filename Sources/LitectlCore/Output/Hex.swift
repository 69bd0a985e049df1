// Lower-case hexadecimal, as object names, ids and digests are written.

/// Lower-case hexadecimal.
public enum Hex {
    static let digits = Array("0123456789abcdef".utf8)
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8](); out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
    public static func decode(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count % 2 == 0 else { return nil }
        func v(_ c: UInt8) -> UInt8? {
            switch c { case 48...57: c - 48; case 97...102: c - 87; case 65...70: c - 55; default: nil }
        }
        var out = [UInt8](); out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let h = v(u[i]), let l = v(u[i + 1]) else { return nil }
            out.append(h << 4 | l); i += 2
        }
        return out
    }
}
