// Gathers new pages into blobs (in a version-2 repository up to 64 pages or
// 256 KiB compressed together with zstd, so that similar pages compress as a
// stream would; one page per zlib blob in version 1), the blobs into pack
// objects of about `Repository.packSize` bytes, writes each whole pack once
// (never one object per page), and remembers where each page went for the
// index object the run writes after its packs.
import Crypto

final class PackWriter {
    let repository: Repository
    private var buffer: [UInt8] = []
    /// Every page claimed by this run, in the order of the blobs that hold
    /// them: blob b holds ids[blobFirst[b] ..< blobFirst[b] + blobs[b].pages].
    private(set) var ids: [PageID] = []
    private(set) var blobs: [BlobRecord] = []
    private var blobFirst: [UInt32] = []
    /// The packs written, by their run-local number (`BlobRecord.pack`).
    private(set) var packs: [PageID] = []
    /// Blobs added whose pack is not written yet (the last of `blobs`).
    private var pendingBlobs = 0
    private var table = IDTable()
    private(set) var bytesWritten: Int64 = 0
    private(set) var packsWritten = 0
    /// Called after each pack is stored (lock refresh).
    var afterPack: () throws -> Void = {}

    /// Whether the blobs this writer stores carry zstd's content checksum
    /// (`ZstdCompressor`); false only to write blobs as litectl did before 2026-11-26.
    let frameChecksums: Bool

    init(repository: Repository, frameChecksums: Bool = true) {
        self.repository = repository
        self.frameChecksums = frameChecksums
    }

    /// The position of a page this run claimed, or nil.
    func position(of id: PageID) -> Int? { table.find(id, in: ids) }

    /// Claims a new page: it gets the next position, and must then be put in a
    /// blob (in claim order). Returns nil when the run claimed it already.
    func claim(_ id: PageID) -> Int? {
        if table.find(id, in: ids) != nil { return nil }
        ids.append(id)
        table.insert(id, position: UInt32(ids.count - 1), in: ids)
        return ids.count - 1
    }

    /// Adds a blob (compressed, sealed) holding the next `pages` claimed pages.
    func add(blob: [UInt8], first: Int, pages: Int, pageSizeLog2: UInt8) throws {
        precondition(first == (blobFirst.last.map { Int($0) } ?? 0) + Int(blobs.last?.pages ?? 0) && first + pages <= ids.count,
                     "blobs are added in claim order")
        // One allocation for the pack, never doubled past it.
        if buffer.capacity < repository.packSize + blob.count { buffer.reserveCapacity(repository.packSize + 2 * blob.count + 4096) }
        blobs.append(BlobRecord(pack: UInt32(packs.count), offset: UInt32(buffer.count), length: UInt32(blob.count),
                                pages: UInt8(pages), pageSizeLog2: pageSizeLog2, source: 0))
        blobFirst.append(UInt32(first))
        pendingBlobs += 1
        buffer.append(contentsOf: blob)
        if buffer.count >= repository.packSize { try flush() }
    }

    /// Writes the pack in progress, if any.
    func flush() throws {
        guard pendingBlobs > 0 else { return }
        let pack = PageID(digest: SHA256.hash(data: buffer))
        try repository.store.put(Repository.packKey(pack), buffer)
        packs.append(pack)
        bytesWritten += Int64(buffer.count)
        packsWritten += 1
        buffer.removeAll(keepingCapacity: true)
        pendingBlobs = 0
        try afterPack()
    }

    /// Blobs in written packs.
    var writtenBlobCount: Int { blobs.count - pendingBlobs }

    /// The ids of the pages in written packs.
    var writtenIDs: ArraySlice<PageID> {
        let n = writtenBlobCount
        return ids.prefix(n == 0 ? 0 : Int(blobFirst[n - 1]) + Int(blobs[n - 1].pages))
    }

    /// The pack id of a written blob.
    func pack(ofBlob b: Int) -> PageID { packs[Int(blobs[b].pack)] }

    /// The id of the page in `slot` of blob `b`.
    func id(blob b: Int, slot: Int) -> PageID { ids[Int(blobFirst[b]) + slot] }

    /// Writes the index object for every pack written; returns its size in bytes (0 when nothing was written).
    func writeIndex() throws -> Int {
        let n = writtenBlobCount
        guard n > 0 else { return 0 }
        let object = IndexObject.encode(for: repository, packs: packs, blobCount: n, blob: { self.blobs[$0] },
                                        id: { self.ids[Int(self.blobFirst[$0]) + $1] })
        return try repository.putObject(prefix: "index", object).bytes
    }

