// The shared-pages shortcut for two content-addressed images (two moments of
// a repository: SQLite/IdentifiedPages.swift): a leaf page with the same id
// on both sides, in both tables' b-trees, holds the same rows there, so the
// rows that can differ lie in the leaves whose ids differ. Only those leaves
// and the tables' interior pages are read: a diff of two moments fetches
// what changed, not the database. Rowid tables only; a WITHOUT ROWID table
// (whose interior pages hold rows too) takes the byte comparison of
// SharedPages.swift.
//
// What a shared leaf holds is taken from its id, not read; so is its rows'
// overflow: an overflow page that changed under a shared leaf would be a
// page whose id differs and that is, on both sides, neither a b-tree page
// nor free. Before any range is trusted, every page whose id differs is
// accounted for (see `changesAccountedFor`); when one is not, the shortcut
// is not taken and the tables are compared byte by byte (SharedPages.swift).

/// Pages of two content-addressed images, compared by id.
final class IdentifiedImages {
    let a: PageFile, b: PageFile
    private let sourceA: any IdentifiedPages
    private let sourceB: any ImagePages
    private let usable: Int
    /// Each walked b-tree's leaves in key order, and its interior pages, per side and root.
    private var walks: [Side: [UInt32: TreeLeaves]] = [.a: [:], .b: [:]]
    /// Whether every changed page was accounted for (computed once).
    private var accounted: Bool?

    enum Side { case a, b }

    struct TreeLeaves {
        var leaves: [UInt32]
        var interior: [UInt32]
    }

    /// nil unless both files are served by content-addressed sources.
    init?(a: PageFile, b: PageFile) {
        guard let sourceA = PageVFS.source(of: a.file) as? any IdentifiedPages, let sourceB = PageVFS.source(of: b.file),
              a.walPages.isEmpty, b.walPages.isEmpty, a.usableSize == b.usableSize,
              // An overflow page starts with the next one's number: below 2^24 its first byte is 0, never a b-tree page's type.
              max(a.pageCount, b.pageCount) < 1 << 24 else { return nil }
        self.a = a
        self.b = b
        self.sourceA = sourceA
        self.sourceB = sourceB
        usable = a.usableSize
    }

    /// Page `page` has the same id on both sides.
    func same(_ page: UInt32) -> Bool {
        page >= 1 && page <= min(a.pageCount, b.pageCount) && sourceA.samePage(Int(page), in: sourceB)
    }

    private func file(_ side: Side) -> PageFile { side == .a ? a : b }

    /// The leaves of the table b-tree at `root` in key order, with its
    /// interior pages; nil when it cannot be walked with confidence (a page
    /// out of range or of another kind, a cycle, a tree 64 levels deep).
    /// Leaves are not read: SQLite keeps every leaf at one depth, that of
    /// the leftmost.
    func leaves(_ side: Side, root: UInt32) -> TreeLeaves? {
        if let walk = walks[side]![root] { return walk }
        let file = file(side)
        var seen = PageSet(pageCount: file.pageCount)
        // The depth of the leaves, from the leftmost path.
        var depth = 0, page = root
        while true {
            guard depth < 64, let bytes = file.singlePage(page) else { return nil }
            let node = BTreePage(bytes: UnsafeRawBufferPointer(start: bytes, count: file.pageSize), usable: usable, page: page)
            if node.type == BTreePage.tableLeaf { break }
            guard node.type == BTreePage.tableInterior, let first = node.children()?.first else { return nil }
            depth += 1
            page = first
        }
        var walk = TreeLeaves(leaves: [], interior: [])
        // Depth first, children pushed right to left: leaves come out in key order.
        var stack: [(page: UInt32, depth: Int)] = [(root, 0)]
        while let (page, level) = stack.popLast() {
            guard page >= 1, page <= file.pageCount, seen.insert(page) else { return nil }
            if level == depth {
                walk.leaves.append(page)
                continue
            }
            guard let bytes = file.singlePage(page) else { return nil }
            let node = BTreePage(bytes: UnsafeRawBufferPointer(start: bytes, count: file.pageSize), usable: usable, page: page)
            guard node.type == BTreePage.tableInterior, let children = node.children() else { return nil }
            walk.interior.append(page)
            for child in children.reversed() { stack.append((child, level + 1)) }
        }
        walks[side]![root] = walk
        return walk
    }

    /// The smallest and largest rowid of table leaf `page`; nil for an empty
    /// leaf; throws `Untrusted` when the page is no table leaf.
    func span(_ side: Side, _ page: UInt32) throws -> (low: Int64, high: Int64)? {
        let file = file(side)
        guard let bytes = file.singlePage(page) else { throw Untrusted() }
        let node = BTreePage(bytes: UnsafeRawBufferPointer(start: bytes, count: file.pageSize), usable: usable, page: page)
        guard node.type == BTreePage.tableLeaf else { throw Untrusted() }
        var low = Int64.max, high = Int64.min
        for i in 0..<node.cellCount {
            guard let rowid = node.rowid(i) else { throw Untrusted() }
            low = min(low, rowid)
            high = max(high, rowid)
        }
        return node.cellCount == 0 ? nil : (low, high)
    }

