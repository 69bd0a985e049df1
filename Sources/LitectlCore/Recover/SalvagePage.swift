// One b-tree page of a damaged file read as leniently as its bytes allow: a
// page whose header is intact and whose every cell parses is sound; otherwise
// each cell that still parses on its own is kept, after trying the page as
// the kind its b-tree expects when its type byte is wrong, and with its cell
// count cut to what fits in the page. Like sqlite_dbdata (the recover
// extension's reader), a damaged page's cell need only lie past its own
// pointer, not past the whole (perhaps wrong) pointer array; pointers past
// where the page's content area says the array ends are read too, but
// marked as suspect (stale pointers, or content bytes read as pointers).
// https://www.sqlite.org/fileformat2.html#b_tree_pages

/// A b-tree page's cells, as far as they parse.
struct SalvagePage {
    /// The page as read (in a buffer the caller owns; its header may have
    /// been patched to the kind tried).
    let page: BTreePage
    let number: UInt32
    /// The page type the cells were read as.
    let type: UInt8
    /// Every cell parsed, under the page's own type byte and cell count.
    let sound: Bool
    /// Parsed cells with their index on the page.
    let cells: [(index: Int, cell: BTreeCell)]
    /// Cells that did not parse.
    let badCells: Int
    /// What was wrong, when not sound.
    let problem: String?
    /// Cells at this index and after it lie past where the page's content
    /// area says its cell pointer array ends: not to be trusted (Int.max
    /// when every cell is within it).
    var suspectFrom = Int.max

    var isLeaf: Bool { type == BTreePage.tableLeaf || type == BTreePage.indexLeaf }
    var isTable: Bool { type == BTreePage.tableLeaf || type == BTreePage.tableInterior }

