// TEXT of a UTF-16 database turned into UTF-8 byte for byte as SQLite turns
// it when a statement asks for UTF-8 (sqlite3VdbeMemTranslate in utf.c),
// including what it does with bytes that are not valid UTF-16: an odd last
// byte is dropped, a surrogate followed by any unit is combined with it by
// SQLite's formula, and a lone surrogate at the end is written as three bytes.
// That is what the statement path of diff and hash sees, so the decoder must
// see the same; `matchesLibrary` checks it against the linked SQLite.
import CSQLite

enum UTF16Text {
    /// Replaces `out` with the UTF-8 that SQLite makes of `bytes`.
    static func toUTF8(_ bytes: UnsafeRawBufferPointer, bigEndian: Bool, into out: inout [UInt8]) {
        let capacity = maxUTF8Count(bytes.count)
        out = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            count = capacity == 0 ? 0 : writeUTF8(bytes, bigEndian: bigEndian, to: buffer.baseAddress!)
        }
    }

    /// The most bytes `toUTF8` writes for `count` bytes of UTF-16: a unit
    /// gives at most 3 bytes, a pair 4.
    static func maxUTF8Count(_ count: Int) -> Int { (count / 2) * 3 }

    /// Writes to `out` (room for `maxUTF8Count(bytes.count)` bytes) the UTF-8
    /// that SQLite makes of `bytes`; returns how many bytes it wrote.
    static func writeUTF8(_ bytes: UnsafeRawBufferPointer, bigEndian: Bool, to out: UnsafeMutablePointer<UInt8>) -> Int {
        let count = bytes.count & ~1
        guard count > 0, let base = bytes.baseAddress else { return 0 }
        let (hi, lo) = bigEndian ? (0, 1) : (1, 0)
        @inline(__always) func unit(_ at: Int) -> UInt32 {
            UInt32(base.load(fromByteOffset: at + lo, as: UInt8.self))
                | UInt32(base.load(fromByteOffset: at + hi, as: UInt8.self)) << 8
        }
        var at = 0
        var z = 0
        while at < count {
            var c = unit(at)
            at += 2
            if c >= 0xD800 && c < 0xE000 && at < count {
                let c2 = unit(at)
                at += 2
                c = (c2 & 0x03FF) + ((c & 0x003F) << 10) + (((c & 0x03C0) + 0x0040) << 10)
            }
            z += writeScalar(c, to: out + z)
        }
        return z
    }

    /// SQLite's WRITE_UTF8: any value below 0x110000, surrogates included.
    /// Returns the number of bytes written.
    @inline(__always)
    static func writeScalar(_ c: UInt32, to z: UnsafeMutablePointer<UInt8>) -> Int {
        if c < 0x80 {
            z[0] = UInt8(c)
            return 1
        } else if c < 0x800 {
            z[0] = 0xC0 + UInt8((c >> 6) & 0x1F)
            z[1] = 0x80 + UInt8(c & 0x3F)
            return 2
        } else if c < 0x10000 {
            z[0] = 0xE0 + UInt8((c >> 12) & 0x0F)
            z[1] = 0x80 + UInt8((c >> 6) & 0x3F)
            z[2] = 0x80 + UInt8(c & 0x3F)
            return 3
        } else {
            z[0] = 0xF0 + UInt8((c >> 18) & 0x07)
            z[1] = 0x80 + UInt8((c >> 12) & 0x3F)
            z[2] = 0x80 + UInt8((c >> 6) & 0x3F)
            z[3] = 0x80 + UInt8(c & 0x3F)
            return 4
        }
    }

    /// Awkward UTF-16LE inputs (lone and swapped surrogates, an odd last
    /// byte, a surrogate at the end, NULs), for checking `toUTF8` against
    /// the linked SQLite. None starts with a byte-order mark: binding text
    /// strips one (values read from a record keep theirs).
    static let probes: [[UInt8]] = [
        [0x41, 0x00], [0xE9, 0x00, 0x00, 0x00, 0x42], [0x3D, 0xD8, 0x00, 0xDE], [0x00, 0xDC, 0x3D, 0xD8],
        [0x00, 0xD8], [0x00, 0xD8, 0x41, 0x00], [0xFF, 0xDF, 0xFF, 0xDB], [0x41, 0x00, 0xFE, 0xFF, 0xFF, 0xFF],
        [0x00, 0xDC], [0x41], [0xFF, 0xDB, 0xFF, 0xDF, 0x00, 0xD8],
    ]

    /// True when the linked SQLite turns every probe into the same bytes as
    /// `toUTF8` (checked once per process): otherwise the decoder leaves
    /// UTF-16 databases to statements.
    static let matchesLibrary: Bool = {
        var db: OpaquePointer?
        guard sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let db else {
            sqlite3_close_v2(db)
            return false
        }
        defer { sqlite3_close_v2(db) }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, "SELECT ?1", -1, &statement, nil) == SQLITE_OK, let statement else { return false }
        defer { sqlite3_finalize(statement) }
        var mine: [UInt8] = []
        for probe in probes {
            // Through SQLite: bound as UTF-16LE, read back as UTF-8.
            var swapped = probe
            if UInt16(littleEndian: 1) != 1 {  // big-endian host: bind_text16 takes native order
                var i = 0
                while i + 1 < swapped.count { swapped.swapAt(i, i + 1); i += 2 }
            }
            let bound = swapped.withUnsafeBytes { raw in
                sqlite3_bind_text16(statement, 1, raw.baseAddress, Int32(raw.count & ~1), litectl_transient())
            }
            guard bound == SQLITE_OK, sqlite3_step(statement) == SQLITE_ROW else { return false }
            let text = sqlite3_column_text(statement, 0)
            let length = Int(sqlite3_column_bytes(statement, 0))
            let theirs = text.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
            sqlite3_reset(statement)
            probe.withUnsafeBytes { toUTF8($0, bigEndian: false, into: &mine) }
            if mine != theirs { return false }
        }
        return true
    }()
}
