// A snapshot's ordered page ids, stored as their own object: either a full
// list, or a delta (the pages that differ) on a full list. A delta always
// refers to a full list, never to another delta, so loading one snapshot reads
// at most two list objects, whatever the history.
// Format (before compression, zstd or zlib in version 1, and sealing), little-endian:
//   "LCPL" u32 version=1 | u8 kind (0 full, 1 delta) | u32 page count
//   full:  page count × page id (32 bytes)
//   delta: base list id (32) | u32 change count | changes: u32 page index, page id

public enum PageListObject {
    static let magic: [UInt8] = Array("LCPL".utf8)

    enum Kind: Equatable {
        case full
        case delta(base: PageID, changes: [(index: UInt32, id: PageID)])
        static func == (l: Kind, r: Kind) -> Bool {
            switch (l, r) {
            case (.full, .full): true
            case let (.delta(a, x), .delta(b, y)): a == b && x.count == y.count && zip(x, y).allSatisfy { $0.index == $1.index && $0.id == $1.id }
            default: false
            }
        }
    }

    static func encodeFull(_ ids: [PageID], for repository: Repository) -> [UInt8] {
        encodeFull(count: ids.count, for: repository) { ids[$0] }
    }

    /// A full list of `count` ids, `id(i)` giving the i-th.
    static func encodeFull(count: Int, for repository: Repository, id: (Int) -> PageID) -> [UInt8] {
        let w = ObjectWriter(repository: repository, size: 13 + 32 * count)
        w.raw(magic); w.u32(1); w.u8(0); w.u32(UInt32(count))
        for i in 0..<count { w.id(id(i)) }
        return w.finish()
    }

    static func encodeDelta(base: PageID, pageCount: Int, changes: [(index: UInt32, id: PageID)], for repository: Repository) -> [UInt8] {
        let w = ObjectWriter(repository: repository, size: 13 + 36 + 36 * changes.count)
        w.raw(magic); w.u32(1); w.u8(1); w.u32(UInt32(pageCount))
        w.id(base); w.u32(UInt32(changes.count))
        for c in changes { w.u32(c.index); w.id(c.id) }
        return w.finish()
    }

    /// The header and, for a full list, the ids.
    static func decode(_ compressed: [UInt8], what: String) throws -> (pageCount: Int, kind: Kind, ids: [PageID]) {
        let raw = try decompressObject(compressed, what: what)
        var r = ByteReader(raw, what: what)
        guard try r.raw(4) == magic else { throw r.damaged("not a page list") }
        guard try r.u32() == 1 else { throw r.damaged("unknown page list version") }
        let kind = try r.u8()
        let count = Int(try r.u32())
        switch kind {
        case 0:
            guard count <= (raw.count - r.offset) / 32 else { throw r.damaged("page count past the end") }
            var ids: [PageID] = []; ids.reserveCapacity(count)
            for _ in 0..<count { ids.append(try r.id()) }
            guard r.atEnd else { throw r.damaged("bytes after the last page id") }
            return (count, .full, ids)
        case 1:
            let base = try r.id()
            let n = try r.count(of: 36)
            var changes: [(index: UInt32, id: PageID)] = []; changes.reserveCapacity(n)
            for _ in 0..<n {
                let index = try r.u32(), id = try r.id()
                guard Int(index) < count else { throw r.damaged("page index out of range") }
                changes.append((index, id))
            }
            guard r.atEnd else { throw r.damaged("bytes after the last change") }
            return (count, .delta(base: base, changes: changes), [])
        default:
            throw r.damaged("unknown page list kind")
        }
    }

    /// What `stream` found at the head of a list.
    enum Head {
        case full(count: Int)
        case delta(count: Int, base: PageID, changes: Int)
    }

    /// Reads a list without holding its ids: `head` once, then `item` for
    /// each id in order (a full list: page index and id; a delta: the page
    /// index it replaces and the id). Every count and index is checked.
    static func stream(_ compressed: [UInt8], what: String, head: (Head) throws -> Void,
                       item: (Int, PageID) throws -> Void) throws {
        func damaged(_ detail: String) -> StoreError { StoreError(.other, location: what, message: "damaged object: \(detail)") }
        var pending: [UInt8] = []
        var parsedHead: Head?
        var items = 0, expected = 0, count = 0
        try decompressObject(compressed, what: what) { chunk in
            pending.append(contentsOf: chunk)
            var offset = 0
            if parsedHead == nil {
                guard pending.count >= 13 else { return }
                var r = ByteReader(Array(pending.prefix(49)), what: what)
                guard try r.raw(4) == magic else { throw damaged("not a page list") }
                guard try r.u32() == 1 else { throw damaged("unknown page list version") }
                let kind = try r.u8()
                count = Int(try r.u32())
                switch kind {
                case 0:
                    parsedHead = .full(count: count); expected = count; offset = 13
                case 1:
                    guard pending.count >= 49 else { return }
                    let base = try r.id(), changes = Int(try r.u32())
                    parsedHead = .delta(count: count, base: base, changes: changes); expected = changes; offset = 49
                default:
                    throw damaged("unknown page list kind")
                }
                try head(parsedHead!)
            }
            let size: Int
            if case .delta = parsedHead! { size = 36 } else { size = 32 }
            try pending.withUnsafeBytes { raw in
                while offset + size <= raw.count {
                    guard items < expected else { throw damaged("bytes after the last entry") }
                    if size == 32 {
                        try item(items, PageID(bytes: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + 32])))
                    } else {
                        let index = Int(raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
                        guard index < count else { throw damaged("page index out of range") }
                        try item(index, PageID(bytes: UnsafeRawBufferPointer(rebasing: raw[offset + 4..<offset + 36])))
                    }
                    items += 1; offset += size
                }
            }
            pending.removeFirst(offset)
        }
        guard parsedHead != nil, pending.isEmpty, items == expected else { throw damaged("truncated page list") }
    }
}
