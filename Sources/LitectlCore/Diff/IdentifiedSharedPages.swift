// The shared-pages shortcut for content-addressed images (two moments of a
// repository, or a moment and a local file hashed as the repository names
// pages: SQLite/IdentifiedPages.swift). Which pages differ is known from
// their ids before a byte is read; each b-tree is then read only along the
// paths from its root to its pages that differ (the changed pages and the
// interior pages above them). Every subtree hanging off those paths whose
// root is hung off the paths of both sides and has the same id on both holds
// the same rows on both: no page below it differs (each one that did would
// have been reached by its own path). The rows a diff must read lie in the
// other subtrees' key intervals (and, in a WITHOUT ROWID table, whose
// interior pages hold rows too, in the cells of the pages on the paths).
//
// The path to a changed page is found by looking up its first key from the
// root, as SQLite would: this trusts the b-tree's key order and its leaves'
// single depth (what `PRAGMA integrity_check` verifies), as SQLite's own
// lookups do. Rows under an unchanged subtree are known from its ids, not
// read; so is their overflow: an overflow page that changed under a shared
// subtree would be a page whose id differs and that is, on both sides,
// neither a b-tree page nor free. Before any range is trusted, every page
// whose id differs is accounted for (see `prepare`); when one is not, or a
// changed page of the table's kind cannot be placed, the shortcut is not
// taken and the table is compared byte by byte (SharedPages.swift).
import CSQLite

/// Keys of a WITHOUT ROWID table from `low` to `high` (nil: unbounded),
/// each end included or not: rows a diff must read on both sides.
struct KeySpan {
    var low: [Value]?
    var lowIncluded: Bool
    var high: [Value]?
    var highIncluded: Bool

    init(low: [Value]?, lowIncluded: Bool, high: [Value]?, highIncluded: Bool) {
        self.low = low
        self.lowIncluded = lowIncluded
        self.high = high
        self.highIncluded = highIncluded
    }
}

/// Pages of two content-addressed images (or of one and a file hashed as it
/// names pages), compared by id.
final class IdentifiedImages {
    let a: PageFile, b: PageFile
    private let usable: Int
    /// How pages are compared: by the ids of two sources, or by hashing the
    /// other side's pages as the identified side names its own.
    private enum Naming {
        case ids(any IdentifiedPages, any ImagePages)
        /// `source` names side `identified`'s pages; the other side's are hashed.
        case hashed(source: any IdentifiedPages, identified: Side)
    }
    private let naming: Naming
    /// Pages compared so far, and those found the same.
    private var compared: PageSet, equal: PageSet
    /// A page of the hashed side, read through SQLite's handle.
    private let buffer: UnsafeMutableRawPointer
    /// Per side: changed pages that read as b-tree pages (page, type), not
    /// free, no pointer map, no root of a schema object.
    private var candidates: [Side: [(page: UInt32, type: UInt8)]] = [.a: [], .b: []]
    /// Whether every changed page was accounted for (computed once).
    private var accounted: Bool?

    enum Side { case a, b }

    /// nil unless one side at least is served by a content-addressed source
    /// and the other is either one too or a file whose pages it can name.
    init?(a: PageFile, b: PageFile) {
        guard a.walPages.isEmpty, b.walPages.isEmpty, a.pageCount > 0, b.pageCount > 0, a.usableSize == b.usableSize, a.pageSize == b.pageSize,
              // An overflow page starts with the next one's number: below 2^24 its first byte is 0, never a b-tree page's type.
              max(a.pageCount, b.pageCount) < 1 << 24 else { return nil }
        let sourceA = PageVFS.source(of: a.file), sourceB = PageVFS.source(of: b.file)
        if let identifiedA = sourceA as? any IdentifiedPages, let sourceB, sourceB is any IdentifiedPages {
            naming = .ids(identifiedA, sourceB)
        } else if let identifiedA = sourceA as? any IdentifiedPages {
            naming = .hashed(source: identifiedA, identified: .a)
        } else if let identifiedB = sourceB as? any IdentifiedPages {
            naming = .hashed(source: identifiedB, identified: .b)
        } else {
            return nil
        }
        self.a = a
        self.b = b
        usable = a.usableSize
        let common = min(a.pageCount, b.pageCount)
        compared = PageSet(pageCount: common)
        equal = PageSet(pageCount: common)
        buffer = .allocate(byteCount: a.pageSize, alignment: 8)
    }

    deinit { buffer.deallocate() }

