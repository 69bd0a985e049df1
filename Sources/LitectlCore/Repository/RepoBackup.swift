// One database into a repository as a snapshot: the hot copy (backup API, one
// committed state, the folder backup's WAL and rollback rules) into a
// temporary file, then each page of the copy hashed, the pages the repository
// lacks compressed into packs, and, in this order, the packs, the index
// object, the page list and the snapshot written: a run killed at any moment
// leaves at most objects nothing refers to, which `prune` removes.
// Built on the folder backup's hot copy and check (Backup/) and on the
// logical hash of `litectl hash` (Diff/ContentHash.swift).
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
}

/// The repository's index as this process knows it, shared by the backups a
/// run makes (one at a time or several at once).
public final class SharedIndex: @unchecked Sendable {
    private var index: RepoIndex
    private var mutex = pthread_mutex_t()

    public init(_ index: RepoIndex) { self.index = index; pthread_mutex_init(&mutex, nil) }

    func contains(_ id: PageID) -> Bool {
        pthread_mutex_lock(&mutex); defer { pthread_mutex_unlock(&mutex) }
        return index.contains(id)
    }

    func add(_ entries: [IndexEntry], objectKey: String) {
        pthread_mutex_lock(&mutex); defer { pthread_mutex_unlock(&mutex) }
        index.add(entries, objectKey: objectKey)
    }
}

public enum RepoBackup {
    static let temporaryStem = "litectl-snapshot"

    /// The folder for temporary copies.
    public static func temporaryFolder(_ requested: String?) -> String {
        if let requested { return requested }
        if let tmp = getenv("TMPDIR").map({ String(cString: $0) }), !tmp.isEmpty { return tmp }
        return "/tmp"
    }

