// Gathers the blobs of new pages (zlib-compressed, then sealed) into pack
// objects of about `Repository.packSize` bytes, writes each whole pack once
// (never one object per page), and remembers where each page went for the
// index object the run writes after its packs.
import Crypto

final class PackWriter {
    let repository: Repository
    private var buffer: [UInt8] = []
    /// Every page added, in order, with where its blob went: flat arrays
    /// (48 bytes a page), the pack numbers set when each pack is written.
    private(set) var ids: [PageID] = []
    private var offsets: [UInt32] = []
    private var lengths: [UInt32] = []
    private var packNumbers: [UInt32] = []
    private var packs: [PageID] = []
    /// Pages added whose pack is not written yet (the last of `ids`).
    private var pendingCount = 0
    /// 8-byte id prefixes of the pages added → their position in `ids`: finds a
    /// page added twice in one run (zero pages, copies) in a quarter of the
    /// memory of a set of whole ids; the whole id is always compared.
    private var byPrefix: [UInt64: UInt32] = [:]
    private(set) var bytesWritten: Int64 = 0
    private(set) var packsWritten = 0
    /// Called after each pack is stored (lock refresh, progress).
    var afterPack: () throws -> Void = {}

    init(repository: Repository) {
        self.repository = repository
    }

    /// Whether this run already added the page.
    func contains(_ id: PageID) -> Bool {
        guard let at = byPrefix[id.a] else { return false }
        return ids[Int(at)] == id
    }

    /// Adds a page's blob (already compressed and sealed).
    func add(_ id: PageID, blob: [UInt8]) throws {
        // One allocation for the pack, never doubled past it.
        if buffer.capacity < repository.packSize + blob.count { buffer.reserveCapacity(repository.packSize + 2 * blob.count + 4096) }
        if byPrefix[id.a] == nil { byPrefix[id.a] = UInt32(ids.count) }
        ids.append(id); offsets.append(UInt32(buffer.count)); lengths.append(UInt32(blob.count)); packNumbers.append(0)
        pendingCount += 1
        buffer.append(contentsOf: blob)
        if buffer.count >= repository.packSize { try flush() }
    }

    /// Writes the pack in progress, if any.
    func flush() throws {
        guard pendingCount > 0 else { return }
        let pack = PageID(digest: SHA256.hash(data: buffer))
        try repository.store.put(Repository.packKey(pack), buffer)
        let number = UInt32(packs.count)
        packs.append(pack)
        for i in (ids.count - pendingCount)..<ids.count { packNumbers[i] = number }
        bytesWritten += Int64(buffer.count)
        packsWritten += 1
        buffer.removeAll(keepingCapacity: true)
        pendingCount = 0
        try afterPack()
    }

    /// Entries of the packs written.
    var written: [IndexEntry] {
        (0..<(ids.count - pendingCount)).map {
            IndexEntry(id: ids[$0], location: BlobLocation(pack: packs[Int(packNumbers[$0])], offset: offsets[$0], length: lengths[$0]))
        }
    }

    /// Writes the index object for every pack written; returns its size in bytes (0 when nothing was written).
    func writeIndex() throws -> Int {
        let count = ids.count - pendingCount
        guard count > 0 else { return 0 }
        let (_, bytes) = try repository.putObject(prefix: "index", IndexObject.encode(ids: ids.prefix(count), packNumbers: packNumbers,
                                                                                        offsets: offsets, lengths: lengths, packs: packs))
        return bytes
    }

    /// The memory no longer needed once the index object is written.
    func releaseLookup() { byPrefix = [:]; buffer = [] }
}

extension Repository {
    /// A page as stored: zlib, then sealed.
    func blob(of page: UnsafeRawBufferPointer) throws -> [UInt8] {
        try keys.seal(Zlib.compress(page, level: 6))
    }

    /// A page back from its blob, checked against its id.
    func page(fromBlob blob: [UInt8], id: PageID, pageSize: Int, what: String) throws -> [UInt8] {
        let compressed = try keys.open(blob, what: what)
        guard let page = Zlib.decompress(compressed, size: pageSize) else {
            throw StoreError(.other, location: what, message: "damaged page \(id.hex.prefix(12)): cannot decompress")
        }
        let actual = page.withUnsafeBytes { keys.pageID($0) }
        guard actual == id else {
            throw StoreError(.other, location: what, message: "damaged page \(id.hex.prefix(12)): its content does not match its id")
        }
        return page
    }

    /// The page id of raw page bytes.
    func pageID(_ page: UnsafeRawBufferPointer) -> PageID { keys.pageID(page) }
}
