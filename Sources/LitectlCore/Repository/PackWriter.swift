// A backup's new pages: each claimed once (a page met again is stored once),
// gathered into blobs (in a version-2 repository up to 64 pages or 256 KiB
// compressed together with zstd, so that similar pages compress as a stream
// would; one page per zlib blob in version 1) and the blobs into packs of
// about `Repository.packSize` bytes by the pack assembler, each whole pack
// written once (never one object per page); then the index object of the
// run's packs.

final class PackWriter {
    let repository: Repository
    /// The packs, assembled and written to the store as each is full.
    private var assembler: PackAssembler!
    private var table = IDTable()
    /// Called after each pack is stored (lock refresh).
    var afterPack: () throws -> Void = {}

    /// Whether the blobs this writer stores carry zstd's content checksum
    /// (`ZstdCompressor`); false only to write blobs as litectl did before 2026-11-26.
    let frameChecksums: Bool

    init(repository: Repository, frameChecksums: Bool = true) {
        self.repository = repository
        self.frameChecksums = frameChecksums
        assembler = PackAssembler(repository: repository, closing: .atSize) { [unowned self] pack in
            try repository.put(pack.object)
            try afterPack()
        }
    }

    /// Every page claimed by this run, in the order of the blobs that hold them.
    var ids: [PageID] { assembler.ids }
    var blobs: [BlobRecord] { assembler.blobs }
    /// The packs written, by their run-local number (`BlobRecord.pack`).
    var packs: [PageID] { assembler.packs }
    var bytesWritten: Int64 { assembler.bytesWritten }
    var packsWritten: Int { assembler.packsWritten }

    /// The position of a page this run claimed, or nil.
    func position(of id: PageID) -> Int? { table.find(id, in: assembler.ids) }

    /// Claims a new page: it gets the next position, and must then be put in a
    /// blob (in claim order). Returns nil when the run claimed it already.
    func claim(_ id: PageID) -> Int? {
        if table.find(id, in: assembler.ids) != nil { return nil }
        let position = assembler.reserve(id)
        table.insert(id, position: UInt32(position), in: assembler.ids)
        return position
    }

    /// Adds a blob (compressed, sealed) holding the next `pages` claimed pages.
    func add(blob: [UInt8], first: Int, pages: Int, pageSizeLog2: UInt8) throws {
        try assembler.add(blob: blob, first: first, pages: pages, pageSizeLog2: pageSizeLog2)
    }

    /// Writes the pack in progress, if any.
    func flush() throws { try assembler.flush() }

    /// Blobs in written packs.
    var writtenBlobCount: Int { assembler.writtenBlobCount }

    /// The ids of the pages in written packs.
    var writtenIDs: ArraySlice<PageID> { assembler.writtenIDs }

    /// The pack id of a written blob.
    func pack(ofBlob b: Int) -> PageID { assembler.pack(ofBlob: b) }

    /// The id of the page in `slot` of blob `b`.
    func id(blob b: Int, slot: Int) -> PageID { assembler.id(blob: b, slot: slot) }

    /// Writes the index object for every pack written; returns its size in bytes (0 when nothing was written).
    func writeIndex() throws -> Int {
        guard let object = try assembler.sealIndex() else { return 0 }
        try repository.put(object)
        return object.bytes.count
    }

    /// The pack buffer, once the last pack is written.
    func releaseBuffer() { assembler.releaseBuffer() }

    /// The memory no longer needed once the index object is written.
    func releaseLookup() { table = IDTable(); assembler.releaseBuffer() }
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
