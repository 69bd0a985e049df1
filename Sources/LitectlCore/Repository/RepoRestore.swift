// A snapshot back into a database file: every page fetched (pack by pack,
// whole packs or byte ranges), checked against its id and written at its place
// in a temporary file beside TARGET; then the file's SHA-256, integrity_check
// and the logical hash are compared with what the snapshot recorded, and the
// file lands as `litectl restore` lands a backup (rename for a new TARGET; the
// backup API in one transaction, the old content kept, for an existing one).
// Built on the folder restore (Backup/Restore.swift).
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
    /// integrity_check (full, the default) or quick_check (quick) of the rebuilt file.
    public var verify: VerifyLevel = .full
    public init(snapshot: Snapshot, target: String) { self.snapshot = snapshot; self.target = target }
}

public struct RepoRestoreOutcome: Sendable {
    public var keptOld: String?
    public var replacedExisting: Bool
    public var pages: Int
    public var bytesFetched: Int64
}

public enum RepoRestore {
    public static func run(_ request: RepoRestoreRequest, repository: Repository,
                           progress: (CopyProgress) -> Void = { _ in }) throws -> RepoRestoreOutcome {
        let snapshot = request.snapshot
        let targetExists = DurableFolder.exists(request.target)
        if targetExists && !request.force {
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (use --force; the old content is then kept as \(DurableFolder.baseName(of: request.target)).before-restore-<timestamp>)",
                                path: request.target)
        }
        let folder = DurableFolder.parent(of: request.target)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder: \(folder)", path: request.target)
        }
        // What a restore of this TARGET killed with SIGKILL left beside it.
        TemporaryFiles.removeStale(in: folder, stem: DurableFolder.baseName(of: request.target))
        let ids = try repository.pageIDs(of: snapshot)
        let index = try repository.loadIndex()
        let file = try TemporaryFile(in: folder, stem: DurableFolder.baseName(of: request.target),
                                     permissions: targetExists ? try DurableFolder.permissions(of: request.target) : 0o644)
        defer { file.discard() }
        let fetched = try writePages(ids, pageSize: snapshot.pageSize, index: index, repository: repository,
                                     into: file, progress: progress)
        try file.sync()
        // The three checks only read the file: integrity_check on this thread,
        // the SHA-256 and then the logical hash on another.
        let ((digest, logical), facts) = try Concurrently.run({ () throws -> (StreamDigest, String) in
            let digest = try FileStreams.digest(of: file.path)
            guard digest.sha256 == snapshot.databaseSHA256 else { return (digest, "") }
            return (digest, try ContentHasher.hash(path: file.path).digest)
        }, { try BackupJob.inspect(file.path, verify: request.verify) })
        guard digest.sha256 == snapshot.databaseSHA256 else {
            throw DatabaseError(code: .corrupt, message: "the rebuilt file's SHA-256 does not match the snapshot's; nothing restored", path: request.target)
        }
        guard facts.passed else {
            throw DatabaseError(code: .corrupt, message: "the rebuilt database fails \(request.verify == .quick ? "quick_check" : "integrity_check"), nothing restored: \(facts.checkResult)", path: request.target)
        }
        guard logical == snapshot.logicalHash else {
            throw DatabaseError(code: .corrupt, message: "the rebuilt database's logical hash differs from the snapshot's; nothing restored", path: request.target)
        }
        if !targetExists {
            try file.commit(as: request.target, replace: false)
            return RepoRestoreOutcome(keptOld: nil, replacedExisting: false, pages: ids.count, bytesFetched: fetched)
        }
        var restore = RestoreRequest(backup: file.path, target: request.target)
        restore.force = true
        restore.keepOld = request.keepOld
        restore.verify = .none  // checked above
        restore.timeout = request.timeout
        let outcome = try Restore.run(restore)
        return RepoRestoreOutcome(keptOld: outcome.keptOld, replacedExisting: true, pages: ids.count, bytesFetched: fetched)
    }

    /// Fetches every page of `ids` and writes it at its place; returns the bytes fetched.
    static func writePages(_ ids: [PageID], pageSize: Int, index: RepoIndex, repository: Repository,
                           into file: TemporaryFile, progress: (CopyProgress) -> Void) throws -> Int64 {
        // (pack, offset, length, page number), in pack order: one pass per pack.
        struct Need { var pack: PageID; var offset: UInt32; var length: UInt32; var page: UInt32 }
        var needs: [Need] = []
        needs.reserveCapacity(ids.count)
        for (n, id) in ids.enumerated() {
            guard let at = index.location(of: id) else {
                throw StoreError(.notFound, location: repository.location, message: "page \(n + 1) (\(id.hex.prefix(12))) is not in the repository's index; run `litectl verify --repo`")
            }
            needs.append(Need(pack: at.pack, offset: at.offset, length: at.length, page: UInt32(n)))
        }
        needs.sort { $0.pack != $1.pack ? $0.pack < $1.pack : ($0.offset != $1.offset ? $0.offset < $1.offset : $0.page < $1.page) }
        if ftruncate(file.descriptor, off_t(ids.count) * off_t(pageSize)) != 0 {
            throw DatabaseError(code: .full, message: "cannot size the file: \(String(cString: strerror(errno)))", path: file.path)
        }
        var fetched: Int64 = 0, done = 0
        var start = 0
        while start < needs.count {
            var end = start
            while end < needs.count && needs[end].pack == needs[start].pack { end += 1 }
            let key = Repository.packKey(needs[start].pack)
            // A pack's needed blobs as byte ranges: neighbours closer than 64 KiB share one read.
            var ranges: [(from: Int, to: Int)] = []
            for k in start..<end {
                let from = Int(needs[k].offset), to = from + Int(needs[k].length)
                if let last = ranges.last, from <= last.to + 65536 { ranges[ranges.count - 1].to = max(last.to, to) }
                else { ranges.append((from, to)) }
            }
            var k = start
            for range in ranges {
                let bytes = try repository.store.get(key, offset: Int64(range.from), length: range.to - range.from)
                fetched += Int64(bytes.count)
                var lastOffset: UInt32 = .max, lastPage: [UInt8] = []
                while k < end && Int(needs[k].offset) < range.to {
                    let need = needs[k]
                    if need.offset != lastOffset {
                        let from = Int(need.offset) - range.from, to = from + Int(need.length)
                        guard to <= bytes.count else {
                            throw StoreError(.other, location: repository.objectName(key), message: "damaged pack: shorter than its index says")
                        }
                        lastPage = try repository.page(fromBlob: Array(bytes[from..<to]), id: ids[Int(need.page)], pageSize: pageSize,
                                                       what: repository.objectName(key))
                        lastOffset = need.offset
                    }
                    try lastPage.withUnsafeBytes { raw in
                        var written = 0
                        while written < pageSize {
                            let n = pwrite(file.descriptor, raw.baseAddress! + written, pageSize - written,
                                           off_t(need.page) * off_t(pageSize) + off_t(written))
                            if n < 0 && errno == EINTR { continue }
                            guard n > 0 else {
                                throw DatabaseError(code: .full, message: "write failed: \(String(cString: strerror(errno)))", path: file.path)
                            }
                            written += n
                        }
                    }
                    done += 1
                    k += 1
                }
                progress(CopyProgress(pagesCopied: done, pageCount: ids.count))
            }
            start = end
        }
        return fetched
    }
}
