// The shortcut for databases that share history (a backup against its live
// source, a copy changed by a migration): a b-tree subtree whose pages are
// byte-identical in both files holds the same rows on both sides, and those
// rows are a contiguous run of keys in both tables. The key ranges of such
// subtrees need not be read row by row; the diff reads only the gaps between
// them (see `DiffEngine.merge`).
//
// Pages come from `PageFile` (SQLite's own file handle, the same snapshot);
// a page with a frame anywhere in either -wal is never trusted.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    /// A's leaf pages (identical ones among them count in `sharedPages`).
    var leavesA = 0
    /// When set (WITHOUT ROWID tables compared by page id): the key spans,
    /// in key order and disjoint, outside which every row is identical in A
    /// and B; the diff reads the rows inside them (`ranges` is then empty).
    var unshared: [KeySpan]? = nil
}

/// Finds the key ranges of a table whose b-tree pages are identical in A and B.
final class SharedPages {
    let a: PageFile
    let b: PageFile
    private let pageSize: Int
    private let usable: Int
    /// Both files served by content-addressed sources (two moments), or one
    /// and a file hashed as it names pages: tables are compared by page id
    /// (IdentifiedSharedPages.swift).
    private let identified: IdentifiedImages?

    /// nil when the two files cannot share pages meaningfully: different page
    /// size or reserved space, an encoding other than UTF-8 on either side (its
    /// bytes would mean other text, and its order is not the engine's), or a
    /// file that cannot be read through SQLite's handle.
    init?(_ ca: Connection, _ cb: Connection) throws {
        guard try ca.scalar("PRAGMA encoding") == .text("UTF-8"), try cb.scalar("PRAGMA encoding") == .text("UTF-8"),
              let a = try PageFile(ca, cacheChunks: 4), let b = try PageFile(cb, cacheChunks: 4),
              a.pageSize == b.pageSize, a.usableSize == b.usableSize else { return nil }
        self.a = a
        self.b = b
        pageSize = a.pageSize
        usable = a.usableSize
        identified = IdentifiedImages(a: a, b: b)
    }

    /// The shared key ranges of table `name` (the same definition on both
    /// sides), or nil when its b-trees cannot be walked with confidence (an
    /// interior page in a -wal, a malformed page, a key that does not fit in
    /// its page) or share nothing worth skipping (the first 64 leaves of A
    /// compared without one identical page).
    func ranges(table name: String, withoutRowid: Bool, keyColumns: Int) throws -> SharedRanges? {
        guard let rootA = try rootPage(a.connection, name), let rootB = try rootPage(b.connection, name) else { return nil }
        if let identified, let shared = identified.ranges(rootA: rootA, rootB: rootB, keyColumns: withoutRowid ? keyColumns : 0) {
            return shared
        }
        var walkB = TreeWalk(file: b, usable: usable)
        guard walkB.collect(rootB) else { return nil }
        var comparison = TreeComparison(a: a, b: b, usable: usable, keyColumns: withoutRowid ? keyColumns : 0, treeB: walkB)
        defer { comparison.release() }
        guard comparison.visit(rootA, depth: 0) != nil else { return nil }
        return SharedRanges(kind: withoutRowid ? .primaryKey : .rowid,
                            ranges: comparison.ranges.map { ($0.low, $0.high) }, sharedPages: comparison.sharedPages,
                            leavesA: comparison.leaves)
    }

