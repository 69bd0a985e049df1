// One database into a repository as a snapshot: the hot copy (backup API, one
// committed state, the folder backup's WAL and rollback rules) into a
// temporary file, then each page of the copy hashed (the snapshot records the
// SHA-256 of the ids in order; of the file, before repository version 3), the
// pages the repository lacks compressed into packs, and, in this order, the
// packs, the index object, the page list and the snapshot written: a run
// killed at any moment leaves at most objects nothing refers to, which
// `prune` removes. Of a WAL source, the temporary file keeps only page 1:
// the source's read transaction stays open after the copy, and the check,
// the row sums and the pages to store are read from that same snapshot.
// Built on the folder backup's hot copy and check (Backup/) and on the
// logical hash of `litectl hash` (Hash/ContentHash.swift, in the base).
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct RepoBackupRequest: Sendable {
    public var source: String
    public var tags: [String] = []
    public var verify: VerifyLevel = .quick
    public var copy = HotCopyOptions()
    /// Where the temporary copy goes (default: $TMPDIR or /tmp).
    public var temporaryFolder: String?
    /// Refuse an empty source; flag one that shrank since its last snapshot.
    public var shrink = SourceShrinkPolicy()
    /// Take the pages' ids from the copy's writes when it allows (false:
    /// from a scan of the whole copy, to compare the two).
    public var pagesFromWrites = true
    /// Read a WAL source's pages from its snapshot rather than from a whole
    /// temporary copy when it allows (false: from a whole copy, to compare).
    public var readsSourceSnapshot = true
    /// Blobs carry zstd's content checksum (false: as litectl wrote them
    /// before 2026-11-26, for tests that read such repositories).
    public var frameChecksums = true
    public init(source: String) { self.source = source }
}

public struct RepoBackupProgress: Sendable {
    public enum Phase: String, Sendable { case copying = "copying", storing = "storing" }
    public var phase: Phase
    public var pages: Int
    public var pageCount: Int
}

public struct RepoBackupOutcome: Sendable {
    public var snapshot: Snapshot
    public var pagesRead: Int
    public var pagesNew: Int
    public var bytesAdded: Int64
    public var packsWritten: Int
    public var seconds: Double
    /// Pages whose rows the logical hash summed anew, and pages whose sums it
    /// took from the last backup of the database (both 0 when it was not summed page by page).
    public var hashPagesDecoded = 0
    public var hashPagesReused = 0
    /// Whether the pages' ids came from the copy's writes (the usual case),
    /// rather than from a scan of the whole copy.
    public var pagesFromWrites = false
    /// Whether the pages were read from the source's snapshot (a WAL source),
    /// the temporary copy keeping only page 1, rather than from a whole copy.
    public var pagesFromSource = false
    /// Whether the check ran beside the copy, on a second connection to the same snapshot.
    var checkedDuringCopy = false
    /// Set when the source lost most of its pages since its last snapshot
    /// (of this host and path; `RepoBackupRequest.shrink`).
    public var shrink: SourceShrink? = nil
}

/// The repository's index as this process knows it, shared by the backups a
/// run makes (one at a time or several at once): the index read at the start,
/// which does not change during the run, and the pages that the run's
/// finished backups stored since.
public final class SharedIndex: @unchecked Sendable {
    let base: RepoIndex
    private var added = Set<PageID>()
    private var mutex = pthread_mutex_t()

    public init(_ index: RepoIndex) { base = index; pthread_mutex_init(&mutex, nil) }

    /// Whether an earlier backup of this run stored the page.
    func addedContains(_ id: PageID) -> Bool {
        pthread_mutex_lock(&mutex); defer { pthread_mutex_unlock(&mutex) }
        return added.contains(id)
    }

    func add<S: Sequence>(_ ids: S) where S.Element == PageID {
        pthread_mutex_lock(&mutex); defer { pthread_mutex_unlock(&mutex) }
        added.formUnion(ids)
    }

    var hasAdded: Bool {
        pthread_mutex_lock(&mutex); defer { pthread_mutex_unlock(&mutex) }
        return !added.isEmpty
    }
}

/// One value handed from one thread to another: `take` waits for `put`.
final class Offer<T>: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: T?
    private var given = false

    func put(_ v: T) {
        condition.lock(); defer { condition.unlock() }
        if !given { value = v; given = true; condition.broadcast() }
    }

    func take() -> T {
        condition.lock(); defer { condition.unlock() }
        while !given { condition.wait() }
        return value!
    }
}

