// Byte-level helpers of the repository format: little-endian writers and a
// bounds-checked reader (objects come from storage and are never trusted),
// and the two codecs: zstd (format version 2: blobs of pages and the binary
// objects) and zlib (version 1, still read and written in version-1 repositories).
import CZlib
import CZstd

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

/// zstd (RFC 8878). A compressor or decompressor holds its context, which is
/// costly to make (about a megabyte): one per thread, reused, and
/// used by one thread at a time (hence unchecked Sendable).
final class ZstdCompressor: @unchecked Sendable {
    private let context: OpaquePointer
    /// With `contentChecksum` (the default), frames carry zstd's checksum of
    /// their content (XXH64, 4 bytes), which every zstd decoder checks: damage
    /// that would still decompress, to other bytes, fails there. Without, they
    /// are frames as litectl wrote them before 2026-11-26.
    init(level: Int32, contentChecksum: Bool = true) {
        context = ZSTD_createCCtx()
        ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level)
        ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, contentChecksum ? 1 : 0)
    }

    deinit { ZSTD_freeCCtx(context); scratch.deallocate() }

    /// Where frames are made, kept from call to call: a fresh bound-sized
    /// buffer for each blob cost a page fault and a zeroing of every page of it.
    private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// One frame holding `input`, its size recorded in the frame header.
    func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        let bound = ZSTD_compressBound(input.count)
        if scratch.count < bound {
            scratch.deallocate()
            scratch = .allocate(byteCount: bound, alignment: 16)
        }
        let n = ZSTD_compress2(context, scratch.baseAddress, bound, input.baseAddress, input.count)
        precondition(ZSTD_isError(n) == 0, "zstd cannot fail with a bound-sized buffer")
        return Array(UnsafeRawBufferPointer(rebasing: scratch[..<n]))
    }

    func compress(_ input: [UInt8]) -> [UInt8] { input.withUnsafeBytes { compress($0) } }
}

final class ZstdDecompressor: @unchecked Sendable {
    private let context: OpaquePointer

    init() { context = ZSTD_createDCtx() }
    deinit { ZSTD_freeDCtx(context) }

    /// Decompresses one frame into `out`, which it must fill exactly; false
    /// for anything else (damaged data, a frame of another size, trailing bytes).
    func decompress(_ input: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard input.count > 0 else { return false }
        let size = ZSTD_getFrameContentSize(input.baseAddress, input.count)
        guard size == UInt64(out.count) else { return false }
        let n = ZSTD_decompressDCtx(context, out.baseAddress, out.count, input.baseAddress, input.count)
        return ZSTD_isError(n) == 0 && n == out.count
    }

    /// Exactly `size` bytes back, or nil.
    func decompress(_ input: UnsafeRawBufferPointer, size: Int) -> [UInt8]? {
        guard size >= 0 else { return nil }
        var out = [UInt8](repeating: 0, count: size)
        let ok = out.withUnsafeMutableBytes { decompress(input, into: $0) }
        return ok ? out : nil
    }
}

/// Decompresses a binary repository object (index, page list): zstd in
/// version 2, zlib in version 1, told apart by their first bytes (a zstd
/// frame starts with 28 B5 2F FD; a zlib stream's first byte is never 0x28).
/// Refuses more than `limit` bytes of output.
func decompressObject(_ compressed: [UInt8], what: String, limit: Int = 1 << 30) throws -> [UInt8] {
    if compressed.count >= 4 && compressed[0] == 0x28 && compressed[1] == 0xB5 && compressed[2] == 0x2F && compressed[3] == 0xFD {
        let damaged = StoreError(.other, location: what, message: "damaged object: cannot decompress")
        let size = compressed.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        guard size <= UInt64(limit) else { throw damaged }
        guard let out = compressed.withUnsafeBytes({ ZstdDecompressor().decompress($0, size: Int(size)) }) else { throw damaged }
        return out
    }
    // zlib, of a size not known in advance: collected from the streaming form.
    var out: [UInt8] = []
    try decompressObject(compressed, what: what, limit: limit) { out.append(contentsOf: $0) }
    return out
}

/// Builds a binary object (index, page list) of a size known in advance and
/// compresses it as it is written, so that a large one is never held twice:
/// zstd at level 1 in a version-2 repository, zlib at the end in version 1.
final class ObjectWriter {
    private let version: Int
    private let size: Int
    private var pending: [UInt8] = []
    private var output: [UInt8] = []
    private var produced = 0
    private var written = 0
    private var stream: OpaquePointer?

