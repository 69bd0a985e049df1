// One b-tree page of a damaged file read as leniently as its bytes allow: a
// page whose header is intact and whose every cell parses is sound; otherwise
// each cell that still parses on its own is kept, after trying the page as
// the kind its b-tree expects when its type byte is wrong, and with its cell
// count cut to what fits in the page.
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
            if bad < header.cellCount {
                return SalvagePage(page: page, number: number, type: ownType, sound: false, cells: cells, badCells: bad,
                                   problem: header.cellCount == 0 ? "an empty interior page" : "\(bad) of \(header.cellCount) cells do not parse")
            }
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
        var best: SalvagePage?
        for kind in tried {
            let pointers = offset + (kind == BTreePage.tableLeaf || kind == BTreePage.indexLeaf ? 8 : 12)
            let fit = max(0, min(claimedCount, (usable - pointers) / 2, (pageSize - 8) / 6))
            guard fit > 0 else { continue }
            buffer.storeBytes(of: kind, toByteOffset: offset, as: UInt8.self)
            buffer.storeBytes(of: UInt8(fit >> 8), toByteOffset: offset + 3, as: UInt8.self)
            buffer.storeBytes(of: UInt8(fit & 0xFF), toByteOffset: offset + 4, as: UInt8.self)
            var cells: [(index: Int, cell: BTreeCell)] = []
            for i in 0..<fit {
                if let cell = try? page.cell(i) { cells.append((i, cell)) }
            }
            if cells.count > (best?.cells.count ?? 0) {
                let problem = ownType == kind
                    ? "the cell count (\(claimedCount)) does not fit the page"
                    : "page type byte \(ownType) is not a \(table ? "table" : "index") b-tree page's"
                best = SalvagePage(page: page, number: number, type: kind, sound: false, cells: cells,
                                   badCells: fit - cells.count, problem: problem)
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
}
