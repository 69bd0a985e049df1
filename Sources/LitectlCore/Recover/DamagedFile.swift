// A possibly damaged database file read page by page with plain positioned
// reads, never through SQLite: the header's facts when it is intact, the page
// size found from the pages themselves when it is not, the committed pages of
// a -wal laid over the main file's, and which pages the format reserves
// (the lock-byte page, pointer-map pages). Nothing is written or created.
// https://www.sqlite.org/fileformat2.html#the_database_header
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The raw pages of a damaged database file (and of its -wal), read-only.
final class DamagedFile {
    let path: String
    let pageSize: Int
    /// Bytes at the end of each page reserved for extensions (header byte 20).
    let reserved: Int
    var usable: Int { pageSize - reserved }
    /// Pages there are to read: the main file's whole pages, or the -wal's
    /// committed size when there is one.
    let pageCount: UInt32
    let encoding: TextEncoding
    let header: Header
    /// The committed pages of the -wal, when there is a usable one.
    let wal: WALOverlay?
    /// What was odd about the file itself (a truncated file, a guessed page
    /// size), for the report.
    private(set) var notes: [String] = []
    /// Pages that could not be read (I/O errors), as they are met.
    private(set) var unreadable = PageSet(pageCount: 0)

    private let fd: Int32
    private var walFD: Int32 = -1
    let fileSize: Int64

    /// The database header's fields that recovery uses, as found.
    struct Header {
        /// The first 16 bytes are "SQLite format 3\0".
        var valid = false
        var pageSizeField = 0
        var reservedField = 0
        var changeCounter: UInt32 = 0
        var pageCountField: UInt32 = 0
        var freelistTrunk: UInt32 = 0
        var freelistCount: UInt32 = 0
        var largestRootPage: UInt32 = 0
        var encodingField: UInt32 = 0
        var userVersion: Int32 = 0
        var incrementalVacuum: UInt32 = 0
        var applicationID: Int32 = 0
        var versionValidFor: UInt32 = 0
        /// Bytes 18 and 19 are 2: the file is in WAL mode.
        var walMode = false

        var autoVacuum: Bool { largestRootPage != 0 }
    }

