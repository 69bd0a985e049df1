// One backup of one source database, start to finish: hot copy into a
// temporary file in the destination folder, fsync, verification, optional
// gzip, SHA-256, rename into place, folder fsync, then the manifest.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How thoroughly a copy is checked before it gets its final name.
public enum VerifyLevel: String, Sendable, CaseIterable {
    /// `PRAGMA quick_check`: b-tree structure and record format, O(N).
    case quick
    /// `PRAGMA integrity_check`: also indexes against tables, UNIQUE and NOT NULL.
    case full
    /// No check (a corrupt source then yields a corrupt backup).
    case none
}

public struct BackupRequest: Sendable {
    public var source: String
    /// A folder (the backup is named `<source stem>-<UTC timestamp>.db[.gz]`) or a file.
    public var destination: String
    public var destinationIsFolder: Bool
    /// gzip level 1-9, or nil for an uncompressed copy.
    public var gzipLevel: Int?
    public var verify: VerifyLevel = .quick
    public var copy = HotCopyOptions()
    /// Replace an existing destination file (a folder destination never replaces).
    public var replaceExisting = false
    /// Refuse an empty source; flag one that shrank since its last backup.
    public var shrink = SourceShrinkPolicy()
    /// The write gate's token of the destination folder (`BackupRun` holds
    /// the folder as a protected tree and is its one writer).
    public var owner: WriteGate.Tree?
    public init(source: String, destination: String, destinationIsFolder: Bool) {
        self.source = source
        self.destination = destination
        self.destinationIsFolder = destinationIsFolder
    }
}

public struct BackupOutcome: Sendable {
    public var backupPath: String
    public var manifestPath: String
    public var manifest: BackupManifest
    /// Set when the source lost most of its pages since its last backup in
    /// the destination folder (`BackupRequest.shrink`).
    public var shrink: SourceShrink? = nil
}

/// What is known about a finished copy, read from the copy itself.
public struct CopyFacts: Sendable {
    public var pageSize: Int64
    public var pageCount: Int64
    public var userVersion: Int64
    public var schemaHash: String
    /// "ok", "skipped", or the first lines the check reported.
    public var checkResult: String
    public var passed: Bool
}

