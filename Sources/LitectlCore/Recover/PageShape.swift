// Whether a page's bytes are a well-formed b-tree page of a given size: a
// known page type, cells and free blocks inside the page and not overlapping,
// and every byte accounted for (the header's fragment count is exactly the
// bytes left over). A page of another size almost never passes, which is how
// the page size of a file whose header is destroyed is found (the check the
// recover extension's recoverIsValidPage makes).
// https://www.sqlite.org/fileformat2.html#b_tree_pages

/// Checks the layout of b-tree pages, with a scratch map of used bytes.
final class PageShape {
    private var used: [Bool] = []

    /// True when the `size` bytes at `bytes` (the usable part of a page; its
    /// b-tree header at `headerOffset`) are a well-formed b-tree page.
    func isWellFormed(_ bytes: UnsafeRawPointer, size n: Int, headerOffset h: Int = 0) -> Bool {
        guard n >= 480, n <= 65536, h + 8 <= n else { return false }
        func u8(_ at: Int) -> Int { Int(bytes.load(fromByteOffset: at, as: UInt8.self)) }
        func u16(_ at: Int) -> Int { u8(at) << 8 | u8(at + 1) }
        let type = u8(h)
        guard type == 0x02 || type == 0x05 || type == 0x0A || type == 0x0D else { return false }
        let leaf = type == 0x0A || type == 0x0D
        let pointers = h + (leaf ? 8 : 12)
        let cellCount = u16(h + 3)
        var content = u16(h + 5)
        if content == 0 { content = 65536 }
        let fragments = u8(h + 7)
        guard pointers + 2 * cellCount <= content, content <= n else { return false }
        if used.count < n { used = Array(repeating: false, count: 65536) }
        for i in 0..<n { used[i] = i < content }

        // Free blocks: in the content area, in increasing order, at least 4 bytes.
        var free = u16(h + 1)
        var blocks = 0
        if free != 0 && free < content { return false }
        while free != 0 {
            guard free + 4 <= n, blocks < n / 4 else { return false }
            let next = u16(free), size = u16(free + 2)
            guard size >= 4, free + size <= n, next == 0 || next >= free + size else { return false }
            for i in free..<(free + size) {
                if used[i] { return false }
                used[i] = true
            }
            free = next
            blocks += 1
        }

        // Cells: each inside the content area, none overlapping another.
        for c in 0..<cellCount {
            let start = u16(pointers + 2 * c)
            guard start >= content, start < n else { return false }
            guard let length = PageShape.cellLength(bytes, at: start, type: type, usable: n) else { return false }
            guard start + length <= n else { return false }
            for i in start..<(start + length) {
                if used[i] { return false }
                used[i] = true
            }
        }
        var unused = 0
        for i in 0..<n where !used[i] { unused += 1 }
        return unused == fragments
    }

    /// The length of the cell at `at` on a page of `type` with `usable`
    /// bytes (its local payload and overflow pointer included), nil when its
    /// varints run past the page.
    static func cellLength(_ bytes: UnsafeRawPointer, at start: Int, type: Int, usable n: Int) -> Int? {
        var at = start
        if type == 0x02 || type == 0x05 { at += 4 }
        guard let size = Varint.read(bytes, at, n) else { return nil }
        at += size.length
        if type == 0x05 { return at - start }
        if type == 0x0D {
            guard let rowid = Varint.read(bytes, at, n) else { return nil }
            at += rowid.length
        }
        guard size.value <= UInt64(Int32.max) else { return nil }
        let payload = Int(size.value)
        let local = BTreePage.localSize(payload: payload, usable: n, table: type == 0x0D)
        return at - start + local + (local < payload ? 4 : 0)
    }
}