    /// Opens `path` read-only. Throws only when the file cannot be opened or
    /// read at all, or holds nothing that could be a database.
    init(path: String) throws {
        self.path = path
        try FileCheck.requireDatabaseFile(path, writable: false, whole: false)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw DatabaseError(code: .cantopen, message: String(cString: strerror(errno)), path: path)
        }
        self.fd = fd
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw DatabaseError(code: .ioerr, message: message, path: path)
        }
        fileSize = Int64(info.st_size)

        var fileNotes: [String] = []
        var first = [UInt8](repeating: 0, count: 100)
        let headerRead = fileSize >= 100 && WALOverlay.preadAll(fd, &first, 0)
        var header = Header()
        if headerRead {
            header = DamagedFile.parseHeader(first)
        }

        // The -wal beside it, when it exists (SQLite reads one whatever the header says).
        var overlay: WALOverlay?
        var walNote: String?
        let walFD = open(path + "-wal", O_RDONLY | O_CLOEXEC)
        if walFD >= 0 {
            var walInfo = stat()
            if fstat(walFD, &walInfo) == 0, (walInfo.st_mode & S_IFMT) == S_IFREG, walInfo.st_size > 0 {
                let headerPageSize = header.valid ? DamagedFile.pageSize(field: header.pageSizeField) : nil
                overlay = WALOverlay.read(fd: walFD, size: Int64(walInfo.st_size), pageSize: headerPageSize)
                if overlay == nil { walNote = "the -wal holds no committed frames this reader can use; it was ignored" }
            }
        }

        // A committed page 1 in the -wal holds the newer header.
        if let overlay, let offset = overlay.frames[1] {
            var newer = [UInt8](repeating: 0, count: 100)
            if WALOverlay.preadAll(walFD, &newer, offset) {
                let parsed = DamagedFile.parseHeader(newer)
                if parsed.valid { header = parsed }
            }
        }
        self.header = header

        // The page size: the header's when its pages bear it out, else found from the pages.
        let shape = PageShape()
        var size = header.valid ? DamagedFile.pageSize(field: header.pageSizeField) : nil
        var reserved = header.valid ? header.reservedField : 0
        if size == nil, let overlay { size = overlay.frames.isEmpty ? nil : DamagedFile.walPageSize(walFD) }
        let detected = DamagedFile.detectPageSize(fd: fd, fileSize: fileSize, reserved: reserved, shape: shape)
        if let headerSize = size, let detected, detected != headerSize,
           !DamagedFile.pagesLookRight(fd: fd, fileSize: fileSize, pageSize: headerSize, reserved: reserved, shape: shape) {
            fileNotes.append("the header's page size (\(headerSize)) does not fit the pages; read as \(detected)-byte pages")
            size = detected
        }
        if size == nil, let detected {
            size = detected
            fileNotes.append(header.valid ? "the header's page size field is invalid; read as \(detected)-byte pages"
                         : "the database header is damaged; read as \(detected)-byte pages")
            if !header.valid { reserved = 0 }
        }
        guard let pageSize = size else {
            if walFD >= 0 { close(walFD) }
            close(fd)
            if fileSize == 0 {
                throw DatabaseError(code: .notadb, message: "the file is empty", path: path)
            }
            throw DatabaseError(code: .notadb, message: "no b-tree page found: not a SQLite database, or damaged beyond recovery",
                                path: path)
        }
        if reserved >= pageSize - 480 { reserved = 0 }
        self.pageSize = pageSize
        self.reserved = reserved
        self.walFD = overlay == nil ? -1 : walFD
        if overlay == nil && walFD >= 0 { close(walFD) }
        if let walNote { fileNotes.append(walNote) }

        switch header.encodingField {
        case 1: encoding = .utf8
        case 2: encoding = .utf16le
        case 3: encoding = .utf16be
        default:
            encoding = .utf8
            if header.valid && header.encodingField != 0 { fileNotes.append("the header's text encoding is invalid; read as UTF-8") }
            if !header.valid { fileNotes.append("text encoding unknown (header damaged); read as UTF-8") }
        }

        let filePages = UInt32(clamping: fileSize / Int64(pageSize))
        if fileSize % Int64(pageSize) != 0 {
            fileNotes.append("the file ends with \(fileSize % Int64(pageSize)) bytes of a partial page, not read")
        }
        var count = filePages
        // SQLite believes the header's page count when the change counter vouches for it.
        if header.valid && header.pageCountField > 0 && header.changeCounter == header.versionValidFor && overlay == nil {
            if header.pageCountField > filePages {
                fileNotes.append("the file is truncated: the header says \(header.pageCountField) pages, the file holds \(filePages)")
            } else {
                count = header.pageCountField
            }
        }
        if var bounded = overlay {
            if let note = bounded.bound(filePages: filePages) { fileNotes.append(note) }
            count = bounded.pageCount
            overlay = bounded
        }
        pageCount = count
        wal = overlay
        unreadable = PageSet(pageCount: count)
        notes = fileNotes
        // The cache's chunks: a few pages at a time, read with one call.
        chunkPages = max(1, (128 << 10) / pageSize)
        for _ in 0..<DamagedFile.slotCount {
            slots.append((-1, UnsafeMutableRawPointer.allocate(byteCount: chunkPages * pageSize, alignment: 8)))
        }
        single = .allocate(byteCount: pageSize, alignment: 8)
    }

    deinit {
        for slot in slots { slot.bytes.deallocate() }
        single?.deallocate()
        close(fd)
        if walFD >= 0 { close(walFD) }
    }

    // MARK: Pages

    private static let slotCount = 8
    private var chunkPages = 1
    private var slots: [(chunk: Int, bytes: UnsafeMutableRawPointer)] = []
    private var single: UnsafeMutableRawPointer!
    /// How many main-file pages the file really holds (pages past it read as missing).
    private var filePages: UInt32 { UInt32(clamping: fileSize / Int64(pageSize)) }

    /// Page `number` (1-based), valid until the next call; nil when it lies
    /// outside the database or cannot be read (also recorded in `unreadable`).
    func page(_ number: UInt32) -> UnsafeRawPointer? {
        guard number >= 1, number <= pageCount else { return nil }
        if let wal, let offset = wal.frames[number] {
            guard WALOverlay.preadAll(walFD, single, pageSize, offset) else {
                _ = unreadable.insert(number)
                return nil
            }
            return UnsafeRawPointer(single)
        }
        guard number <= filePages else {
            // A page the -wal's size counts but neither file holds.
            _ = unreadable.insert(number)
            return nil
        }
        let index = Int(number - 1)
        let chunk = index / chunkPages, slot = chunk % DamagedFile.slotCount
        if slots[slot].chunk != chunk {
            let first = chunk * chunkPages
            let pages = min(chunkPages, Int(filePages) - first)
            slots[slot].chunk = -1
            if WALOverlay.preadAll(fd, slots[slot].bytes, pages * pageSize, first * pageSize) {
                slots[slot].chunk = chunk
            } else {
                // An I/O error somewhere in the chunk: read this page alone.
                guard WALOverlay.preadAll(fd, single, pageSize, index * pageSize) else {
                    _ = unreadable.insert(number)
                    return nil
                }
                return UnsafeRawPointer(single)
            }
        }
        return UnsafeRawPointer(slots[slot].bytes + (index - chunk * chunkPages) * pageSize)
    }

    /// Copies page `number` into `buffer` (`pageSize` bytes); false when it cannot be read.
    func copy(_ number: UInt32, into buffer: UnsafeMutableRawPointer) -> Bool {
        guard let source = page(number) else { return false }
        buffer.copyMemory(from: source, byteCount: pageSize)
        return true
    }

    /// The lock-byte page (the page holding byte 2^30), which is never used.
    var lockBytePage: UInt32 { UInt32(0x4000_0000 / pageSize + 1) }

    /// True for the pointer-map pages of an auto-vacuum database (btree.c's ptrmapPageno).
    func isPointerMap(_ page: UInt32) -> Bool {
        guard header.autoVacuum, page >= 2 else { return false }
        let perMap = UInt32(usable / 5 + 1)
        var map = (page - 2) / perMap * perMap + 2
        if map == lockBytePage { map += 1 }
        return map == page
    }

    /// True for pages that hold no b-tree, overflow or freelist data by the
    /// format's rules: the lock-byte page and pointer-map pages.
    func isReserved(_ page: UInt32) -> Bool {
        page == lockBytePage || isPointerMap(page)
    }

    // MARK: Header and page size

    static func parseHeader(_ b: [UInt8]) -> Header {
        var h = Header()
        let magic: [UInt8] = Array("SQLite format 3".utf8) + [0]
        h.valid = Array(b[0..<16]) == magic
        func u32(_ at: Int) -> UInt32 { WALOverlay.be32(b, at) }
        h.pageSizeField = Int(b[16]) << 8 | Int(b[17])
        h.walMode = b[18] == 2 && b[19] == 2
        h.reservedField = Int(b[20])
        h.changeCounter = u32(24)
        h.pageCountField = u32(28)
        h.freelistTrunk = u32(32)
        h.freelistCount = u32(36)
        h.largestRootPage = u32(52)
        h.encodingField = u32(56)
        h.userVersion = Int32(bitPattern: u32(60))
        h.incrementalVacuum = u32(64)
        h.applicationID = Int32(bitPattern: u32(68))
        h.versionValidFor = u32(92)
        return h
    }

    /// The page size a header field stands for (1 is 65536), nil when invalid.
    static func pageSize(field: Int) -> Int? {
        let size = field == 1 ? 65536 : field
        guard size >= 512, size <= 65536, size & (size - 1) == 0 else { return nil }
        return size
    }

    private static func walPageSize(_ fd: Int32) -> Int? {
        var header = [UInt8](repeating: 0, count: 12)
        guard WALOverlay.preadAll(fd, &header, 0) else { return nil }
        return pageSize(field: Int(WALOverlay.be32(header, 8)))
    }

    /// The page size under which the most of the file's first pages are
    /// well-formed b-tree pages (page 1 checked after its 100-byte header).
    static func detectPageSize(fd: Int32, fileSize: Int64, reserved: Int, shape: PageShape) -> Int? {
        let span = Int(min(fileSize, 1 << 20))
        guard span >= 512 else { return nil }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: span, alignment: 8)
        defer { buffer.deallocate() }
        guard WALOverlay.preadAll(fd, buffer, span, 0) else { return nil }
        var best: (size: Int, count: Int)?
        var size = 512
        while size <= 65536 {
            var count = 0
            var offset = 0
            var checked = 0
            while offset + size <= span && checked < 64 {
                let usable = size - (reserved < size - 480 ? reserved : 0)
                if shape.isWellFormed(buffer + offset, size: usable, headerOffset: offset == 0 ? 100 : 0) { count += 1 }
                offset += size
                checked += 1
            }
            if count > 0 && count >= (best?.count ?? 0) { best = (size, count) }
            size *= 2
        }
        return best?.size
    }

    /// True when, read as `pageSize`-byte pages, some of the first pages are
    /// well-formed b-tree pages.
    static func pagesLookRight(fd: Int32, fileSize: Int64, pageSize: Int, reserved: Int, shape: PageShape) -> Bool {
        let pages = Int(min(fileSize / Int64(pageSize), 16))
        guard pages > 0 else { return false }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: pageSize, alignment: 8)
        defer { buffer.deallocate() }
        for i in 0..<pages {
            guard WALOverlay.preadAll(fd, buffer, pageSize, i * pageSize) else { continue }
            if shape.isWellFormed(buffer, size: pageSize - reserved, headerOffset: i == 0 ? 100 : 0) { return true }
        }
        return false
    }
}
