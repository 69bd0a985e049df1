// Restores a backup into a target database: verified first, then copied in
// through the backup API, which writes the target in one transaction (a crash
// midway rolls back through the target's journal), so processes that have the
// target open see the old content or the new, never a mix.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct RestoreRequest: Sendable {
    public var backup: String
    public var target: String
    /// Overwrite an existing target.
    public var force = false
    /// With `force`, keep the old content as `TARGET.before-restore-<timestamp>`.
    public var keepOld = true
    public var verify: VerifyLevel = .full
    public var timeout: Double = 60
    public var busyTimeout = Connection.defaultBusyTimeout

    public init(backup: String, target: String) { self.backup = backup; self.target = target }
}

public struct RestoreOutcome: Sendable {
    public var check: BackupCheck
    /// Where the target's previous content was kept, if anywhere.
    public var keptOld: String?
    public var replacedExisting: Bool
}

public enum Restore {
    /// Whether `target` exists; refuses a folder, and an existing file
    /// without `force` (whose old content `--force` keeps beside it).
    static func checkTarget(_ target: String, force: Bool) throws -> Bool {
        if DurableFolder.isFolder(target) {
            throw DatabaseError(code: .cantopen, message: "is a folder; give the path of the database file to restore into", path: target)
        }
        WriteGate.shared.declareTarget(target)
        let exists = DurableFolder.exists(target)
        if exists && !force {
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (use --force; the old content is then kept as \(DurableFolder.baseName(of: target)).before-restore-<timestamp>)",
                                path: target)
        }
        try WriteGate.shared.requireWritable(target, what: "the restore's target", replacing: .always)
        return exists
    }

    public static func run(_ request: RestoreRequest, progress: (CopyProgress) -> Void = { _ in }) throws -> RestoreOutcome {
        try SameFileRule.require(output: request.target,
                                 apartFrom: [request.backup, BackupManifest.path(forBackup: request.backup)],
                                 what: "the backup being restored")
        let targetExists = try checkTarget(request.target, force: request.force)
        // What a restore of this TARGET killed with SIGKILL left beside it
        // (the full-size copy of the old content, or of the new one).
        TemporaryFiles.removeStale(in: DurableFolder.parent(of: request.target), stem: DurableFolder.baseName(of: request.target))
        let prepared = try BackupVerifier.prepare(request.backup, level: request.verify)
        defer { prepared.discard() }
        let check = prepared.check
        guard check.passed else {
            let why = check.sha256Matches == false ? "SHA-256 does not match its manifest" : check.checkResult
            throw DatabaseError(code: .corrupt, message: "the backup fails verification, nothing restored: \(why)", path: request.backup)
        }
        let backup = try Connection(path: prepared.databasePath, mode: .readOnly, busyTimeout: 0, immutable: true)
        defer { try? backup.close() }

        // A TARGET that is not a database at all, or too damaged to open (often
        // why one restores), cannot take the backup API; it is replaced by
        // rename instead.
        var targetIsDatabase = targetExists
        if targetExists {
            do { try Connection(path: request.target, mode: .readOnly, busyTimeout: request.busyTimeout).close() } catch let error as DatabaseError
                where [.notadb, .corrupt].contains(error.code.primary) {
                targetIsDatabase = false
            }
        }

        if !targetIsDatabase {
            // Copy into a temporary file beside TARGET and rename (never a partial TARGET).
            var keptOld: String?
            if targetExists && request.keepOld {
                let old = request.target + ".before-restore-" + Timestamp.compact(Clock.wall())
                let file = try TemporaryFile(in: DurableFolder.parent(of: old), stem: DurableFolder.baseName(of: old),
                                             permissions: try DurableFolder.permissions(of: request.target))
                defer { file.discard() }
                try FileStreams.copy(request.target, into: file)
                try file.commit(as: old, replace: false)
                keptOld = old
            }
            let permissions = try DurableFolder.permissions(of: targetExists ? request.target : request.backup)
            let file = try TemporaryFile(in: DurableFolder.parent(of: request.target),
                                         stem: DurableFolder.baseName(of: request.target), permissions: permissions)
            defer { file.discard() }
            var options = HotCopyOptions(); options.timeout = request.timeout
            _ = try HotCopy.copy(from: backup, into: file.path, options: options, progress: progress)
            try file.commit(as: request.target, replace: targetExists)
            return RestoreOutcome(check: check, keptOld: keptOld, replacedExisting: targetExists)
        }

        var keptOld: String?
        if request.keepOld {
            var keep = BackupRequest(source: request.target, destination: request.target + ".before-restore-" + Timestamp.compact(Clock.wall()),
                                     destinationIsFolder: false)
            keep.verify = .none  // the old content may be why we restore; keep it as it is
            keep.shrink = SourceShrinkPolicy(allowEmpty: true, warnFraction: nil)
            keep.copy.timeout = request.timeout
            keptOld = try BackupJob.run(keep).backupPath
        }
        let target = try Connection(path: request.target, mode: .readWrite, busyTimeout: request.busyTimeout)
        defer { try? target.close() }
        try target.execute("PRAGMA synchronous=FULL")
        guard let handle = sqlite3_backup_init(target.rawHandle, "main", backup.rawHandle, "main") else {
            throw DatabaseError.fromConnection(target.rawHandle, code: sqlite3_errcode(target.rawHandle), path: request.target)
        }
        var finished = false
        defer { if !finished { sqlite3_backup_finish(handle) } }
        let deadline = Deadline(seconds: request.timeout)
        while true {
            // One step: the whole copy in one write transaction on the target.
            let rc = sqlite3_backup_step(handle, -1)
            if rc == SQLITE_DONE { break }
            if rc & 0xFF == SQLITE_BUSY || rc & 0xFF == SQLITE_LOCKED {
                if deadline.passed {
                    throw DatabaseError(code: ResultCode(rawValue: rc), message: DatabaseError.lockedMessage(waited: Clock.now() - deadline.start) + "; nothing restored",
                                        path: request.target)
                }
                usleep(10_000)
                continue
            }
            var error = DatabaseError.fromConnection(target.rawHandle, code: rc, path: request.target)
            if rc & 0xFF == SQLITE_READONLY {
                error.message += " (a WAL-mode target must have the backup's page size; restore into a new file instead)"
            }
            error.message += "; nothing restored"
            throw error
        }
        let total = Int(sqlite3_backup_pagecount(handle))
        finished = true
        let rc = sqlite3_backup_finish(handle)
        if rc != SQLITE_OK { throw DatabaseError.fromConnection(target.rawHandle, code: rc, path: request.target) }
        progress(CopyProgress(pagesCopied: total, pageCount: total))
        return RestoreOutcome(check: check, keptOld: keptOld, replacedExisting: true)
    }
}
