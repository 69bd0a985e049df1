// The one place packs are assembled: blobs (pages compressed together, then
// sealed) appended to a pack buffer, each full pack handed whole to a sink
// (a backup writes it to the store, a follower's segment queues it for its
// shipper, a gathering spools it), and the index object that says where
// every page of the blobs went. docs/repository.md specifies packs and
// index objects.
import Crypto

/// A pack made whole, named by the SHA-256 of its bytes.
struct FullPack {
    let id: PageID
    let bytes: [UInt8]
    var key: ObjectKey { .pack(id) }
    /// The pack as an object to write.
    var object: SealedObject { SealedObject(key: key, bytes: bytes, sha256: id.bytes) }
}

final class PackAssembler {
    /// When a pack is closed.
    enum Closing {
        /// Once it holds `size` bytes or more (a backup's: the last blob may
        /// take it a little past).
        case atSize
        /// Before a blob would take it past `size` (a follower's).
        case beforeOverflow
    }

    let repository: Repository
    let size: Int
    let closing: Closing
    /// Whether each pack ends with 16 random bytes that no blob covers (a
    /// follower's segment packs: no other writer's pack can then have their
    /// name, so a pack a gathering replaced is removed without reading
    /// every index object).
    let salted: Bool
    private let sink: (FullPack) throws -> Void

    private var buffer: [UInt8] = []
    /// The pages of the blobs added, in blob order, then those reserved for
    /// the next blobs: blob b holds ids[blobFirst[b] ..< blobFirst[b] + blobs[b].pages].
    private(set) var ids: [PageID] = []
    private(set) var blobs: [BlobRecord] = []
    private var blobFirst: [UInt32] = []
    /// Pages in blobs (the rest of `ids` are reserved).
    private var covered = 0
    /// The packs handed to the sink, by their number (`BlobRecord.pack`).
    private(set) var packs: [PageID] = []
    /// Blobs added whose pack is not closed yet (the last of `blobs`).
    private var pendingBlobs = 0
    private(set) var bytesWritten: Int64 = 0

    init(repository: Repository, size: Int? = nil, closing: Closing, salted: Bool = false, sink: @escaping (FullPack) throws -> Void) {
        self.repository = repository; self.size = size ?? repository.packSize; self.closing = closing; self.salted = salted; self.sink = sink
    }

    var packsWritten: Int { packs.count }
    var isEmpty: Bool { blobs.isEmpty }

    /// Reserves the next position for a page that a later blob holds (in
    /// reservation order); returns it.
    func reserve(_ id: PageID) -> Int {
        ids.append(id)
        return ids.count - 1
    }

    /// Adds a blob (compressed, sealed) holding the next `pages` reserved pages, from `first`.
    func add(blob: [UInt8], first: Int, pages: Int, pageSizeLog2: UInt8) throws {
        precondition(first == covered && first + pages <= ids.count, "blobs are added in reservation order")
        if closing == .beforeOverflow && !buffer.isEmpty && buffer.count + blob.count > size { try flush() }
        // (A backup's:) one allocation for the pack, never doubled past it.
        if closing == .atSize && buffer.capacity < size + blob.count { buffer.reserveCapacity(size + 2 * blob.count + 4096) }
        blobs.append(BlobRecord(pack: UInt32(packs.count), offset: UInt32(buffer.count), length: UInt32(blob.count),
                                pages: UInt8(pages), pageSizeLog2: pageSizeLog2, source: 0))
        blobFirst.append(UInt32(first))
        covered += pages
        pendingBlobs += 1
        buffer.append(contentsOf: blob)
        if closing == .atSize && buffer.count >= size { try flush() }
    }

    /// Adds a blob holding `pageIDs` (reserved now).
    func add<C: Collection>(blob: [UInt8], pageIDs: C, pageSizeLog2: UInt8) throws where C.Element == PageID {
        let first = ids.count
        ids.append(contentsOf: pageIDs)
        try add(blob: blob, first: first, pages: pageIDs.count, pageSizeLog2: pageSizeLog2)
    }

    /// Compresses and seals `pages` (whole pages of `pageSize` bytes, one per
    /// id) into one blob, and adds it.
    func add<C: Collection>(pages: UnsafeRawBufferPointer, pageIDs: C, pageSize: Int, compressor: ZstdCompressor) throws where C.Element == PageID {
        precondition(pages.count == pageIDs.count * pageSize)
        let blob = try repository.blob(of: pages, compressor: compressor)
        try add(blob: blob, pageIDs: pageIDs, pageSizeLog2: UInt8(pageSize.trailingZeroBitCount))
    }

    /// Closes the pack in progress, if any, and hands it to the sink.
    func flush() throws {
        guard pendingBlobs > 0 else { return }
        if salted {
            var random = SystemRandomNumberGenerator()
            for _ in 0..<2 { withUnsafeBytes(of: random.next() as UInt64) { buffer.append(contentsOf: $0) } }
        }
        let id = PageID(digest: SHA256.hash(data: buffer))
        // (Handed as a temporary: once the sink returns, the buffer is this
        // assembler's alone again, and a backup reuses its storage.)
        try sink(FullPack(id: id, bytes: buffer))
        packs.append(id)
        bytesWritten += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
        pendingBlobs = 0
    }

    /// Blobs in closed packs.
    var writtenBlobCount: Int { blobs.count - pendingBlobs }

    /// The ids of the pages in closed packs.
    var writtenIDs: ArraySlice<PageID> {
        let n = writtenBlobCount
        return ids.prefix(n == 0 ? 0 : Int(blobFirst[n - 1]) + Int(blobs[n - 1].pages))
    }

    /// The pack id of a blob in a closed pack.
    func pack(ofBlob b: Int) -> PageID { packs[Int(blobs[b].pack)] }

    /// The id of the page in `slot` of blob `b`.
    func id(blob b: Int, slot: Int) -> PageID { ids[Int(blobFirst[b]) + slot] }

    /// The index object of every blob in a closed pack, sealed; nil when there is none.
    func sealIndex() throws -> SealedObject? {
        let n = writtenBlobCount
        guard n > 0 else { return nil }
        let object = IndexObject.encode(for: repository, packs: packs, blobCount: n, blob: { self.blobs[$0] },
                                        id: { self.ids[Int(self.blobFirst[$0]) + $1] })
        return try repository.sealIndexObject(object)
    }

    /// Starts again with no blob and no pack (a follower's next segment).
    func reset() {
        precondition(pendingBlobs == 0, "a pack in progress")
        ids.removeAll(keepingCapacity: true); blobs = []; blobFirst = []; packs = []; covered = 0
    }

    /// The pack buffer, once the last pack is closed.
    func releaseBuffer() { buffer = [] }
}