    /// Page `page` has the same id on both sides.
    func same(_ page: UInt32) -> Bool {
        guard page >= 1, page <= min(a.pageCount, b.pageCount) else { return false }
        if compared.contains(page) { return equal.contains(page) }
        let result: Bool
        switch naming {
        case .ids(let source, let other):
            result = source.samePage(Int(page), in: other)
        case .hashed(let source, let identified):
            let file = identified == .a ? b : a
            guard let xRead = file.file.pointee.pMethods?.pointee.xRead,
                  xRead(file.file, buffer, Int32(file.pageSize), sqlite3_int64(page - 1) * sqlite3_int64(file.pageSize)) == SQLITE_OK
            else { result = false; break }
            result = source.samePage(Int(page), asBytes: UnsafeRawBufferPointer(start: buffer, count: file.pageSize))
        }
        _ = compared.insert(page)
        if result { _ = equal.insert(page) }
        return result
    }

    private func file(_ side: Side) -> PageFile { side == .a ? a : b }

    private func node(_ side: Side, _ page: UInt32) -> BTreePage? {
        let file = file(side)
        guard let bytes = file.singlePage(page) else { return nil }
        return BTreePage(bytes: UnsafeRawBufferPointer(start: bytes, count: file.pageSize), usable: usable, page: page)
    }

    /// Reads every page whose id differs (or that only one side has) on each
    /// side once: those that read as b-tree pages are the candidates a
    /// table's paths are looked up for. True when every page whose id
    /// differs and that lies in both images is, on one side at least, free,
    /// a pointer-map page, or a b-tree page; so none is an overflow page on
    /// both sides, which is what a changed overflow page of a row in a
    /// shared subtree would be. Pages past either image's end are never
    /// such a page (a shared subtree's rows point inside both images).
    func prepare() -> Bool {
        if let accounted { return accounted }
        accounted = false
        guard let freeA = freePages(.a), let freeB = freePages(.b),
              let roots = try? schemaRoots(a.connection).union(schemaRoots(b.connection)) else { return false }
        let common = min(a.pageCount, b.pageCount)
        var tree: [Side: PageSet] = [.a: PageSet(pageCount: a.pageCount), .b: PageSet(pageCount: b.pageCount)]
        for side in [Side.a, .b] {
            let free = side == .a ? freeA : freeB
            for page in UInt32(1)...file(side).pageCount where !same(page) {
                if free.contains(page) || isPointerMap(page) { continue }
                guard let node = node(side, page), node.isValid else { continue }
                _ = tree[side]!.insert(page)
                if !roots.contains(page) { candidates[side]!.append((page, node.type)) }
            }
        }
        for page in UInt32(1)...common where !same(page) {
            guard tree[.a]!.contains(page) || tree[.b]!.contains(page) || freeA.contains(page) || freeB.contains(page)
                    || isPointerMap(page) else { return false }
        }
        accounted = true
        return true
    }

    /// The root pages of the schema's b-trees (its own at page 1 among them).
    private func schemaRoots(_ connection: Connection) throws -> Set<UInt32> {
        var roots: Set<UInt32> = [1]
        for row in try connection.rows("SELECT rootpage FROM main.sqlite_schema WHERE rootpage > 0") {
            if case .integer(let root) = row[0], root > 0, root <= Int64(UInt32.max) { roots.insert(UInt32(root)) }
        }
        return roots
    }

    /// Both sides are auto-vacuum databases (they have pointer-map pages).
    private lazy var autoVacuum: Bool = {
        func autoVacuum(_ file: PageFile) -> Bool {
            guard let first = file.singlePage(1) else { return false }
            return (first + 52).loadUnaligned(as: UInt32.self) != 0
        }
        return autoVacuum(a) && autoVacuum(b)
    }()

    /// Pointer-map pages of an auto-vacuum database (both sides must be one).
    private func isPointerMap(_ page: UInt32) -> Bool {
        guard page >= 2, autoVacuum else { return false }
        let perMap = UInt32(usable / 5) + 1
        return (page - 2) % perMap == 0
    }

    /// The free pages of a side (trunk pages and the leaves they list); nil
    /// when the freelist cannot be read with confidence.
    private func freePages(_ side: Side) -> PageSet? {
        let file = file(side)
        guard let first = file.singlePage(1) else { return nil }
        func u32(_ p: UnsafeRawPointer, _ at: Int) -> UInt32 {
            (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(p.load(fromByteOffset: at + $1, as: UInt8.self)) }
        }
        var trunk = u32(first, 32)
        let total = Int(u32(first, 36))
        var pages = PageSet(pageCount: file.pageCount)
        var count = 0
        while trunk != 0 {
            guard trunk <= file.pageCount, pages.insert(trunk), count <= total,
                  let bytes = file.singlePage(trunk) else { return nil }
            count += 1
            let next = u32(bytes, 0), leaves = Int(u32(bytes, 4))
            guard leaves <= (usable - 8) / 4 else { return nil }
            for i in 0..<leaves {
                let leaf = u32(bytes, 8 + 4 * i)
                if leaf >= 1 && leaf <= file.pageCount && pages.insert(leaf) { count += 1 }
            }
            trunk = next
        }
        return pages
    }

