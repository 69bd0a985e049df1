// Walks the b-trees of a damaged file from their roots, in key order, and
// hands every cell it can read to the caller, saying how far to trust it.
// Children are followed only from sound interior pages (a page whose every
// cell parses and whose keys ascend within the bounds its parent sets); the
// children of a damaged interior page are set aside, with their tree, for the
// pass over pages no b-tree reached. Each page is claimed once, so a cycle or
// two trees sharing a page cannot make the walk loop or read a page twice;
// the depth is bounded. Table leaves are checked against their parent's key
// bounds: a leaf whose rows fall outside them is another tree's page.
// https://www.sqlite.org/fileformat2.html#b_tree_pages

/// How far a cell read from a damaged file can be trusted.
enum CellTrust {
    /// On a sound page, within its bounds.
    case sound
    /// On a damaged page, but within bounds and in key order with its neighbours.
    case salvaged
    /// Parsed, but out of bounds or out of order: not placed in the table.
    case doubtful
    /// Read from past where the page's content area says its cell pointer
    /// array ends (a stale pointer, or cell bytes read as one; see
    /// SalvagePage.suspectFrom): kept in lost_and_found, never placed.
    case stray

    /// Placed in its table (when its values fit).
    var placeable: Bool { self == .sound || self == .salvaged }
}

/// One cell handed to the caller of a walk.
struct SalvageCell {
    let page: UInt32
    let index: Int
    let cell: BTreeCell
    /// The page's bytes (a copy, valid during the call).
    let bytes: UnsafeRawPointer
    let trust: CellTrust
}

/// Walks b-trees of one damaged file.
final class TreeSalvage {
    let file: DamagedFile
    /// The deepest a walk goes (SQLite's cursors stop at 20).
    static let maxDepth = 40
    private var buffers: [UnsafeMutableRawPointer] = []
    /// Pages found damaged (the first problem seen on each).
    private(set) var damage: [UInt32: String] = [:]
    /// Children of damaged interior pages no walk followed: page → its tree and key bounds.
    private(set) var setAside: [UInt32: (tree: Int, low: Int64?, high: Int64?)] = [:]
    /// Pages read by walks, for progress.
    private(set) var pagesRead = 0
    var progress: ((Int) -> Void)?

    init(file: DamagedFile) { self.file = file }

    deinit { for buffer in buffers { buffer.deallocate() } }

    /// What one walk found.
    struct Outcome {
        var pages = 0
        var damagedPages = 0
        /// Key ranges (low, high] of subtrees the walk could not reach (table b-trees).
        var lostRanges: [(low: Int64?, high: Int64?)] = []
        /// Something was wrong (a damaged page, a lost subtree).
        var damaged: Bool { damagedPages > 0 || !lostRanges.isEmpty }
    }

    func noteDamage(_ page: UInt32, _ problem: String) {
        if damage[page] == nil { damage[page] = problem }
    }

    /// Walks the b-tree at `root` (a table b-tree when `table`, else an index
    /// b-tree), claiming its pages for `tree` in `owners`, and calls `body`
    /// with every cell: table leaf cells, or every entry of an index b-tree
    /// (interior cells between their subtrees), in key order.
    func walk(root: UInt32, tree: Int, table: Bool, owners: inout PageOwners,
              _ body: (SalvageCell, inout PageOwners) throws -> Void) rethrows -> Outcome {
        var outcome = Outcome()
        guard root >= 1, root <= file.pageCount, !file.isReserved(root) else {
            noteDamage(root, "a root page outside the file")
            outcome.lostRanges.append((nil, nil))
            return outcome
        }
        guard owners.claim(root, as: .tree, owner: tree) || root == 1 && owners.owner(1) == tree else {
            noteDamage(root, "the root page belongs to another b-tree")
            outcome.lostRanges.append((nil, nil))
            return outcome
        }
        try visit(root, depth: 0, low: nil, high: nil, tree: tree, table: table, owners: &owners, outcome: &outcome, body)
        return outcome
    }

    private func buffer(_ depth: Int) -> UnsafeMutableRawPointer {
        while buffers.count <= depth { buffers.append(.allocate(byteCount: file.pageSize, alignment: 8)) }
        return buffers[depth]
    }