    init(repository: Repository, size: Int) {
        version = repository.version
        self.size = size
        if version == 1 {
            pending.reserveCapacity(size)
        } else {
            let context = ZSTD_createCCtx()!
            ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 1)
            ZSTD_CCtx_setPledgedSrcSize(context, UInt64(size))
            stream = context
            output = [UInt8](repeating: 0, count: ZSTD_compressBound(size))
            pending.reserveCapacity(1 << 16)
        }
    }

    deinit { if let stream { ZSTD_freeCCtx(stream) } }

    func u8(_ v: UInt8) { pending.append(v); spill() }
    func u32(_ v: UInt32) { for s in 0..<4 { pending.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(s)))) }; spill() }
    func raw(_ v: [UInt8]) { pending.append(contentsOf: v); spill() }
    func id(_ v: PageID) {
        for w in [v.a, v.b, v.c, v.d] { for s in stride(from: 56, through: 0, by: -8) { pending.append(UInt8(truncatingIfNeeded: w >> UInt64(s))) } }
        spill()
    }

    private func spill() {
        if stream != nil && pending.count >= 1 << 16 { feed(end: false) }
    }

    private func feed(end: Bool) {
        guard let stream else { return }
        written += pending.count
        pending.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
                var outBuffer = ZSTD_outBuffer(dst: out.baseAddress, size: out.count, pos: produced)
                while true {
                    let left = ZSTD_compressStream2(stream, &outBuffer, &inBuffer, end ? ZSTD_e_end : ZSTD_e_continue)
                    precondition(ZSTD_isError(left) == 0, "zstd streaming cannot fail with a bound-sized buffer and the pledged size")
                    if end ? left == 0 : inBuffer.pos == inBuffer.size { break }
                }
                produced = outBuffer.pos
            }
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// The compressed object.
    func finish() -> [UInt8] {
        if stream == nil {
            precondition(pending.count == size, "object size announced wrongly")
            return Zlib.compress(pending)
        }
        feed(end: true)
        precondition(written == size, "object size announced wrongly")
        output.removeLast(output.count - produced)
        return output
    }
}

/// Decompresses a binary object like `decompressObject`, handing the output
/// over in chunks of at most 64 KiB instead of holding all of it.
func decompressObject(_ compressed: [UInt8], what: String, limit: Int = 1 << 30,
                      chunks body: (UnsafeRawBufferPointer) throws -> Void) throws {
    let damaged = StoreError(.other, location: what, message: "damaged object: cannot decompress")
    var total = 0
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    if compressed.count >= 4 && compressed[0] == 0x28 && compressed[1] == 0xB5 && compressed[2] == 0x2F && compressed[3] == 0xFD {
        guard let stream = ZSTD_createDStream() else { throw damaged }
        defer { ZSTD_freeDStream(stream) }
        try compressed.withUnsafeBytes { input in
            var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
            while true {
                let (left, produced) = buffer.withUnsafeMutableBytes { raw -> (Int, Int) in
                    var outBuffer = ZSTD_outBuffer(dst: raw.baseAddress, size: raw.count, pos: 0)
                    let left = ZSTD_decompressStream(stream, &outBuffer, &inBuffer)
                    return (ZSTD_isError(left) != 0 ? -1 : left, outBuffer.pos)
                }
                guard left >= 0 else { throw damaged }
                total += produced
                guard total <= limit else { throw damaged }
                if produced > 0 { try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) } }
                if left == 0 {
                    // The frame is complete: nothing may follow it.
                    guard inBuffer.pos == inBuffer.size else { throw damaged }
                    return
                }
                // Input used up with the frame unfinished: truncated.
                if inBuffer.pos == inBuffer.size && produced < buffer.count { throw damaged }
            }
        }
        return
    }
    var stream = z_stream()
    guard inflateInit_(&stream, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw damaged }
    defer { inflateEnd(&stream) }
    try compressed.withUnsafeBytes { input in
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        while true {
            let (rc, produced) = buffer.withUnsafeMutableBytes { raw -> (Int32, Int) in
                stream.next_out = raw.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(raw.count)
                let rc = CZlib.inflate(&stream, Z_NO_FLUSH)
                return (rc, raw.count - Int(stream.avail_out))
            }
            total += produced
            guard total <= limit else { throw damaged }
            if produced > 0 { try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<produced])) } }
            if rc == Z_STREAM_END { return }
            if rc != Z_OK { throw damaged }
        }
    }
}
