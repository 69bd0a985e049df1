// The committed frames of a database's -wal, read as wal.c writes them
// (https://www.sqlite.org/walformat.html#the_write_ahead_log_file_format):
// the 32-byte header (magic, page size, salts, checksum), then frames of a
// 24-byte header (page number, the database size on a commit frame, the
// salts, the cumulative checksum) and the page. A frame counts only when its
// salts are the generation's and its checksum continues the chain from the
// one before it; only frames up to a commit frame count. The file is read
// through SQLite's own handle of it (SQLITE_FCNTL_JOURNAL_POINTER), never a
// second open. The one reader of the -wal's format: `replicate` follows a
// database with it (Recover/ reads a -wal with its own WALOverlay for now).
import CSQLite

/// Where a state ends in the database's -wal: the generation (its two salts)
/// and the commit frame, with that frame's cumulative checksum.
public struct WALPosition: Sendable, Equatable {
    public var salt1: UInt32
    public var salt2: UInt32
    /// The commit frame that ends the state (1-based). 0: no frame of this
    /// -wal generation (it was empty, or every frame was in the main file).
    public var frame: UInt32
    public var checksum1: UInt32
    public var checksum2: UInt32

    public init(salt1: UInt32, salt2: UInt32, frame: UInt32, checksum1: UInt32, checksum2: UInt32) {
        self.salt1 = salt1; self.salt2 = salt2; self.frame = frame; self.checksum1 = checksum1; self.checksum2 = checksum2
    }
}

/// A frame or header that is not what the follower expected: the -wal is
/// not the generation it read (it was restarted), or is damaged. The
/// follower then resyncs page by page; it never skips frames.
struct WALMismatch: Error, CustomStringConvertible {
    var description: String
}

extension WALIndexHeader {
    private func word(_ at: Int) -> UInt32 { bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt32.self) } }
    private func bigEndianWord(_ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
    /// The salts as numbers (the -wal header holds them big-endian; the index keeps their bytes).
    var salt1: UInt32 { bigEndianWord(32) }
    var salt2: UInt32 { bigEndianWord(36) }
    /// The cumulative checksum of frame `maxFrame` (the index keeps it in the host's order).
    var frameChecksum: (UInt32, UInt32) { (word(24), word(28)) }

    /// The position of the snapshot this header describes.
    var position: WALPosition {
        WALPosition(salt1: salt1, salt2: salt2, frame: maxFrame, checksum1: frameChecksum.0, checksum2: frameChecksum.1)
    }

    func sameGeneration(_ position: WALPosition) -> Bool { salt1 == position.salt1 && salt2 == position.salt2 }
}

/// SQLite's WAL checksum (wal.c walChecksumBytes): two 32-bit sums over
/// 32-bit words, read big-endian when the header's magic says so, else little-endian.
struct WALChecksum: Equatable {
    var s1: UInt32
    var s2: UInt32

    mutating func add(_ bytes: UnsafeRawBufferPointer, bigEndian: Bool) {
        var a = s1, b = s2
        var i = 0
        let n = bytes.count & ~7
        if bigEndian {
            while i < n {
                a = a &+ UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self)) &+ b
                b = b &+ UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self)) &+ a
                i += 8
            }
        } else {
            while i < n {
                a = a &+ UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self)) &+ b
                b = b &+ UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self)) &+ a
                i += 8
            }
        }
        s1 = a; s2 = b
    }
}

/// The commits read after a position: each page's newest frame among them.
struct WALCommits {
    /// Page number → offset in the -wal of the data of its newest frame.
    var newest: [UInt32: Int] = [:]
    /// The database's size in pages after the last commit.
    var pageCount: UInt32 = 0
    /// Commit frames read.
    var transactions: UInt32 = 0
    /// The position after the last commit.
    var end: WALPosition
}

/// The frames a follower read last, kept from look to look (one buffer,
/// allocated once): the pages of the newest frames are taken from it
/// rather than read from the -wal a second time.
final class FrameBuffer {
    let capacity: Int
    let bytes: UnsafeMutableRawBufferPointer
    /// Where in the -wal `bytes` starts, and how much of it holds frames.
    var fileOffset = 0, count = 0