    // MARK: One table

    /// An interior page's children in key order and the keys between them.
    private struct Interior {
        var children: [UInt32]
        var keys: [KeyBound]
    }

    /// A subtree hanging off the paths: its root page, and the keys it may
    /// hold (after `low`, up to `high`, nil: unbounded; `high` is included
    /// in a rowid table's interval, excluded in a WITHOUT ROWID table's).
    private struct Hanging {
        var page: UInt32
        var low: KeyBound?, high: KeyBound?
    }

    /// The key of cell `i` of `node`: a rowid (table pages) or the first
    /// `keyColumns` fields of the record (index pages).
    private func key(_ node: BTreePage, _ i: Int, keyColumns: Int) -> KeyBound? {
        if keyColumns == 0 {
            guard node.type == BTreePage.tableLeaf || node.type == BTreePage.tableInterior,
                  let cell = try? node.cell(i) else { return nil }
            return .rowid(cell.rowid)
        }
        return node.keyFields(i, count: keyColumns).map { .values($0) }
    }

    private static func compare(_ x: KeyBound, _ y: KeyBound) -> Int {
        switch (x, y) {
        case (.rowid(let u), .rowid(let v)): return u < v ? -1 : (u == v ? 0 : 1)
        default:
            for (u, v) in zip(x.values, y.values) {
                let c = Value.compare(u, v)
                if c != 0 { return c }
            }
            return 0
        }
    }

    /// Side `side`'s b-tree at `root` cut along the paths to its changed
    /// pages: the interior pages on them (read), the subtrees hanging off
    /// them (not read), and the keys of the path pages' cells (rows, in a
    /// WITHOUT ROWID table). nil when the tree cannot be cut with confidence:
    /// a page of another kind where a node is expected, a cycle, a tree 64
    /// levels deep, a changed page of the table's kind with no key to look up.
    private func cut(_ side: Side, root: UInt32, keyColumns: Int) -> (hanging: [Hanging], cells: [UInt32: [KeyBound]])? {
        let file = file(side)
        let interiorType = keyColumns == 0 ? BTreePage.tableInterior : BTreePage.indexInterior
        let leafType = keyColumns == 0 ? BTreePage.tableLeaf : BTreePage.indexLeaf
        var path: [UInt32: Interior] = [:]
        func read(_ page: UInt32) -> Interior? {
            if let interior = path[page] { return interior }
            guard let node = node(side, page), node.type == interiorType, let children = node.children(),
                  children.allSatisfy({ $0 >= 1 && $0 <= file.pageCount }) else { return nil }
            var keys: [KeyBound] = []
            for i in 0..<node.cellCount {
                guard let key = key(node, i, keyColumns: keyColumns) else { return nil }
                keys.append(key)
            }
            let interior = Interior(children: children, keys: keys)
            path[page] = interior
            return interior
        }
        // The depth of the leaves, from the leftmost path: SQLite keeps every leaf at one depth.
        var depth = 0
        var page = root
        while true {
            guard depth < 64, let node = node(side, page) else { return nil }
            if node.type == leafType { break }
            guard let interior = read(page) else { return nil }
            depth += 1
            page = interior.children[0]
        }
        // Each changed page of the table's kind is looked up by its first key.
        for (changed, type) in candidates[side]! where type == interiorType || type == leafType {
            guard let node = node(side, changed), node.cellCount > 0, let key = key(node, 0, keyColumns: keyColumns) else {
                return nil
            }
            var page = root, level = 0
            while level < depth {
                guard let interior = read(page) else { return nil }
                var i = 0
                while i < interior.keys.count && Self.compare(key, interior.keys[i]) > 0 { i += 1 }
                // A WITHOUT ROWID interior cell is a row: a key found there lies in no page below.
                if keyColumns > 0 && i < interior.keys.count && Self.compare(key, interior.keys[i]) == 0 { break }
                page = interior.children[i]
                level += 1
                if page == changed {
                    if level < depth {
                        guard read(page) != nil else { return nil }
                    } else if type != leafType {
                        return nil
                    }
                    break
                }
            }
        }
        // The pages read, from the root: what hangs off them.
        var hanging: [Hanging] = []
        var cells: [UInt32: [KeyBound]] = [:]
        var seen = PageSet(pageCount: file.pageCount)
        var stack = [Hanging(page: root, low: nil, high: nil)]
        while let next = stack.popLast() {
            guard seen.insert(next.page) else { return nil }
            guard let interior = path[next.page] else { hanging.append(next); continue }
            if keyColumns > 0 { cells[next.page] = interior.keys }
            for (i, child) in interior.children.enumerated() {
                stack.append(Hanging(page: child, low: i == 0 ? next.low : interior.keys[i - 1],
                                     high: i < interior.keys.count ? interior.keys[i] : next.high))
            }
        }
        return (hanging, cells)
    }