/// A snapshot's pages as 4-byte references while a backup runs, rather than
/// 32-byte ids: a position in the shared index, a page this backup stored, or
/// (rarely) a page another backup of the same run stored, kept whole.
struct PageRefs {
    static let own: UInt32 = 1 << 31, other: UInt32 = 3 << 30, kindMask: UInt32 = 3 << 30
    /// Never equal to a reference (an id the index lacks, in a parent's list).
    static let none = UInt32.max
    var refs: [UInt32] = []
    var others: [PageID] = []

    mutating func appendOther(_ id: PageID) {
        refs.append(Self.other | UInt32(others.count)); others.append(id)
    }

    func id(_ i: Int, index: RepoIndex, writer: PackWriter) -> PageID {
        let r = refs[i]
        switch r & Self.kindMask {
        case Self.other: return others[Int(r & ~Self.kindMask)]
        case Self.own: return writer.ids[Int(r & ~Self.own)]
        default: return index.entries[Int(r)].id
        }
    }
}

public enum RepoBackup {
    static let temporaryStem = "litectl-snapshot"

    /// Makes one snapshot of `request.source`. `snapshots` are the
    /// repository's snapshots (to find the parent whose page list the new
    /// one is a delta on); `lock` is refreshed as packs are written.
    public static func run(_ request: RepoBackupRequest, repository: Repository, index: SharedIndex,
                           snapshots: [Snapshot], lock: RepoLock?, rememberPages: Bool = true,
                           progress: (RepoBackupProgress) -> Void = { _ in }) throws -> RepoBackupOutcome {
        do {
            return try run(request, repository: repository, index: index, snapshots: snapshots, lock: lock,
                           rememberPages: rememberPages, keepSnapshot: request.pagesFromWrites && request.readsSourceSnapshot, progress: progress)
        } catch is CopyNotKept {
            // The copy that kept only page 1 cannot be used (not expected): again, keeping it whole.
            return try run(request, repository: repository, index: index, snapshots: snapshots, lock: lock,
                           rememberPages: rememberPages, keepSnapshot: false, progress: progress)
        }
    }

    /// A copy that kept only page 1 whose pages cannot be taken from the
    /// source's snapshot after all; nothing was stored yet.
    struct CopyNotKept: Error {}