    /// Visits page `number` (already claimed for `tree`).
    private func visit(_ number: UInt32, depth: Int, low: Int64?, high: Int64?, tree: Int, table: Bool,
                       owners: inout PageOwners, outcome: inout Outcome,
                       _ body: (SalvageCell, inout PageOwners) throws -> Void) rethrows {
        pagesRead += 1
        outcome.pages += 1
        if pagesRead & 255 == 0 { progress?(pagesRead) }
        let copy = buffer(depth)
        guard file.copy(number, into: copy) else {
            noteDamage(number, "the page cannot be read")
            outcome.damagedPages += 1
            outcome.lostRanges.append((low, high))
            return
        }
        guard let page = SalvagePage.read(copy, pageSize: file.pageSize, usable: file.usable, number: number, table: table) else {
            noteDamage(number, "not a \(table ? "table" : "index") b-tree page")
            outcome.damagedPages += 1
            outcome.lostRanges.append((low, high))
            return
        }
        if page.isLeaf {
            try leaf(page, copy, low: low, high: high, table: table, owners: &owners, outcome: &outcome, body)
            return
        }
        // An interior page: its children, each with its key bounds.
        var children: [(page: UInt32, low: Int64?, high: Int64?, entry: Int?)] = []
        var previous = low
        var ordered = true
        // Cells past the pointer array (SalvagePage.suspectFrom) name no child to follow.
        for (position, item) in page.cells.enumerated() where item.index < page.suspectFrom {
            let key: Int64? = table ? item.cell.rowid : nil
            if let key {
                if let previous, key <= previous { ordered = false }
                if let high, key > high { ordered = false }
            }
            children.append((item.cell.leftChild, table ? previous : nil, key, table ? nil : position))
            if let key { previous = key }
        }
        children.append((page.page.rightChild, table ? previous : nil, table ? high : nil, nil))
        if !page.sound || !ordered || depth + 1 >= TreeSalvage.maxDepth {
            let problem = page.problem ?? (!ordered ? "keys out of order" : "the b-tree is deeper than \(TreeSalvage.maxDepth) levels")
            noteDamage(number, problem)
            outcome.damagedPages += 1
            for child in children where child.page >= 2 && child.page <= file.pageCount && owners.role(child.page) == .none {
                if setAside[child.page] == nil { setAside[child.page] = (tree, child.low, child.high) }
            }
            outcome.lostRanges.append((low, high))
            // The entries an interior page of an index b-tree holds itself.
            if !table {
                for item in page.cells {
                    try body(SalvageCell(page: number, index: item.index, cell: item.cell, bytes: UnsafeRawPointer(copy),
                                         trust: .salvaged), &owners)
                }
            }
            return
        }
        // A sound page: its children are followed, but for those outside
        // the file (a truncated file), whose subtrees are lost.
        var outside = 0
        for child in children {
            if child.page < 2 || child.page > file.pageCount || file.isReserved(child.page) {
                outside += 1
                outcome.lostRanges.append((child.low, child.high))
            } else if owners.claim(child.page, as: .tree, owner: tree) {
                try visit(child.page, depth: depth + 1, low: child.low, high: child.high, tree: tree, table: table,
                          owners: &owners, outcome: &outcome, body)
            } else {
                noteDamage(child.page, owners.owner(child.page) == tree ? "reached twice in one b-tree"
                           : "named by two b-trees (or a b-tree and the freelist)")
                outcome.lostRanges.append((child.low, child.high))
            }
            if let entry = child.entry {
                let item = page.cells[entry]
                try body(SalvageCell(page: number, index: item.index, cell: item.cell, bytes: UnsafeRawPointer(copy),
                                     trust: .sound), &owners)
            }
        }
        if outside > 0 {
            noteDamage(number, "\(outside) child pointers outside the file")
            outcome.damagedPages += 1
        }
    }

