// The pages of a minute of segments stored again together. Each segment's
// pack holds the versions of its second side by side, so zstd stores each
// page's first version of the second whole and the later ones as their
// changed bytes; but a page changed every second is stored whole every
// second. When the shipper gathers the recent segments into one, it also
// gathers their pages: every version of one page of the whole minute side by
// side in new blobs (a page's versions, read in page and state order, from a
// merge of the batches' blobs, which are in that order already), a new pack
// and one index object for them; then the old index objects go. The old
// packs stay (pack names are content addresses: another index object may
// name the same pack); prune removes them once no index names them. Part of the replicate capability, built on
// Repository/'s blobs, packs and index objects.
import Crypto

enum Regroup {
    /// A blob of an old batch: where it is, and the pages it holds in slot order.
    struct OldBlob {
        var pack: PageID
        var offset: Int64
        var length: Int
        var pageSizeLog2: UInt8
        var ids: [PageID]
    }

    /// What a regrouping wrote: the new index object's key, the bytes
    /// written, the old index objects it replaces.
    struct Outcome {
        var indexKey: String
        var bytes: Int64
        var replaced: [String]
    }

    /// Regroups the pages `indexKeys` list (the index objects of the
    /// batches of `segments`, in batch order); nil when there is nothing to
    /// gain (fewer than two batches, or pages of several sizes).
    static func run(_ repository: Repository, indexKeys: [String], segments: [Segment]) throws -> Outcome? {
        guard indexKeys.count > 1, let pageSize = segments.first?.pageSize, segments.allSatisfy({ $0.pageSize == pageSize }) else { return nil }
        // Each page id's page number and state (the first to name it).
        var where_: [PageID: (page: UInt32, state: UInt64)] = [:]
        for segment in segments {
            for state in segment.states {
                for change in state.changes where where_[change.id] == nil { where_[change.id] = (change.page, state.number) }
            }
        }
        // The batches' blobs, split into runs in (page, state) order: the streams to merge.
        var streams: [[OldBlob]] = []
        var read: [String] = []
        for key in indexKeys {
            var index = RepoIndex()
            let bytes: [UInt8]
            // (One removed by an earlier try of this gathering is left out.)
            do { bytes = try repository.getObject(key) } catch let error as StoreError where error.kind == .notFound { continue }
            try IndexObject.decode(bytes, what: repository.objectName(key), into: &index, source: 0)
            read.append(key)
            let byBlob = index.entriesByBlob()
            var run: [OldBlob] = []
            var last: (UInt32, UInt64) = (0, 0)
            for (b, blob) in index.blobs.enumerated() {
                guard 1 << Int(blob.pageSizeLog2) == pageSize else { return nil }
                let ids = (0..<Int(blob.pages)).map { index.entries[Int(byBlob.positions[Int(byBlob.starts[b]) + $0])].id }
                let first = where_[ids[0]].map { ($0.page, $0.state) } ?? (0, 0)
                if !run.isEmpty && first < last { streams.append(run); run = [] }
                run.append(OldBlob(pack: index.packs[Int(blob.pack)], offset: Int64(blob.offset), length: Int(blob.length),
                                   pageSizeLog2: blob.pageSizeLog2, ids: ids))
                last = where_[ids[ids.count - 1]].map { ($0.page, $0.state) } ?? (0, 0)
            }
            if !run.isEmpty { streams.append(run) }
        }
        guard streams.count > 1 else { return nil }

        // The merge: one blob of each stream decompressed at a time.
        final class Cursor {
            var blobs: [OldBlob]
            var blob = 0, slot = 0
            var pages: [UInt8] = []
            var loaded = -1
            init(_ blobs: [OldBlob]) { self.blobs = blobs }
            var done: Bool { blob >= blobs.count }
            var id: PageID { blobs[blob].ids[slot] }
            func advance() { slot += 1; if slot == blobs[blob].ids.count { slot = 0; blob += 1 } }
        }
        let cursors = streams.map(Cursor.init)
        let decompressor = ZstdDecompressor()
        func page(_ c: Cursor) throws -> ArraySlice<UInt8> {
            if c.loaded != c.blob {
                let old = c.blobs[c.blob]
                let key = Repository.packKey(old.pack)
                let bytes = try repository.store.get(key, offset: old.offset, length: old.length)
                guard bytes.count == old.length else {
                    throw StoreError(.other, location: repository.objectName(key), message: "damaged pack: shorter than its index says")
                }
                c.pages = try repository.pages(fromBlob: bytes, pages: old.ids.count, pageSize: pageSize, ids: old.ids.map { Optional($0) },
                                               decompressor: decompressor, what: repository.objectName(key))
                c.loaded = c.blob
            }
            return c.pages[c.slot * pageSize..<(c.slot + 1) * pageSize]
        }
        // Pages no state of these segments names come last, kept all the same: the
        // new index lists every page the old ones did.
        func order(_ c: Cursor) -> (UInt32, UInt64) { where_[c.id].map { ($0.page, $0.state) } ?? (UInt32.max, UInt64.max) }

        let perBlob = repository.blobPages(pageSize: pageSize)
        let log2 = UInt8(pageSize.trailingZeroBitCount)
        let compressor = ZstdCompressor(level: 3)
        var group: [UInt8] = [], groupIDs: [PageID] = []
        var pack: [UInt8] = [], packIDs: [PageID] = [], written: Int64 = 0
        var blobs: [BlobRecord] = [], blobIDs: [[PageID]] = []
        var emitted = Set<PageID>()
        func flushPack() throws {
            guard !pack.isEmpty else { return }
            let id = PageID(digest: SHA256.hash(data: pack))
            try repository.store.put(Repository.packKey(id), pack)
            written += Int64(pack.count)
            packIDs.append(id)
            pack = []
        }
        func flushGroup() throws {
            guard !groupIDs.isEmpty else { return }
            let blob = try group.withUnsafeBytes { try repository.blob(of: $0, compressor: compressor) }
            if !pack.isEmpty && pack.count + blob.count > repository.packSize { try flushPack() }
            blobs.append(BlobRecord(pack: UInt32(packIDs.count), offset: UInt32(pack.count), length: UInt32(blob.count),
                                    pages: UInt8(groupIDs.count), pageSizeLog2: log2, source: 0))
            blobIDs.append(groupIDs)
            pack.append(contentsOf: blob)
            group.removeAll(keepingCapacity: true); groupIDs.removeAll(keepingCapacity: true)
        }
        while true {
            var best: Cursor?
            for c in cursors where !c.done {
                if best == nil || order(c) < order(best!) { best = c }
            }
            guard let c = best else { break }
            let id = c.id
            if emitted.insert(id).inserted {
                group.append(contentsOf: try page(c))
                groupIDs.append(id)
                if groupIDs.count == perBlob { try flushGroup() }
            }
            c.advance()
        }
        try flushGroup()
        try flushPack()
        guard !blobs.isEmpty else { return nil }
        let object = IndexObject.encode(for: repository, packs: packIDs, blobCount: blobs.count, blob: { blobs[$0] }, id: { blobIDs[$0][$1] })
        let (indexID, indexBytes) = try repository.putObject(prefix: "index", object)
        return Outcome(indexKey: "index/" + indexID, bytes: written + Int64(indexBytes), replaced: read)
    }
}