    static func run(_ request: RepoBackupRequest, repository: Repository, index: SharedIndex,
                    snapshots: [Snapshot], lock: RepoLock?, rememberPages: Bool, keepSnapshot: Bool,
                    progress: (RepoBackupProgress) -> Void) throws -> RepoBackupOutcome {
        let started = Clock.wall(), startedMono = Clock.now()
        let source = try HotCopy.openSource(request.source, timeout: request.copy.timeout)
        // Closing ends the read transaction a kept snapshot leaves open.
        defer { try? source.close() }
        try EmptySource.require(source, path: request.source, policy: request.shrink, timeout: request.copy.timeout)
        let sourcePath = FilePaths.resolved(request.source)
        let folder = TemporaryFiles.folder(request.temporaryFolder)
        let copyFile = try TemporaryFile(in: folder, stem: temporaryStem, permissions: 0o600)
        defer { copyFile.discard() }
        var copyOptions = request.copy
        copyOptions.vacuum = false
        copyOptions.memoryMapped = false  // memory stays flat whatever the database size
        copyOptions.writeback = false     // a scratch copy: read back, then deleted
        // The copy's pages are hashed and looked up as they are written.
        let collector = PageCollector(repository: repository, index: index,
                                      writer: PackWriter(repository: repository, frameChecksums: request.frameChecksums))
        copyOptions.hashWrites = true
        // A version-3 repository's snapshot records its pages' digest, not the file's SHA-256.
        copyOptions.digestFile = !repository.recordsPagesDigest
        copyOptions.pageObserver = collector
        copyOptions.keepSourceSnapshot = keepSnapshot
        // A kept snapshot is checked while the copy goes on, on a connection of its own.
        let snapshotKnown = Offer<SourceSnapshot?>()
        if keepSnapshot { copyOptions.snapshotKnown = { snapshotKnown.put($0) } }
        func copy() throws -> HotCopyResult {
            do {
                return try HotCopy.copy(from: source, into: copyFile.path, options: copyOptions) {
                    progress(RepoBackupProgress(phase: .copying, pages: $0.pagesCopied, pageCount: $0.pageCount))
                }
            } catch var error as DatabaseError {
                // A copy that kept only page 1 failing on its own side: again, whole.
                if keepSnapshot && error.path == copyFile.path && error.code.primary == .ioerr && snapshotKnown.take() != nil { throw CopyNotKept() }
                if error.path == copyFile.path {
                    error.path = request.source
                    error.message = "cannot make the temporary copy in \(folder): " + error.message
                }
                throw error
            }
        }
        // (Waited for by the check below, or when the run ends.)
        let earlyCheck = keepSnapshot ? Concurrently.start { checkBeside(snapshotKnown.take(), source: request.source, request: request) } : nil
        let result = try copy()
        let checkedBeside = Locked(false)
        // With a kept snapshot, the source's read transaction is still open:
        // the checks, the row sums and the pages read from there. Without, the copy is all.
        let kept = result.sourceSnapshot
        if kept != nil {
            guard result.digest != nil, !collector.broken else { throw CopyNotKept() }
        } else {
            try? source.close()
        }

        // The checks of the copy run beside the page scan (they only read it),
        // each on a thread of its own: the scan, the quick_check, the logical hash.
        // (With a kept snapshot, the scan reads the pages through the source
        // connection's file handles, and the quick_check has run beside the
        // copy on a connection of its own, or runs on the source's after the scan.)
        func naming<T>(_ body: () throws -> T) throws -> T {
            do {
                return try body()
            } catch let error as DatabaseError where error.code.primary == .corrupt || error.code.primary == .notadb {
                // A copy too damaged for the check to run: name the source, not our temporary file.
                throw DatabaseError(code: .corrupt, message: "the copy fails \(request.verify == .full ? "integrity_check" : "quick_check"), so the source database is corrupt; no snapshot made: \(error.message)",
                                    path: request.source)
            }
        }
        // nil: the check of a kept snapshot that could not run beside the copy,
        // made on the source's connection once the scan no longer reads through it.
        func check() throws -> CopyFacts? {
            try naming {
                if let early = try earlyCheck?.wait() { checkedBeside.withLock { $0 = true }; return try early.get() }
                if kept != nil { return nil }
                return try BackupJob.inspect(copyFile.path, verify: request.verify)
            }
        }
        // The logical hash is summed page by page in the scan, reusing the sums
        // of the pages the last backup of this database met (RowSumCache);
        // when the copy cannot be read that way, it is computed on a thread of its own.
        let sourceHost = RepoLock.hostname
        let cacheFile = RowSumCache.location(repository: repository.id, host: sourceHost, path: sourcePath)
        let rowSums = kept.map { try? PageRowSums(source, walIndex: $0.walIndex, ownsTransaction: false, cacheFile: cacheFile) }
            ?? (try? PageRowSums(path: copyFile.path, cacheFile: cacheFile))
        // While the check runs, the scan keeps to one thread: the check is one
        // thread's work that cannot be split, and on a small change it is
        // the longest; the scan's work can wait for the core it leaves.
        let checking = Locked(false)
        // The parent's page list, which the new one is compared with, is
        // read once the scan is done, beside the check when it still runs.
        let parent = snapshots.last { sameBytes($0.path, sourcePath) && sameBytes($0.hostname, RepoLock.hostname) }
        let parentListRead = Locked<Concurrently.Pending<ParentList?>?>(nil)
        defer { _ = try? parentListRead.withLock({ $0 })?.wait() }
        let ((scan, earlyFacts), separateHash) = try withoutActuallyEscaping(progress) { progress in
            try Concurrently.run({ () throws -> (PageScan, CopyFacts?) in
                let (facts, scan) = try Concurrently.run({ checking.withLock { $0 = true }; defer { checking.withLock { $0 = false } }; return try check() }) { () throws -> PageScan in
                    let report = { progress(RepoBackupProgress(phase: .storing, pages: $0, pageCount: $1)) }
                    if request.pagesFromWrites, let digest = result.digest, !collector.broken,
                       let scan = try storeCollected(copyFile.path, collector: collector, sha256: digest.sha256, repository: repository,
                                                     snapshot: kept, lock: lock, rowSums: rowSums,
                                                     soleThread: { checking.withLock { $0 } }, progress: report) {
                        parentListRead.withLock { $0 = Concurrently.start { parentList(of: parent, index: index.base, repository: repository) } }
                        return scan
                    }
                    if kept != nil { throw CopyNotKept() }
                    return try scanPages(copyFile.path, repository: repository, index: index, lock: lock, rowSums: rowSums,
                                         frameChecksums: request.frameChecksums,
                                         progress: report)
                }
                return (scan, facts)
            }, { () -> String in
                // (On the source's connection, which the scan reads through, it waits: below.)
                guard rowSums == nil, kept == nil else { return "" }
                // A copy too damaged to hash fails its check, which is reported instead.
                return (try? ContentHasher.hash(path: copyFile.path).digest) ?? ""
            })
        }
        let copyFacts = try earlyFacts ?? naming { try BackupJob.inspect(source, verify: request.verify) }
        var separate = separateHash
        if rowSums == nil, let kept {
            separate = (try? ContentHasher.hash(source, options: ContentHashOptions(), walIndex: kept.walIndex).digest) ?? ""
        }
        // A copy too damaged to hash fails its check, which is reported instead.
        let logicalHash = rowSums.map { (try? $0.finish()) ?? "" } ?? separate
        // Done with the source: its read transaction ends (and writers may checkpoint past it).
        if kept != nil { try? source.close() }
        if copyFacts.passed && logicalHash.isEmpty {
            throw DatabaseError(code: .corrupt, message: "cannot compute the copy's logical hash; no snapshot made", path: request.source)
        }
        if !copyFacts.passed {
            throw DatabaseError(code: .corrupt,
                                message: "the copy fails \(request.verify == .full ? "integrity_check" : "quick_check"), so the source database is corrupt; no snapshot made: \(copyFacts.checkResult)",
                                path: request.source)
        }

        // A source wiped after the check above: no snapshot (its one page's
        // pack, if new, is left for prune).
        try EmptySource.require(pageCount: Int64(scan.pageCount), path: request.source, policy: request.shrink)
        // Packs are written; now the index, the page list, the snapshot.
        var bytesAdded = scan.packBytes
        let indexBytes = try scan.writer.writeIndex()
        bytesAdded += Int64(indexBytes)
        scan.writer.releaseLookup()

        var pagesDigest: String?
        if repository.recordsPagesDigest {
            var digest = PagesDigest()
            for i in 0..<scan.pageCount { digest.add(scan.refs.id(i, index: index.base, writer: scan.writer)) }
            pagesDigest = digest.finalizeHex()
        }
        let base: ParentList?
        if let read = parentListRead.withLock({ $0 }) { base = try read.wait() } else { base = parentList(of: parent, index: index.base, repository: repository) }
        let (listID, listBytes) = try writeList(scan, index: index.base, base: base, repository: repository)
        bytesAdded += Int64(listBytes)

        var header: [(String, JSON)] = []
        if let first = scan.firstPage, let h = try? DatabaseHeader(bytes: Array(first.prefix(DatabaseHeader.size))) {
            header += [("application_id", .integer(Int64(h.applicationID))), ("auto_vacuum", .integer(Int64(h.autoVacuum))),
                       ("reserved_bytes", .integer(Int64(h.reservedBytes))), ("schema_format", .integer(Int64(h.schemaFormat))),
                       ("sqlite_version", .string(h.sqliteVersion)), ("text_encoding", .string(h.textEncodingName ?? "unknown")),
                       ("user_version", .integer(Int64(h.userVersion)))]
        }
        // Keys in name order, as `snapshots --json` reads them back.
        header.append(("journal_mode", .string(result.journalMode)))
        header.sort { $0.0 < $1.0 }
        var snapshot = Snapshot(
            database: DurableFolder.baseName(of: sourcePath), path: sourcePath, hostname: RepoLock.hostname,
            time: started, tags: request.tags, pageSize: scan.pageSize, pageCount: scan.pageCount,
            list: listID, parent: parent?.id, databaseSHA256: pagesDigest == nil ? scan.sha256 : nil,
            pagesSHA256: pagesDigest, logicalHash: logicalHash,
            header: header, pagesNew: scan.newPages, bytesAdded: 0,
            durationSeconds: 0, strategy: result.strategy.rawValue,
            verification: request.verify == .none ? "skipped" : "\(request.verify == .full ? "integrity_check" : "quick_check") \(copyFacts.checkResult)")
        snapshot.durationSeconds = Clock.now() - startedMono
        // The snapshot's own size counts too; it is about the same whatever the figure in it.
        snapshot.bytesAdded = bytesAdded + Int64(snapshot.encoded().count) + (repository.encrypted ? 28 : 0)
        let (id, _) = try repository.putObject(prefix: "snapshots", snapshot.encoded())
        snapshot.id = id
        // Later backups of this run must know these pages (a single one need not).
        if rememberPages { index.add(scan.writer.writtenIDs) }
        return RepoBackupOutcome(snapshot: snapshot, pagesRead: scan.pageCount, pagesNew: scan.newPages,
                                 bytesAdded: snapshot.bytesAdded, packsWritten: scan.writer.packsWritten,
                                 seconds: snapshot.durationSeconds, hashPagesDecoded: rowSums?.decoded ?? 0,
                                 hashPagesReused: rowSums?.reused ?? 0, pagesFromWrites: scan.fromWrites,
                                 pagesFromSource: kept != nil, checkedDuringCopy: checkedBeside.withLock { $0 },
                                 shrink: SourceShrink(pages: Int64(scan.pageCount), previousPages: parent.map { Int64($0.pageCount) },
                                                      previousTime: parent?.time, policy: request.shrink))
    }

