// Who each page of a damaged file belongs to, as salvage finds out: a b-tree
// (or an overflow chain of one), the freelist, a page the format reserves, or
// nobody yet. A page is claimed once; a second claim is damage (two b-trees,
// or a b-tree and the freelist, that both name it). One byte and one tree
// number per page, so memory is bounded by the file's page count.

/// The role and owner of every page of one file.
struct PageOwners {
    enum Role: UInt8 {
        case none = 0
        /// A page of a b-tree (`owner` is the tree).
        case tree
        /// A page of an overflow chain of a b-tree's cell (`owner` is the tree).
        case overflow
        case freeTrunk
        case freeLeaf
        /// The lock-byte page or a pointer-map page.
        case reserved
    }

    private var roles: [UInt8]
    private var owners: [Int32]
    let pageCount: UInt32

    init(pageCount: UInt32) {
        self.pageCount = pageCount
        roles = Array(repeating: 0, count: Int(pageCount) + 1)
        owners = Array(repeating: -1, count: Int(pageCount) + 1)
    }

    func role(_ page: UInt32) -> Role {
        page >= 1 && page <= pageCount ? Role(rawValue: roles[Int(page)]) ?? .none : .none
    }

    /// The tree that owns a `.tree` or `.overflow` page, else nil.
    func owner(_ page: UInt32) -> Int? {
        guard page >= 1, page <= pageCount, owners[Int(page)] >= 0 else { return nil }
        return Int(owners[Int(page)])
    }

    /// Claims an unclaimed page; false when it is out of range or already claimed.
    mutating func claim(_ page: UInt32, as role: Role, owner: Int? = nil) -> Bool {
        guard page >= 1, page <= pageCount, roles[Int(page)] == 0 else { return false }
        roles[Int(page)] = role.rawValue
        owners[Int(page)] = owner.map { Int32($0) } ?? -1
        return true
    }

    /// Gives a page to `role` whatever held it (a b-tree takes back a page
    /// the freelist named).
    mutating func reassign(_ page: UInt32, to role: Role, owner: Int? = nil) {
        guard page >= 1, page <= pageCount else { return }
        roles[Int(page)] = role.rawValue
        owners[Int(page)] = owner.map { Int32($0) } ?? -1
    }

    /// Returns a page to nobody (a leaf a b-tree reached but whose rows are not its own).
    mutating func release(_ page: UInt32) {
        guard page >= 1, page <= pageCount else { return }
        roles[Int(page)] = 0
        owners[Int(page)] = -1
    }

    /// Returns every page of the trees `trees` (and of their overflow chains)
    /// to nobody, so that they can be walked again (one pass over the file).
    mutating func releaseTrees(_ trees: Set<Int>) {
        guard !trees.isEmpty else { return }
        let owned = Set(trees.map { Int32(clamping: $0) })
        for page in owners.indices where owners[page] >= 0 && owned.contains(owners[page])
            && (roles[page] == Role.tree.rawValue || roles[page] == Role.overflow.rawValue) {
            roles[page] = 0
            owners[page] = -1
        }
    }

    /// The unclaimed pages, in order. (The loops count up before use: with
    /// `pageCount` at UInt32.max, `page += 1` after the last page would trap.)
    func unclaimed() -> [UInt32] {
        var pages: [UInt32] = []
        var page: UInt32 = 0
        while page < pageCount {
            page += 1
            if roles[Int(page)] == 0 { pages.append(page) }
        }
        return pages
    }

    /// The pages of `role`, in order.
    func pages(_ role: Role) -> [UInt32] {
        var pages: [UInt32] = []
        var page: UInt32 = 0
        while page < pageCount {
            page += 1
            if roles[Int(page)] == role.rawValue { pages.append(page) }
        }
        return pages
    }
}
