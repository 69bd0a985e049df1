// The committed pages of a damaged database's -wal, read without SQLite: the
// frames whose salts match the header and whose running checksum holds, up to
// the last commit frame among them, exactly as SQLite's recovery of a -wal
// reads it. Pages found there are newer than the main file's copies.
// https://www.sqlite.org/fileformat2.html#the_write_ahead_log
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The last committed copy of each page in a -wal file.
struct WALOverlay {
    /// Page number → offset of that page's data in the -wal.
    var frames: [UInt32: Int]
    /// The database's size in pages after the last commit (once `bound`, no
    /// more than the two files can hold).
    var pageCount: UInt32
    /// Frames read and valid (committed or not).
    var validFrames: Int
    /// Frames after the last commit, or past a bad checksum: not used.
    var ignoredFrames: Int

    static let magicLittle: UInt32 = 0x377F_0682
    static let magicBig: UInt32 = 0x377F_0683

    /// Reads the -wal open on `fd` (of `size` bytes) for pages of `pageSize`
    /// bytes (nil: take the -wal's own page size). nil when there is no
    /// usable -wal: too short, a bad header, another page size, no commit.
    static func read(fd: Int32, size: Int64, pageSize: Int?) -> WALOverlay? {
        guard size >= 32 else { return nil }
        var header = [UInt8](repeating: 0, count: 32)
        guard preadAll(fd, &header, 0) else { return nil }
        let magic = be32(header, 0)
        guard magic == magicLittle || magic == magicBig, be32(header, 4) == 3_007_000 else { return nil }
        let walPageSize = Int(be32(header, 8))
        guard walPageSize >= 512, walPageSize <= 65536, walPageSize & (walPageSize - 1) == 0 else { return nil }
        if let pageSize, pageSize != walPageSize { return nil }
        let bigEndian = magic == magicBig
        var s1: UInt32 = 0, s2: UInt32 = 0
        checksum(header, count: 24, bigEndian: bigEndian, &s1, &s2)
        guard s1 == be32(header, 24), s2 == be32(header, 28) else { return nil }
        let salt1 = be32(header, 16), salt2 = be32(header, 20)

        let frameSize = 24 + walPageSize
        var frame = [UInt8](repeating: 0, count: frameSize)
        var pending: [(page: UInt32, offset: Int)] = []
        var committed: [UInt32: Int] = [:]
        var pageCount: UInt32 = 0
        var valid = 0, total = 0
        var offset = 32
        while Int64(offset + frameSize) <= size {
            total += 1
            guard preadAll(fd, &frame, offset) else { break }
            let page = be32(frame, 0)
            guard page >= 1, be32(frame, 8) == salt1, be32(frame, 12) == salt2 else { break }
            var t1 = s1, t2 = s2
            checksum(frame, count: 8, bigEndian: bigEndian, &t1, &t2)
            frame.withUnsafeBytes { raw in
                checksum(raw.baseAddress! + 24, count: walPageSize, bigEndian: bigEndian, &t1, &t2)
            }
            guard t1 == be32(frame, 16), t2 == be32(frame, 20) else { break }
            s1 = t1; s2 = t2
            valid += 1
            pending.append((page, offset + 24))
            let commitSize = be32(frame, 4)
            if commitSize > 0 {
                for entry in pending { committed[entry.page] = entry.offset }
                pending.removeAll()
                pageCount = commitSize
            }
            offset += frameSize
        }
        guard pageCount > 0 else { return nil }
        // Frames of pages past the committed size are not part of the database.
        committed = committed.filter { $0.key <= pageCount }
        let framesInFile = Int((size - 32) / Int64(frameSize))
        return WALOverlay(frames: committed, pageCount: pageCount, validFrames: valid,
                          ignoredFrames: framesInFile - (valid - pending.count))
    }

    /// Bounds `pageCount`, which the last commit frame states in a field
    /// nothing vouches for (its checksum anyone can compute), by the pages the
    /// two files can hold: the main file's `filePages`, or else the highest
    /// page a committed frame writes. A database that grew wrote each new
    /// page into the -wal (all but the lock-byte page, never written), so a
    /// frame of a page past `filePages` + one per frame + 1 names a page no
    /// database of these files has; such frames are dropped. Without this, a
    /// hostile size (0xFFFFFFFF) would size every per-page table of the run.
    /// Returns a note for the report when it took anything away.
    mutating func bound(filePages: UInt32) -> String? {
        let stated = pageCount
        let reach = UInt64(filePages) + UInt64(frames.count) + 1
        let highest = frames.keys.filter { UInt64($0) <= reach }.max() ?? 0
        let limit = max(1, min(stated, max(filePages, highest)))
        guard limit < stated else { return nil }
        let dropped = frames.keys.filter { $0 > limit }.count
        frames = frames.filter { $0.key <= limit }
        pageCount = limit
        let framesNote = dropped > 0 ? "; \(dropped) frames of pages past it ignored" : ""
        return "the -wal's last commit says the database has \(stated) pages, more than the main file and the -wal hold; read as \(limit) pages\(framesNote)"
    }

    /// SQLite's WAL checksum (walChecksumBytes) over `count` bytes (a multiple of 8).
    static func checksum(_ bytes: UnsafeRawPointer, count: Int, bigEndian: Bool, _ s1: inout UInt32, _ s2: inout UInt32) {
        var i = 0
        while i + 8 <= count {
            let a = bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self)
            let b = bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self)
            let x0 = bigEndian ? UInt32(bigEndian: a) : UInt32(littleEndian: a)
            let x1 = bigEndian ? UInt32(bigEndian: b) : UInt32(littleEndian: b)
            s1 = s1 &+ x0 &+ s2
            s2 = s2 &+ x1 &+ s1
            i += 8
        }
    }

    static func checksum(_ bytes: [UInt8], count: Int, bigEndian: Bool, _ s1: inout UInt32, _ s2: inout UInt32) {
        bytes.withUnsafeBytes { checksum($0.baseAddress!, count: count, bigEndian: bigEndian, &s1, &s2) }
    }

    static func be32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    /// Fills `buffer` from `offset`; false on an error or a short read.
    static func preadAll(_ fd: Int32, _ buffer: inout [UInt8], _ offset: Int) -> Bool {
        buffer.withUnsafeMutableBytes { preadAll(fd, $0.baseAddress!, $0.count, offset) }
    }

    static func preadAll(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int, _ offset: Int) -> Bool {
        var done = 0
        while done < count {
            let n = pread(fd, buffer + done, count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            if n == 0 { return false }
            done += n
        }
        return true
    }
}