    private func rootPage(_ connection: Connection, _ name: String) throws -> UInt32? {
        guard case .integer(let root) = try connection.scalar(
            "SELECT rootpage FROM main.sqlite_schema WHERE type = 'table' AND name = ?1", [.text(name)]) ?? .null,
              root >= 2, root <= Int64(UInt32.max) else { return nil }
        return UInt32(root)
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
    /// A's leaves compared without one page found identical after which the
    /// comparison stops (the table is then read in full).
    static let leavesBeforeGivingUp = 64
    /// Key columns of a WITHOUT ROWID table; 0 for a rowid table.
    let keyColumns: Int
    let treeB: TreeWalk
    var ranges: [Range] = []
    var sharedPages = 0
    private var leafCounter = 0
    /// A's leaf pages visited.
    var leaves: Int { leafCounter }
    private var visitedA: PageSet
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
        visitedA = PageSet(pageCount: a.pageCount)
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
        // Each page once: a hostile file whose pages share children must not
        // make the walk exponential.
        guard depth < 64, !a.walPages.contains(page), visitedA.insert(page) else { return nil }
        let x = buffers(at: depth).a
        guard let source = a.page(page) else { return nil }
        x.copyMemory(from: source, byteCount: a.pageSize)
        let node = BTreePage(bytes: UnsafeRawBufferPointer(start: x, count: a.pageSize), usable: usable)
        guard node.isValid, node.isTable == (keyColumns == 0) else { return nil }
        let y = treeB.nodes.contains(page) ? pageB(page) : nil
        if node.isLeaf {
            let position = leafCounter
            leafCounter += 1
            // The first leaves compared share no page: a VACUUMed or restored
            // copy. The engine would read such a table in full anyway (see
            // `DiffEngine.reading`), so walking the rest of A's tree (every
            // page of it, read once more) would find nothing it could use.
            if leafCounter >= TreeComparison.leavesBeforeGivingUp && sharedPages == 0 { return nil }
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

// MARK: - Reading what is not shared

/// What the engine may skip in one table whose definition is the same in A and B.
struct TableShortcut {
    let shared: SharedRanges
    /// The rowid is the table's INTEGER PRIMARY KEY on both sides.
    let rowidAlias: Bool
    /// The name the rowid can be selected under, nil when columns take all three.
    let rowidName: String?
    /// A rowid table's declared key holds no NULL (SQLite lets a key that is
    /// not the rowid repeat NULLs), so its values are unique.
    let keyIsUnique: Bool
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
        /// Rows inside the spans (in key order, disjoint), span by span in
        /// key order, with the key columns' SQL names.
        case spans(keys: [String], spans: [KeySpan])

        /// Every row: nothing shared to skip.
        var isEverything: Bool {
            switch self {
            case .everything: return true
            case .gaps(_, let ranges), .unsharedRowids(_, let ranges): return ranges.isEmpty
            case .spans(_, let spans): return spans.count == 1 && spans[0].low == nil && spans[0].high == nil
            }
        }
    }

    /// How to read a side for `plan`: only the gaps when the plan reads in
    /// the b-tree's order, a rowid filter when it sorts otherwise.
    ///
    /// Skipping shared rows on both sides changes nothing only where the
    /// merge pairs rows by something unique: never with a --key (it may
    /// repeat), a key that may hold NULLs, or a multiset with ignored columns
    /// (rows that tie on the compared columns are then told apart by what is
    /// printed); those tables are read in full.
    func reading(_ plan: TablePlan) -> Reading {
        if plan.userKey { return .everything }
        switch shared.kind {
        case .rowid:
            if plan.mode == .key && rowidAlias && plan.keyIndexes.count == 1 {
                return .gaps(keys: [quoteIdentifier(plan.columns[plan.keyIndexes[0]])], ranges: shared.ranges)
            }
            guard let rowidName else { return .everything }
            switch plan.mode {
            case .rowid:
                guard let rowid = plan.rowidColumn, sameSQLName(rowid, rowidName) else { return .everything }
                return .gaps(keys: [rowid], ranges: shared.ranges)
            case .key:
                guard keyIsUnique else { return .everything }
            case .multiset:
                guard plan.keyIndexes.count == plan.columns.count else { return .everything }
            }
            return .unsharedRowids(rowid: rowidName, ranges: shared.ranges)
        case .primaryKey:
            guard plan.mode == .key, keyOrderIsTreeOrder else { return .everything }
            if let unshared = shared.unshared {
                return .spans(keys: plan.keyIndexes.map { quoteIdentifier(plan.columns[$0]) }, spans: unshared)
            }
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
            // The key's b-tree order is the engine's order only for BINARY,
            // ascending key columns; and the gaps' `key > ?` compares with the
            // column's own collation, which must then be BINARY too.
            let odd = try a.connection.scalar("""
                SELECT count(*) FROM pragma_index_list(?1) AS l, pragma_index_xinfo(l.name) AS x
                WHERE l.origin = 'pk' AND x.key = 1 AND (x."desc" != 0 OR x.coll != 'BINARY')
                """, [.text(ta.name)])
            keyOrderIsTreeOrder = odd == .integer(0) && ta.primaryKey.allSatisfy { sameSQLName($0.collation, "BINARY") }
            guard keyOrderIsTreeOrder else { return nil }
        }

        guard let shared = try ranges(table: ta.name, withoutRowid: ta.withoutRowid, keyColumns: ta.primaryKey.count) else {
            return nil
        }

        return TableShortcut(shared: shared, rowidAlias: ta.hasRowidAlias && tb.hasRowidAlias,
                             rowidName: DiffEngine.selectableRowidName([ta, tb]),
                             keyIsUnique: ta.primaryKey.allSatisfy(\.notNull), keyOrderIsTreeOrder: keyOrderIsTreeOrder)
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
