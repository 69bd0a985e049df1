// A cell's payload put together from its page and its overflow chain, as far
// as a reader needs it. The chain is followed for exactly the pages the
// payload's size calls for, so it cannot run on; a pointer outside the file,
// a chain that ends early or comes back to a page it passed is damage.
// https://www.sqlite.org/fileformat2.html#ovflpgs
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A growable byte buffer that holds one payload at a time.
final class PayloadBuffer {
    private(set) var bytes: UnsafeMutableRawPointer
    private(set) var capacity: Int

    init(capacity: Int = 1 << 16) {
        self.capacity = capacity
        bytes = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { bytes.deallocate() }

    /// Makes room for `count` bytes (the contents are not kept).
    func reserve(_ count: Int) {
        guard count > capacity else { return }
        var grown = capacity * 2
        while grown < count { grown *= 2 }
        bytes.deallocate()
        bytes = .allocate(byteCount: grown, alignment: 8)
        capacity = grown
    }

    /// Gives back memory beyond `limit` bytes (after a huge row).
    func shrink(to limit: Int) {
        guard capacity > limit else { return }
        bytes.deallocate()
        bytes = .allocate(byteCount: limit, alignment: 8)
        capacity = limit
    }
}

enum Overflow {
    /// Copies the first `count` bytes of `cell`'s payload into `buffer`: the
    /// local part from `page` (the cell's page), the rest from its overflow
    /// chain, read through `pages`. `page` must not be a buffer of `pages`
    /// (reading overflow pages moves its caches on).
    static func assemble(_ cell: BTreeCell, page: UnsafeRawPointer, count: Int, pages: PageFile,
                         into buffer: PayloadBuffer) throws {
        precondition(count <= cell.payloadSize)
        buffer.reserve(max(count, 1))
        let local = min(count, cell.localSize)
        buffer.bytes.copyMemory(from: page + cell.localStart, byteCount: local)
        var copied = local
        guard copied < count else { return }
        let chunk = pages.usableSize - 4
        guard chunk > 0 else { throw PageError(.badOverflow, "usable size too small") }
        // Pages the payload's size calls for, at most: a chain longer than the
        // file has pages must loop.
        let needed = (cell.payloadSize - cell.localSize + chunk - 1) / chunk
        guard needed <= Int(pages.pageCount) else {
            throw PageError(.badOverflow, "a \(cell.payloadSize)-byte payload cannot fit in the file")
        }
        var next = cell.overflow
        var seen = ChainPages()
        while copied < count {
            guard next >= 2, next <= pages.pageCount else {
                throw PageError(.badOverflow, "overflow chain \(next == 0 ? "ends early" : "points to page \(next), outside the file")")
            }
            guard seen.insert(next) else { throw PageError(.badOverflow, page: next, "overflow chain loops") }
            let data = try pages.load(next)
            let take = min(chunk, count - copied)
            (buffer.bytes + copied).copyMemory(from: data + 4, byteCount: take)
            copied += take
            next = UInt32(data.load(fromByteOffset: 0, as: UInt8.self)) << 24
                | UInt32(data.load(fromByteOffset: 1, as: UInt8.self)) << 16
                | UInt32(data.load(fromByteOffset: 2, as: UInt8.self)) << 8
                | UInt32(data.load(fromByteOffset: 3, as: UInt8.self))
        }
    }
}

/// The pages one chain has passed: a short list, a set once it grows.
private struct ChainPages {
    private var few: [UInt32] = []
    private var many: Set<UInt32>?

    mutating func insert(_ page: UInt32) -> Bool {
        if var set = many {
            many = nil
            defer { many = set }
            return set.insert(page).inserted
        }
        if few.contains(page) { return false }
        few.append(page)
        if few.count > 32 { many = Set(few); few = [] }
        return true
    }
}