    /// The check (`--verify`) of a kept snapshot, on a second connection to
    /// the source that sees the same snapshot: its read begins, and it is
    /// the same one when the -wal's header is still the one the copy's read
    /// pinned down (no commit came since). nil when that cannot be had: the
    /// check then runs after the copy, on the copy's connection.
    static func checkBeside(_ snapshot: SourceSnapshot?, source path: String, request: RepoBackupRequest) -> Result<CopyFacts, any Error>? {
        guard let walIndex = snapshot?.walIndex,
              let second = try? HotCopy.openSource(path, timeout: 0) else { return nil }
        defer { try? second.close() }
        guard (try? second.execute("BEGIN DEFERRED")) != nil,
              (try? second.scalar("SELECT count(*) FROM sqlite_schema")) != nil,
              WALIndexHeader.pinned(second, before: walIndex) != nil else { return nil }
        return Result { try BackupJob.inspect(second, verify: request.verify) }
    }

    /// The full page list a snapshot's list is a delta on (its own, or its
    /// base's): its id and its pages as index positions.
    typealias ParentList = (id: PageID, refs: [UInt32])

    /// `parent`'s full page list, when it can be read.
    static func parentList(of parent: Snapshot?, index: RepoIndex, repository: Repository) -> ParentList? {
        guard let parent, let baseKey = try? repository.listKeys(of: parent).last,
              let baseID = PageID(hex: String(baseKey.dropFirst("lists/".count))),
              let baseRefs = try? parentRefs(baseKey, index: index, repository: repository) else { return nil }
        return (baseID, baseRefs)
    }

