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

// MARK: A state's page map, and reads of several blobs of one pack at once
// (Moments/ opens a state through them without restoring it).

/// Where each page of one state lies, by the index: page n's entry, and each
/// blob's entries by slot (to check, and keep, every page a blob holds).
final class StatePages: @unchecked Sendable {
    let index: RepoIndex
    /// Page n's position in `index.entries` at n - 1.
    let positions: [UInt32]
    /// Entry positions by blob, in slot order (`RepoIndex.entriesByBlob`).
    let slots: (starts: [UInt32], positions: [UInt32])

    init(index: RepoIndex, positions: [UInt32]) {
        self.index = index
        self.positions = positions
        slots = index.entriesByBlob()
    }

    /// The blob that holds page `number` (1...count).
    func blob(ofPage number: Int) -> UInt32 { index.entries[Int(positions[number - 1])].blob }

    /// How many pages a blob holds.
    func pageCount(ofBlob blob: UInt32) -> Int { Int(index.blobs[Int(blob)].pages) }

    /// The pack a blob lies in, by its number into the index's packs.
    func pack(ofBlob blob: UInt32) -> UInt32 { index.blobs[Int(blob)].pack }

    /// The id of the page in `slot` of `blob`, when the index names one.
    func id(ofBlob blob: UInt32, slot: Int) -> PageID? {
        let p = Int(slots.positions[Int(slots.starts[Int(blob)]) + slot])
        let entry = index.entries[p]
        return entry.blob == blob && Int(entry.slot) == slot ? entry.id : nil
    }

    /// One ranged read of a pack: `blobs` (numbers into the index's blobs, in
    /// offset order) lie in `from..<to` of pack `pack`.
    struct Span: Sendable { var pack: UInt32; var blobs: [UInt32]; var from: Int; var to: Int }

    /// `blobs` (any order, repeats ignored) grouped into as few ranged reads
    /// as `reads` allows: by pack, in offset order, neighbours together
    /// (RepoRestore.Reads, the rule restore reads packs by).
    func spans(_ blobs: [UInt32], reads: RepoRestore.Reads) -> [Span] {
        let sorted = Array(Set(blobs)).sorted { a, b in
            let x = index.blobs[Int(a)], y = index.blobs[Int(b)]
            return (x.pack, x.offset) < (y.pack, y.offset)
        }
        var out: [Span] = []
        var i = 0
        while i < sorted.count {
            let pack = index.blobs[Int(sorted[i])].pack
            var end = i
            while end < sorted.count && index.blobs[Int(sorted[end])].pack == pack { end += 1 }
            var k = i
            while k < end {
                let cut = reads.cut(k..<end, offset: { Int(self.index.blobs[Int(sorted[$0])].offset) },
                                    length: { Int(self.index.blobs[Int(sorted[$0])].length) })
                out.append(Span(pack: pack, blobs: Array(sorted[k..<cut.end]), from: cut.from, to: cut.to))
                k = cut.end
            }
            i = end
        }
        return out
    }
}

extension Repository {
    /// The page map of a state whose page n has id `ids[n - 1]`; a page the
    /// index lacks, or whose blob holds pages of another size, is an error
    /// naming it (as restore says it).
    func pageMap(ids: [PageID], pageSize: Int, index: RepoIndex) throws -> StatePages {
        var positions: [UInt32] = []
        positions.reserveCapacity(ids.count)
        for (n, id) in ids.enumerated() {
            guard let p = index.position(of: id) else {
                throw StoreError(.notFound, location: location, message: "page \(n + 1) (\(id.hex.prefix(12))) is not in the repository's index; run `litectl verify --repo`")
            }
            let blob = index.blobs[Int(index.entries[p].blob)]
            if blob.pageSizeLog2 != 0 && 1 << Int(blob.pageSizeLog2) != pageSize {
                throw StoreError(.other, location: location, message: "damaged index: page \(n + 1) (\(id.hex.prefix(12))) is in a blob of \(1 << Int(blob.pageSizeLog2))-byte pages, the state's are \(pageSize) bytes")
            }
            positions.append(UInt32(p))
        }
        return StatePages(index: index, positions: positions)
    }

    /// Reads `span` in one ranged read of its pack, opens and decompresses
    /// each of its blobs, checks every page the index names in them against
    /// its id, and hands each to `page` (its id and bytes, valid during the
    /// call). Nothing unchecked is handed on: a page whose bytes do not match
    /// its id fails the read with an error naming the pack and the page.
    /// Returns the bytes read.
    func read(_ span: StatePages.Span, map: StatePages, pageSize: Int, decompressor: ZstdDecompressor,
              buffers: RepoRestore.Buffers, page: (PageID, UnsafeRawBufferPointer) -> Void) throws -> Int {
        let key = Self.packKey(map.index.packs[Int(span.pack)])
        let what = objectName(key)
        let count = try store.get(key, offset: Int64(span.from), length: span.to - span.from, into: &buffers.read)
        for b in span.blobs {
            let record = map.index.blobs[Int(b)]
            let lo = Int(record.offset) - span.from, hi = lo + Int(record.length)
            guard lo >= 0, hi <= count else {
                throw StoreError(.other, location: what, message: "damaged pack: shorter than its index says")
            }
            let ids = (0..<Int(record.pages)).map { map.id(ofBlob: b, slot: $0) }
            try buffers.read.withUnsafeBytes { read in
                try pages(fromBlob: UnsafeRawBufferPointer(rebasing: read[lo..<hi]), pages: Int(record.pages), pageSize: pageSize,
                          ids: ids, decompressor: decompressor, what: what, into: &buffers.pages)
            }
            buffers.pages.withUnsafeBytes { all in
                for (slot, id) in ids.enumerated() {
                    guard let id else { continue }
                    page(id, UnsafeRawBufferPointer(rebasing: all[slot * pageSize..<(slot + 1) * pageSize]))
                }
            }
        }
        return count
    }
}
