// A snapshot back into a database file: every page fetched (packs on every
// core, byte ranges of them) and written at its place in a temporary file
// beside TARGET; then the file is proven to be the one the backup read (its
// SHA-256, or each page against its id and the ids' SHA-256, as the snapshot
// recorded; a damaged page names its pack) and its logical hash compared, quick_check or
// integrity_check run when asked or when the backup did not check the copy,
// and the file lands as `litectl restore` lands a backup (renamed into place
// for a new TARGET or one no other process has open, the old content kept;
// else the backup API in one transaction).
// Built on the folder restore (Backup/Restore.swift).
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct RepoRestoreRequest: Sendable {
    public var snapshot: Snapshot
    public var target: String
    public var force = false
    public var keepOld = true
    public var timeout: Double = 60
    /// The SQLite check of the rebuilt file: nil (the default) runs
    /// quick_check only when the backup did not check the copy, since the
    /// file is proven to be that very copy; quick or full to run one anyway.
    public var verify: VerifyLevel?
    /// Other files the restore reads (the key or passphrase file): never the target.
    public var otherInputs: [String] = []
    /// The page ids to restore instead of the snapshot's list: a state of a
    /// chain of `litectl replicate` (Repository/ReplicaChains.swift, RestorePoint.request), which
    /// `snapshot` then describes (its page size and count, and the ids'
    /// `pages_sha256`).
    public var pageIDs: [PageID]?
    /// Write an existing target in place even when a rename could replace it (RestoreRequest.inPlace).
    public var inPlace = false
    public init(snapshot: Snapshot, target: String) { self.snapshot = snapshot; self.target = target }
}

public struct RepoRestoreOutcome: Sendable {
    public var keptOld: String?
    public var replacedExisting: Bool
    public var pages: Int
    public var bytesFetched: Int64
    /// Pages whose row sums the logical hash took from this host's cache
    /// (RowSumCache), and pages whose rows it decoded.
    public var hashPagesReused = 0, hashPagesDecoded = 0
    /// Why an existing target was written in place (RestoreOutcome.inPlaceBecause).
    public var inPlaceBecause: String?
}