    /// Writes the snapshot's page list: a delta on the parent's full list
    /// (`base`) when that is less than half the size of a full list, else a full list.
    static func writeList(_ scan: PageScan, index: RepoIndex, base: ParentList?, repository: Repository) throws -> (String, Int) {
        let refs = scan.refs, writer = scan.writer, count = scan.pageCount
        if let (baseID, baseRefs) = base {
            var changes: [(index: UInt32, id: PageID)] = []
            let limit = count * 32 / 2 / 36
            for i in 0..<count where i >= baseRefs.count || baseRefs[i] != refs.refs[i] {
                changes.append((UInt32(i), refs.id(i, index: index, writer: writer)))
                if changes.count > limit { break }
            }
            if changes.count <= limit {
                return try repository.putObject(prefix: "lists", PageListObject.encodeDelta(base: baseID, pageCount: count, changes: changes, for: repository))
            }
        }
        return try repository.putObject(prefix: "lists", PageListObject.encodeFull(count: count, for: repository) {
            refs.id($0, index: index, writer: writer)
        })
    }

    /// A full list's pages as index positions (`PageRefs.none` for an id the index lacks).
    static func parentRefs(_ key: String, index: RepoIndex, repository: Repository) throws -> [UInt32] {
        try repository.listPositions(String(key.dropFirst("lists/".count)), index: index) { _, _ in PageRefs.none }
    }
}