    init(capacity: Int = 1 << 20) {
        self.capacity = capacity
        bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
    }

    deinit { bytes.deallocate() }

    /// Calls `body` with the `count` bytes at -wal offset `offset` where the
    /// buffer holds them, or with nil when it does not.
    func withBytes<T>(offset: Int, count: Int, _ body: (UnsafeRawBufferPointer?) throws -> T) rethrows -> T {
        guard self.count > 0, offset >= fileOffset, offset + count <= fileOffset + self.count else { return try body(nil) }
        return try body(UnsafeRawBufferPointer(rebasing: bytes[offset - fileOffset..<offset - fileOffset + count]))
    }
}

/// A database's -wal, read through the handle of a connection that has it open.
struct WALFile {
    let file: UnsafeMutablePointer<sqlite3_file>
    let pageSize: Int
    var frameSize: Int { 24 + pageSize }

    /// The -wal of `connection` (in WAL mode, after a first read); nil when it has none open.
    init?(_ connection: Connection, pageSize: Int) {
        var wal: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(connection.rawHandle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK,
              let wal, wal.pointee.pMethods != nil, wal.pointee.pMethods.pointee.xRead != nil else { return nil }
        file = wal
        self.pageSize = pageSize
    }

    /// Reads exactly `count` bytes at `offset`; false on a short read or an error.
    func read(into buffer: UnsafeMutableRawPointer, count: Int, offset: Int) -> Bool {
        file.pointee.pMethods.pointee.xRead(file, buffer, Int32(count), sqlite3_int64(offset)) == SQLITE_OK
    }

    /// The file's header, checked: magic, version, page size, its checksum,
    /// and the salts of the generation `index` describes.
    func header(matching index: WALIndexHeader) throws -> (checksum: WALChecksum, bigEndian: Bool) {
        var raw = [UInt8](repeating: 0, count: 32)
        guard raw.withUnsafeMutableBytes({ read(into: $0.baseAddress!, count: 32, offset: 0) }) else {
            throw WALMismatch(description: "the -wal has no header")
        }
        func be(_ at: Int) -> UInt32 { UInt32(raw[at]) << 24 | UInt32(raw[at + 1]) << 16 | UInt32(raw[at + 2]) << 8 | UInt32(raw[at + 3]) }
        let magic = be(0)
        guard magic & 0xFFFF_FFFE == 0x377F_0682 else { throw WALMismatch(description: "the -wal's header has no WAL magic number") }
        let bigEndian = magic & 1 == 1
        guard be(4) == 3_007_000, Int(be(8)) == pageSize else { throw WALMismatch(description: "the -wal's header has another version or page size") }
        var sum = WALChecksum(s1: 0, s2: 0)
        raw.withUnsafeBytes { sum.add(UnsafeRawBufferPointer(rebasing: $0[0..<24]), bigEndian: bigEndian) }
        guard sum == WALChecksum(s1: be(24), s2: be(28)) else { throw WALMismatch(description: "the -wal's header checksum is wrong") }
        guard be(16) == index.salt1, be(20) == index.salt2 else { throw WALMismatch(description: "the -wal's header is of another generation") }
        return (sum, bigEndian)
    }

    /// The commits of frames `after.frame + 1 ... index.maxFrame` (the
    /// snapshot `index` pins down), every frame checked: the generation's
    /// salts, a page number, and the checksum chain from `after` (or from
    /// the header, when `after` is frame 0 or of the previous generation:
    /// `newGeneration`). The last frame must be a commit frame of
    /// `index.pageCount` pages.
    func commits(after: WALPosition, newGeneration: Bool, index: WALIndexHeader, buffer frames: FrameBuffer = FrameBuffer()) throws -> WALCommits {
        frames.count = 0
        if !newGeneration {
            guard index.sameGeneration(after), after.frame <= index.maxFrame else {
                throw WALMismatch(description: "the -wal is not the generation of the last state")
            }
        }
        let first = newGeneration ? 1 : Int(after.frame) + 1, last = Int(index.maxFrame)
        var out = WALCommits(end: after)
        if newGeneration { out.end = index.position; out.end.frame = 0 }
        // Nothing to read (the header of an emptied -wal may still be the old one's).
        guard first <= last else { return out }
        let (headerSum, bigEndian) = try header(matching: index)
        var sum = first == 1 ? headerSum : WALChecksum(s1: after.checksum1, s2: after.checksum2)
        let salts = Array(index.salts)
        let batch = max(1, frames.capacity / frameSize)
        let buffer = frames.bytes
        // Pages of frames since the last commit frame, which count only once it comes.
        var uncommitted: [(page: UInt32, offset: Int)] = []
        var frame = first
        while frame <= last {
            let count = min(batch, last - frame + 1)
            let offset = 32 + (frame - 1) * frameSize
            frames.count = 0
            guard read(into: buffer.baseAddress!, count: count * frameSize, offset: offset) else {
                throw WALMismatch(description: "frames \(frame)...\(frame + count - 1) cannot be read")
            }
            frames.fileOffset = offset
            frames.count = count * frameSize
            for k in 0..<count {
                let header = UnsafeRawBufferPointer(rebasing: buffer[k * frameSize..<k * frameSize + 24])
                let page = UInt32(bigEndian: header.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
                let size = UInt32(bigEndian: header.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                for s in 0..<8 where header[8 + s] != salts[s] {
                    throw WALMismatch(description: "frame \(frame + k) is of another generation")
                }
                sum.add(UnsafeRawBufferPointer(rebasing: header[0..<8]), bigEndian: bigEndian)
                sum.add(UnsafeRawBufferPointer(rebasing: buffer[k * frameSize + 24..<(k + 1) * frameSize]), bigEndian: bigEndian)
                let recorded = WALChecksum(s1: UInt32(bigEndian: header.loadUnaligned(fromByteOffset: 16, as: UInt32.self)),
                                           s2: UInt32(bigEndian: header.loadUnaligned(fromByteOffset: 20, as: UInt32.self)))
                guard page != 0, recorded == sum else {
                    throw WALMismatch(description: "frame \(frame + k) does not continue the checksum chain")
                }
                uncommitted.append((page, offset + k * frameSize + 24))
                if size != 0 {
                    for u in uncommitted { out.newest[u.page] = u.offset }
                    uncommitted.removeAll(keepingCapacity: true)
                    out.pageCount = size
                    out.transactions += 1
                    out.end = WALPosition(salt1: index.salt1, salt2: index.salt2, frame: UInt32(frame + k), checksum1: sum.s1, checksum2: sum.s2)
                }
            }
            frame += count
        }
        guard uncommitted.isEmpty, out.end.frame == index.maxFrame, out.pageCount == index.pageCount else {
            throw WALMismatch(description: "frame \(last) is not the commit the wal-index says")
        }
        guard (out.end.checksum1, out.end.checksum2) == index.frameChecksum else {
            throw WALMismatch(description: "the checksum of frame \(last) is not the one the wal-index holds")
        }
        // Pages past the database's end are not part of it (a truncation).
        for page in out.newest.keys where page > out.pageCount { out.newest[page] = nil }
        return out
    }

    /// The cumulative checksum recorded in frame `frame`'s header, when the
    /// frame is of the generation `index` describes; nil otherwise.
    func recordedChecksum(frame: UInt32, index: WALIndexHeader) -> WALChecksum? {
        guard frame >= 1 else { return nil }
        var header = [UInt8](repeating: 0, count: 24)
        guard header.withUnsafeMutableBytes({ read(into: $0.baseAddress!, count: 24, offset: 32 + (Int(frame) - 1) * frameSize) }) else { return nil }
        guard Array(header[8..<16]) == Array(index.salts) else { return nil }
        return header.withUnsafeBytes {
            WALChecksum(s1: UInt32(bigEndian: $0.loadUnaligned(fromByteOffset: 16, as: UInt32.self)),
                        s2: UInt32(bigEndian: $0.loadUnaligned(fromByteOffset: 20, as: UInt32.self)))
        }
    }
}
