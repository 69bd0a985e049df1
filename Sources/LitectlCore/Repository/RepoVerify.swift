// Checks a repository: every snapshot's page list loads and each of its pages
// is in the index; every pack the index names exists and is long enough; with
// `readData`, every pack (or a random share of them) is read back and every
// page in it decompressed and rehashed. Problems are reported with the
// snapshots they damage.
public struct RepoVerifyOptions: Sendable {
    /// Share of packs to read back, 0 (none) to 100 (all).
    public var readDataPercent: Double = 0
    public init() {}
}

public struct RepoProblem: Sendable {
    /// The object concerned (a snapshot, list, pack or index key).
    public var object: String
    public var message: String
    /// Ids of the snapshots it damages.
    public var snapshots: [String]
}

public struct RepoVerifyReport: Sendable {
    public var snapshots = 0
    public var packs = 0
    public var packsRead = 0
    public var pagesIndexed = 0
    public var pagesRead = 0
    /// Packs no index refers to (left by killed runs; prune removes them).
    public var unreferencedPacks = 0
    public var problems: [RepoProblem] = []
    /// Ids of every damaged snapshot, sorted.
    public var damagedSnapshots: [String] {
        Array(Set(problems.flatMap(\.snapshots))).sorted()
    }
}

public enum RepoVerify {
    public static func run(_ repository: Repository, options: RepoVerifyOptions = RepoVerifyOptions(),
                           progress: (CopyProgress) -> Void = { _ in }) throws -> RepoVerifyReport {
        var report = RepoVerifyReport()
        let (snapshots, damaged) = try repository.snapshots()
        report.snapshots = snapshots.count + damaged.count
        for d in damaged {
            report.problems.append(RepoProblem(object: d.key, message: d.error, snapshots: [String(d.key.dropFirst("snapshots/".count))]))
        }
        let index = try repository.loadIndex()
        report.pagesIndexed = index.count
        var packSizes: [PageID: Int64] = [:]
        for object in try repository.store.list(prefix: "packs/") {
            if let id = PageID(hex: String(object.key.split(separator: "/").last ?? "")) { packSizes[id] = object.size }
        }
        report.packs = packSizes.count

        // Packs the index names: present and long enough.
        var badPacks: [PageID: String] = [:]
        var indexedPacks = Set<PageID>()
        var packExtent: [PageID: Int64] = [:]
        for location in index.locations {
            indexedPacks.insert(location.pack)
            packExtent[location.pack] = max(packExtent[location.pack] ?? 0, Int64(location.offset) + Int64(location.length))
        }
        for (pack, extent) in packExtent {
            guard let size = packSizes[pack] else { badPacks[pack] = "missing"; continue }
            if size < extent { badPacks[pack] = "shorter (\(size) bytes) than its index says (\(extent))" }
        }
        report.unreferencedPacks = packSizes.keys.filter { !indexedPacks.contains($0) }.count

        // Read back packs: every page rehashed.
        var badPages = Set<PageID>()
        var badPageReason: [PageID: String] = [:]
        if options.readDataPercent > 0 {
            var chosen = indexedPacks.filter { badPacks[$0] == nil }.sorted()
            if options.readDataPercent < 100 {
                chosen.shuffle()
                chosen = Array(chosen.prefix(max(1, Int((Double(chosen.count) * options.readDataPercent / 100).rounded(.up)))))
            }
            var entriesByPack: [PageID: [Int]] = [:]
            let chosenSet = Set(chosen)
            for (i, location) in index.locations.enumerated() where chosenSet.contains(location.pack) {
                entriesByPack[location.pack, default: []].append(i)
            }
            // The page size is not stored per blob: the sizes the snapshots use
            // first, then the others (pages only forgotten snapshots used).
            let used = Set(snapshots.map(\.pageSize))
            let pageSizes = used.sorted() + (9...16).map { 1 << $0 }.filter { !used.contains($0) }
            for (n, pack) in chosen.enumerated() {
                let key = Repository.packKey(pack)
                let bytes: [UInt8]
                do { bytes = try repository.store.get(key) } catch let error as StoreError where error.kind == .notFound {
                    badPacks[pack] = "missing"; continue
                }
                report.packsRead += 1
                var packBad = 0
                for i in entriesByPack[pack] ?? [] {
                    let id = index.ids[i], at = index.locations[i]
                    let from = Int(at.offset), to = from + Int(at.length)
                    report.pagesRead += 1
                    guard to <= bytes.count else { badPages.insert(id); packBad += 1; continue }
                    let blob = Array(bytes[from..<to])
                    let ok = pageSizes.contains { size in
                        (try? repository.page(fromBlob: blob, id: id, pageSize: size, what: key)) != nil
                    }
                    if !ok { badPages.insert(id); packBad += 1 }
                }
                if packBad > 0 {
                    for i in entriesByPack[pack] ?? [] where badPages.contains(index.ids[i]) {
                        badPageReason[index.ids[i]] = Repository.packKey(pack)
                    }
                    report.problems.append(RepoProblem(object: key, message: "\(packBad) damaged page(s): content does not match its id", snapshots: []))
                }
                progress(CopyProgress(pagesCopied: n + 1, pageCount: chosen.count))
            }
        }
        for (pack, why) in badPacks.sorted(by: { $0.key < $1.key }) {
            report.problems.append(RepoProblem(object: Repository.packKey(pack), message: "pack \(why)", snapshots: []))
        }

        // Each snapshot: its list, and each page in the index, in a sound pack, not damaged.
        var problemOfPack: [String: Int] = [:]
        for (i, p) in report.problems.enumerated() where p.object.hasPrefix("packs/") { problemOfPack[p.object] = i }
        for snapshot in snapshots {
            let ids: [PageID]
            do { ids = try repository.pageIDs(of: snapshot) } catch let error as StoreError where error.kind != .unavailable && error.kind != .denied {
                report.problems.append(RepoProblem(object: "snapshots/" + snapshot.id, message: "page list: \(error.description)", snapshots: [snapshot.id]))
                continue
            }
            var missing = 0
            var hitPacks = Set<String>()
            for id in Set(ids) {
                guard let at = index.location(of: id) else { missing += 1; continue }
                let key = Repository.packKey(at.pack)
                if badPacks[at.pack] != nil || badPages.contains(id) { hitPacks.insert(badPageReason[id] ?? key) }
            }
            if missing > 0 {
                report.problems.append(RepoProblem(object: "snapshots/" + snapshot.id, message: "\(missing) page(s) not in the index", snapshots: [snapshot.id]))
            }
            for key in hitPacks {
                if let i = problemOfPack[key] { report.problems[i].snapshots.append(snapshot.id) }
            }
        }
        return report
    }
}
