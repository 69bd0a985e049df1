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

    static func decode(_ compressed: [UInt8], what: String) throws -> [IndexEntry] {
        var raw = try inflate(compressed, what: what)
        var r = ByteReader(raw, what: what)
        guard try r.raw(4) == magic else { throw r.damaged("not an index") }
        guard try r.u32() == 1 else { throw r.damaged("unknown index version") }
        let packCount = try r.count(of: 32)
        var packs: [PageID] = []
        for _ in 0..<packCount { packs.append(try r.id()) }
        let n = try r.count(of: 44)
        var out: [IndexEntry] = []; out.reserveCapacity(n)
        for _ in 0..<n {
            let id = try r.id(), pack = Int(try r.u32()), offset = try r.u32(), length = try r.u32()
            guard pack < packs.count else { throw r.damaged("pack number out of range") }
            out.append(IndexEntry(id: id, location: BlobLocation(pack: packs[pack], offset: offset, length: length)))
        }
        raw = []
        return out
    }
}

/// Inflates a zlib stream of unknown size (the binary repository objects),
/// refusing more than `limit` bytes of output.
func inflate(_ compressed: [UInt8], what: String, limit: Int = 1 << 30) throws -> [UInt8] {
    var stream = z_stream()
    let damaged = StoreError(.other, location: what, message: "damaged object: cannot decompress")
    guard inflateInit_(&stream, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw damaged }
    defer { inflateEnd(&stream) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    return try compressed.withUnsafeBytes { input -> [UInt8] in
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        while true {
            let (rc, produced) = buffer.withUnsafeMutableBytes { raw -> (Int32, Int) in
                stream.next_out = raw.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(raw.count)
                let rc = CZlib.inflate(&stream, Z_NO_FLUSH)
                return (rc, raw.count - Int(stream.avail_out))
            }
            out.append(contentsOf: buffer[0..<produced])
            guard out.count <= limit else { throw damaged }
            if rc == Z_STREAM_END { return out }
            // Z_BUF_ERROR with input left means no progress: damaged or truncated.
            if rc != Z_OK { throw damaged }
        }
    }
}

import CZlib

/// Every page the repository holds, sorted by id, in flat arrays.
public struct RepoIndex: Sendable {
    var ids: [PageID] = []
    var locations: [BlobLocation] = []
    /// Which index object each entry came from (for prune).
    var sources: [UInt32] = []
    /// Keys of the index objects read.
    public internal(set) var objectKeys: [String] = []

    public init() {}

    public var count: Int { ids.count }

    /// Builds the table from the entries of each index object (duplicates: the first kept).
    init(objects: [(key: String, entries: [IndexEntry])]) {
        var all: [(PageID, BlobLocation, UInt32)] = []
        all.reserveCapacity(objects.reduce(0) { $0 + $1.entries.count })
        for (n, object) in objects.enumerated() {
            objectKeys.append(object.key)
            for e in object.entries { all.append((e.id, e.location, UInt32(n))) }
        }
        all.sort { $0.0 < $1.0 || ($0.0 == $1.0 && $0.2 < $1.2) }
        ids.reserveCapacity(all.count); locations.reserveCapacity(all.count); sources.reserveCapacity(all.count)
        for item in all where ids.last != item.0 {
            ids.append(item.0); locations.append(item.1); sources.append(item.2)
        }
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

    /// Adds entries a backup just stored (kept sorted).
    mutating func add(_ entries: [IndexEntry], objectKey: String) {
        guard !entries.isEmpty else { return }
        let source = UInt32(objectKeys.count)
        objectKeys.append(objectKey)
        var extra = entries.filter { !contains($0.id) }.sorted { $0.id < $1.id }
        if extra.isEmpty { return }
        var newIDs: [PageID] = [], newLocs: [BlobLocation] = [], newSources: [UInt32] = []
        newIDs.reserveCapacity(ids.count + extra.count)
        var i = 0, j = 0
        while i < ids.count || j < extra.count {
            if j == extra.count || (i < ids.count && ids[i] < extra[j].id) {
                newIDs.append(ids[i]); newLocs.append(locations[i]); newSources.append(sources[i]); i += 1
            } else {
                if newIDs.last != extra[j].id {
                    newIDs.append(extra[j].id); newLocs.append(extra[j].location); newSources.append(source)
                }
                j += 1
            }
        }
        extra = []
        ids = newIDs; locations = newLocs; sources = newSources
    }

    /// Every entry, in id order.
    public var entries: [IndexEntry] { zip(ids, locations).map { IndexEntry(id: $0, location: $1) } }
}
