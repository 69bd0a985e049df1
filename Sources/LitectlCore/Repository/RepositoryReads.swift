// The reads a reader of moments goes through (restore today; a read-only
// VFS that opens a moment straight from the repository next): a snapshot's
// page list, a chain's states up to a time, where a page's blob lies in its
// pack, and that blob read by its byte range alone. Each checks what it
// reads (object names against their bytes, pages against their ids).

extension Repository {
    /// A snapshot's page list: page n's id at n - 1 (its list object and,
    /// for a delta, the full list it is a delta on).
    public func readPageList(of snapshot: Snapshot) throws -> [PageID] { try pageIDs(of: snapshot) }

    /// The states of `base`'s chain observed at or before `time` (seconds
    /// since 1970), from its segments: the number of the last of them (0:
    /// the base itself) and the page ids it had.
    public func readChain(_ base: Snapshot, upTo time: Double) throws -> (chain: ReplicaChain, state: UInt64, ids: [PageID]) {
        let chain = try loadChain(base)
        let micros = ReplicaState.micros(time)
        let state = chain.states.last(where: { $0.observedMicros <= micros })?.number ?? 0
        return (chain, state, try stateIDs(chain, upTo: state))
    }

    /// Where a page's blob lies: its pack, the blob's bytes in it, how many
    /// pages it holds and which of them the page is.
    struct BlobLocation: Equatable {
        var pack: ObjectKey
        var offset: Int64
        var length: Int
        var pages: Int
        var slot: Int
        var pageSize: Int
    }

    /// The blob that holds page `id`, by `index`; nil when the index has none.
    func blobLocation(of id: PageID, in index: RepoIndex) -> BlobLocation? {
        guard let p = index.position(of: id) else { return nil }
        let entry = index.entries[p], blob = index.blobs[Int(entry.blob)]
        return BlobLocation(pack: .pack(index.packs[Int(blob.pack)]), offset: Int64(blob.offset), length: Int(blob.length),
                            pages: Int(blob.pages), slot: Int(entry.slot), pageSize: 1 << Int(blob.pageSizeLog2))
    }

    /// The pages of the blob at `location`, read by its byte range alone
    /// (one ranged read of its pack), decompressed and opened; the page in
    /// its slot is checked against `id`.
    func readBlob(_ location: BlobLocation, id: PageID, decompressor: ZstdDecompressor) throws -> [UInt8] {
        let what = objectName(location.pack)
        let bytes = try store.get(location.pack.name, offset: location.offset, length: location.length)
        guard bytes.count == location.length, location.slot < location.pages else {
            throw StoreError(.other, location: what, message: "damaged pack: shorter than its index says")
        }
        var ids = [PageID?](repeating: nil, count: location.pages)
        ids[location.slot] = id
        return try pages(fromBlob: bytes, pages: location.pages, pageSize: location.pageSize, ids: ids, decompressor: decompressor, what: what)
    }
}
