// Reading a database file page by page as a connection's read transaction
// sees it, through SQLite's own file handle (SQLITE_FCNTL_FILE_POINTER), never
// through a second open of the file: closing another descriptor would drop
// SQLite's POSIX locks. Pages that have a frame anywhere in the -wal are named,
// so that callers never trust the main file's copy of them.
// https://www.sqlite.org/c3ref/c_fcntl_begin_atomic_write.html
import CSQLite

/// The pages of one connection's main database as its read transaction sees them.
final class PageFile {
    let connection: Connection
    let file: UnsafeMutablePointer<sqlite3_file>
    let pageSize: Int
    let usableSize: Int
    let pageCount: UInt32
    /// Pages with a frame anywhere in the -wal: their copy in the main file
    /// may be older than the snapshot, so they never count as identical.
    private(set) var walPages = Set<UInt32>()

    /// nil when the file cannot be read this way (no file handle, or a WAL
    /// that SQLite reads but this reader cannot see). Call inside the
    /// connection's read transaction, after its first read.
    init?(_ connection: Connection) throws {
        self.connection = connection
        let db = connection.rawHandle
        var pointer: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
              let pointer, pointer.pointee.pMethods != nil else { return nil }
        file = pointer
        guard case .integer(let size) = try connection.scalar("PRAGMA page_size") ?? .null,
              case .integer(let count) = try connection.scalar("PRAGMA page_count") ?? .null,
              size >= 512, count >= 1, count < Int64(UInt32.max) else { return nil }
        var reserved: Int32 = -1
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserved) == SQLITE_OK,
              reserved >= 0 else { return nil }
        pageSize = Int(size)
        usableSize = Int(size) - Int(reserved)
        pageCount = UInt32(count)
        // SQLite reads a -wal whenever one exists, whatever the header's
        // version bytes say: ask the pager what it does.
        if try connection.journalMode() == "wal" {
            var wal: UnsafeMutablePointer<sqlite3_file>?
            guard sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK else { return nil }
            if let wal, wal.pointee.pMethods != nil {
                guard let pages = PageFile.framePages(wal, pageSize: pageSize) else { return nil }
                walPages = pages
            } else if !connection.isImmutable {
                // SQLite would read a -wal we cannot see.
                return nil
            }
        }
    }

    /// Reads `count` bytes at `offset` of the main file; false on any error or short read.
    func read(into buffer: UnsafeMutableRawPointer, count: Int, offset: Int) -> Bool {
        guard let xRead = file.pointee.pMethods.pointee.xRead else { return false }
        return xRead(file, buffer, Int32(count), sqlite3_int64(offset)) == SQLITE_OK
    }

    // A small direct-mapped cache of 64 KiB chunks: one read per chunk
    // rather than one per page (b-tree pages mostly lie near each other).
    private static let slotCount = 8
    private lazy var chunkPages = max(1, (64 << 10) / pageSize)
    private lazy var slots: [(chunk: Int, pages: Int, bytes: UnsafeMutableRawPointer)] = (0..<PageFile.slotCount).map { _ in
        (-1, 0, UnsafeMutableRawPointer.allocate(byteCount: chunkPages * pageSize, alignment: 8))
    }
    private lazy var single = UnsafeMutableRawPointer.allocate(byteCount: pageSize, alignment: 8)

    deinit {
        for slot in slots { slot.bytes.deallocate() }
        single.deallocate()
    }

    /// Page `page` (1-based), valid until the next call; nil when the page is
    /// out of range or unreadable.
    func page(_ page: UInt32) -> UnsafeRawPointer? {
        guard page >= 1, page <= pageCount else { return nil }
        let index = Int(page - 1)
        let chunk = index / chunkPages, slot = chunk % PageFile.slotCount
        if slots[slot].chunk != chunk {
            let first = chunk * chunkPages
            let pages = min(chunkPages, Int(pageCount) - first)
            slots[slot].chunk = -1
            if read(into: slots[slot].bytes, count: pages * pageSize, offset: first * pageSize) {
                slots[slot] = (chunk, pages, slots[slot].bytes)
            } else {
                // A page past the end of the file (its only copy is in the -wal).
                return read(into: single, count: pageSize, offset: index * pageSize) ? UnsafeRawPointer(single) : nil
            }
        }
        return UnsafeRawPointer(slots[slot].bytes + (index - chunk * chunkPages) * pageSize)
    }

    /// Page `page` read on its own (not through the chunk cache, for pages
    /// scattered over the file), valid until the next call.
    func singlePage(_ page: UInt32) -> UnsafeRawPointer? {
        guard page >= 1, page <= pageCount else { return nil }
        return read(into: single, count: pageSize, offset: Int(page - 1) * pageSize) ? UnsafeRawPointer(single) : nil
    }

    /// The page numbers named in the headers of every frame of the -wal
    /// (whatever their salt: a superset of the snapshot's frames). nil when
    /// the -wal cannot be read or has another page size.
    static func framePages(_ wal: UnsafeMutablePointer<sqlite3_file>, pageSize: Int) -> Set<UInt32>? {
        let methods = wal.pointee.pMethods.pointee
        guard let xRead = methods.xRead, let xFileSize = methods.xFileSize else { return nil }
        var size: sqlite3_int64 = 0
        guard xFileSize(wal, &size) == SQLITE_OK else { return nil }
        var pages = Set<UInt32>()
        if size < 32 { return pages }
        var header = [UInt8](repeating: 0, count: 32)
        guard header.withUnsafeMutableBytes({ xRead(wal, $0.baseAddress, 32, 0) }) == SQLITE_OK else { return nil }
        guard Int(bigEndian32(header, 8)) == pageSize else { return nil }
        let frameSize = 24 + pageSize
        var offset = 32
        var frame = [UInt8](repeating: 0, count: 24)
        while offset + frameSize <= Int(size) {
            let rc = frame.withUnsafeMutableBytes { xRead(wal, $0.baseAddress, 24, sqlite3_int64(offset)) }
            // A -wal that grows while we read it: later frames are newer than our snapshot.
            if rc != SQLITE_OK { break }
            pages.insert(bigEndian32(frame, 0))
            offset += frameSize
        }
        return pages
    }

    static func bigEndian32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
}

/// A set of page numbers, one bit per page of a file.
struct PageSet {
    private var words: [UInt64]

    init(pageCount: UInt32) { words = Array(repeating: 0, count: Int(pageCount) / 64 + 1) }

    func contains(_ page: UInt32) -> Bool {
        Int(page / 64) < words.count && words[Int(page / 64)] & (1 << UInt64(page % 64)) != 0
    }

    /// Adds `page`; false when it was there already or lies past the file.
    mutating func insert(_ page: UInt32) -> Bool {
        guard Int(page / 64) < words.count, !contains(page) else { return false }
        words[Int(page / 64)] |= 1 << UInt64(page % 64)
        return true
    }
}
