// A cell's payload put together from a damaged file: the local part from its
// page, the rest from its overflow chain, followed for exactly the pages the
// payload's size calls for. Each overflow page must lie in the file, belong to
// nobody else and carry a plausible next pointer; a chain that breaks gives
// the bytes read so far, so the fields before the break survive and only the
// value that needed the lost pages is lost.
// https://www.sqlite.org/fileformat2.html#ovflpgs

/// A payload as far as it could be read.
struct SalvagedPayload {
    let bytes: UnsafeRawPointer
    /// Bytes read (the whole payload when `complete`).
    let available: Int
    let size: Int
    var complete: Bool { available == size }
    /// Why the chain broke, when it did.
    var problem: String?
}

/// Reads payloads of one damaged file, claiming overflow pages as it goes.
final class SalvagePayloadReader {
    let file: DamagedFile
    private let buffer = PayloadBuffer()

    init(file: DamagedFile) { self.file = file }

    /// How the chain's pages are taken.
    enum Claim {
        /// Claimed for the tree (they must belong to nobody yet).
        case claim
        /// Read whoever owns them (a first look at a page no b-tree reached).
        case peek
    }

    /// The payload of `cell` on `page` (a copy, not a buffer of `file`),
    /// its overflow pages claimed for `tree`.
    func payload(_ cell: BTreeCell, page: UnsafeRawPointer, tree: Int, owners: inout PageOwners,
                 claim: Claim = .claim) -> SalvagedPayload {
        if cell.localSize >= cell.payloadSize {
            return SalvagedPayload(bytes: page + cell.localStart, available: cell.payloadSize, size: cell.payloadSize)
        }
        let chunk = file.usable - 4
        let needed = (cell.payloadSize - cell.localSize + chunk - 1) / chunk
        guard needed <= Int(file.pageCount) else {
            return SalvagedPayload(bytes: page + cell.localStart, available: cell.localSize, size: cell.payloadSize,
                                   problem: "a \(cell.payloadSize)-byte payload cannot fit in the file")
        }
        buffer.reserve(cell.payloadSize)
        buffer.bytes.copyMemory(from: page + cell.localStart, byteCount: cell.localSize)
        var copied = cell.localSize
        var next = cell.overflow
        var problem: String?
        var seen = Set<UInt32>()
        while copied < cell.payloadSize {
            guard next >= 2, next <= file.pageCount, !file.isReserved(next) else {
                problem = next == 0 ? "the overflow chain ends early" : "the overflow chain points to page \(next), outside the file"
                break
            }
            if claim == .claim {
                guard owners.claim(next, as: .overflow, owner: tree) else {
                    problem = "the overflow chain reaches page \(next), which belongs elsewhere"
                    break
                }
            } else if seen.count > needed || !seen.insert(next).inserted {
                problem = "the overflow chain loops"
                break
            }
            guard let data = file.page(next) else {
                problem = "overflow page \(next) cannot be read"
                break
            }
            let link = UInt32(data.load(fromByteOffset: 0, as: UInt8.self)) << 24
                | UInt32(data.load(fromByteOffset: 1, as: UInt8.self)) << 16
                | UInt32(data.load(fromByteOffset: 2, as: UInt8.self)) << 8
                | UInt32(data.load(fromByteOffset: 3, as: UInt8.self))
            let take = min(chunk, cell.payloadSize - copied)
            let last = copied + take == cell.payloadSize
            // Every page but the last names the next one; a next pointer past
            // the file means this is not an overflow page at all (a b-tree
            // page's first byte reads as a page number in the tens of millions).
            // The last page's pointer is never followed (the recover
            // extension ignores it): there, damage to it (a flipped bit) costs
            // nothing, and only a first byte that is a b-tree page's type
            // says the page is some b-tree's, not this chain's end.
            if !last && (link < 2 || link > file.pageCount) || last && link > file.pageCount && SalvagePayloadReader.looksLikeBTreePage(link) {
                if claim == .claim { owners.release(next) }
                problem = "page \(next) is not an overflow page of this chain"
                break
            }
            (buffer.bytes + copied).copyMemory(from: data + 4, byteCount: take)
            copied += take
            next = link
        }
        return SalvagedPayload(bytes: UnsafeRawPointer(buffer.bytes), available: copied, size: cell.payloadSize, problem: problem)
    }

    /// True when `link`, the first four bytes of a page read as a next
    /// pointer, starts with a b-tree page's type byte (2, 5, 10 or 13).
    static func looksLikeBTreePage(_ link: UInt32) -> Bool {
        let type = UInt8(link >> 24)
        return type == BTreePage.indexInterior || type == BTreePage.tableInterior || type == BTreePage.indexLeaf
            || type == BTreePage.tableLeaf
    }

    /// Gives back memory after a huge payload.
    func trim() { if buffer.capacity > 64 << 20 { buffer.shrink(to: 1 << 16) } }
}
