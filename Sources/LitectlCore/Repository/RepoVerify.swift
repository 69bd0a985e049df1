// Checks a repository: every snapshot's page list loads, each of its pages
// is in the index, and (snapshot version 2) the ids' SHA-256 is the one the
// snapshot recorded; every pack the index names exists and is long enough; with
// `readData`, every pack (or a random share of them) is read back and every
// page in it decompressed and rehashed. Problems are reported with the
// snapshots they damage.
import Foundation
import Crypto

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
    /// Segments and chains of `litectl replicate` checked (ReplicaVerify.swift).
    public var segments = 0
    public var chains = 0
    public var problems: [RepoProblem] = []
    /// Each replicated database's ranges and gaps (ChainHealth.swift): a gap is also a problem.
    public var histories: [DatabaseHistory] = []
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
        var damagedIndex: [(key: String, error: String)] = []
        let index = try repository.loadIndex(damaged: &damagedIndex)
        for d in damagedIndex {
            report.problems.append(RepoProblem(object: d.key, message: d.error, snapshots: []))
        }
        report.pagesIndexed = index.count
        var packSizes: [PageID: Int64] = [:]
        for object in try repository.store.list(prefix: "packs/") {
            if let id = PageID(hex: String(object.key.split(separator: "/").last ?? "")) { packSizes[id] = object.size }
        }
        report.packs = packSizes.count

        // Packs the index names: present and long enough.
        var badPacks: [PageID: String] = [:]
        var packExtent = [Int64](repeating: 0, count: index.packs.count)
        for blob in index.blobs {
            packExtent[Int(blob.pack)] = max(packExtent[Int(blob.pack)], Int64(blob.offset) + Int64(blob.length))
        }
        let indexedPacks = Set(index.packs)
        for (n, pack) in index.packs.enumerated() {
            guard let size = packSizes[pack] else { badPacks[pack] = "missing"; continue }
            if size < packExtent[n] { badPacks[pack] = "shorter (\(size) bytes) than its index says (\(packExtent[n]))" }
        }
        report.unreferencedPacks = packSizes.keys.filter { !indexedPacks.contains($0) }.count

        // Read back packs: every blob decompressed, every page rehashed.
        // Damaged pages by index position (the copy a restore would read).
        var badPages = Set<Int>()
        var badPageReason: [Int: String] = [:]
        if options.readDataPercent > 0 {
            var chosen = index.packs.indices.filter { badPacks[index.packs[$0]] == nil }.sorted { index.packs[$0] < index.packs[$1] }
            if options.readDataPercent < 100 {
                chosen.shuffle()
                chosen = Array(chosen.prefix(max(1, Int((Double(chosen.count) * options.readDataPercent / 100).rounded(.up)))))
            }
            let byBlob = index.entriesByBlob(), byPack = index.blobsByPack()
            // A version-1 blob does not record its page size: the sizes the
            // snapshots use first, then the others (pages only forgotten snapshots used).
            let used = Set(snapshots.map(\.pageSize))
            let pageSizes = used.sorted() + (9...16).map { 1 << $0 }.filter { !used.contains($0) }
            let next = Locked(0), failure = Locked<(any Error)?>(nil)
            let found = Locked((read: 0, pages: 0, missing: [PageID](), renamed: [PageID](), bad: [(pack: PageID, positions: [UInt32])]()))
            let remote = !(repository.store is FolderStore)
            let workers = max(1, min(chosen.count, remote ? 8 : ProcessInfo.processInfo.activeProcessorCount))
            try withoutActuallyEscaping(progress) { progress in
                nonisolated(unsafe) let progress = progress
                nonisolated(unsafe) let index = index, chosen = chosen
                DispatchQueue.concurrentPerform(iterations: workers) { _ in
                    let decompressor = ZstdDecompressor()
                    while failure.withLock({ $0 == nil }) {
                        let c = next.withLock { n -> Int in n += 1; return n - 1 }
                        guard c < chosen.count else { return }
                        let n = chosen[c], pack = index.packs[n]
                        let key = Repository.packKey(pack)
                        do {
                            let bytes: [UInt8]
                            do { bytes = try repository.store.get(key) } catch let error as StoreError where error.kind == .notFound {
                                found.withLock { $0.missing.append(pack) }; continue
                            }
                            // A pack is named by the SHA-256 of its bytes: another name is
                            // damage, or another pack put in its place.
                            if !SHA256.hash(data: bytes).elementsEqual(pack.bytes) { found.withLock { $0.renamed.append(pack) } }
                            var bad: [UInt32] = [], pages = 0
                            for b in byPack.blobs[Int(byPack.starts[n])..<Int(byPack.starts[n + 1])] {
                                let blob = index.blobs[Int(b)]
                                let positions = byBlob.positions[Int(byBlob.starts[Int(b)])..<Int(byBlob.starts[Int(b) + 1])]
                                let ids = positions.map { index.entries[Int($0)].id }
                                pages += ids.count
                                let from = Int(blob.offset), to = from + Int(blob.length)
                                guard to <= bytes.count else { bad += positions; continue }
                                let sealed = Array(bytes[from..<to])
                                let sizes = blob.pageSizeLog2 == 0 ? pageSizes : [1 << Int(blob.pageSizeLog2)]
                                let ok = sizes.contains { size in
                                    (try? repository.pages(fromBlob: sealed, pages: ids.count, pageSize: size, ids: ids,
                                                           decompressor: decompressor, what: key)) != nil
                                }
                                if !ok { bad += positions }
                            }
                            let done = found.withLock { f -> Int in
                                f.read += 1; f.pages += pages
                                if !bad.isEmpty { f.bad.append((pack, bad)) }
                                return f.read + f.missing.count
                            }
                            found.withLock { _ in progress(CopyProgress(pagesCopied: done, pageCount: chosen.count)) }
                        } catch {
                            failure.withLock { if $0 == nil { $0 = error } }
                        }
                    }
                }
            }
            if let error = failure.withLock({ $0 }) { throw error }
            let result = found.withLock { $0 }
            report.packsRead = result.read
            report.pagesRead = result.pages
            for pack in result.missing { badPacks[pack] = "missing" }
            for pack in result.renamed where badPacks[pack] == nil {
                badPacks[pack] = "damaged or swapped: its bytes' SHA-256 is not its name"
            }
            for (pack, positions) in result.bad.sorted(by: { $0.pack < $1.pack }) {
                for p in positions { badPages.insert(Int(p)); badPageReason[Int(p)] = Repository.packKey(pack) }
                report.problems.append(RepoProblem(object: Repository.packKey(pack), message: "\(positions.count) damaged page(s): content does not match its id", snapshots: []))
            }
        }
        for (pack, why) in badPacks.sorted(by: { $0.key < $1.key }) {
            report.problems.append(RepoProblem(object: Repository.packKey(pack), message: "pack \(why)", snapshots: []))
        }

        // Each snapshot: its list, and each page in the index, in a sound pack, not damaged.
        var problemOfPack: [String: Int] = [:]
        for (i, p) in report.problems.enumerated() where p.object.hasPrefix("packs/") { problemOfPack[p.object] = i }
        for snapshot in snapshots {
            let positions: [UInt32]
            var missing = 0
            do {
                positions = try repository.pagePositions(of: snapshot, index: index) { _, _ in missing += 1; return UInt32.max }
            } catch let error as StoreError where error.kind != .unavailable && error.kind != .denied {
                report.problems.append(RepoProblem(object: "snapshots/" + snapshot.id, message: "page list: \(error.description)", snapshots: [snapshot.id]))
                continue
            }
            var hitPacks = Set<String>()
            for position in Set(positions) where position != UInt32.max {
                let p = Int(position)
                let pack = index.packs[Int(index.blobs[Int(index.entries[p].blob)].pack)]
                if badPacks[pack] != nil || badPages.contains(p) { hitPacks.insert(badPageReason[p] ?? Repository.packKey(pack)) }
            }
            if missing > 0 {
                report.problems.append(RepoProblem(object: "snapshots/" + snapshot.id, message: "\(missing) page(s) not in the index", snapshots: [snapshot.id]))
            } else if let recorded = snapshot.pagesSHA256,
                      Array(PagesDigest.of(positions.lazy.map { index.entries[Int($0)].id }).utf8) != Array(recorded.utf8) {
                // A version-2 snapshot records its ids' digest: the list is checked against it
                // (when a page is missing from the index, that is the problem reported).
                report.problems.append(RepoProblem(object: "lists/" + snapshot.list, message: RepoRestore.listMismatch(snapshot, repository: repository, rebuilt: false),
                                                   snapshots: [snapshot.id]))
            }
            for key in hitPacks {
                if let i = problemOfPack[key] { report.problems[i].snapshots.append(snapshot.id) }
            }
        }
        if repository.holdsSegments {
            try checkChains(repository, snapshots: snapshots, index: index, report: &report) { p in
                let pack = index.packs[Int(index.blobs[Int(index.entries[p].blob)].pack)]
                return badPacks[pack] != nil || badPages.contains(p) ? (badPageReason[p] ?? Repository.packKey(pack)) : nil
            }
            try checkWindows(repository, snapshots: snapshots, report: &report) { id in
                guard let p = index.position(of: id) else { return "page id \(id.hex.prefix(12)) is not in the index" }
                let pack = index.packs[Int(index.blobs[Int(index.entries[p].blob)].pack)]
                if badPages.contains(p) { return "\(badPageReason[p] ?? Repository.packKey(pack)) holds it damaged" }
                return badPacks[pack].map { "\(Repository.packKey(pack)): pack \($0)" }
            }
        }
        return report
    }
}
