// The shortcut for databases that share history (a backup against its live
// source, a copy changed by a migration): a b-tree subtree whose pages are
// byte-identical in both files holds the same rows on both sides, and those
// rows are a contiguous run of keys in both tables. The key ranges of such
// subtrees need not be read row by row; the diff reads only the gaps between
// them (see `DiffEngine.merge`).
//
// Pages are read through SQLite's own file handle (SQLITE_FCNTL_FILE_POINTER),
// never through a second open of the file: closing another descriptor would
// drop SQLite's POSIX locks. A page that has a frame anywhere in the -wal is
// never trusted from the main file. File format:
// https://www.sqlite.org/fileformat2.html#b_tree_pages
import CSQLite

/// One end of a key range: a rowid, or the key values of a WITHOUT ROWID table.
enum KeyBound: Equatable {
    case rowid(Int64)
    case values([Value])

    var values: [Value] {
        switch self {
        case .rowid(let rowid): [.integer(rowid)]
        case .values(let values): values
        }
    }

    /// Binds the bound's values from parameter `index` on; returns the next free index.
    func bind(to statement: Statement, at index: Int) throws -> Int {
        switch self {
        case .rowid(let rowid):
            try statement.bind(.integer(rowid), at: index)
            return index + 1
        case .values(let values):
            for (offset, value) in values.enumerated() { try statement.bind(value, at: index + offset) }
            return index + values.count
        }
    }
}

/// Key ranges (inclusive, in key order, disjoint) whose rows are identical in A and B.
struct SharedRanges {
    enum Kind {
        /// Keys are rowids (a rowid table's b-tree).
        case rowid
        /// Keys are the primary-key values of a WITHOUT ROWID table, in key order.
        case primaryKey
    }
    var kind: Kind
    var ranges: [(low: KeyBound, high: KeyBound)]
    /// Pages compared and found identical (for tests and -v).
    var sharedPages = 0
}

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

    // A small direct-mapped cache of 128 KiB chunks: one read per chunk
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

/// Finds the key ranges of a table whose b-tree pages are identical in A and B.
final class SharedPages {
    let a: PageFile
    let b: PageFile
    private let pageSize: Int
    private let usable: Int

    /// nil when the two files cannot share pages meaningfully: different page
    /// size or reserved space, an encoding other than UTF-8 on either side (its
    /// bytes would mean other text, and its order is not the engine's), or a
    /// file that cannot be read through SQLite's handle.
    init?(_ ca: Connection, _ cb: Connection) throws {
        guard try ca.scalar("PRAGMA encoding") == .text("UTF-8"), try cb.scalar("PRAGMA encoding") == .text("UTF-8"),
              let a = try PageFile(ca), let b = try PageFile(cb),
              a.pageSize == b.pageSize, a.usableSize == b.usableSize else { return nil }
        self.a = a
        self.b = b
        pageSize = a.pageSize
        usable = a.usableSize
    }

    /// The shared key ranges of table `name` (the same definition on both
    /// sides), or nil when its b-trees cannot be walked with confidence (an
    /// interior page in a -wal, a malformed page, a key that does not fit in
    /// its page).
    func ranges(table name: String, withoutRowid: Bool, keyColumns: Int) throws -> SharedRanges? {
        guard let rootA = try rootPage(a.connection, name), let rootB = try rootPage(b.connection, name) else { return nil }
        var walkB = TreeWalk(file: b, usable: usable)
        guard walkB.collect(rootB) else { return nil }
        var comparison = TreeComparison(a: a, b: b, usable: usable, keyColumns: withoutRowid ? keyColumns : 0, treeB: walkB)
        defer { comparison.release() }
        guard comparison.visit(rootA, depth: 0) != nil else { return nil }
        return SharedRanges(kind: withoutRowid ? .primaryKey : .rowid,
                            ranges: comparison.ranges.map { ($0.low, $0.high) }, sharedPages: comparison.sharedPages)
    }

    private func rootPage(_ connection: Connection, _ name: String) throws -> UInt32? {
        guard case .integer(let root) = try connection.scalar(
            "SELECT rootpage FROM main.sqlite_schema WHERE type = 'table' AND name = ?1", [.text(name)]) ?? .null,
              root >= 2, root <= Int64(UInt32.max) else { return nil }
        return UInt32(root)
    }
}

// MARK: - Reading b-tree pages