    /// Makes one snapshot of `request.source`. `snapshots` are the
    /// repository's snapshots (to find the parent whose page list the new
    /// one is a delta on); `lock` is refreshed as packs are written.
    public static func run(_ request: RepoBackupRequest, repository: Repository, index: SharedIndex,
                           snapshots: [Snapshot], lock: RepoLock?, rememberPages: Bool = true,
                           progress: (RepoBackupProgress) -> Void = { _ in }) throws -> RepoBackupOutcome {
        let started = Clock.wall(), startedMono = Clock.now()
        let source = try HotCopy.openSource(request.source, timeout: request.copy.timeout)
        let sourcePath = BackupJob.resolvedPath(request.source)
        let folder = temporaryFolder(request.temporaryFolder)
        let copyFile = try TemporaryFile(in: folder, stem: temporaryStem, permissions: 0o600)
        defer { copyFile.discard() }
        var copyOptions = request.copy
        copyOptions.vacuum = false
        copyOptions.memoryMapped = false  // memory stays flat whatever the database size
        let result: HotCopyResult
        do {
            result = try HotCopy.copy(from: source, into: copyFile.path, options: copyOptions) {
                progress(RepoBackupProgress(phase: .copying, pages: $0.pagesCopied, pageCount: $0.pageCount))
            }
        } catch var error as DatabaseError {
            if error.path == copyFile.path {
                error.path = request.source
                error.message = "cannot make the temporary copy in \(folder): " + error.message
            }
            throw error
        }
        try? source.close()

        // The checks of the copy run beside the page scan (they only read it):
        // the scan and then the quick_check on one thread, the logical hash
        // (the longest) on the other.
        let ((scan, copyFacts), logicalHash) = try withoutActuallyEscaping(progress) { progress in
            try Concurrently.run({ () throws -> (PageScan, CopyFacts) in
                let scan = try scanPages(copyFile.path, repository: repository, index: index, lock: lock) {
                    progress(RepoBackupProgress(phase: .storing, pages: $0, pageCount: $1))
                }
                do {
                    return (scan, try BackupJob.inspect(copyFile.path, verify: request.verify))
                } catch let error as DatabaseError where error.code.primary == .corrupt || error.code.primary == .notadb {
                    // A copy too damaged for the check to run: name the source, not our temporary file.
                    throw DatabaseError(code: .corrupt, message: "the copy fails \(request.verify == .full ? "integrity_check" : "quick_check"), so the source database is corrupt; no snapshot made: \(error.message)",
                                        path: request.source)
                }
            }, { () -> String in
                // A copy too damaged to hash fails its check, which is reported instead.
                (try? ContentHasher.hash(path: copyFile.path).digest) ?? ""
            })
        }
        if copyFacts.passed && logicalHash.isEmpty {
            throw DatabaseError(code: .corrupt, message: "cannot compute the copy's logical hash; no snapshot made", path: request.source)
        }
        if !copyFacts.passed {
            throw DatabaseError(code: .corrupt,
                                message: "the copy fails \(request.verify == .full ? "integrity_check" : "quick_check"), so the source database is corrupt; no snapshot made: \(copyFacts.checkResult)",
                                path: request.source)
        }

        // Packs are written; now the index, the page list, the snapshot.
        var bytesAdded = scan.packBytes
        let indexBytes = try scan.writer.writeIndex()
        bytesAdded += Int64(indexBytes)
        scan.writer.releaseLookup()

        let parent = snapshots.last { $0.path == sourcePath && $0.hostname == RepoLock.hostname }
        let (listID, listBytes) = try writeList(scan.ids, parent: parent, repository: repository)
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
            time: started, tags: request.tags, pageSize: scan.pageSize, pageCount: scan.ids.count,
            list: listID, parent: parent?.id, databaseSHA256: scan.sha256, logicalHash: logicalHash,
            header: header, pagesNew: scan.newPages, bytesAdded: 0,
            durationSeconds: 0, strategy: result.strategy.rawValue,
            verification: request.verify == .none ? "skipped" : "\(request.verify == .full ? "integrity_check" : "quick_check") \(copyFacts.checkResult)")
        snapshot.durationSeconds = Clock.now() - startedMono
        // The snapshot's own size counts too; it is about the same whatever the figure in it.
        snapshot.bytesAdded = bytesAdded + Int64(snapshot.encoded().count) + (repository.encrypted ? 28 : 0)
        let (id, _) = try repository.putObject(prefix: "snapshots", snapshot.encoded())
        snapshot.id = id
        // Later backups of this run must know these pages (a single one need not).
        if rememberPages { index.add(scan.writer.written, objectKey: "") }
        return RepoBackupOutcome(snapshot: snapshot, pagesRead: scan.ids.count, pagesNew: scan.newPages,
                                 bytesAdded: snapshot.bytesAdded, packsWritten: scan.writer.packsWritten,
                                 seconds: snapshot.durationSeconds)
    }

    struct PageScan {
        var ids: [PageID] = []
        var pageSize = 0
        var newPages = 0
        var packBytes: Int64 = 0
        var sha256 = ""
        var firstPage: [UInt8]?
        var writer: PackWriter
    }

    /// Reads the copy page by page: ids, and the new pages into packs.
    static func scanPages(_ path: String, repository: Repository, index: SharedIndex, lock: RepoLock?,
                          progress: (Int, Int) -> Void) throws -> PageScan {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DatabaseError(code: .cantopen, message: "cannot read the copy", path: path) }
        defer { close(fd) }
        var info = stat()
        fstat(fd, &info)
        let size = Int(info.st_size)
        var head = [UInt8](repeating: 0, count: 100)
        guard size >= 512, pread(fd, &head, 100, 0) == 100 else {
            throw DatabaseError(code: .notadb, message: "the copy is empty", path: path)
        }
        var pageSize = Int(head[16]) << 8 | Int(head[17])
        if pageSize == 1 { pageSize = 65536 }
        guard pageSize >= 512, pageSize & (pageSize - 1) == 0, size % pageSize == 0 else {
            throw DatabaseError(code: .notadb, message: "the copy's size is not a whole number of pages", path: path)
        }
        let writer = PackWriter(repository: repository)
        if let lock { writer.afterPack = { try lock.refresh() } }
        var scan = PageScan(pageSize: pageSize, writer: writer)
        let pageCount = size / pageSize
        scan.ids.reserveCapacity(pageCount)
        var hasher = SHA256Hasher()
        let chunkPages = max(1, (1 << 20) / pageSize)
        var buffer = [UInt8](repeating: 0, count: chunkPages * pageSize)
        var page = 0
        while page < pageCount {
            let n = min(chunkPages, pageCount - page)
            let want = n * pageSize
            var got = 0
            while got < want {
                let r = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, want - got, off_t(page * pageSize + got)) }
                if r < 0 && errno == EINTR { continue }
                guard r > 0 else { throw DatabaseError(code: .ioerr, message: "cannot read the copy", path: path) }
                got += r
            }
            if page == 0 { scan.firstPage = Array(buffer[0..<pageSize]) }
            try buffer.withUnsafeBytes { all in
                hasher.update(UnsafeRawBufferPointer(rebasing: all[0..<want]))
                var fresh: [(page: Int, id: PageID)] = []
                var freshIDs = Set<PageID>()
                for k in 0..<n {
                    let id = repository.pageID(UnsafeRawBufferPointer(rebasing: all[k * pageSize..<(k + 1) * pageSize]))
                    scan.ids.append(id)
                    if !index.contains(id) && !writer.contains(id) && freshIDs.insert(id).inserted { fresh.append((k, id)) }
                }
                // New pages are compressed on every core (a first backup is mostly this).
                let blobs = Locked([[UInt8]?](repeating: nil, count: fresh.count))
                nonisolated(unsafe) let base = UnsafeRawBufferPointer(all)  // read-only while the workers run
                let pages = fresh.map(\.page)
                let failure = Locked<(any Error)?>(nil)
                let size = pageSize
                let workers = pages.count >= 8 ? min(ProcessInfo.processInfo.activeProcessorCount, 4) : 1
                DispatchQueue.concurrentPerform(iterations: workers) { w in
                    for j in stride(from: w, to: pages.count, by: workers) {
                        let k = pages[j]
                        do {
                            let blob = try repository.blob(of: UnsafeRawBufferPointer(rebasing: base[k * size..<(k + 1) * size]))
                            blobs.withLock { $0[j] = blob }
                        } catch { failure.withLock { $0 = error } }
                    }
                }
                if let error = failure.withLock({ $0 }) { throw error }
                let made = blobs.withLock { $0 }
                for (j, item) in fresh.enumerated() { try writer.add(item.id, blob: made[j]!) }
                scan.newPages += fresh.count
            }
            page += n
            progress(page, pageCount)
        }
        try writer.flush()
        scan.packBytes = writer.bytesWritten
        scan.sha256 = hasher.finalizeHex()
        return scan
    }

    /// Writes the snapshot's page list: a delta on the parent's full list when
    /// that is less than half the size of a full list, else a full list.
    static func writeList(_ ids: [PageID], parent: Snapshot?, repository: Repository) throws -> (String, Int) {
        if let parent, let baseKey = try? repository.listKeys(of: parent).last,
           let base = try? PageListObject.decode(try repository.getObject(baseKey), what: baseKey), base.kind == .full {
            var changes: [(index: UInt32, id: PageID)] = []
            let limit = ids.count * 32 / 2 / 36
            for (i, id) in ids.enumerated() where i >= base.ids.count || base.ids[i] != id {
                changes.append((UInt32(i), id))
                if changes.count > limit { break }
            }
            if changes.count <= limit, let baseID = PageID(hex: String(baseKey.dropFirst("lists/".count))) {
                let (id, bytes) = try repository.putObject(prefix: "lists", PageListObject.encodeDelta(base: baseID, pageCount: ids.count, changes: changes))
                return (id, bytes)
            }
        }
        return try repository.putObject(prefix: "lists", PageListObject.encodeFull(ids))
    }
}
