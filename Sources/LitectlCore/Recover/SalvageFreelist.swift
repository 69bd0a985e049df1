// The freelist of a damaged file: trunk pages from the header's first trunk,
// each naming leaf pages and the next trunk. The walk stops at a trunk that
// is out of range, already seen, or a page a b-tree owns (its "leaf" entries
// would be a b-tree page's bytes), so a damaged freelist can neither loop nor
// hand live pages to the freelist; a count that differs from the header's is
// reported.
// https://www.sqlite.org/fileformat2.html#the_freelist

/// The pages the freelist names, as far as it can be followed.
struct SalvageFreelist {
    var trunks: [UInt32] = []
    var leaves: [UInt32] = []
    /// What was wrong with it, if anything.
    var problems: [String] = []

    /// Follows the freelist of `file` (read only; nothing is claimed).
    static func read(_ file: DamagedFile, isTreePage: (UInt32) -> Bool) -> SalvageFreelist {
        var list = SalvageFreelist()
        guard file.header.valid else { return list }
        var trunk = file.header.freelistTrunk
        var seen = PageSet(pageCount: file.pageCount)
        let maxLeaves = file.usable / 4 - 2
        while trunk != 0 {
            guard trunk >= 2, trunk <= file.pageCount, !file.isReserved(trunk) else {
                list.problems.append("a freelist trunk pointer names page \(trunk), outside the file")
                break
            }
            guard seen.insert(trunk) else {
                list.problems.append("the freelist loops back to page \(trunk)")
                break
            }
            guard !isTreePage(trunk) else {
                list.problems.append("freelist trunk page \(trunk) is a page of a b-tree")
                break
            }
            guard let data = file.page(trunk) else {
                list.problems.append("freelist trunk page \(trunk) cannot be read")
                break
            }
            func u32(_ at: Int) -> UInt32 {
                UInt32(data.load(fromByteOffset: at, as: UInt8.self)) << 24 | UInt32(data.load(fromByteOffset: at + 1, as: UInt8.self)) << 16
                    | UInt32(data.load(fromByteOffset: at + 2, as: UInt8.self)) << 8 | UInt32(data.load(fromByteOffset: at + 3, as: UInt8.self))
            }
            list.trunks.append(trunk)
            let next = u32(0)
            var count = Int(u32(4))
            if count > maxLeaves {
                list.problems.append("freelist trunk page \(trunk) claims \(count) leaves, more than a page holds")
                count = maxLeaves
            }
            var leaves: [UInt32] = []
            for i in 0..<count {
                let leaf = u32(8 + 4 * i)
                if leaf < 2 || leaf > file.pageCount || file.isReserved(leaf) {
                    list.problems.append("freelist trunk page \(trunk) names page \(leaf), outside the file")
                    continue
                }
                guard seen.insert(leaf) else {
                    list.problems.append("the freelist names page \(leaf) twice")
                    continue
                }
                leaves.append(leaf)
            }
            list.leaves += leaves
            trunk = next
        }
        let total = list.trunks.count + list.leaves.count
        if total != Int(file.header.freelistCount) && list.problems.isEmpty {
            list.problems.append("the header counts \(file.header.freelistCount) free pages, the freelist holds \(total)")
        }
        return list
    }
}