    /// The shared key ranges of a table (`keyColumns` 0: a rowid table; else
    /// a WITHOUT ROWID table with that many key columns, BINARY and
    /// ascending), nil when the shortcut cannot be taken with confidence.
    /// A subtree hanging off the paths of both sides with the same id is
    /// shared; every other hanging subtree's interval is read, and in a
    /// WITHOUT ROWID table so is each key of the cells of a path page that
    /// is not on the paths of both sides with the same id.
    func ranges(rootA: UInt32, rootB: UInt32, keyColumns: Int) -> SharedRanges? {
        guard prepare(), let cutA = cut(.a, root: rootA, keyColumns: keyColumns),
              let cutB = cut(.b, root: rootB, keyColumns: keyColumns) else { return nil }
        let pagesA = Set(cutA.hanging.map(\.page)), pagesB = Set(cutB.hanging.map(\.page))
        func shared(_ page: UInt32) -> Bool { pagesA.contains(page) && pagesB.contains(page) && same(page) }
        let unshared = cutA.hanging.filter { !shared($0.page) } + cutB.hanging.filter { !shared($0.page) }
        let sharedCount = cutA.hanging.count - cutA.hanging.filter { !shared($0.page) }.count
        if keyColumns == 0 {
            var spans: [(low: Int64, high: Int64)] = []
            for subtree in unshared {
                var low = Int64.min, high = Int64.max
                if case .rowid(let after) = subtree.low {
                    guard after < .max else { continue }
                    low = after + 1
                }
                if case .rowid(let upTo) = subtree.high { high = upTo }
                if low <= high { spans.append((low, high)) }
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
            return SharedRanges(kind: .rowid, ranges: ranges, sharedPages: sharedCount, leavesA: cutA.hanging.count)
        }
        var spans = unshared.map { KeySpan(low: $0.low?.values, lowIncluded: false, high: $0.high?.values, highIncluded: false) }
        // A page on the paths of both sides with the same id holds the same rows in both trees.
        var cells: [KeyBound] = []
        for (page, keys) in cutA.cells where !(cutB.cells[page] != nil && same(page)) { cells += keys }
        for (page, keys) in cutB.cells where !(cutA.cells[page] != nil && same(page)) { cells += keys }
        spans += cells.map { KeySpan(low: $0.values, lowIncluded: true, high: $0.values, highIncluded: true) }
        return SharedRanges(kind: .primaryKey, ranges: [], sharedPages: sharedCount, leavesA: cutA.hanging.count,
                            unshared: Self.merged(spans))
    }

    /// Spans in key order, overlapping ones joined, empty ones dropped.
    static func merged(_ spans: [KeySpan]) -> [KeySpan] {
        func compare(_ x: [Value], _ y: [Value]) -> Int {
            for (u, v) in zip(x, y) {
                let c = Value.compare(u, v)
                if c != 0 { return c }
            }
            return 0
        }
        let nonEmpty = spans.filter { span in
            guard let low = span.low, let high = span.high else { return true }
            let c = compare(low, high)
            return c < 0 || (c == 0 && span.lowIncluded && span.highIncluded)
        }
        // By low end: unbounded first, then by key, an included end before an excluded one.
        let sorted = nonEmpty.sorted { x, y in
            guard let u = y.low else { return false }
            guard let t = x.low else { return true }
            let c = compare(t, u)
            return c < 0 || (c == 0 && x.lowIncluded && !y.lowIncluded)
        }
        var out: [KeySpan] = []
        for span in sorted {
            guard var last = out.last else { out.append(span); continue }
            // Does `span` start at or before where `last` ends (or right at it, with one of the two ends included)?
            let touches: Bool
            if let end = last.high, let start = span.low {
                let c = compare(start, end)
                touches = c < 0 || (c == 0 && (span.lowIncluded || last.highIncluded))
            } else {
                touches = true
            }
            guard touches else { out.append(span); continue }
            if let end = last.high {
                if let high = span.high {
                    let c = compare(high, end)
                    if c > 0 || (c == 0 && span.highIncluded) { last.high = high; last.highIncluded = span.highIncluded || (c == 0 && last.highIncluded) }
                } else {
                    last.high = nil
                }
            }
            out[out.count - 1] = last
        }
        return out
    }
}
