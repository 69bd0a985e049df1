// Walks one b-tree of a snapshot in key order, page by page: for a table
// b-tree every leaf cell (a row), for an index b-tree every entry (leaf and
// interior cells, in order). The walk checks what SQLite's cursor checks
// (page kinds, a non-empty child, at most 20 levels) and also that no page is
// visited twice, so a damaged or hostile file can neither loop nor make the
// walk exponential. A tree can be split into disjoint parts (subtrees, and
// the entries between them) that several threads walk at once.
// https://www.sqlite.org/fileformat2.html#b_tree_pages
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Pages claimed by the walks of one tree, shared between threads.
final class ClaimedPages: @unchecked Sendable {
    private var set: PageSet
    private var mutex = pthread_mutex_t()

    init(pageCount: UInt32) {
        set = PageSet(pageCount: pageCount)
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    /// True the first time a page is claimed.
    func claim(_ page: UInt32) -> Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return set.insert(page)
    }
}

/// One piece of a b-tree for a walk: a subtree, a leaf already claimed by
/// `split`, or an entry of an interior page of an index b-tree (which lies
/// between two subtrees in key order).
enum TreePart: Equatable {
    case subtree(page: UInt32, depth: Int)
    case leaf(page: UInt32, depth: Int)
    case entry(page: UInt32, cell: Int, depth: Int)
}

/// Walks b-trees of one snapshot, on one thread.
final class BTreeWalker {
    let pages: PageFile
    let claimed: ClaimedPages
    /// The deepest a b-tree may go (SQLite's BTCURSOR_MAX_DEPTH).
    static let maxDepth = 20
    /// A copy of the page at each depth of the walk: the page reader's caches
    /// move on as children and overflow pages are read.
    private var copies: [UnsafeMutableRawPointer] = []

    init(pages: PageFile, claimed: ClaimedPages) {
        self.pages = pages
        self.claimed = claimed
    }

    deinit { for copy in copies { copy.deallocate() } }

    /// Page `number` copied into the buffer of `depth`, checked as a b-tree
    /// page of the expected kind: `index` (an index b-tree) or not, and not
    /// empty unless it is the root.
    func node(_ number: UInt32, depth: Int, index: Bool) throws -> (page: BTreePage, cells: Int) {
        guard depth < BTreeWalker.maxDepth else { throw PageError(.badTree, page: number, "b-tree deeper than 20 levels") }
        while copies.count <= depth { copies.append(.allocate(byteCount: pages.pageSize, alignment: 8)) }
        let source = try pages.load(number)
        copies[depth].copyMemory(from: source, byteCount: pages.pageSize)
        let page = BTreePage(bytes: UnsafeRawBufferPointer(start: copies[depth], count: pages.pageSize),
                             usable: pages.usableSize, page: number)
        let header: (type: UInt8, cellCount: Int, rightChild: UInt32)
        do { header = try page.header() } catch let error as PageError { throw error.at(page: number) }
        guard page.isTable != index else {
            throw PageError(.unexpectedPageType, page: number, index ? "a table page in an index b-tree" : "an index page in a table b-tree")
        }
        if header.cellCount == 0 && (depth > 0 || !page.isLeaf) {
            throw PageError(.badTree, page: number, "an empty page inside a b-tree")
        }
        return (page, header.cellCount)
    }

    /// Calls `body` with each entry of the subtree at `root`, in key order,
    /// with the page (a copy, valid during the call) and the cell.
    func walk(_ root: UInt32, depth: Int = 0, index: Bool, _ body: (BTreePage, BTreeCell) throws -> Void) throws {
        guard claimed.claim(root) else { throw PageError(.badTree, page: root, "page reached twice in one b-tree") }
        let (page, cells) = try node(root, depth: depth, index: index)
        if page.isLeaf {
            for i in 0..<cells {
                let cell: BTreeCell
                do { cell = try page.cell(i) } catch let error as PageError { throw error.at(page: root, cell: i) }
                try body(page, cell)
            }
            return
        }
        let rightChild = page.rightChild
        for i in 0..<cells {
            // Children overwrite deeper buffers only: this page's copy stays.
            let cell: BTreeCell
            do { cell = try page.cell(i) } catch let error as PageError { throw error.at(page: root, cell: i) }
            try walk(cell.leftChild, depth: depth + 1, index: index, body)
            if index { try body(page, cell) }
        }
        try walk(rightChild, depth: depth + 1, index: index, body)
    }

    /// Walks one part (see `split`).
    func walk(_ part: TreePart, index: Bool, _ body: (BTreePage, BTreeCell) throws -> Void) throws {
        switch part {
        case .subtree(let page, let depth):
            try walk(page, depth: depth, index: index, body)
        case .leaf(let number, let depth):
            let (page, cells) = try node(number, depth: depth, index: index)
            for i in 0..<cells {
                let cell: BTreeCell
                do { cell = try page.cell(i) } catch let error as PageError { throw error.at(page: number, cell: i) }
                try body(page, cell)
            }
        case .entry(let number, let i, let depth):
            let (page, _) = try node(number, depth: depth, index: index)
            let cell: BTreeCell
            do { cell = try page.cell(i) } catch let error as PageError { throw error.at(page: number, cell: i) }
            try body(page, cell)
        }
    }

    /// The tree at `root` as disjoint parts in key order, at least `wanted`
    /// subtrees when the tree is that big: interior pages are opened level
    /// by level (and claimed, as are leaves met on the way: walking the
    /// parts claims the rest).
    func split(_ root: UInt32, index: Bool, wanted: Int) throws -> [TreePart] {
        var parts: [TreePart] = [.subtree(page: root, depth: 0)]
        while parts.count < wanted {
            var next: [TreePart] = []
            var opened = false
            for part in parts {
                guard case .subtree(let number, let depth) = part else { next.append(part); continue }
                guard claimed.claim(number) else { throw PageError(.badTree, page: number, "page reached twice in one b-tree") }
                let (page, cells) = try node(number, depth: depth, index: index)
                if page.isLeaf {
                    next.append(.leaf(page: number, depth: depth))
                    continue
                }
                opened = true
                for i in 0..<cells {
                    let cell: BTreeCell
                    do { cell = try page.cell(i) } catch let error as PageError { throw error.at(page: number, cell: i) }
                    next.append(.subtree(page: cell.leftChild, depth: depth + 1))
                    if index { next.append(.entry(page: number, cell: i, depth: depth)) }
                }
                next.append(.subtree(page: page.rightChild, depth: depth + 1))
            }
            parts = next
            if !opened { break }
        }
        return parts
    }
}
