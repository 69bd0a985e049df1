// Gathers the blobs of new pages (zlib-compressed, then sealed) into pack
// objects of about `Repository.packSize` bytes, writes each whole pack once
// (never one object per page), and remembers where each page went for the
// index object the run writes after its packs.
import Crypto

final class PackWriter {
    let repository: Repository
    private var buffer: [UInt8] = []
    private var pending: [(id: PageID, offset: UInt32, length: UInt32)] = []
    /// Entries of the packs written so far.
    private(set) var written: [IndexEntry] = []
    private(set) var bytesWritten: Int64 = 0
    private(set) var packsWritten = 0
    /// Called after each pack is stored (lock refresh, progress).
    var afterPack: () throws -> Void = {}

    init(repository: Repository) {
        self.repository = repository
    }

    /// Adds a page's blob (already compressed and sealed).
    func add(_ id: PageID, blob: [UInt8]) throws {
        pending.append((id, UInt32(buffer.count), UInt32(blob.count)))
        buffer.append(contentsOf: blob)
        if buffer.count >= repository.packSize { try flush() }
    }

    /// Writes the pack in progress, if any.
    func flush() throws {
        guard !pending.isEmpty else { return }
        let pack = PageID(digest: SHA256.hash(data: buffer))
        try repository.store.put(Repository.packKey(pack), buffer)
        for p in pending { written.append(IndexEntry(id: p.id, location: BlobLocation(pack: pack, offset: p.offset, length: p.length))) }
        bytesWritten += Int64(buffer.count)
        packsWritten += 1
        buffer.removeAll(keepingCapacity: true)
        pending.removeAll()
        try afterPack()
    }

    /// Writes the index object for every pack written; returns its size in bytes (0 when nothing was written).
    func writeIndex() throws -> Int {
        guard !written.isEmpty else { return 0 }
        let (_, bytes) = try repository.putObject(prefix: "index", IndexObject.encode(written))
        return bytes
    }
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