    /// Reads the page in `buffer` (a copy of page `number`, `pageSize`
    /// bytes) as a page of a table b-tree (`table`) or of an index b-tree.
    /// A page whose type byte is no b-tree type's is tried as each kind of
    /// its b-tree when `repair` (a page a b-tree leads to); a page of the
    /// other family is not this b-tree's. nil when no cell can be read.
    static func read(_ buffer: UnsafeMutableRawPointer, pageSize: Int, usable: Int, number: UInt32,
                     table: Bool, repair: Bool = true) -> SalvagePage? {
        let offset = number == 1 ? 100 : 0
        let bytes = UnsafeRawBufferPointer(start: buffer, count: pageSize)
        let page = BTreePage(bytes: bytes, usable: usable, headerOffset: offset)
        let kinds: [UInt8] = table ? [BTreePage.tableLeaf, BTreePage.tableInterior] : [BTreePage.indexLeaf, BTreePage.indexInterior]
        let ownType = page.type
        if kinds.contains(ownType), let header = try? page.header() {
            var cells: [(index: Int, cell: BTreeCell)] = []
            cells.reserveCapacity(header.cellCount)
            var bad = 0
            for i in 0..<header.cellCount {
                if let cell = try? page.cell(i) { cells.append((i, cell)) } else { bad += 1 }
            }
            // An interior page of no cells but a right child is what
            // SQLite leaves on page 1 when the child's content cannot move up.
            if bad == 0 && (header.cellCount > 0 || page.isLeaf || header.rightChild != 0) {
                return SalvagePage(page: page, number: number, type: ownType, sound: true, cells: cells, badCells: 0, problem: nil)
            }
            if header.cellCount == 0 {
                return SalvagePage(page: page, number: number, type: ownType, sound: false, cells: cells, badCells: 0,
                                   problem: "an empty interior page")
            }
            // Some cells do not parse: read again below, each cell past its
            // own pointer (a cell count made too large by damage pushes the
            // array's end past the first cells).
        }
        // A damaged header: try each kind with the cell count cut to what fits.
        let anyKind: [UInt8] = [BTreePage.tableLeaf, BTreePage.tableInterior, BTreePage.indexLeaf, BTreePage.indexInterior]
        if anyKind.contains(ownType) && !kinds.contains(ownType) { return nil }
        guard repair || kinds.contains(ownType), offset + 12 <= usable else { return nil }
        let tried = kinds.contains(ownType) ? [ownType] : kinds
        let original = (type: buffer.load(fromByteOffset: offset, as: UInt8.self),
                        countHigh: buffer.load(fromByteOffset: offset + 3, as: UInt8.self),
                        countLow: buffer.load(fromByteOffset: offset + 4, as: UInt8.self))
        let claimedCount = Int(original.countHigh) << 8 | Int(original.countLow)
        // Where the cell content area starts (0 means 65536): the pointer
        // array ends before it on a page SQLite wrote.
        let contentField = Int(buffer.load(fromByteOffset: offset + 5, as: UInt8.self)) << 8
            | Int(buffer.load(fromByteOffset: offset + 6, as: UInt8.self))
        let contentStart = contentField == 0 ? 65536 : contentField
        var best: SalvagePage?
        var bestTrusted = 0
        for kind in tried {
            let pointers = offset + (kind == BTreePage.tableLeaf || kind == BTreePage.indexLeaf ? 8 : 12)
            let fit = max(0, min(claimedCount, (usable - pointers) / 2, (pageSize - 8) / 6))
            guard fit > 0 else { continue }
            let arrayEnd = contentStart >= pointers && contentStart <= usable ? (contentStart - pointers) / 2 : fit
            let suspectFrom = min(fit, arrayEnd)
            buffer.storeBytes(of: kind, toByteOffset: offset, as: UInt8.self)
            var cells: [(index: Int, cell: BTreeCell)] = []
            var trusted = 0
            for i in 0..<fit {
                // Read as if the page had i + 1 cells: the cell must lie past
                // its own pointer (sqlite_dbdata's rule), not past the end of
                // an array whose length may be what was damaged.
                buffer.storeBytes(of: UInt8((i + 1) >> 8), toByteOffset: offset + 3, as: UInt8.self)
                buffer.storeBytes(of: UInt8((i + 1) & 0xFF), toByteOffset: offset + 4, as: UInt8.self)
                if let cell = try? page.cell(i) {
                    cells.append((i, cell))
                    if i < suspectFrom { trusted += 1 }
                }
            }
            // The kind under which the most cells parse within the array.
            if !cells.isEmpty && (best == nil || (trusted, cells.count) > (bestTrusted, best?.cells.count ?? 0)) {
                bestTrusted = trusted
                let problem = ownType != kind
                    ? "page type byte \(ownType) is not a \(table ? "table" : "index") b-tree page's"
                    : claimedCount > suspectFrom ? "the cell count (\(claimedCount)) does not fit the page"
                    : "\(fit - cells.count) of \(claimedCount) cells do not parse"
                var read = SalvagePage(page: page, number: number, type: kind, sound: false, cells: cells,
                                       badCells: fit - cells.count, problem: problem)
                read.suspectFrom = suspectFrom < fit ? suspectFrom : Int.max
                best = read
            }
        }
        // Leave the page as it was; keep the best kind's header in place.
        if let best {
            let pointers = best.isLeaf ? 8 : 12
            let fit = max(0, min(claimedCount, (usable - offset - pointers) / 2, (pageSize - 8) / 6))
            buffer.storeBytes(of: best.type, toByteOffset: offset, as: UInt8.self)
            buffer.storeBytes(of: UInt8(fit >> 8), toByteOffset: offset + 3, as: UInt8.self)
            buffer.storeBytes(of: UInt8(fit & 0xFF), toByteOffset: offset + 4, as: UInt8.self)
            return best
        }
        buffer.storeBytes(of: original.type, toByteOffset: offset, as: UInt8.self)
        buffer.storeBytes(of: original.countHigh, toByteOffset: offset + 3, as: UInt8.self)
        buffer.storeBytes(of: original.countLow, toByteOffset: offset + 4, as: UInt8.self)
        return nil
    }

    /// Offsets on a page copy where a cell's bytes may end: where another
    /// cell or a freeblock starts, and the end of the usable area. A damaged
    /// cell whose record header says it ends at one of them, while its
    /// payload size says it ends elsewhere, had its payload size damaged
    /// (cells are written back to back from the end of the page; a cell
    /// that ends before a gap of 1 to 3 bytes, a fragment, is not proven).
    static func cellEnds(_ bytes: UnsafeRawPointer, usable: Int, number: UInt32) -> Set<Int> {
        let offset = number == 1 ? 100 : 0
        guard offset + 12 <= usable else { return [usable] }
        func u16(_ at: Int) -> Int {
            Int(bytes.load(fromByteOffset: at, as: UInt8.self)) << 8 | Int(bytes.load(fromByteOffset: at + 1, as: UInt8.self))
        }
        let type = bytes.load(fromByteOffset: offset, as: UInt8.self)
        let pointers = offset + (type == BTreePage.tableLeaf || type == BTreePage.indexLeaf ? 8 : 12)
        var ends: Set<Int> = [usable]
        let count = min(u16(offset + 3), max(0, (usable - pointers) / 2))
        for i in 0..<count {
            let start = u16(pointers + 2 * i)
            if start > pointers && start < usable { ends.insert(start) }
        }
        // The freeblock chain, in ascending order as SQLite keeps it.
        var block = u16(offset + 1)
        var steps = 0
        while block > pointers && block + 4 <= usable && steps < usable / 4 {
            ends.insert(block)
            let next = u16(block)
            guard next > block else { break }
            block = next
            steps += 1
        }
        return ends
    }
}