/// A b-tree page's header and cells, read in place.
struct BTreePage {
    let bytes: UnsafeRawBufferPointer
    let usable: Int

    static let tableInterior: UInt8 = 0x05, tableLeaf: UInt8 = 0x0D
    static let indexInterior: UInt8 = 0x02, indexLeaf: UInt8 = 0x0A

    var type: UInt8 { bytes[0] }
    var isValid: Bool { [Self.tableInterior, Self.tableLeaf, Self.indexInterior, Self.indexLeaf].contains(type) }
    var isLeaf: Bool { type == Self.tableLeaf || type == Self.indexLeaf }
    var isTable: Bool { type == Self.tableInterior || type == Self.tableLeaf }
    var cellCount: Int { Int(u16(3)) }
    var rightChild: UInt32 { u32(8) }

    func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]) }
    func u32(_ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    /// Where cell `i` starts, nil when outside the page.
    func cellStart(_ i: Int) -> Int? {
        let pointer = (isLeaf ? 8 : 12) + 2 * i
        guard pointer + 2 <= usable else { return nil }
        let start = Int(u16(pointer))
        return start >= (isLeaf ? 8 : 12) && start < usable ? start : nil
    }

    /// The left child of interior cell `i`.
    func child(_ i: Int) -> UInt32? {
        guard let start = cellStart(i), start + 4 <= usable else { return nil }
        return u32(start)
    }

    /// A varint at `at`: its value and length, nil past the usable area.
    func varint(_ at: Int) -> (value: UInt64, length: Int)? {
        var value: UInt64 = 0
        for i in 0..<9 {
            guard at + i < usable else { return nil }
            let byte = bytes[at + i]
            if i == 8 { return (value << 8 | UInt64(byte), 9) }
            value = value << 7 | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 { return (value, i + 1) }
        }
        return nil
    }

    /// The payload of cell `i`: where it starts, its total size, the bytes
    /// stored on this page, and the first overflow page (0 when none).
    /// nil for a table interior page (no payload) or a malformed cell.
    func payload(_ i: Int) -> (start: Int, size: Int, local: Int, overflow: UInt32)? {
        guard type != Self.tableInterior, var at = cellStart(i) else { return nil }
        if type == Self.indexInterior { at += 4 }
        guard let size = varint(at), size.value < UInt64(Int32.max) else { return nil }
        at += size.length
        if type == Self.tableLeaf {
            guard let rowid = varint(at) else { return nil }
            at += rowid.length
        }
        let p = Int(size.value), u = usable
        let maxLocal = type == Self.tableLeaf ? u - 35 : (u - 12) * 64 / 255 - 23
        let minLocal = (u - 12) * 32 / 255 - 23
        if p <= maxLocal {
            return at + p <= usable ? (at, p, p, 0) : nil
        }
        let k = minLocal + (p - minLocal) % (u - 4)
        let local = k <= maxLocal ? k : minLocal
        guard at + local + 4 <= usable else { return nil }
        return (at, p, local, u32(at + local))
    }

    /// The rowid of table-leaf cell `i`.
    func rowid(_ i: Int) -> Int64? {
        guard type == Self.tableLeaf, let start = cellStart(i), let size = varint(start),
              let rowid = varint(start + size.length) else { return nil }
        return Int64(bitPattern: rowid.value)
    }

    /// The first `count` fields of the record in index cell `i` (a WITHOUT
    /// ROWID table's key columns), nil when they do not lie on this page.
    func keyFields(_ i: Int, count: Int) -> [Value]? {
        guard let cell = payload(i) else { return nil }
        let end = cell.start + cell.local
        guard let headerSize = varint(cell.start), headerSize.value <= UInt64(end - cell.start) else { return nil }
        var typeAt = cell.start + headerSize.length
        var valueAt = cell.start + Int(headerSize.value)
        var values: [Value] = []
        while values.count < count {
            guard typeAt < cell.start + Int(headerSize.value), let serial = varint(typeAt) else { return nil }
            typeAt += serial.length
            let t = serial.value
            let length: Int
            switch t {
            case 0, 8, 9: length = 0
            case 1, 2, 3, 4: length = Int(t)
            case 5: length = 6
            case 6, 7: length = 8
            case 10, 11: return nil
            default: length = Int((t - 12) / 2)
            }
            guard length <= end - valueAt else { return nil }
            switch t {
            case 0: values.append(.null)
            case 8: values.append(.integer(0))
            case 9: values.append(.integer(1))
            case 1...6:
                var v: Int64 = Int64(Int8(bitPattern: bytes[valueAt]))
                for j in 1..<length { v = v << 8 | Int64(bytes[valueAt + j]) }
                values.append(.integer(v))
            case 7:
                var bits: UInt64 = 0
                for j in 0..<8 { bits = bits << 8 | UInt64(bytes[valueAt + j]) }
                values.append(.real(Double(bitPattern: bits)))
            default:
                let content = Array(bytes[valueAt..<(valueAt + length)])
                values.append(t % 2 == 0 ? .blob(content) : .text(content))
            }
            valueAt += length
        }
        return values
    }

    /// The children of an interior page, in key order.
    func children() -> [UInt32]? {
        var result: [UInt32] = []
        result.reserveCapacity(cellCount + 1)
        for i in 0..<cellCount {
            guard let child = child(i) else { return nil }
            result.append(child)
        }
        result.append(rightChild)
        return result
    }
}

