// Reading a database file page by page as a connection's read transaction
// sees it, through SQLite's own file handles (SQLITE_FCNTL_FILE_POINTER and
// _JOURNAL_POINTER), never through a second open of the file: closing another
// descriptor would drop SQLite's POSIX locks. Pages that have a frame anywhere
// in the -wal are named, so that callers never trust the main file's copy of
// them; when the snapshot's frames are known (see WALIndexHeader), those pages
// are read from the -wal.
// https://www.sqlite.org/c3ref/c_fcntl_begin_atomic_write.html
import CSQLite

/// The pages of one connection's main database as its read transaction sees them.
///
/// One reader per thread: `clone()` makes another over the same handles
/// (reads are positioned reads, which may run at once), with its own caches.
/// Other threads may read only while the connection's own thread leaves it
/// alone (waits for them).
final class PageFile {
    let connection: Connection
    let file: UnsafeMutablePointer<sqlite3_file>
    let pageSize: Int
    let usableSize: Int
    let pageCount: UInt32
    /// Pages with a frame anywhere in the -wal: their copy in the main file
    /// may be older than the snapshot, so they never count as identical.
    private(set) var walPages = Set<UInt32>()
    /// The -wal, when the database has one that SQLite reads.
    private(set) var wal: UnsafeMutablePointer<sqlite3_file>?
    /// The snapshot's pages in the -wal: page → offset of its data there.
    /// nil when the snapshot's frames are not known: pages in `walPages`
    /// cannot then be read (`page` gives nil).
    private(set) var walFrames: [UInt32: Int]? = [:]

    /// True when every page of the snapshot can be read.
    var seesWholeSnapshot: Bool { walFrames != nil || walPages.isEmpty }