public enum RepoRestore {
    public static func run(_ request: RepoRestoreRequest, repository: Repository,
                           progress: (CopyProgress) -> Void = { _ in }) throws -> RepoRestoreOutcome {
        let snapshot = request.snapshot
        if let folder = repository.store as? FolderStore {
            try SameFileRule.require(output: request.target, outside: folder.root, what: "the repository")
        }
        try SameFileRule.require(output: request.target, apartFrom: request.otherInputs, what: "the repository's key or passphrase file")
        let targetExists = try Restore.checkTarget(request.target, force: request.force)
        let folder = DurableFolder.parent(of: request.target)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder: \(folder)", path: request.target)
        }
        // What a restore of this TARGET killed with SIGKILL left beside it.
        TemporaryFiles.removeStale(in: folder, stem: DurableFolder.baseName(of: request.target))
        let file = try TemporaryFile(in: folder, stem: DurableFolder.baseName(of: request.target),
                                     permissions: targetExists ? try DurableFolder.permissions(of: request.target) : 0o644)
        defer { file.discard() }
        // The index is let go before the checks; the pages' ids are kept for the
        // logical hash, and each page's pack to name it should the file differ.
        // A pack removed after the index was read (a prune, or replicate
        // storing a minute's pages again, which write their replacement
        // first): the index is read again, once.
        let (fetched, ids, packs) = try Self.retryingOnce { () throws -> (Int64, [PageID], PagePacks) in
            let index = try repository.loadIndex()
            func missing(_ n: Int, _ id: PageID) throws -> UInt32 {
                throw StoreError(.notFound, location: repository.location, message: "page \(n + 1) (\(id.hex.prefix(12))) is not in the repository's index; run `litectl verify --repo`")
            }
            let positions = try request.pageIDs.map { ids in
                try ids.enumerated().map { n, id in try index.position(of: id).map { UInt32($0) } ?? missing(n, id) }
            } ?? repository.pagePositions(of: snapshot, index: index, missing: missing)
            let fetched: Int64
            do {
                fetched = try writePages(positions, pageSize: snapshot.pageSize, index: index, repository: repository,
                                         into: file, progress: progress)
            } catch var error as DatabaseError where error.path == file.path {
                // A full disk names TARGET, and says it stays as it was.
                error.path = request.target
                throw InPlaceWrite.failure(error, target: request.target,
                                           consequence: targetExists ? "nothing restored, \(DurableFolder.baseName(of: request.target)) is as it was" : "nothing restored")
            }
            return (fetched, positions.map { index.entries[Int($0)].id },
                    PagePacks(of: positions.map { index.blobs[Int(index.entries[Int($0)].blob)].pack }, names: index.packs))
        }
        let level = request.verify ?? Self.defaultCheck(for: snapshot)
        // The checks only read the file, each on a thread of its own beside
        // the fsync (which waits on the disk): the logical hash (on every
        // core), the proof (`prove`), and the SQLite check, if any, whose
        // outcome counts only for a proven file. (A file too damaged to hash
        // or to check is named by the proof first.)
        let cacheFile = RowSumCache.location(repository: repository.id, host: snapshot.hostname, path: snapshot.path)
        let ((logical, ()), (proof, facts)) = try Concurrently.run({ () throws -> (Result<LogicalHash, any Error>, Void) in
            // (A state of a replicated chain records no logical hash: nothing to sum.)
            try Concurrently.run({ snapshot.logicalHash.isEmpty ? .success(LogicalHash(digest: "", reused: 0, decoded: 0))
                                       : Result { try logicalHash(of: file.path, ids: ids, pageSize: snapshot.pageSize, cacheFile: cacheFile) } },
                                 { try file.sync() })
        }, { () throws -> (Proof, CopyFacts?) in
            let path = file.path
            let (check, proof) = try Concurrently.run({ level == .none ? nil : Result { try BackupJob.inspect(path, verify: level) } },
                                                      { try prove(path, snapshot: snapshot, ids: ids, packs: packs, repository: repository) })
            guard case .proven = proof else { return (proof, nil) }
            return (proof, try check?.get())
        })
        switch proof {
        case .proven: break
        case .damagedPack(let damage): throw damage
        case .listDiffers:
            throw DatabaseError(code: .corrupt, message: listMismatch(snapshot, repository: repository) + "; nothing restored", path: request.target)
        }
        if let facts, !facts.passed {
            throw DatabaseError(code: .corrupt, message: "the rebuilt database fails \(level == .quick ? "quick_check" : "integrity_check"), nothing restored: \(facts.checkResult)", path: request.target)
        }
        let summed = try logical.get()
        guard summed.digest == snapshot.logicalHash else {
            throw DatabaseError(code: .corrupt, message: "the rebuilt database's logical hash differs from the snapshot's; nothing restored", path: request.target)
        }
        var outcome = RepoRestoreOutcome(keptOld: nil, replacedExisting: targetExists, pages: snapshot.pageCount, bytesFetched: fetched,
                                         hashPagesReused: summed.reused, hashPagesDecoded: summed.decoded)
        if !targetExists {
            try file.commit(as: request.target, replace: false)
            return outcome
        }
        var restore = RestoreRequest(backup: file.path, target: request.target)
        restore.force = true
        restore.keepOld = request.keepOld
        restore.timeout = request.timeout
        restore.inPlace = request.inPlace
        let landed = try Restore.land(rebuilt: file, into: restore)
        outcome.keptOld = landed.keptOld
        outcome.inPlaceBecause = landed.inPlaceBecause
        return outcome
    }

    /// The rebuilt file's logical hash (`litectl hash`), summed page by page
    /// as the backup summed it: a page whose number, table and id are those
    /// of a page the last backup of the database on this host decoded takes
    /// that backup's row sums from the host's cache (RowSumCache), every other
    /// page is decoded. The result counts only once the file is proven to be
    /// the snapshot's (`prove`): then every page is the one its id names, and
    /// a cached sum is the sum of those very bytes.
    /// A restore on another host, or with LITECTL_CACHE_DIR set empty,
    /// decodes every row. The cache is only read.
    static func logicalHash(of path: String, ids: [PageID], pageSize: Int, cacheFile: String?) throws -> LogicalHash {
        guard let sums = try? PageRowSums(path: path, cacheFile: cacheFile, writeCache: false) else {
            return LogicalHash(digest: try ContentHasher.hash(path: path).digest, reused: 0, decoded: 0)
        }
        try sums.add(file: path, ids: ids, pageSize: pageSize, threads: ProcessInfo.processInfo.activeProcessorCount)
        return LogicalHash(digest: try sums.finish(), reused: sums.reused, decoded: sums.decoded)
    }

    struct LogicalHash { var digest: String; var reused: Int; var decoded: Int }

    /// `body`, run again once when an object it read was not found.
    static func retryingOnce<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as StoreError where error.kind == .notFound { return try body() }
    }

    /// The SQLite check a restore runs by default: none when the snapshot
    /// records that its copy passed quick_check or integrity_check (the
    /// rebuilt file is that copy, byte for byte, by `prove` and its logical
    /// hash), quick_check when the backup skipped it.
    public static func defaultCheck(for snapshot: Snapshot) -> VerifyLevel {
        snapshot.verification == "quick_check ok" || snapshot.verification == "integrity_check ok" ? .none : .quick
    }

    /// Fetches every page of `ids` and writes it at its place; returns the bytes
    /// fetched. Packs are read on every core (several at a time from a server):
    /// each blob fetched once (neighbours in one read: `Reads`),
    /// decompressed once, each page it holds for the snapshot written wherever
    /// the snapshot has it. Pages are not checked against their ids here but
    /// after, by `prove`: one SHA-256 pass over the file instead of two.
    static func writePages(_ positions: [UInt32], pageSize: Int, index: RepoIndex, repository: Repository,
                           into file: TemporaryFile, progress: (CopyProgress) -> Void) throws -> Int64 {
        let pageCount = positions.count
        for (n, p) in positions.enumerated() {
            let blob = index.blobs[Int(index.entries[Int(p)].blob)]
            if blob.pageSizeLog2 != 0 && 1 << Int(blob.pageSizeLog2) != pageSize {
                throw StoreError(.other, location: repository.location, message: "damaged index: page \(n + 1) (\(index.entries[Int(p)].id.hex.prefix(12))) is in a blob of \(1 << Int(blob.pageSizeLog2))-byte pages, the snapshot's are \(pageSize) bytes")
            }
        }
        // Page numbers in (pack, offset, slot) order: one pass per pack.
        var keys = positions.enumerated().map { n, p -> (UInt64, UInt64) in
            let entry = index.entries[Int(p)], blob = index.blobs[Int(entry.blob)]
            return (UInt64(blob.pack) << 32 | UInt64(blob.offset), UInt64(entry.slot) << 32 | UInt64(n))
        }
        keys.withUnsafeMutableBufferPointer { InPlaceSort.sort($0) { $0 < $1 } }
        let order = keys.map { UInt32(truncatingIfNeeded: $0.1) }
        // Where each pack's pages start in `order`.
        var packStarts: [Int] = []
        for i in keys.indices where i == 0 || keys[i].0 >> 32 != keys[i - 1].0 >> 32 { packStarts.append(i) }
        packStarts.append(order.count)
        keys = []
        if ftruncate(file.descriptor, off_t(pageCount) * off_t(pageSize)) != 0 {
            throw DatabaseError(code: .full, message: "cannot size the file: \(String(cString: strerror(errno)))", path: file.path)
        }
        let packCount = packStarts.count - 1
        let remote = !(repository.store is FolderStore)
        let workers = max(1, min(packCount, remote ? 8 : ProcessInfo.processInfo.activeProcessorCount))
        let reads = remote ? Reads.server : Reads.folder
        let next = Locked(0), failure = Locked<(any Error)?>(nil)
        let state = Locked((fetched: Int64(0), done: 0))
        let descriptor = file.descriptor, path = file.path
        try withoutActuallyEscaping(progress) { progress in
            nonisolated(unsafe) let progress = progress
            nonisolated(unsafe) let order = order, positions = positions, index = index, packStarts = packStarts
            DispatchQueue.concurrentPerform(iterations: workers) { _ in
                let decompressor = ZstdDecompressor(), buffers = Buffers()
                while failure.withLock({ $0 == nil }) {
                    let p = next.withLock { n -> Int in n += 1; return n - 1 }
                    guard p < packCount else { return }
                    do {
                        let (fetched, pages) = try restorePack(order[packStarts[p]..<packStarts[p + 1]], positions: positions, index: index,
                                                               pageSize: pageSize, reads: reads, repository: repository, decompressor: decompressor, buffers: buffers,
                                                               descriptor: descriptor, path: path)
                        let now = state.withLock { s -> Int in s.fetched += fetched; s.done += pages; return s.done }
                        state.withLock { _ in progress(CopyProgress(pagesCopied: now, pageCount: pageCount)) }
                    } catch {
                        failure.withLock { if $0 == nil { $0 = error } }
                    }
                }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return state.withLock { $0.fetched }
    }

    /// How blobs of one pack are read together: a blob and the next ones
    /// needed that start within `gap` bytes of its end, up to `most` bytes in
    /// one read (memory stays flat with several readers). From a server a
    /// request costs about as much as a megabyte more of its answer (tens of
    /// milliseconds against S3; moto, on loopback, answers a 4 KiB range in
    /// 6.5 ms, 1 MiB in 5.7 ms and a whole 4.2 MB pack in 8.8 ms, medians
    /// of 10): a gathering's pack of 1 MiB, whose pages of a state lie among
    /// the other versions of the period, is one read instead of five or
    /// six, a backup's pack (4 MiB and a blob) one instead of two.
    struct Reads { var gap: Int; var most: Int
        static let folder = Reads(gap: 64 << 10, most: 1 << 20)
        static let server = Reads(gap: 1 << 20, most: 8 << 20)

        /// The read that begins with item `items.lowerBound` of blobs in
        /// offset order (`offset` and `length` of item i): the items it takes
        /// (up to `end`) and its byte range. It always takes the first.
        func cut(_ items: Range<Int>, offset: (Int) -> Int, length: (Int) -> Int) -> (end: Int, from: Int, to: Int) {
            let from = offset(items.lowerBound)
            var to = from, j = items.lowerBound
            while j < items.upperBound {
                let o = offset(j), l = length(j)
                if j > items.lowerBound && (o > to + gap || o + l - from > most) { break }
                to = max(to, o + l); j += 1
            }
            return (j, from, to)
        }
    }

    /// A worker's buffers, reused from read to read: what it read of a pack, and a blob's pages.
    final class Buffers { var read: [UInt8] = [], pages: [UInt8] = [] }

    /// One pack's share of a restore: `pages` are page numbers in (offset, slot) order.
    private static func restorePack(_ pages: ArraySlice<UInt32>, positions: [UInt32], index: RepoIndex, pageSize: Int, reads: Reads,
                                    repository: Repository, decompressor: ZstdDecompressor, buffers: Buffers,
                                    descriptor: Int32, path: String) throws -> (fetched: Int64, pages: Int) {
        func blob(of n: UInt32) -> BlobRecord { index.blobs[Int(index.entries[Int(positions[Int(n)])].blob)] }
        let first = blob(of: pages[pages.startIndex])
        let key = Repository.packKey(index.packs[Int(first.pack)])
        let what = repository.objectName(key)
        var fetched: Int64 = 0
        var i = pages.startIndex
        while i < pages.endIndex {
            // One read: this blob and the next ones (`reads`).
            let (j, from, to) = reads.cut(i..<pages.endIndex, offset: { Int(blob(of: pages[$0]).offset) },
                                          length: { Int(blob(of: pages[$0]).length) })
            let count = try repository.store.get(key, offset: Int64(from), length: to - from, into: &buffers.read)
            fetched += Int64(count)
            var k = i
            while k < j {
                // The pages this blob holds for the snapshot: pages[k..<end].
                let entry = index.entries[Int(positions[Int(pages[k])])]
                let record = index.blobs[Int(entry.blob)]
                var end = k
                while end < j && index.entries[Int(positions[Int(pages[end])])].blob == entry.blob { end += 1 }
                let lo = Int(record.offset) - from, hi = lo + Int(record.length)
                guard hi <= count else {
                    throw StoreError(.other, location: what, message: "damaged pack: shorter than its index says")
                }
                for m in k..<end where Int(index.entries[Int(positions[Int(pages[m])])].slot) >= Int(record.pages) {
                    throw StoreError(.other, location: what, message: "damaged index: slot past its blob")
                }
                try buffers.read.withUnsafeBytes { read in
                    try repository.pages(fromBlob: UnsafeRawBufferPointer(rebasing: read[lo..<hi]), pages: Int(record.pages), pageSize: pageSize,
                                         ids: [], decompressor: decompressor, what: what, into: &buffers.pages)
                }
                // Runs of pages that follow each other both in the blob and in
                // the file (a first backup's blobs are such runs) in one write each.
                func slot(_ m: Int) -> Int { Int(index.entries[Int(positions[Int(pages[m])])].slot) }
                try buffers.pages.withUnsafeBytes { all in
                    var m = k
                    while m < end {
                        let first = slot(m)
                        var run = 1
                        while m + run < end && pages[m + run] == pages[m] + UInt32(run) && slot(m + run) == first + run { run += 1 }
                        try writeAll(descriptor, UnsafeRawBufferPointer(rebasing: all[first * pageSize..<(first + run) * pageSize]),
                                     at: off_t(pages[m]) * off_t(pageSize), path: path)
                        m += run
                    }
                }
                k = end
            }
            i = j
        }
        return (fetched, pages.count)
    }

    /// Each page's pack, kept from the index the restore read (4 bytes a page).
    struct PagePacks {
        var of: [UInt32]
        var names: [PageID]
    }

    /// What the check of the rebuilt file found.
    enum Proof {
        /// It is the file the backup read, page for page.
        case proven
        /// A page differs from its id: the error names its pack.
        case damagedPack(StoreError)
        /// Every page matches its id, yet the digest the snapshot recorded
        /// (the file's SHA-256, or the page ids') differs.
        case listDiffers
    }

    /// Proves the rebuilt file to be the one the snapshot recorded: for a
    /// version-1 snapshot, the file's SHA-256 (and each page against its id
    /// only when that differs, to name the pack); for a version-2 snapshot,
    /// each page against its id, then the ids' digest against the snapshot's.
    static func prove(_ path: String, snapshot: Snapshot, ids: [PageID], packs: PagePacks,
                      repository: Repository) throws -> Proof {
        if let recorded = snapshot.pagesSHA256 {
            // The pages checked are those the list names: the file must hold no more.
            var info = stat()
            guard stat(path, &info) == 0, Int64(info.st_size) == Int64(ids.count) * Int64(snapshot.pageSize) else {
                throw DatabaseError(code: .ioerr, message: "the rebuilt file is not \(ids.count) pages long", path: path)
            }
            if let damage = try damagedPacks(path, ids: ids, packs: packs, pageSize: snapshot.pageSize, repository: repository) {
                return .damagedPack(damage)
            }
            return Array(PagesDigest.of(ids).utf8) == Array(recorded.utf8) ? .proven : .listDiffers
        }
        let digest = try FileStreams.digest(of: path)
        if Array(digest.sha256.utf8) == Array((snapshot.databaseSHA256 ?? "").utf8) { return .proven }
        // Which pages are not what the snapshot lists, and in which packs.
        if let damage = try damagedPacks(path, ids: ids, packs: packs, pageSize: snapshot.pageSize, repository: repository) {
            return .damagedPack(damage)
        }
        return .listDiffers
    }

    /// The one line that says a snapshot and its page list disagree, every
    /// page matching its id: the list (and its base, for a delta) or the
    /// snapshot is damaged, or a list was swapped for another.
    /// (`verify` says it without the rebuilt file, which it does not make.)
    static func listMismatch(_ snapshot: Snapshot, repository: Repository, rebuilt: Bool = true) -> String {
        let keys = (try? repository.listKeys(of: snapshot)) ?? ["lists/" + snapshot.list]
        let lists = keys.count > 1 ? "\(repository.objectName(keys[0])) (a delta on \(repository.objectName(keys[1])))" : repository.objectName(keys[0])
        if snapshot.pagesSHA256 != nil {
            return "the SHA-256 of the page ids in \(lists) does not match snapshot \(snapshot.shortID)'s pages_sha256"
                + (rebuilt ? ", though every page of the rebuilt file matches its id there" : "") + ": the list or the snapshot is damaged"
        }
        return "the rebuilt file's SHA-256 does not match snapshot \(snapshot.shortID)'s, though every page matches its id in the page list \(lists): the list or the snapshot is damaged"
    }

    /// Each page of the rebuilt file against its id
    /// (page n's is `ids[n - 1]`). The error names the pack of the first page
    /// that differs and counts the others; nil when every page matches.
    static func damagedPacks(_ path: String, ids: [PageID], packs: PagePacks, pageSize: Int,
                             repository: Repository) throws -> StoreError? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DatabaseError(code: .cantopen, message: "cannot open: \(String(cString: strerror(errno)))", path: path) }
        defer { close(fd) }
        let chunk = max(1, (2 << 20) / pageSize)
        var buffer = [UInt8](repeating: 0, count: chunk * pageSize)
        var damaged: [Int] = []
        var first = 0
        while first < ids.count {
            let count = min(chunk, ids.count - first)
            var got = 0
            while got < count * pageSize {
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, count * pageSize - got, off_t(first) * off_t(pageSize) + off_t(got)) }
                if n < 0 && errno == EINTR { continue }
                guard n >= 0 else { throw DatabaseError(code: .ioerr, message: "cannot read: \(String(cString: strerror(errno)))", path: path) }
                if n == 0 { break }  // a file cut short: its missing pages count as damaged
                got += n
            }
            buffer.withUnsafeBytes { bytes in
                for k in 0..<count {
                    let whole = (k + 1) * pageSize <= got
                    if !whole || repository.pageID(UnsafeRawBufferPointer(rebasing: bytes[k * pageSize..<(k + 1) * pageSize])) != ids[first + k] {
                        damaged.append(first + k)
                    }
                }
            }
            first += count
        }
        guard let page = damaged.first else { return nil }
        var named = Set<UInt32>()
        for n in damaged { named.insert(packs.of[n]) }
        var message = "damaged pack: page \(page + 1) of the snapshot (\(ids[page].hex.prefix(12))) does not match its id"
        if damaged.count > 1 { message += ", nor do \(damaged.count - 1) more" + (named.count > 1 ? " (in \(named.count) packs)" : "") }
        message += "; nothing restored (`litectl verify --repo --read-data` names the snapshots it damages)"
        return StoreError(.other, location: repository.objectName(Repository.packKey(packs.names[Int(packs.of[page])])), message: message)
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: off_t, path: String) throws {
        var written = 0
        while written < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, offset + off_t(written))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw DatabaseError(code: .full, message: "write failed: \(String(cString: strerror(errno)))", path: path)
            }
            written += n
        }
    }
}