    /// The pack buffer, once the last pack is written.
    func releaseBuffer() { buffer = [] }

    /// The memory no longer needed once the index object is written.
    func releaseLookup() { table = IDTable(); buffer = [] }
}

/// An open-addressing table from page ids to their positions in an array of
/// ids kept elsewhere: 4 bytes a slot, two slots an id, the whole id always
/// compared. Finds a page a run met twice (zero pages, copies) in a tenth of
/// the memory of a dictionary of ids.
struct IDTable {
    private var slots: [UInt32] = []
    private var count = 0
    private static let empty = UInt32.max

    func find(_ id: PageID, in ids: [PageID]) -> Int? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: id.b) & mask
        while true {
            let p = slots[i]
            if p == Self.empty { return nil }
            if ids[Int(p)] == id { return Int(p) }
            i = (i + 1) & mask
        }
    }

    mutating func insert(_ id: PageID, position: UInt32, in ids: [PageID]) {
        if (count + 1) * 2 > slots.count { grow(ids) }
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: id.b) & mask
        while slots[i] != Self.empty { i = (i + 1) & mask }
        slots[i] = position
        count += 1
    }

    private mutating func grow(_ ids: [PageID]) {
        let old = slots
        slots = [UInt32](repeating: Self.empty, count: max(1024, old.count * 2))
        let mask = slots.count - 1
        for p in old where p != Self.empty {
            var i = Int(truncatingIfNeeded: ids[Int(p)].b) & mask
            while slots[i] != Self.empty { i = (i + 1) & mask }
            slots[i] = p
        }
    }
}

extension Repository {
    /// Pages as stored: `pages` whole pages compressed (zstd, or zlib for the
    /// one page of a version-1 blob), then sealed.
    func blob(of pages: UnsafeRawBufferPointer, compressor: ZstdCompressor) throws -> [UInt8] {
        if version == 1 { return try keys.seal(Zlib.compress(pages, level: 6)) }
        return try keys.seal(compressor.compress(pages))
    }

    /// A blob's pages back (`pages` × `pageSize` bytes), each checked against
    /// its id when `ids` gives them (nil entries are not checked).
    func pages(fromBlob blob: [UInt8], pages: Int, pageSize: Int, ids: [PageID?], decompressor: ZstdDecompressor,
               what: String) throws -> [UInt8] {
        var out: [UInt8] = []
        try blob.withUnsafeBytes {
            try self.pages(fromBlob: $0, pages: pages, pageSize: pageSize, ids: ids, decompressor: decompressor, what: what, into: &out)
        }
        return out
    }

    /// The same into `out` (resized to the pages' size, its storage reused
    /// from call to call: a plain repository's blob is decompressed from
    /// where it lies, with no allocation).
    func pages(fromBlob blob: UnsafeRawBufferPointer, pages: Int, pageSize: Int, ids: [PageID?], decompressor: ZstdDecompressor,
               what: String, into out: inout [UInt8]) throws {
        let sealed = keys.encryption == nil ? nil : try keys.open(Array(blob), what: what)
        let size = pages * pageSize
        let ok: Bool
        if version == 1 {
            let single = pages == 1 ? Zlib.decompress(sealed ?? Array(blob), size: pageSize) : nil
            ok = single != nil
            if let single { out = single }
        } else {
            // (An array of zeros appended, not repeatElement: element by element in a debug build.)
            if out.count < size { out += [UInt8](repeating: 0, count: size - out.count) } else { out.removeLast(out.count - size) }
            ok = out.withUnsafeMutableBytes { target in
                if let sealed { return sealed.withUnsafeBytes { decompressor.decompress($0, into: target) } }
                return decompressor.decompress(blob, into: target)
            }
        }
        guard ok else {
            throw StoreError(.other, location: what, message: "damaged blob of \(pages) page(s): cannot decompress")
        }
        try out.withUnsafeBytes { raw in
            for (slot, id) in ids.enumerated() {
                guard let id else { continue }
                let actual = keys.pageID(UnsafeRawBufferPointer(rebasing: raw[slot * pageSize..<(slot + 1) * pageSize]))
                guard actual == id else {
                    throw StoreError(.other, location: what, message: "damaged page \(id.hex.prefix(12)): its content does not match its id")
                }
            }
        }
    }

    /// The page id of raw page bytes.
    func pageID(_ page: UnsafeRawBufferPointer) -> PageID { keys.pageID(page) }
}
