// Byte-level helpers of the repository format: little-endian writers and a
// bounds-checked reader (objects come from storage and are never trusted),
// and zlib compression of pages and binary objects.
import CZlib

/// Appends fixed-width little-endian integers and raw bytes.
struct ByteWriter {
    var bytes: [UInt8] = []
    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { for s in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(s)))) } }
    mutating func u64(_ v: UInt64) { for s in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(s)))) } }
    mutating func raw(_ v: [UInt8]) { bytes.append(contentsOf: v) }
    mutating func id(_ v: PageID) {
        for w in [v.a, v.b, v.c, v.d] { for s in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: w >> UInt64(s))) } }
    }
}

/// Reads what `ByteWriter` wrote; every read checks the bounds.
struct ByteReader {
    let bytes: [UInt8]
    var offset = 0
    let what: String

    init(_ bytes: [UInt8], what: String) { self.bytes = bytes; self.what = what }

    func damaged(_ detail: String) -> StoreError { StoreError(.other, location: what, message: "damaged object: \(detail)") }

    mutating func need(_ n: Int) throws {
        guard n >= 0, offset <= bytes.count - n else { throw damaged("truncated") }
    }
    mutating func u8() throws -> UInt8 { try need(1); defer { offset += 1 }; return bytes[offset] }
    mutating func u32() throws -> UInt32 {
        try need(4); defer { offset += 4 }
        var v: UInt32 = 0
        for s in 0..<4 { v |= UInt32(bytes[offset + s]) << (8 * UInt32(s)) }
        return v
    }
    mutating func u64() throws -> UInt64 {
        try need(8); defer { offset += 8 }
        var v: UInt64 = 0
        for s in 0..<8 { v |= UInt64(bytes[offset + s]) << (8 * UInt64(s)) }
        return v
    }
    mutating func raw(_ n: Int) throws -> [UInt8] { try need(n); defer { offset += n }; return Array(bytes[offset..<offset + n]) }
    mutating func id() throws -> PageID {
        try need(32); defer { offset += 32 }
        return bytes.withUnsafeBytes { PageID(bytes: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + 32])) }
    }
    /// A count of items of `size` bytes each that must fit in what is left.
    mutating func count(of size: Int) throws -> Int {
        let n = Int(try u32())
        guard n <= (bytes.count - offset) / max(size, 1) else { throw damaged("count \(n) past the end") }
        return n
    }
    var atEnd: Bool { offset == bytes.count }
}

enum Zlib {
    /// zlib format (RFC 1950) at `level`.
    static func compress(_ input: UnsafeRawBufferPointer, level: Int32 = 6) -> [UInt8] {
        var capacity = compressBound(uLong(input.count))
        var out = [UInt8](repeating: 0, count: Int(capacity))
        let rc = out.withUnsafeMutableBytes { o in
            compress2(o.baseAddress!.assumingMemoryBound(to: Bytef.self), &capacity,
                      input.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(input.count), level)
        }
        precondition(rc == Z_OK, "compress2 cannot fail with a bound-sized buffer")
        out.removeLast(out.count - Int(capacity))
        return out
    }

    static func compress(_ input: [UInt8], level: Int32 = 6) -> [UInt8] {
        input.withUnsafeBytes { compress($0, level: level) }
    }

    /// Exactly `size` bytes back, or nil when the input is not zlib data of that size.
    static func decompress(_ input: [UInt8], size: Int) -> [UInt8]? {
        guard size >= 0, size <= 1 << 31 else { return nil }
        var out = [UInt8](repeating: 0, count: max(size, 1))
        var length = uLong(size)
        let rc = out.withUnsafeMutableBytes { o in
            input.withUnsafeBytes { i in
                uncompress(o.baseAddress!.assumingMemoryBound(to: Bytef.self), &length,
                           i.baseAddress?.assumingMemoryBound(to: Bytef.self), uLong(i.count))
            }
        }
        guard rc == Z_OK, Int(length) == size else { return nil }
        if size == 0 { out.removeAll() }
        return out
    }
}

/// Inflates a zlib stream of unknown size (the binary repository objects),
/// refusing more than `limit` bytes of output.
func inflate(_ compressed: [UInt8], what: String, limit: Int = 1 << 30) throws -> [UInt8] {
    var stream = z_stream()
    let damaged = StoreError(.other, location: what, message: "damaged object: cannot decompress")
    guard inflateInit_(&stream, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw damaged }
    defer { inflateEnd(&stream) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    return try compressed.withUnsafeBytes { input -> [UInt8] in
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        while true {
            let (rc, produced) = buffer.withUnsafeMutableBytes { raw -> (Int32, Int) in
                stream.next_out = raw.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(raw.count)
                let rc = CZlib.inflate(&stream, Z_NO_FLUSH)
                return (rc, raw.count - Int(stream.avail_out))
            }
            out.append(contentsOf: buffer[0..<produced])
            guard out.count <= limit else { throw damaged }
            if rc == Z_STREAM_END { return out }
            // Z_BUF_ERROR with input left means no progress: damaged or truncated.
            if rc != Z_OK { throw damaged }
        }
    }
}
