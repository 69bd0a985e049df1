// Retention and space reclamation. `forget` removes snapshot objects by the
// folder retention's rules (per database and host); `prune`, under an
// exclusive lock, removes what no snapshot needs: packs nothing refers to are
// deleted, packs mostly garbage are rewritten with their live pages, and the
// index is rewritten (a damaged chain of `replicate` is reported, and the
// pages its readable segments name kept: ReplicaRetention.swift). Order: new packs, new index, old index objects, then
// old packs and unused page lists; a run killed at any point leaves a
// repository that verifies, with at most unreferenced objects for the next prune.
public struct ForgetDecision: Sendable {
    public var keep: [Snapshot]
    public var remove: [Snapshot]
}

public struct PruneReport: Sendable {
    public var packsDeleted = 0
    public var packsRewritten = 0
    public var packsKept = 0
    public var bytesFreed: Int64 = 0
    public var bytesRepacked: Int64 = 0
    public var listsDeleted = 0
    public var indexObjectsReplaced = 0
    public var pagesLive = 0
    public var pagesRemoved = 0
    /// Chains a segment of which does not read back or names a page the
    /// index lacks: the pages their other segments name are kept, the
    /// others' work goes on.
    public var damagedChains: [DamagedChain] = []
}

public enum RepoForget {
    /// Which snapshots `policy` keeps, applied per (host, database path);
    /// never leaves only empty snapshots of a database that had data
    /// (`Retention.kept(times:holdsData:policy:)`).
    /// Snapshots of other databases than `database` (a name or path) are kept.
    public static func decide(_ snapshots: [Snapshot], policy: RetentionPolicy, database: String? = nil) -> ForgetDecision {
        var groups: [[UInt8]: [Snapshot]] = [:]
        var keep: [Snapshot] = [], remove: [Snapshot] = []
        for s in snapshots {
            if let database, !sameBytes(s.database, database) && !sameBytes(s.path, database) { keep.append(s); continue }
            // Bases of replicated chains go with their chains (ReplicaRetention.swift).
            if s.replica != nil { keep.append(s); continue }
            groups[seriesKey(hostname: s.hostname, path: s.path), default: []].append(s)
        }
        for key in groups.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let group = groups[key]!
            let kept = Retention.kept(times: group.map(\.time),
                                      holdsData: group.map { EmptySource.holdsData(pageCount: Int64($0.pageCount)) }, policy: policy)
            for (i, s) in group.enumerated() { if kept.contains(i) { keep.append(s) } else { remove.append(s) } }
        }
        return ForgetDecision(keep: keep.sorted { $0.time < $1.time }, remove: remove.sorted { $0.time < $1.time })
    }

    public static func remove(_ snapshots: [Snapshot], from repository: Repository) throws {
        for s in snapshots { try repository.store.delete("snapshots/" + s.id) }
    }
}

public enum RepoPrune {
    /// A pack whose live bytes are less than this share of it is rewritten.
    static let rewriteBelow = 0.5
    /// Pages per index object that prune writes.
    static let pagesPerIndexObject = 100_000