    /// The cells of a leaf, each with how far to trust it.
    private func leaf(_ page: SalvagePage, _ copy: UnsafeMutableRawPointer, low: Int64?, high: Int64?, table: Bool,
                      owners: inout PageOwners, outcome: inout Outcome,
                      _ body: (SalvageCell, inout PageOwners) throws -> Void) rethrows {
        var trust = Array(repeating: page.sound ? CellTrust.sound : .salvaged, count: page.cells.count)
        // Cells read from past the pointer array are kept, never trusted.
        var considered = page.cells.count
        if page.suspectFrom != Int.max {
            for (i, item) in page.cells.enumerated() where item.index >= page.suspectFrom {
                trust[i] = .stray
                considered -= 1
            }
        }
        if table {
            // Rowids must lie within the parent's bounds and ascend.
            var outside = 0
            for (i, item) in page.cells.enumerated() where trust[i] != .stray {
                let rowid = item.cell.rowid
                if let low, rowid <= low { trust[i] = .doubtful; outside += 1 }
                if let high, rowid > high { trust[i] = .doubtful; outside += 1 }
            }
            if considered > 0 && outside * 2 > considered {
                // Mostly someone else's rows: a wrong child pointer led here.
                owners.release(page.number)
                noteDamage(page.number, "its rows lie outside the key range its parent gives it")
                outcome.damagedPages += 1
                outcome.lostRanges.append((low, high))
                return
            }
            let ascending = TreeSalvage.ascendingRun(page.cells.map { $0.cell.rowid }, trust)
            for i in page.cells.indices where trust[i].placeable && !ascending[i] { trust[i] = .doubtful }
            if trust.contains(where: { !$0.placeable }) && page.sound {
                for i in trust.indices where trust[i] == .sound { trust[i] = .salvaged }
            }
        }
        let damaged = !page.sound || trust.contains { !$0.placeable }
        if damaged {
            noteDamage(page.number, page.problem ?? "rows out of key order or outside the page's key range")
            outcome.damagedPages += 1
            if page.badCells > 0 { outcome.lostRanges.append((low, high)) }
        }
        for (i, item) in page.cells.enumerated() {
            try body(SalvageCell(page: page.number, index: item.index, cell: item.cell, bytes: UnsafeRawPointer(copy),
                                 trust: trust[i]), &owners)
        }
    }

    /// Which keys belong to every longest strictly ascending run (among
    /// those not already doubtful or stray): the others are out of place.
    /// A key in some longest run but not all could trade places with
    /// another (rowids 10, 30, 20, 40: one of 30 and 20 is damaged, and the
    /// page cannot tell which): both are out of place, so that no row is
    /// put in its table under a rowid that may be the damaged one.
    static func ascendingRun(_ keys: [Int64], _ trust: [CellTrust]) -> [Bool] {
        let indices = keys.indices.filter { trust[$0].placeable }
        let values = indices.map { keys[$0] }
        // The longest run ending at each key, and (the keys reversed and
        // complemented, which reverses their order) starting at each.
        let ending = longestRunLengths(values)
        let starting = Array(longestRunLengths(values.reversed().map { ~$0 }).reversed())
        let longest = ending.max() ?? 0
        // Per place in a longest run: the keys that can take it, and the
        // last cell that can. One key there (two cells of the same rowid,
        // a cell pointer that repeats another, among them) is certain: its
        // last cell takes the place, as one cell of a rowid always did.
        var onSomeRun = Array(repeating: false, count: values.count)
        var atLength: [Int: (keys: Set<Int64>, last: Int)] = [:]
        for k in values.indices where ending[k] + starting[k] - 1 == longest {
            onSomeRun[k] = true
            var place = atLength[ending[k]] ?? ([], k)
            place.keys.insert(values[k])
            place.last = k
            atLength[ending[k]] = place
        }
        var result = Array(repeating: false, count: keys.count)
        for k in values.indices where onSomeRun[k] {
            if let place = atLength[ending[k]], place.keys.count == 1, place.last == k { result[indices[k]] = true }
        }
        return result
    }

    /// For each of `keys`, the length of the longest strictly ascending run
    /// of `keys` that ends with it (O(n log n)).
    static func longestRunLengths(_ keys: [Int64]) -> [Int] {
        var tails: [Int64] = []  // the smallest last key of a run of each length
        return keys.map { key in
            var lo = 0, hi = tails.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if tails[mid] < key { lo = mid + 1 } else { hi = mid }
            }
            if lo == tails.count { tails.append(key) } else { tails[lo] = key }
            return lo + 1
        }
    }
}