/// Collects the pages of one b-tree (B's side): every node, and each leaf's position in key order.
struct TreeWalk {
    let file: PageFile
    let usable: Int
    /// One bit per page of the file: the page is a node of the tree.
    var nodes: PageSet
    /// (page, position in key order) of each leaf, sorted by page.
    private var leafPositions: [(page: UInt32, position: Int32)] = []

    init(file: PageFile, usable: Int) {
        self.file = file
        self.usable = usable
        nodes = PageSet(pageCount: file.pageCount)
    }

    /// The position of leaf `page` in key order, nil when it is not a leaf of the tree.
    func leafPosition(_ page: UInt32) -> Int? {
        var lo = 0, hi = leafPositions.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if leafPositions[mid].page < page { lo = mid + 1 } else { hi = mid }
        }
        return lo < leafPositions.count && leafPositions[lo].page == page ? Int(leafPositions[lo].position) : nil
    }

    /// False when the tree cannot be trusted (a page in the -wal, whose copy
    /// in the main file may be stale, a malformed page, a cycle).
    ///
    /// Leaves are not read: SQLite keeps every leaf of a b-tree at the same
    /// depth, so the first child of an interior page tells what its siblings
    /// are. Nothing here is taken on trust: a B page is used only after its
    /// bytes matched A's, and a page wrongly taken for a leaf only takes a
    /// position, which keeps the leaves around it from counting as neighbours.
    mutating func collect(_ root: UInt32) -> Bool {
        var stack: [(page: UInt32, depth: Int)] = [(root, 0)]
        var leaves: [UInt32] = []
        // Depth first, children pushed right to left: leaves come out in key order.
        while let (page, depth) = stack.popLast() {
            // Interior pages are few and scattered: read one by one.
            guard depth < 64, !file.walPages.contains(page), nodes.insert(page),
                  let buffer = file.singlePage(page) else { return false }
            let node = BTreePage(bytes: UnsafeRawBufferPointer(start: buffer, count: file.pageSize), usable: usable)
            guard node.isValid else { return false }
            if node.isLeaf {
                leaves.append(page)
                continue
            }
            guard let children = node.children(), let first = children.first, !file.walPages.contains(first),
                  let firstChild = file.singlePage(first) else { return false }
            let childrenAreLeaves = BTreePage(bytes: UnsafeRawBufferPointer(start: firstChild, count: file.pageSize),
                                              usable: usable).isLeaf
            if childrenAreLeaves {
                for child in children {
                    guard !file.walPages.contains(child), nodes.insert(child) else { return false }
                    leaves.append(child)
                }
            } else {
                for child in children.reversed() { stack.append((child, depth + 1)) }
            }
        }
        leafPositions = leaves.enumerated().map { (page: $0.element, position: Int32($0.offset)) }
        leafPositions.sort { $0.page < $1.page }
        return true
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

/// Walks A's b-tree and finds what is byte-identical in B: whole subtrees,
/// and within a leaf that has the same page number in both trees, runs of
/// cells that are identical on both sides.
struct TreeComparison {
    /// Keys `low...high` whose rows are identical in A and B (and nothing
    /// else lies between them on either side).
    struct Range {
        var low: KeyBound, high: KeyBound
        /// Leaf positions (in key order) in A and B where the range starts and ends.
        var firstLeafA: Int, lastLeafA: Int, firstLeafB: Int, lastLeafB: Int
        /// The range starts at the first cell of both first leaves / ends at
        /// the last cell of both last leaves.
        var fromLeafStart: Bool, toLeafEnd: Bool
    }
    /// What a visited subtree turned out to be.
    struct Subtree {
        var identical: Bool
        var range: Range?
    }

    let a: PageFile, b: PageFile
    let usable: Int
    /// Key columns of a WITHOUT ROWID table; 0 for a rowid table.
    let keyColumns: Int
    let treeB: TreeWalk
    var ranges: [Range] = []
    var sharedPages = 0
    private var leafCounter = 0
    /// In an index b-tree, A leaf positions whose following divider entry
    /// (in an interior page) is byte-identical in B.
    /// In an index b-tree, the last leaf position whose following divider
    /// entry (in an interior page) is byte-identical in B, when the last
    /// divider passed was. Only the latest divider can decide a join: ranges
    /// are joined as they are found.
    private var sharedDividerAfterLeaf: Int?
    /// Copies of A's and B's page at each depth of the walk (the page caches move on).
    private var buffers: [(a: UnsafeMutableRawPointer, b: UnsafeMutableRawPointer)] = []
    /// A copy of B's leaf being matched cell by cell.
    private var leafB: UnsafeMutableRawPointer

    init(a: PageFile, b: PageFile, usable: Int, keyColumns: Int, treeB: TreeWalk) {
        self.a = a
        self.b = b
        self.usable = usable
        self.keyColumns = keyColumns
        self.treeB = treeB
        leafB = .allocate(byteCount: a.pageSize, alignment: 8)
    }

    mutating func release() {
        for (x, y) in buffers { x.deallocate(); y.deallocate() }
        buffers = []
        leafB.deallocate()
    }

    private mutating func buffers(at depth: Int) -> (a: UnsafeMutableRawPointer, b: UnsafeMutableRawPointer) {
        while buffers.count <= depth {
            buffers.append((.allocate(byteCount: a.pageSize, alignment: 8), .allocate(byteCount: a.pageSize, alignment: 8)))
        }
        return buffers[depth]
    }

    /// B's copy of `page`, when neither file has it in its -wal.
    private func pageB(_ page: UInt32) -> UnsafeRawPointer? {
        guard !a.walPages.contains(page), !b.walPages.contains(page) else { return nil }
        return b.page(page)
    }

    /// The overflow chain that starts at `first` and holds `bytes` bytes is the same in both files.
    private mutating func sameOverflow(_ first: UInt32, bytes: Int) -> Bool {
        var next = first
        var remaining = bytes
        while remaining > 0 {
            guard next != 0, let x = a.page(next), let y = pageB(next), memcmp(x, y, a.pageSize) == 0 else { return false }
            sharedPages += 1
            next = BTreePage(bytes: UnsafeRawBufferPointer(start: x, count: a.pageSize), usable: usable).u32(0)
            remaining -= usable - 4
        }
        return true
    }

    /// The overflow chains of every cell of an identical page are identical too.
    private mutating func overflowChainsIdentical(_ node: BTreePage) -> Bool {
        guard node.type != BTreePage.tableInterior else { return true }
        for i in 0..<node.cellCount {
            guard let cell = node.payload(i), sameOverflow(cell.overflow, bytes: cell.size - cell.local) else { return false }
        }
        return true
    }

    /// Visits the subtree at `page` in A. Appends the shared ranges found in
    /// it to `ranges` (one for the whole subtree when it is identical); nil
    /// when A's tree cannot be trusted.
    mutating func visit(_ page: UInt32, depth: Int) -> Subtree? {
        guard depth < 64, !a.walPages.contains(page) else { return nil }
        let x = buffers(at: depth).a
        guard let source = a.page(page) else { return nil }
        x.copyMemory(from: source, byteCount: a.pageSize)
        let node = BTreePage(bytes: UnsafeRawBufferPointer(start: x, count: a.pageSize), usable: usable)
        guard node.isValid, node.isTable == (keyColumns == 0) else { return nil }
        let y = treeB.nodes.contains(page) ? pageB(page) : nil
        if node.isLeaf {
            let position = leafCounter
            leafCounter += 1
            guard let y, node.cellCount > 0, let positionB = treeB.leafPosition(page) else { return Subtree(identical: false) }
            // A copy: reading overflow pages moves B's page cache on.
            leafB.copyMemory(from: y, byteCount: a.pageSize)
            if memcmp(x, leafB, a.pageSize) == 0, overflowChainsIdentical(node),
               let low = key(node, 0), let high = key(node, node.cellCount - 1) {
                sharedPages += 1
                let range = Range(low: low, high: high, firstLeafA: position, lastLeafA: position,
                                  firstLeafB: positionB, lastLeafB: positionB, fromLeafStart: true, toLeafEnd: true)
                append(range)
                return Subtree(identical: true, range: range)
            }
            sharedRuns(node, BTreePage(bytes: UnsafeRawBufferPointer(start: leafB, count: a.pageSize), usable: usable),
                       positionA: position, positionB: positionB)
            return Subtree(identical: false)
        }
        let copyB = buffers(at: depth).b
        if let y { copyB.copyMemory(from: y, byteCount: a.pageSize) }
        let candidate = y != nil && memcmp(x, copyB, a.pageSize) == 0 && overflowChainsIdentical(node)
        guard let children = node.children() else { return nil }
        // An index b-tree's interior cells are entries: those also in B's page
        // (same bytes) let the ranges on either side of them join.
        var sharedDividers = Set<Int>()
        if keyColumns > 0, y != nil {
            if candidate {
                sharedDividers = Set(0..<node.cellCount)
            } else {
                matchCells(node, BTreePage(bytes: UnsafeRawBufferPointer(start: copyB, count: a.pageSize), usable: usable)) { i, _ in
                    sharedDividers.insert(i)
                }
            }
        }
        // What the ranges looked like before this subtree: if it turns out
        // identical as a whole, its ranges give way to one.
        let before = ranges.count
        let previous = ranges.last
        let dividerBefore = sharedDividerAfterLeaf
        var first: Range?, last: Range?
        var allIdentical = candidate
        for (k, child) in children.enumerated() {
            if k > 0 { sharedDividerAfterLeaf = sharedDividers.contains(k - 1) ? leafCounter - 1 : nil }
            guard let subtree = visit(child, depth: depth + 1) else { return nil }
            allIdentical = allIdentical && subtree.identical
            if first == nil { first = subtree.range }
            last = subtree.range
        }
        guard allIdentical, let first, let last else { return Subtree(identical: false) }
        // The whole subtree (with the dividers of an index b-tree) is one range.
        sharedPages += 1
        ranges.removeSubrange(before...)
        if let previous { ranges[before - 1] = previous }
        sharedDividerAfterLeaf = dividerBefore
        let range = Range(low: first.low, high: last.high, firstLeafA: first.firstLeafA, lastLeafA: last.lastLeafA,
                          firstLeafB: first.firstLeafB, lastLeafB: last.lastLeafB, fromLeafStart: true, toLeafEnd: true)
        append(range)
        return Subtree(identical: true, range: range)
    }

    /// Merges the cells of A's page `x` and B's page `y` (same page number,
    /// same kind) by key and calls `body` with each pair of cells that are
    /// byte-identical, overflow included, in key order.
    private mutating func matchCells(_ x: BTreePage, _ y: BTreePage, _ body: (Int, Int) -> Void) {
        guard y.isValid, y.type == x.type else { return }
        var i = 0, j = 0
        while i < x.cellCount && j < y.cellCount {
            // Identical cells hold the same key: keys are read only where cells differ.
            if sameCell(x, i, y, j) {
                body(i, j)
                i += 1; j += 1
                continue
            }
            let order: Int
            if keyColumns == 0 {
                guard let rowidA = x.rowid(i), let rowidB = y.rowid(j) else { return }
                order = rowidA < rowidB ? -1 : (rowidA == rowidB ? 0 : 1)
            } else {
                guard let keyA = x.keyFields(i, count: keyColumns), let keyB = y.keyFields(j, count: keyColumns) else { return }
                order = compareKeys(keyA, keyB)
            }
            if order <= 0 { i += 1 }
            if order >= 0 { j += 1 }
        }
    }

    /// Two leaves with the same page number that differ: each run of cells
    /// that are identical on both sides and consecutive in both leaves
    /// becomes a range (within a leaf no other entry lies between neighbouring cells).
    private mutating func sharedRuns(_ x: BTreePage, _ y: BTreePage, positionA: Int, positionB: Int) {
        var runs: [(firstA: Int, firstB: Int, lastA: Int, lastB: Int)] = []
        matchCells(x, y) { i, j in
            if let last = runs.last, last.lastA == i - 1, last.lastB == j - 1 {
                runs[runs.count - 1].lastA = i
                runs[runs.count - 1].lastB = j
            } else {
                runs.append((i, j, i, j))
            }
        }
        for run in runs {
            guard let low = key(x, run.firstA), let high = key(x, run.lastA) else { continue }
            append(Range(low: low, high: high, firstLeafA: positionA, lastLeafA: positionA,
                                firstLeafB: positionB, lastLeafB: positionB, fromLeafStart: run.firstA == 0 && run.firstB == 0,
                                toLeafEnd: run.lastA == x.cellCount - 1 && run.lastB == y.cellCount - 1))
        }
    }

    /// Cell `i` of `x` (A) and cell `j` of `y` (B) hold the same bytes, overflow chain included.
    private mutating func sameCell(_ x: BTreePage, _ i: Int, _ y: BTreePage, _ j: Int) -> Bool {
        // An interior cell's child pointer is not part of the entry.
        let skip = x.type == BTreePage.indexInterior ? 4 : 0
        guard let cellA = x.payload(i), let cellB = y.payload(j), let startA = x.cellStart(i).map({ $0 + skip }),
              let startB = y.cellStart(j).map({ $0 + skip }) else { return false }
        let lengthA = cellA.start + cellA.local + (cellA.overflow != 0 ? 4 : 0) - startA
        let lengthB = cellB.start + cellB.local + (cellB.overflow != 0 ? 4 : 0) - startB
        guard lengthA == lengthB, memcmp(x.bytes.baseAddress! + startA, y.bytes.baseAddress! + startB, lengthA) == 0 else {
            return false
        }
        return sameOverflow(cellA.overflow, bytes: cellA.size - cellA.local)
    }

    /// Adds a range, joined to the previous one when nothing differs between
    /// them on either side: a range that ends a leaf and one that starts the
    /// next, in both files; in an index b-tree, the divider entry between the
    /// two leaves must also be identical in both.
    private mutating func append(_ range: Range) {
        if let previous = ranges.last, previous.toLeafEnd, range.fromLeafStart,
           previous.lastLeafA + 1 == range.firstLeafA, previous.lastLeafB + 1 == range.firstLeafB,
           keyColumns == 0 || sharedDividerAfterLeaf == previous.lastLeafA {
            ranges[ranges.count - 1].high = range.high
            ranges[ranges.count - 1].lastLeafA = range.lastLeafA
            ranges[ranges.count - 1].lastLeafB = range.lastLeafB
            ranges[ranges.count - 1].toLeafEnd = range.toLeafEnd
        } else {
            ranges.append(range)
        }
    }

    private func key(_ node: BTreePage, _ i: Int) -> KeyBound? {
        if keyColumns == 0 { return node.rowid(i).map { .rowid($0) } }
        return node.keyFields(i, count: keyColumns).map { .values($0) }
    }

    /// Keys in the b-tree's order (BINARY, ascending: checked by the caller).
    private func compareKeys(_ x: [Value], _ y: [Value]) -> Int {
        for (u, v) in zip(x, y) {
            let c = Value.compare(u, v)
            if c != 0 { return c }
        }
        return 0
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Reading what is not shared

/// What the engine may skip in one table whose definition is the same in A and B.
struct TableShortcut {
    let shared: SharedRanges
    /// The rowid is the table's INTEGER PRIMARY KEY on both sides.
    let rowidAlias: Bool
    /// The name the rowid can be selected under.
    let rowidName: String
    /// A WITHOUT ROWID table whose key columns all sort BINARY and ascending:
    /// its b-tree order is the engine's key order.
    let keyOrderIsTreeOrder: Bool

    enum Reading {
        /// Every row.
        case everything
        /// Rows strictly between the shared ranges, in key order, with the key
        /// columns' SQL names.
        case gaps(keys: [String], ranges: [(low: KeyBound, high: KeyBound)])
        /// Rows whose rowid lies outside the shared ranges, in whatever order the plan sorts.
        case unsharedRowids(rowid: String, ranges: [(low: KeyBound, high: KeyBound)])
    }

    /// How to read a side for `plan`: only the gaps when the plan reads in
    /// the b-tree's order, a rowid filter when it sorts otherwise.
    func reading(_ plan: TablePlan) -> Reading {
        if plan.userKey { return .everything }
        switch shared.kind {
        case .rowid:
            if plan.mode == .rowid, let rowid = plan.rowidColumn { return .gaps(keys: [rowid], ranges: shared.ranges) }
            if plan.mode == .key && rowidAlias && plan.keyIndexes.count == 1 {
                return .gaps(keys: [quoteIdentifier(plan.columns[plan.keyIndexes[0]])], ranges: shared.ranges)
            }
            return .unsharedRowids(rowid: rowidName, ranges: shared.ranges)
        case .primaryKey:
            guard plan.mode == .key, keyOrderIsTreeOrder else { return .everything }
            return .gaps(keys: plan.keyIndexes.map { quoteIdentifier(plan.columns[$0]) }, ranges: shared.ranges)
        }
    }
}

extension SharedPages {
    /// The shortcut for a table present in both files, nil when it does not
    /// apply: a virtual table, a definition that differs by a byte (the same
    /// record bytes could then mean other values), or a b-tree that cannot
    /// be walked with confidence.
    func shortcut(_ ta: Table, _ tb: Table) throws -> TableShortcut? {
        guard ta.kind != .virtual, tb.kind != .virtual, ta.problem == nil, tb.problem == nil,
              let sqlA = ta.sql, let sqlB = tb.sql, Array(sqlA.utf8) == Array(sqlB.utf8),
              ta.withoutRowid == tb.withoutRowid else { return nil }
        var keyOrderIsTreeOrder = false
        if ta.withoutRowid {
            // The key's b-tree order is the engine's order only for BINARY, ascending key columns.
            let odd = try a.connection.scalar("""
                SELECT count(*) FROM pragma_index_list(?1) AS l, pragma_index_xinfo(l.name) AS x
                WHERE l.origin = 'pk' AND x.key = 1 AND (x."desc" != 0 OR x.coll != 'BINARY')
                """, [.text(ta.name)])
            keyOrderIsTreeOrder = odd == .integer(0)
            guard keyOrderIsTreeOrder else { return nil }
        }

        guard let shared = try ranges(table: ta.name, withoutRowid: ta.withoutRowid, keyColumns: ta.primaryKey.count) else {
            return nil
        }

        return TableShortcut(shared: shared, rowidAlias: ta.hasRowidAlias && tb.hasRowidAlias,
                             rowidName: DiffEngine.rowidName([ta, tb]), keyOrderIsTreeOrder: keyOrderIsTreeOrder)
    }
}

/// `litectl_unshared(rowid)`: 1 when the rowid lies outside every shared
/// range, for plans that sort rows in another order than the b-tree's.
final class RowidFilter {
    private let lows: [Int64]
    private let highs: [Int64]

    init(_ ranges: [(low: KeyBound, high: KeyBound)]) {
        var lows: [Int64] = [], highs: [Int64] = []
        for range in ranges {
            guard case .rowid(let low) = range.low, case .rowid(let high) = range.high else { continue }
            lows.append(low)
            highs.append(high)
        }
        self.lows = lows
        self.highs = highs
    }

    func isShared(_ rowid: Int64) -> Bool {
        // The last range starting at or before rowid.
        var lo = 0, hi = lows.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if lows[mid] <= rowid { lo = mid + 1 } else { hi = mid }
        }
        return lo > 0 && rowid <= highs[lo - 1]
    }

    /// (Re)defines the function on `connection` for these ranges. No
    /// statement of the connection may be running.
    static func register(_ ranges: [(low: KeyBound, high: KeyBound)], on connection: Connection) throws {
        let filter = Unmanaged.passRetained(RowidFilter(ranges)).toOpaque()
        let rc = sqlite3_create_function_v2(connection.rawHandle, "litectl_unshared", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, filter,
            { context, _, arguments in
                let filter = Unmanaged<RowidFilter>.fromOpaque(sqlite3_user_data(context)!).takeUnretainedValue()
                sqlite3_result_int(context, filter.isShared(sqlite3_value_int64(arguments![0]!)) ? 0 : 1)
            }, nil, nil, { filter in Unmanaged<RowidFilter>.fromOpaque(filter!).release() })
        guard rc == SQLITE_OK else {
            throw DatabaseError.fromConnection(connection.rawHandle, code: rc, path: connection.path)
        }
    }
}