    public static func run(_ repository: Repository, dryRun: Bool, lock: RepoLock?,
                           progress: (String) -> Void = { _ in }) throws -> PruneReport {
        var report = PruneReport()
        let (snapshots, damaged) = try repository.snapshots()
        if let d = damaged.first {
            throw StoreError(.other, location: repository.objectName(d.key), message: "cannot read a snapshot, so prune cannot tell what it needs: \(d.error)")
        }
        let index = try repository.loadIndex()
        // Every page (by index position) and list a snapshot needs.
        var live = [Bool](repeating: false, count: index.count)
        var liveLists = Set<String>()
        for s in snapshots {
            for key in try repository.listKeys(of: s) { liveLists.insert(key) }
            let positions = try repository.pagePositions(of: s, index: index) { _, id in
                throw StoreError(.other, location: repository.location, message: "a snapshot needs page \(id.hex.prefix(12)), which is not in the index; run `litectl verify --repo` (prune changes nothing)")
            }
            for p in positions { live[Int(p)] = true }
        }
        // The pages segments name (repository version 4) are live too. A
        // segment that does not read back names pages no one can know (nor
        // use: a page id without its page number restores nothing); a page
        // a segment names that the index lacks is gone already. Either damages
        // that segment's chain alone: it is reported, every page its other
        // segments name is kept, and the other chains go on.
        let bases = Dictionary(Repository.chainBases(snapshots).map { ($0.id, $0) }) { a, _ in a }
        var damagedChains: [String: DamagedChain] = [:]
        func damage(_ ref: SegmentRef, _ cause: String) {
            let chain = String(ref.key.split(separator: "/").dropFirst().first ?? "")
            if damagedChains[chain] == nil { damagedChains[chain] = DamagedChain(chain: chain, base: bases[chain], cause: cause) }
        }
        try repository.forEachSegment({ ref, segment in
            var missing: PageID?
            for state in segment.states {
                for change in state.changes {
                    guard let p = index.position(of: change.id) else { missing = missing ?? change.id; continue }
                    live[p] = true
                }
            }
            if let missing {
                damage(ref, "\(repository.objectName(ref.key)): names page \(missing.hex.prefix(12)), which is not in the index")
            }
        }, damaged: { ref, error in damage(ref, error.description) })
        report.damagedChains = damagedChains.keys.sorted().map { damagedChains[$0]! }
        let byBlob = index.entriesByBlob(), byPack = index.blobsByPack()
        func pagesOf(_ b: Int) -> ArraySlice<UInt32> { byBlob.positions[Int(byBlob.starts[b])..<Int(byBlob.starts[b + 1])] }
        var blobLive = [UInt8](repeating: 0, count: index.blobs.count)
        for b in index.blobs.indices { blobLive[b] = UInt8(pagesOf(b).filter { live[Int($0)] }.count) }

        var packSizes: [PageID: Int64] = [:]
        for object in try repository.store.list(prefix: "packs/") {
            if let id = PageID(hex: String(object.key.split(separator: "/").last ?? "")) { packSizes[id] = object.size }
        }
        // Per pack: the bytes its live pages take (a blob's bytes shared by its pages).
        var liveBytes = [Double](repeating: 0, count: index.packs.count)
        var hasLive = [Bool](repeating: false, count: index.packs.count)
        for (b, blob) in index.blobs.enumerated() where blobLive[b] > 0 {
            liveBytes[Int(blob.pack)] += Double(blob.length) * Double(blobLive[b]) / Double(blob.pages)
            hasLive[Int(blob.pack)] = true
        }
        var deletePacks: [PageID] = [], rewritePacks: [Int] = []
        for (pack, size) in packSizes {
            guard let number = index.packNumber[pack], hasLive[Int(number)] else { deletePacks.append(pack); report.bytesFreed += size; continue }
            let n = Int(number)
            if liveBytes[n] < Double(size) * rewriteBelow {
                rewritePacks.append(n)
                report.bytesFreed += size - Int64(liveBytes[n]); report.bytesRepacked += Int64(liveBytes[n])
            } else { report.packsKept += 1 }
        }
        report.packsDeleted = deletePacks.count
        report.packsRewritten = rewritePacks.count
        report.pagesLive = live.filter { $0 }.count
        // Pages that leave the index: those of blobs with no live page, and
        // the dead pages of blobs that are rewritten.
        let rewriting = Set(rewritePacks)
        for (b, blob) in index.blobs.enumerated() where blobLive[b] == 0 || rewriting.contains(Int(blob.pack)) {
            report.pagesRemoved += Int(blob.pages) - Int(blobLive[b])
        }
        let allLists = try repository.store.list(prefix: "lists/").map(\.key)
        let deadLists = allLists.filter { !liveLists.contains($0) }
        report.listsDeleted = deadLists.count
        let nothingToDo = deletePacks.isEmpty && rewritePacks.isEmpty && report.pagesRemoved == 0
        report.indexObjectsReplaced = nothingToDo ? 0 : index.objectKeys.count
        if dryRun { return report }
        // Temporary files of killed runs in a folder repository go too.
        if let folder = repository.store as? FolderStore { folder.removeStaleTemporaryFiles() }

        // 1. Live pages of the packs to rewrite, into new packs: a blob whose
        // pages are all live as it is; the live pages of the others decompressed
        // and gathered into new blobs (by page size), in a second writer, since
        // each writer takes its blobs in the order it gave out their pages.
        let copies = PackWriter(repository: repository), regrouped = PackWriter(repository: repository)
        if let lock { copies.afterPack = { try lock.refresh() }; regrouped.afterPack = { try lock.refresh() } }
        let compressor = ZstdCompressor(level: Repository.blobLevel), decompressor = ZstdDecompressor()
        var group: [UInt8] = [], groupFirst = 0, groupLog2: UInt8 = 0
        func flushGroup() throws {
            guard !group.isEmpty else { return }
            let pageSize = 1 << Int(groupLog2)
            let blob = try group.withUnsafeBytes { try repository.blob(of: $0, compressor: compressor) }
            try regrouped.add(blob: blob, first: groupFirst, pages: group.count / pageSize, pageSizeLog2: groupLog2)
            group.removeAll(keepingCapacity: true)
        }
        func claimed(_ id: PageID) -> Bool { copies.position(of: id) != nil || regrouped.position(of: id) != nil }
        for n in rewritePacks.sorted(by: { index.packs[$0] < index.packs[$1] }) {
            let key = Repository.packKey(index.packs[n])
            progress("rewriting \(key)")
            let bytes = try repository.store.get(key)
            for b in byPack.blobs[Int(byPack.starts[n])..<Int(byPack.starts[n + 1])].map(Int.init) where blobLive[b] > 0 {
                let blob = index.blobs[b]
                let from = Int(blob.offset), to = from + Int(blob.length)
                guard to <= bytes.count else {
                    throw StoreError(.other, location: repository.objectName(key), message: "damaged pack: shorter than its index says; run `litectl verify --repo --read-data` (prune stopped before deleting anything)")
                }
                let positions = Array(pagesOf(b)), ids = positions.map { index.entries[Int($0)].id }
                // Live pages not already taken from another copy (a page stored twice).
                let wanted = positions.indices.filter { live[Int(positions[$0])] && !claimed(ids[$0]) }
                if wanted.isEmpty { continue }
                if wanted.count == ids.count {
                    let first = ids.map { copies.claim($0)! }[0]
                    try copies.add(blob: Array(bytes[from..<to]), first: first, pages: ids.count, pageSizeLog2: blob.pageSizeLog2)
                    continue
                }
                // Version 1 blobs hold one page, so they never get here.
                precondition(blob.pageSizeLog2 != 0, "a partly live blob of one page")
                let pageSize = 1 << Int(blob.pageSizeLog2)
                let raw = try repository.pages(fromBlob: Array(bytes[from..<to]), pages: ids.count, pageSize: pageSize,
                                               ids: ids.map { Optional($0) }, decompressor: decompressor, what: repository.objectName(key))
                for slot in wanted {
                    if !group.isEmpty && (groupLog2 != blob.pageSizeLog2 || group.count / pageSize >= repository.blobPages(pageSize: pageSize)) {
                        try flushGroup()
                    }
                    let q = regrouped.claim(ids[slot])!
                    if group.isEmpty { groupFirst = q; groupLog2 = blob.pageSizeLog2 }
                    group.append(contentsOf: raw[slot * pageSize..<(slot + 1) * pageSize])
                }
            }
        }
        try flushGroup()
        try copies.flush()
        try regrouped.flush()
        // 2. One new index of every live blob (objects of at most 100,000 pages).
        if !nothingToDo {
            // (pack id, blob, ids) of every blob the new index lists.
            struct Out { var pack: PageID; var record: BlobRecord; var ids: [PageID] }
            var out: [Out] = []
            // (Blobs of a missing pack stay listed: verify reports them.)
            for (b, blob) in index.blobs.enumerated() where blobLive[b] > 0 && !rewriting.contains(Int(blob.pack)) {
                out.append(Out(pack: index.packs[Int(blob.pack)], record: blob, ids: pagesOf(b).map { index.entries[Int($0)].id }))
            }
            for writer in [copies, regrouped] {
                for b in 0..<writer.writtenBlobCount {
                    let record = writer.blobs[b]
                    out.append(Out(pack: writer.pack(ofBlob: b), record: record, ids: (0..<Int(record.pages)).map { writer.id(blob: b, slot: $0) }))
                }
            }
            var written = Set<String>()
            var start = 0
            while start < out.count {
                var end = start, pages = 0
                while end < out.count && (end == start || pages + out[end].ids.count <= pagesPerIndexObject) { pages += out[end].ids.count; end += 1 }
                var packs: [PageID] = [], numbers: [PageID: UInt32] = [:]
                for o in out[start..<end] where numbers[o.pack] == nil { numbers[o.pack] = UInt32(packs.count); packs.append(o.pack) }
                let chunk = out[start..<end]
                let object = IndexObject.encode(for: repository, packs: packs, blobCount: chunk.count, blob: { i in
                    var r = chunk[start + i].record; r.pack = numbers[chunk[start + i].pack]!; return r
                }, id: { i, slot in chunk[start + i].ids[slot] })
                let (id, _) = try repository.putObject(prefix: "index", object)
                written.insert("index/" + id)
                start = end
            }
            try lock?.refresh()
            // 3. The old index objects.
            for key in index.objectKeys where !written.contains(key) { try repository.store.delete(key) }
        }
        // 4. Old packs, and lists no snapshot needs. A pack this run wrote is
        // never deleted: rewriting the same live pages (after a prune killed
        // midway wrote them once already) makes a pack of the same name as one
        // that looked dead because the index also listed its pages elsewhere.
        let fresh = Set(copies.packs + regrouped.packs)
        for pack in deletePacks + rewritePacks.map({ index.packs[$0] }) where !fresh.contains(pack) {
            try repository.store.delete(Repository.packKey(pack))
        }
        for key in deadLists { try repository.store.delete(key) }
        return report
    }
}