    /// nil when the file cannot be read this way (no file handle, or a WAL
    /// that SQLite reads but this reader cannot see). Call inside the
    /// connection's read transaction, after its first read.
    ///
    /// `walIndex` is the wal-index header of the transaction's snapshot
    /// (`WALIndexHeader.pinned`): with it, the snapshot's frames are known
    /// and pages in the -wal are read from there. Without it, those pages
    /// are unreadable.
    ///
    /// `cacheChunks` sizes the chunk cache of this reader and its clones
    /// (64 KiB each; see `page`).
    init?(_ connection: Connection, walIndex: WALIndexHeader? = nil, cacheChunks: Int = 8) throws {
        self.connection = connection
        slotCount = max(1, cacheChunks)
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
            if let walIndex, walIndex.wholeInMainFile, walIndex.pageCount == pageCount || walIndex.maxFrame == 0 {
                // Every frame of the snapshot is in the main file, and the -wal may be restarted meanwhile: read neither.
            } else if let wal, wal.pointee.pMethods != nil {
                guard let pages = PageFile.framePages(wal, pageSize: pageSize) else { return nil }
                walPages = pages
                self.wal = wal
                walFrames = pages.isEmpty ? [:] : nil
                if !pages.isEmpty, let walIndex, walIndex.pageCount == pageCount || walIndex.maxFrame == 0 {
                    walFrames = walIndex.frames(in: wal, pageSize: pageSize)
                }
            } else if !connection.isImmutable {
                // SQLite would read a -wal we cannot see.
                return nil
            }
        }
    }

    /// Another reader of the same snapshot, with caches of its own (for another thread).
    private init(sharing other: PageFile) {
        connection = other.connection
        file = other.file
        pageSize = other.pageSize
        usableSize = other.usableSize
        pageCount = other.pageCount
        walPages = other.walPages
        wal = other.wal
        walFrames = other.walFrames
        slotCount = other.slotCount
    }

    func clone() -> PageFile { PageFile(sharing: self) }

    /// Reads `count` bytes at `offset` of the main file; false on any error or short read.
    func read(into buffer: UnsafeMutableRawPointer, count: Int, offset: Int) -> Bool {
        PageFile.read(file, into: buffer, count: count, offset: offset)
    }

    /// `count` bytes at `offset` of `connection`'s main file as they are on
    /// disk (never through the -wal), read through SQLite's own handle; nil
    /// on any error or short read.
    static func mainFileBytes(_ connection: Connection, count: Int, offset: Int) -> [UInt8]? {
        var pointer: UnsafeMutablePointer<sqlite3_file>?
        guard count > 0, sqlite3_file_control(connection.rawHandle, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
              let pointer, pointer.pointee.pMethods != nil else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBytes { read(pointer, into: $0.baseAddress!, count: count, offset: offset) }
        return ok ? bytes : nil
    }

    private static func read(_ file: UnsafeMutablePointer<sqlite3_file>, into buffer: UnsafeMutableRawPointer, count: Int, offset: Int) -> Bool {
        guard let xRead = file.pointee.pMethods.pointee.xRead else { return false }
        return xRead(file, buffer, Int32(count), sqlite3_int64(offset)) == SQLITE_OK
    }

    /// Where the snapshot's copy of `page` is: in the -wal (at that offset),
    /// in the main file (nil), or nowhere this reader can see (throws).
    @inline(__always)
    private func walOffset(_ page: UInt32) -> Int?? {
        guard !walPages.isEmpty, walPages.contains(page) else { return .some(nil) }
        guard let walFrames else { return nil }
        return .some(walFrames[page])
    }

    /// Page `page` (1-based) of the snapshot, valid until the next call on
    /// this reader; throws when it lies outside the file or cannot be read.
    func load(_ page: UInt32) throws -> UnsafeRawPointer {
        guard page >= 1, page <= pageCount else {
            throw PageError(.pageOutOfRange, page: page, "page \(page) is outside the file (\(pageCount) pages)")
        }
        guard let pointer = self.page(page) else {
            throw PageError(.unreadable, page: page, walFrames == nil && walPages.contains(page)
                            ? "the page is in the -wal and the snapshot's frames are not known" : "cannot read the page")
        }
        return pointer
    }

    // A small direct-mapped cache of 64 KiB chunks: one read per chunk
    // rather than one per page (b-tree pages mostly lie near each other).
    private let slotCount: Int
    private lazy var chunkPages = max(1, (64 << 10) / pageSize)
    private lazy var slots: [(chunk: Int, pages: Int, bytes: UnsafeMutableRawPointer)] = (0..<slotCount).map { _ in
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
        switch walOffset(page) {
        case .none: return nil
        case .some(.some(let offset)): return readWAL(offset)
        case .some(.none): break
        }
        let index = Int(page - 1)
        let chunk = index / chunkPages, slot = chunk % slotCount
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

    /// Whether SQLite reads page `page` as zeros: it has no frame in the
    /// snapshot and lies wholly past the main file's end (a database grown
    /// by a page SQLite never wrote, such as the lock-byte page). Any other
    /// page that `page(_:)` cannot return failed to be read.
    func readsAsZeros(_ page: UInt32) -> Bool {
        guard page >= 1, page <= pageCount, case .some(.none) = walOffset(page),
              let xFileSize = file.pointee.pMethods?.pointee.xFileSize else { return false }
        var size: sqlite3_int64 = 0
        guard xFileSize(file, &size) == SQLITE_OK else { return false }
        return Int64(page - 1) * Int64(pageSize) >= size
    }

    /// Page `page` read on its own (not through the chunk cache, for pages
    /// scattered over the file), valid until the next call.
    func singlePage(_ page: UInt32) -> UnsafeRawPointer? {
        guard page >= 1, page <= pageCount else { return nil }
        switch walOffset(page) {
        case .none: return nil
        case .some(.some(let offset)): return readWAL(offset)
        case .some(.none): break
        }
        return read(into: single, count: pageSize, offset: Int(page - 1) * pageSize) ? UnsafeRawPointer(single) : nil
    }

    /// A page's data from the -wal, at `offset`, in the single-page buffer.
    private func readWAL(_ offset: Int) -> UnsafeRawPointer? {
        guard let wal, let xRead = wal.pointee.pMethods?.pointee.xRead else { return nil }
        return xRead(wal, single, Int32(pageSize), sqlite3_int64(offset)) == SQLITE_OK ? UnsafeRawPointer(single) : nil
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