public enum BackupJob {
    /// Makes one backup. On any error nothing is left under the final name
    /// and the temporary files are gone; the source is only ever read.
    public static func run(_ request: BackupRequest, progress: (CopyProgress) -> Void = { _ in }) throws -> BackupOutcome {
        let source = try HotCopy.openSource(request.source, timeout: request.copy.timeout)
        try EmptySource.require(source, path: request.source, policy: request.shrink, timeout: request.copy.timeout)
        let sourcePath = resolvedPath(request.source)
        let permissions = try DurableFolder.permissions(of: request.source)
        let started = Clock.wall()
        let folder: String
        var finalPath: String
        if request.destinationIsFolder {
            folder = request.destination
            let stem = backupStem(of: request.source)
            let ext = request.gzipLevel == nil ? ".db" : ".db.gz"
            let base = (folder.hasSuffix("/") ? folder : folder + "/") + stem + "-" + Timestamp.compact(started)
            finalPath = base + ext
            var n = 2
            while DurableFolder.exists(finalPath) || DurableFolder.exists(BackupManifest.path(forBackup: finalPath)) {
                finalPath = base + "-\(n)" + ext; n += 1
            }
        } else {
            folder = DurableFolder.parent(of: request.destination)
            finalPath = request.destination
            if DurableFolder.exists(finalPath) && !request.replaceExisting {
                throw DatabaseError(code: .cantopen, message: "already exists (use --force to replace it)", path: finalPath)
            }
            // The manifest beside it is written too: another file under that name is not ours to replace.
            let manifest = BackupManifest.path(forBackup: finalPath)
            if DurableFolder.exists(manifest) && !request.replaceExisting {
                throw DatabaseError(code: .cantopen, message: "already exists, and the backup's manifest goes there (use --force to replace it)", path: manifest)
            }
        }
        try SameFileRule.require(output: finalPath, apartFrom: [request.source], what: "the database being backed up")
        try SameFileRule.require(output: BackupManifest.path(forBackup: finalPath), apartFrom: [request.source], what: "the database being backed up")
        let replacing = ReplaceRule.forced(request.replaceExisting)
        try WriteGate.shared.requireWritable(finalPath, what: "the backup", replacing: replacing, owner: request.owner)
        try WriteGate.shared.requireWritable(BackupManifest.path(forBackup: finalPath), what: "the backup's manifest",
                                             replacing: replacing, owner: request.owner)

        let copyFile = try TemporaryFile(in: folder, stem: DurableFolder.baseName(of: finalPath), permissions: permissions,
                                         owner: request.owner)
        defer { copyFile.discard() }
        let result: HotCopyResult
        do {
            result = try HotCopy.copy(from: source, into: copyFile.path, options: request.copy, progress: progress)
        } catch var error as DatabaseError {
            // Name the destination the user gave, not our temporary file; a
            // full disk under VACUUM INTO surfaces on the source connection.
            if error.path == copyFile.path { error.path = finalPath }
            if request.copy.vacuum, [.full, .ioerr].contains(error.code.primary) {
                error = DatabaseError(code: error.code, message: "cannot write the copy: \(error.code.primary)",
                                      path: finalPath)
            }
            throw error
        }
        try? source.close()
        // The copy's SHA-256 was computed as it was written (when the writes
        // allowed it). gzip (or, without that SHA-256, a hash pass) runs on
        // the other cores while this one runs the check; they only read the
        // copy. Only a copy that is kept as it is needs its fsync.
        let gzFile = try request.gzipLevel.map { _ in
            try TemporaryFile(in: folder, stem: DurableFolder.baseName(of: finalPath), permissions: permissions, owner: request.owner)
        }
        defer { gzFile?.discard() }
        let written = result.digest
        func check() throws -> CopyFacts {
            if gzFile == nil { try copyFile.sync() }
            return try inspect(copyFile.path, verify: request.verify)
        }
        let database: StreamDigest, stored: StreamDigest, facts: CopyFacts
        if gzFile == nil, let written {
            facts = try check()
            (database, stored) = (written, written)
        } else {
            ((database, stored), facts) = try Concurrently.run({ () throws -> (StreamDigest, StreamDigest) in
                if let gzFile, let level = request.gzipLevel {
                    let (input, output) = try ParallelGzip.compress(copyFile.path, into: gzFile, level: level, hashInput: written == nil)
                    return (written ?? input!, output)
                }
                let digest = try FileStreams.digest(of: copyFile.path)
                return (digest, digest)
            }, check)
        }
        if !facts.passed {
            throw DatabaseError(code: .corrupt,
                                message: "the copy fails \(request.verify == .full ? "integrity_check" : "quick_check"), so the source database is corrupt; no backup kept: \(facts.checkResult)",
                                path: request.source)
        }
        try EmptySource.require(pageCount: facts.pageCount, path: request.source, policy: request.shrink)
        // The last backup of this source in the folder, to flag a shrink.
        let previous = (try? Retention.catalog(folder: folder, source: sourcePath))?.last?.manifest
        let shrink = SourceShrink(pages: facts.pageCount, previousPages: previous?.pageCount,
                                  previousTime: previous?.startedAt, policy: request.shrink)
        let finished = Clock.wall()

        let manifest = BackupManifest(
            backup: DurableFolder.baseName(of: finalPath), source: sourcePath,
            startedAt: started, finishedAt: finished,
            method: request.copy.vacuum ? "vacuum-into" : "backup-api", strategy: result.strategy.rawValue,
            restarts: result.restarts, writersBlockedSeconds: result.writersBlockedSeconds,
            journalMode: result.journalMode, pageSize: facts.pageSize, pageCount: facts.pageCount,
            bytes: database.bytes, compressedBytes: request.gzipLevel == nil ? nil : stored.bytes,
            gzipLevel: request.gzipLevel, sha256: stored.sha256, databaseSHA256: database.sha256,
            userVersion: facts.userVersion, schemaHash: facts.schemaHash, sqliteVersion: Connection.sqliteVersion,
            verification: .init(mode: request.verify.rawValue, result: facts.checkResult))
        // The manifest lands first, then the backup: a failure at either step
        // (a full disk, a signal) leaves no backup under its final name. Until
        // the backup is in place the manifest counts as a temporary file, and
        // goes on an error or a signal.
        let manifestPath = BackupManifest.path(forBackup: finalPath)
        let manifestSlot = TemporaryFiles.register(manifestPath)
        defer { TemporaryFiles.unregister(manifestSlot) }
        do {
            try AtomicFile.write(Array((manifest.json.pretty + "\n").utf8), to: manifestPath, permissions: permissions,
                                 what: "the backup's manifest", replacing: replacing, owner: request.owner)
            try (gzFile ?? copyFile).commit(as: finalPath, replace: request.replaceExisting)
        } catch {
            try? DurableFolder.remove(manifestPath, owner: request.owner)
            throw error
        }
        return BackupOutcome(backupPath: finalPath, manifestPath: manifestPath, manifest: manifest, shrink: shrink)
    }