    struct Untrusted: Error {}

    /// Every page whose id differs and lies in both images is, on one side
    /// at least, a node of a walked b-tree, free, a pointer-map page, or
    /// reads as a b-tree page; so none is an overflow page on both sides,
    /// which is what a changed overflow page of a row in a shared leaf would
    /// be. Pages past either image's end are never such a page (a shared
    /// leaf's rows point inside both images).
    func changesAccountedFor() -> Bool {
        if let accounted { return accounted }
        let pages = min(a.pageCount, b.pageCount)
        var known = PageSet(pageCount: pages)
        for side in [Side.a, .b] {
            for walk in walks[side]!.values {
                for page in walk.leaves + walk.interior where page <= pages { _ = known.insert(page) }
            }
            guard let free = freePages(side) else { accounted = false; return false }
            for page in free where page <= pages { _ = known.insert(page) }
        }
        var result = true
        for page in UInt32(1)...pages where !known.contains(page) && !same(page) {
            guard readsAsTree(.a, page) || readsAsTree(.b, page) || isPointerMap(page) else { result = false; break }
        }
        accounted = result
        return result
    }

    private func readsAsTree(_ side: Side, _ page: UInt32) -> Bool {
        let file = file(side)
        guard let bytes = file.singlePage(page) else { return false }
        return BTreePage(bytes: UnsafeRawBufferPointer(start: bytes, count: file.pageSize), usable: usable, page: page).isValid
    }

    /// Pointer-map pages of an auto-vacuum database (both sides must be one).
    private func isPointerMap(_ page: UInt32) -> Bool {
        func autoVacuum(_ file: PageFile) -> Bool {
            guard let first = file.singlePage(1) else { return false }
            return (first + 52).loadUnaligned(as: UInt32.self) != 0
        }
        guard page >= 2, autoVacuum(a), autoVacuum(b) else { return false }
        let perMap = UInt32(usable / 5) + 1
        return (page - 2) % perMap == 0
    }

    /// The free pages of a side (trunk pages and the leaves they list); nil
    /// when the freelist cannot be read with confidence.
    private func freePages(_ side: Side) -> [UInt32]? {
        let file = file(side)
        guard let first = file.singlePage(1) else { return nil }
        func u32(_ p: UnsafeRawPointer, _ at: Int) -> UInt32 {
            (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(p.load(fromByteOffset: at + $1, as: UInt8.self)) }
        }
        var trunk = u32(first, 32)
        let total = Int(u32(first, 36))
        var pages: [UInt32] = []
        var seen = PageSet(pageCount: file.pageCount)
        while trunk != 0 {
            guard trunk <= file.pageCount, seen.insert(trunk), pages.count <= total,
                  let bytes = file.singlePage(trunk) else { return nil }
            pages.append(trunk)
            let next = u32(bytes, 0), count = Int(u32(bytes, 4))
            guard count <= (usable - 8) / 4 else { return nil }
            for i in 0..<count { pages.append(u32(bytes, 8 + 4 * i)) }
            trunk = next
        }
        return pages
    }

    /// The key ranges of a rowid table whose rows are identical on both
    /// sides: every key outside the spans of the leaves that are not shared
    /// (a leaf is shared when it is a leaf of both trees with the same id).
    /// nil when the trees cannot be walked with confidence or a changed page
    /// is not accounted for.
    func ranges(rootA: UInt32, rootB: UInt32) -> SharedRanges? {
        guard let treeA = leaves(.a, root: rootA), let treeB = leaves(.b, root: rootB), changesAccountedFor() else { return nil }
        var inA = PageSet(pageCount: a.pageCount), inB = PageSet(pageCount: b.pageCount)
        for page in treeA.leaves { _ = inA.insert(page) }
        for page in treeB.leaves { _ = inB.insert(page) }
        var spans: [(low: Int64, high: Int64)] = []
        var shared = 0
        do {
            for page in treeA.leaves {
                if inB.contains(page) && same(page) { shared += 1; continue }
                if let span = try span(.a, page) { spans.append(span) }
            }
            for page in treeB.leaves where !(inA.contains(page) && same(page)) {
                if let span = try span(.b, page) { spans.append(span) }
            }
        } catch {
            return nil
        }
        spans.sort { $0.low < $1.low }
        var ranges: [(low: KeyBound, high: KeyBound)] = []
        var next: Int64? = .min  // the smallest key not yet covered; nil past Int64.max
        for span in spans {
            guard let from = next else { break }
            if span.low > from { ranges.append((.rowid(from), .rowid(span.low - 1))) }
            if span.high >= from { next = span.high == .max ? nil : span.high + 1 }
        }
        if let from = next { ranges.append((.rowid(from), .rowid(.max))) }
        return SharedRanges(kind: .rowid, ranges: ranges, sharedPages: shared, leavesA: treeA.leaves.count)
    }
}
