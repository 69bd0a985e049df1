// The repository side of `litectl replicate` that is not a segment: a chain's
// base (every page of the database the repository lacks stored as a backup
// stores them, its index read once), and page lists made as a delta on the
// last full list when that is small. The follower reads its pages and calls
// these; it never builds a pack or names an object itself.
import Foundation

extension Repository {
    /// What `storePages` stored.
    struct StoredPages {
        /// Every page's id, in page order.
        var ids: [PageID]
        /// Pages the repository lacked (stored now).
        var stored: Int
        /// Bytes written (packs and their index object).
        var bytesWritten: Int64
    }

    /// Stores pages 1...`pageCount` (each read by `page`), those the
    /// repository lacks, into packs and one index object, as a backup does;
    /// the index is read once. Run under `lock` (shared), refreshed after each pack.
    /// `alone` (replicate --dir's new chains): the repository's index is not
    /// read (10,000 databases would each read every other's index object),
    /// so only pages repeated within this database are stored once.
    func storePages(pageCount: UInt32, pageSize: Int, lock: RepoLock, alone: Bool = false, page: (UInt32) throws -> [UInt8]) throws -> StoredPages {
        let index = SharedIndex(alone ? RepoIndex() : try loadIndex())
        let writer = PackWriter(repository: self)
        writer.afterPack = { try lock.refresh() }
        let classifier = PageClassifier(index: index, writer: writer)
        let builder = BlobBuilder(repository: self, writer: writer, pageSize: pageSize)
        var refs = PageRefs()
        var ids: [PageID] = []
        ids.reserveCapacity(Int(pageCount))
        var stored = 0
        for p in 1...max(1, pageCount) {
            let bytes = try page(p)
            let id = bytes.withUnsafeBytes { pageID($0) }
            ids.append(id)
            if classifier.classify(id, into: &refs) {
                bytes.withUnsafeBytes { builder.append(Int(refs.refs.last! & ~PageRefs.own), $0) }
                stored += 1
            }
            if p % 512 == 0 { try builder.drain() }
        }
        try builder.finish()
        try writer.flush()
        let written = writer.bytesWritten + Int64(try writer.writeIndex())
        return StoredPages(ids: ids, stored: stored, bytesWritten: written)
    }

    /// The page list of `ids`, sealed: a delta on the full list `full` when
    /// the changes are under half a full list's size, else a full list
    /// (`isFull`), which later lists can be deltas on.
    func sealPageList(_ ids: [PageID], deltaOn full: (id: PageID, ids: [PageID])?) throws -> (list: SealedObject, isFull: Bool) {
        if let full, let changes = Self.listChanges(from: full.ids, to: ids) {
            return (try sealPageList(PageListObject.encodeDelta(base: full.id, pageCount: ids.count, changes: changes, for: self)), false)
        }
        return (try sealPageList(PageListObject.encodeFull(ids, for: self)), true)
    }

    /// The changes from `full` to `ids`, when a delta is under half a full list.
    static func listChanges(from full: [PageID], to ids: [PageID]) -> [(index: UInt32, id: PageID)]? {
        let limit = ids.count * 32 / 2 / 36
        var changes: [(index: UInt32, id: PageID)] = []
        for i in 0..<ids.count where i >= full.count || full[i] != ids[i] {
            changes.append((UInt32(i), ids[i]))
            if changes.count > limit { return nil }
        }
        return changes
    }
}
