// Retention and space reclamation. `forget` removes snapshot objects by the
// folder retention's rules (per database and host); `prune`, under an
// exclusive lock, removes what no snapshot needs: packs nothing refers to are
// deleted, packs mostly garbage are rewritten with their live pages, and the
// index is rewritten. Order: new packs, new index, old index objects, then
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
}

public enum RepoForget {
    /// Which snapshots `policy` keeps, applied per (host, database path).
    /// Snapshots of other databases than `database` (a name or path) are kept.
    public static func decide(_ snapshots: [Snapshot], policy: RetentionPolicy, database: String? = nil) -> ForgetDecision {
        var groups: [String: [Snapshot]] = [:]
        var keep: [Snapshot] = [], remove: [Snapshot] = []
        for s in snapshots {
            if let database, s.database != database && s.path != database { keep.append(s); continue }
            groups[s.hostname + "\u{0}" + s.path, default: []].append(s)
        }
        for key in groups.keys.sorted() {
            let group = groups[key]!
            let kept = Retention.kept(times: group.map(\.time), policy: policy)
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

    public static func run(_ repository: Repository, dryRun: Bool, lock: RepoLock?,
                           progress: (String) -> Void = { _ in }) throws -> PruneReport {
        var report = PruneReport()
        let (snapshots, damaged) = try repository.snapshots()
        if let d = damaged.first {
            throw StoreError(.other, location: repository.objectName(d.key), message: "cannot read a snapshot, so prune cannot tell what it needs: \(d.error)")
        }
        // Every page and list a snapshot needs.
        var live = Set<PageID>()
        var liveLists = Set<String>()
        for s in snapshots {
            for key in try repository.listKeys(of: s) { liveLists.insert(key) }
            for id in try repository.pageIDs(of: s) { live.insert(id) }
        }
        let index = try repository.loadIndex()
        var packSizes: [PageID: Int64] = [:]
        for object in try repository.store.list(prefix: "packs/") {
            if let id = PageID(hex: String(object.key.split(separator: "/").last ?? "")) { packSizes[id] = object.size }
        }
        // Per pack: live entries and live bytes.
        var livePerPack: [PageID: [Int]] = [:]
        var liveBytes: [PageID: Int64] = [:]
        var indexedPacks = Set<PageID>()
        for (i, at) in index.locations.enumerated() {
            indexedPacks.insert(at.pack)
            if live.contains(index.ids[i]) {
                livePerPack[at.pack, default: []].append(i)
                liveBytes[at.pack, default: 0] += Int64(at.length)
            }
        }
        for id in live where !index.contains(id) {
            throw StoreError(.other, location: repository.location, message: "a snapshot needs page \(id.hex.prefix(12)), which is not in the index; run `litectl verify --repo` (prune changes nothing)")
        }
        var deletePacks: [PageID] = [], rewritePacks: [PageID] = []
        for (pack, size) in packSizes {
            let used = liveBytes[pack] ?? 0
            if !indexedPacks.contains(pack) || used == 0 { deletePacks.append(pack); report.bytesFreed += size }
            else if Double(used) < Double(size) * rewriteBelow { rewritePacks.append(pack); report.bytesFreed += size - used; report.bytesRepacked += used }
            else { report.packsKept += 1 }
        }
        report.packsDeleted = deletePacks.count
        report.packsRewritten = rewritePacks.count
        report.pagesLive = live.count
        report.pagesRemoved = index.count - live.count
        let allLists = try repository.store.list(prefix: "lists/").map(\.key)
        let deadLists = allLists.filter { !liveLists.contains($0) }
        report.listsDeleted = deadLists.count
        let nothingToDo = deletePacks.isEmpty && rewritePacks.isEmpty && report.pagesRemoved == 0
        report.indexObjectsReplaced = nothingToDo ? 0 : index.objectKeys.count
        if dryRun { return report }
        // Temporary files of killed runs in a folder repository go too.
        if let folder = repository.store as? FolderStore { folder.removeStaleTemporaryFiles() }

        // 1. Live pages of the packs to rewrite, into new packs.
        let writer = PackWriter(repository: repository)
        if let lock { writer.afterPack = { try lock.refresh() } }
        var newEntries: [IndexEntry] = []
        for pack in rewritePacks.sorted() {
            let key = Repository.packKey(pack)
            progress("rewriting \(key)")
            let bytes = try repository.store.get(key)
            for i in livePerPack[pack] ?? [] {
                let at = index.locations[i]
                let from = Int(at.offset), to = from + Int(at.length)
                guard to <= bytes.count else {
                    throw StoreError(.other, location: repository.objectName(key), message: "damaged pack: shorter than its index says; run `litectl verify --repo --read-data` (prune stopped before deleting anything)")
                }
                try writer.add(index.ids[i], blob: Array(bytes[from..<to]))
            }
        }
        try writer.flush()
        newEntries = writer.written
        // 2. One new index of every live page (split in objects of at most 100,000 entries).
        if !nothingToDo {
            let rewritten = Set(rewritePacks)
            var entries = newEntries
            for (pack, positions) in livePerPack where !rewritten.contains(pack) {
                for i in positions { entries.append(IndexEntry(id: index.ids[i], location: index.locations[i])) }
            }
            entries.sort { $0.id < $1.id }
            var written = Set<String>()
            var start = 0
            while start < entries.count {
                let end = min(entries.count, start + 100_000)
                let (id, _) = try repository.putObject(prefix: "index", IndexObject.encode(Array(entries[start..<end])))
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
        let fresh = Set(newEntries.map(\.location.pack))
        for pack in deletePacks + rewritePacks where !fresh.contains(pack) { try repository.store.delete(Repository.packKey(pack)) }
        for key in deadLists { try repository.store.delete(key) }
        return report
    }
}