    /// Reads the facts of a database copy and runs the check `verify` asks for.
    /// Opened read-only and `immutable=1`: no locks, no `-wal`/`-shm` files.
    public static func inspect(_ path: String, verify: VerifyLevel) throws -> CopyFacts {
        let connection = try Connection(path: path, mode: .readOnly, immutable: true)
        defer { try? connection.close() }
        return try inspect(connection, verify: verify)
    }

    /// The same facts and check for the database `connection` reads (in the
    /// read transaction it may be in: a source whose snapshot was copied).
    static func inspect(_ connection: Connection, verify: VerifyLevel) throws -> CopyFacts {
        func integer(_ sql: String) throws -> Int64 {
            if case .integer(let n)? = try connection.scalar(sql) { return n }
            return 0
        }
        var hasher = SHA256Hasher()
        let statement = try connection.prepare(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type COLLATE BINARY, name COLLATE BINARY")
        try statement.forEachRow { row in
            for i in 0..<4 {
                if row.isNull(at: i) { hasher.update([1]) } else { hasher.update(row.bytes(at: i)) }
                hasher.update([0])
            }
        }
        var result = "skipped", passed = true
        if verify != .none {
            // quick_check reads each page about once: a 256 KiB page cache keeps
            // memory flat and is no slower. integrity_check also looks every row
            // up in each index, and keeps SQLite's default (2 MB).
            try connection.execute(verify == .full ? "PRAGMA cache_size=-2000" : "PRAGMA cache_size=-256")
            let check = try connection.prepare(verify == .full ? "PRAGMA integrity_check(20)" : "PRAGMA quick_check(20)")
            var lines: [String] = []
            try check.forEachRow { row in lines.append(row.string(at: 0)) }
            if lines == ["ok"] {
                result = "ok"
            } else {
                passed = false
                result = lines.prefix(3).joined(separator: "; ").split(whereSeparator: \.isNewline).joined(separator: " ")
                    + (lines.count > 3 ? "; …" : "")
            }
        }
        return CopyFacts(pageSize: try integer("PRAGMA page_size"), pageCount: try integer("PRAGMA page_count"),
                         userVersion: try integer("PRAGMA user_version"), schemaHash: hasher.finalizeHex(),
                         checkResult: result, passed: passed)
    }

    /// The source's file name without a `.db`, `.sqlite`, `.sqlite3` or `.db3` extension.
    public static func backupStem(of source: String) -> String {
        var name = DurableFolder.baseName(of: source)
        for ext in [".sqlite3", ".sqlite", ".db3", ".db"] where name.count > ext.count && name.hasSuffix(ext) {
            name.removeLast(ext.count)
            break
        }
        return name
    }

    /// The absolute path with links resolved (`FilePaths.resolved`).
    public static func resolvedPath(_ path: String) -> String { FilePaths.resolved(path) }
}
