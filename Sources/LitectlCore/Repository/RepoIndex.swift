// The index: where each stored page lives (pack, offset, length). Each backup
// writes one index object for the pages it added; opening a repository reads
// them all into one sorted, flat table (44 bytes a page, no per-entry objects),
// so lookups are binary searches and memory is what the entries need.
// Format of an index object (before zlib and sealing), little-endian:
//   "LCIX" u32 version=1 | u32 pack count | pack ids (32 bytes each)
//   | u32 entry count | entries: page id (32) u32 pack# u32 offset u32 length

/// Where a page's blob is.
public struct BlobLocation: Sendable, Equatable {
    public var pack: PageID
    public var offset: UInt32
    public var length: UInt32
}

/// One index entry.
public struct IndexEntry: Sendable, Equatable {
    public var id: PageID
    public var location: BlobLocation
}

enum IndexObject {
    static let magic: [UInt8] = Array("LCIX".utf8)

    /// Encodes flat arrays (a run's new pages) without building entries.
    static func encode(ids: ArraySlice<PageID>, packNumbers: [UInt32], offsets: [UInt32], lengths: [UInt32], packs: [PageID]) -> [UInt8] {
        var w = ByteWriter()
        w.bytes.reserveCapacity(16 + packs.count * 32 + ids.count * 44)
        w.raw(magic); w.u32(1)
        w.u32(UInt32(packs.count)); for p in packs { w.id(p) }
        w.u32(UInt32(ids.count))
        for i in ids.indices {
            w.id(ids[i]); w.u32(packNumbers[i]); w.u32(offsets[i]); w.u32(lengths[i])
        }
        return Zlib.compress(w.bytes)
    }

    static func encode(_ entries: [IndexEntry]) -> [UInt8] {
        var packs: [PageID: UInt32] = [:]
        var packList: [PageID] = []
        for e in entries where packs[e.location.pack] == nil {
            packs[e.location.pack] = UInt32(packList.count); packList.append(e.location.pack)
        }
        var w = ByteWriter()
        w.raw(magic); w.u32(1)
        w.u32(UInt32(packList.count)); for p in packList { w.id(p) }
        w.u32(UInt32(entries.count))
        for e in entries {
            w.id(e.id); w.u32(packs[e.location.pack]!); w.u32(e.location.offset); w.u32(e.location.length)
        }
        return Zlib.compress(w.bytes)
    }

    /// Appends the object's entries to `index` (unsorted), without an array of entries in between.
    static func decode(_ compressed: [UInt8], what: String, into index: inout RepoIndex, source: UInt32) throws {
        let raw = try inflate(compressed, what: what)
        var r = ByteReader(raw, what: what)
        guard try r.raw(4) == magic else { throw r.damaged("not an index") }
        guard try r.u32() == 1 else { throw r.damaged("unknown index version") }
        let packCount = try r.count(of: 32)
        var packs: [UInt32] = []
        for _ in 0..<packCount { packs.append(index.number(of: try r.id())) }
        let n = try r.count(of: 44)
        for _ in 0..<n {
            let id = try r.id(), pack = Int(try r.u32()), offset = try r.u32(), length = try r.u32()
            guard pack < packs.count else { throw r.damaged("pack number out of range") }
            index.ids.append(id); index.packNumbers.append(packs[pack]); index.offsets.append(offset)
            index.lengths.append(length); index.sources.append(source)
        }
    }
}

/// Every page the repository holds, sorted by id, in flat arrays: 48 bytes
/// a page (id, pack number, offset, length, source object), pack ids once each.
public struct RepoIndex: Sendable {
    var ids: [PageID] = []
    var packNumbers: [UInt32] = []
    var offsets: [UInt32] = []
    var lengths: [UInt32] = []
    /// Which index object each entry came from (for prune).
    var sources: [UInt32] = []
    var packs: [PageID] = []
    var packNumber: [PageID: UInt32] = [:]
    /// Keys of the index objects read.
    public internal(set) var objectKeys: [String] = []

    public init() {}

    public var count: Int { ids.count }

    /// The entries' locations, by position.
    struct Locations: RandomAccessCollection {
        let index: RepoIndex
        var startIndex: Int { 0 }
        var endIndex: Int { index.ids.count }
        subscript(i: Int) -> BlobLocation {
            BlobLocation(pack: index.packs[Int(index.packNumbers[i])], offset: index.offsets[i], length: index.lengths[i])
        }
    }

    var locations: Locations { Locations(index: self) }

    mutating func number(of pack: PageID) -> UInt32 {
        if let n = packNumber[pack] { return n }
        let n = UInt32(packs.count)
        packs.append(pack); packNumber[pack] = n
        return n
    }

    /// Appends entries unsorted (call `sorted()` before lookups).
    mutating func append(_ entries: [IndexEntry], source: UInt32) {
        for e in entries {
            ids.append(e.id); packNumbers.append(number(of: e.location.pack))
            offsets.append(e.location.offset); lengths.append(e.location.length); sources.append(source)
        }
    }

    /// The same entries in id order, one per id (the earliest source kept).
    func sorted() -> RepoIndex {
        var order = Array(0..<UInt32(ids.count))
        order.sort { a, b in
            let x = ids[Int(a)], y = ids[Int(b)]
            return x < y || (x == y && sources[Int(a)] < sources[Int(b)])
        }
        var out = RepoIndex()
        out.packs = packs; out.packNumber = packNumber; out.objectKeys = objectKeys
        out.ids.reserveCapacity(order.count); out.packNumbers.reserveCapacity(order.count)
        out.offsets.reserveCapacity(order.count); out.lengths.reserveCapacity(order.count); out.sources.reserveCapacity(order.count)
        for i in order.map(Int.init) where out.ids.last != ids[i] {
            out.ids.append(ids[i]); out.packNumbers.append(packNumbers[i]); out.offsets.append(offsets[i])
            out.lengths.append(lengths[i]); out.sources.append(sources[i])
        }
        return out
    }

    func position(of id: PageID) -> Int? {
        var low = 0, high = ids.count
        while low < high {
            let mid = (low + high) / 2
            if ids[mid] < id { low = mid + 1 } else { high = mid }
        }
        return low < ids.count && ids[low] == id ? low : nil
    }

    public func contains(_ id: PageID) -> Bool { position(of: id) != nil }

    public func location(of id: PageID) -> BlobLocation? { position(of: id).map { locations[$0] } }

    /// Adds entries a backup just stored.
    mutating func add(_ entries: [IndexEntry], objectKey: String) {
        let fresh = entries.filter { !contains($0.id) }
        guard !fresh.isEmpty else { return }
        objectKeys.append(objectKey)
        append(fresh, source: UInt32(objectKeys.count - 1))
        self = sorted()
    }
}
