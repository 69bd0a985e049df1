// Restores a backup into a target database: verified first, then landed all
// or nothing. An existing target that no other process has open is replaced
// by a complete copy built beside it and renamed over it; one that is open
// (or in WAL mode, or asked for with --in-place) takes the backup through the
// backup API in one write transaction, which a signal, a full disk or any
// error rolls back before the command exits (Files/InPlaceWrite.swift), so
// processes that have the target open see the old content or the new, never a mix.
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
    /// Write an existing target in place (one transaction through its
    /// journal) even when a rename could replace it (`WholeFileReplacement`).
    public var inPlace = false
    /// When `backup` is a folder of backups: the database whose newest
    /// backup to take (its file name or path; nil when the folder holds one
    /// database's backups), and the latest start time to consider.
    public var database: String?
    public var at: Double?

    public init(backup: String, target: String) { self.backup = backup; self.target = target }
}

public struct RestoreOutcome: Sendable {
    public var check: BackupCheck
    /// Where the target's previous content was kept, if anywhere.
    public var keptOld: String?
    public var replacedExisting: Bool
    /// Why an existing target was written in place, in one transaction
    /// (nil: it was new, or replaced by a rename).
    public var inPlaceBecause: String?
    /// The backup file restored (of a folder: the one chosen).
    public var backup: String = ""
    /// Newer backups of a folder passed over, each with why it failed verification.
    public var skipped: [String] = []
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
        var request = request
        // A folder of backups: its backups of the database, newest first.
        let fromFolder = DurableFolder.isFolder(request.backup)
        var candidates = [request.backup]
        if fromFolder {
            candidates = try BackupFolderChoice.candidates(in: request.backup, database: request.database, at: request.at).map(\.backupPath)
            guard !candidates.isEmpty else {
                throw DatabaseError(code: .cantopen, message: BackupFolderChoice.noneMessage(database: request.database, at: request.at), path: request.backup)
            }
        }
        try SameFileRule.require(output: request.target,
                                 apartFrom: candidates.flatMap { [$0, BackupManifest.path(forBackup: $0)] },
                                 what: "the backup being restored")
        let targetExists = try checkTarget(request.target, force: request.force)
        // What a restore of this TARGET killed with SIGKILL left beside it
        // (the full-size copy of the old content, or of the new one), and a
        // journal a killed in-place restore (or application) left: rolled
        // back first, so that no read-only open below meets it.
        TemporaryFiles.removeStale(in: DurableFolder.parent(of: request.target), stem: DurableFolder.baseName(of: request.target))
        if targetExists { try? InPlaceWrite.settle(request.target, busyTimeout: request.busyTimeout) }
        // The newest candidate that passes verification; of a folder, a
        // newer one that fails (or does not read) is passed over and named.
        var chosen: (path: String, prepared: PreparedBackup)?
        var skipped: [String] = []
        for path in candidates {
            let prepared: PreparedBackup
            do { prepared = try BackupVerifier.prepare(path, level: request.verify) } catch let error where fromFolder {
                skipped.append("\(DurableFolder.baseName(of: path)): \(error)")
                continue
            }
            let check = prepared.check
            if check.passed { chosen = (path, prepared); break }
            prepared.discard()
            let why = check.sha256Matches == false ? "SHA-256 does not match its manifest" : check.checkResult
            guard fromFolder else {
                throw DatabaseError(code: .corrupt, message: "the backup fails verification, nothing restored: \(why)", path: request.backup)
            }
            skipped.append("\(DurableFolder.baseName(of: path)) fails verification: \(why)")
        }
        guard let chosen else {
            throw DatabaseError(code: .corrupt, message: "no backup in this folder passes verification, nothing restored: \(skipped.joined(separator: "; "))", path: request.backup)
        }
        let (backupPath, prepared) = chosen
        defer { prepared.discard() }
        request.backup = backupPath
        let check = prepared.check
        let backup = try Connection(path: prepared.databasePath, mode: .readOnly, busyTimeout: 0, immutable: true)
        defer { try? backup.close() }
        let landed = try land(backup, into: request, targetExists: targetExists, progress: progress)
        return RestoreOutcome(check: check, keptOld: landed.keptOld, replacedExisting: targetExists, inPlaceBecause: landed.inPlaceBecause,
                              backup: backupPath, skipped: skipped)
    }

    /// Where a restore left the old content, and why it wrote in place.
    public struct Landing: Sendable { public var keptOld: String?; public var inPlaceBecause: String? }

    /// Lands `rebuilt`, a complete, proven copy that a repository restore
    /// made beside the existing `request.target`, as `run` lands a backup:
    /// renamed over it, or copied in through one transaction.
    public static func land(rebuilt: TemporaryFile, into request: RestoreRequest) throws -> Landing {
        try? InPlaceWrite.settle(request.target, busyTimeout: request.busyTimeout)
        let backup = try Connection(path: rebuilt.path, mode: .readOnly, busyTimeout: 0, immutable: true)
        defer { try? backup.close() }
        return try land(backup, into: request, targetExists: true, rebuilt: rebuilt, progress: { _ in })
    }

    /// Puts the verified database `backup` (a connection to a private,
    /// immutable file) at `request.target`. `rebuilt`, a complete copy of it
    /// beside the target that the caller made (a repository restore), is
    /// renamed into place itself where a rename is chosen.
    static func land(_ backup: Connection, into request: RestoreRequest, targetExists: Bool, rebuilt: TemporaryFile? = nil,
                     progress: (CopyProgress) -> Void) throws -> Landing {
        let nothing = "nothing restored, \(DurableFolder.baseName(of: request.target)) is as it was"
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
        let replacement = targetIsDatabase ? WholeFileReplacement(target: request.target, inPlace: request.inPlace) : nil
        let keptOld = targetExists && request.keepOld ? try keepOld(request, isDatabase: targetIsDatabase) : nil

        if replacement?.byRename ?? true {
            // A complete copy beside TARGET, renamed over it (never a partial TARGET).
            var made: TemporaryFile?
            if rebuilt == nil {
                let permissions = try DurableFolder.permissions(of: targetExists ? request.target : request.backup)
                made = try TemporaryFile(in: DurableFolder.parent(of: request.target),
                                         stem: DurableFolder.baseName(of: request.target), permissions: permissions)
            }
            defer { made?.discard() }
            guard let file = rebuilt ?? made else { preconditionFailure("a file to rename") }
            if let made {
                var options = HotCopyOptions(); options.timeout = request.timeout
                do {
                    _ = try HotCopy.copy(from: backup, into: made.path, options: options, progress: progress)
                } catch var error as DatabaseError {
                    if error.path == made.path { error.path = request.target }
                    throw InPlaceWrite.failure(error, target: request.target, consequence: targetExists ? nothing : "nothing restored")
                }
            }
            do {
                if let replacement {
                    // Somebody opened or wrote TARGET meanwhile: in place after all.
                    if try replacement.swap(file, busyTimeout: request.busyTimeout) { return Landing(keptOld: keptOld) }
                } else {
                    try file.commit(as: request.target, replace: targetExists)
                    return Landing(keptOld: keptOld)
                }
            } catch {
                throw InPlaceWrite.failure(error, target: request.target, consequence: targetExists ? nothing : "nothing restored")
            }
        }
        try copyInPlace(backup, into: request, consequence: nothing, progress: progress)
        return Landing(keptOld: keptOld, inPlaceBecause: replacement?.inPlaceBecause ?? "another process opened it while the copy was made")
    }

    /// TARGET's old content, kept as `TARGET.before-restore-<timestamp>`
    /// (`-2`, `-3`... after it when that is taken): a backup of it, or for a
    /// file that is no database, its bytes.
    static func keepOld(_ request: RestoreRequest, isDatabase: Bool) throws -> String {
        // A second restore within the same second (a retry) takes the next free name.
        let stamp = request.target + ".before-restore-" + Timestamp.compact(Clock.wall())
        var old = stamp, n = 2
        while DurableFolder.exists(old) || DurableFolder.exists(BackupManifest.path(forBackup: old)) { old = stamp + "-\(n)"; n += 1 }
        if !isDatabase {
            let file = try TemporaryFile(in: DurableFolder.parent(of: old), stem: DurableFolder.baseName(of: old),
                                         permissions: try DurableFolder.permissions(of: request.target))
            defer { file.discard() }
            try FileStreams.copy(request.target, into: file)
            try file.commit(as: old, replace: false)
            return old
        }
        var keep = BackupRequest(source: request.target, destination: old, destinationIsFolder: false)
        keep.verify = .none  // the old content may be why we restore; keep it as it is
        keep.shrink = SourceShrinkPolicy(allowEmpty: true, warnFraction: nil)
        keep.copy.timeout = request.timeout
        do {
            return try BackupJob.run(keep).backupPath
        } catch {
            throw InPlaceWrite.failure(error, target: request.target, consequence: "the old content could not be kept, so nothing was restored")
        }
    }

    /// The backup API into TARGET, in one write transaction (a step of a few
    /// MiB at a time, so that a signal is seen between steps): on any error
    /// or signal `sqlite3_backup_finish` rolls it back, and `InPlaceWrite`
    /// rolls back a journal an I/O error left hot.
    static func copyInPlace(_ backup: Connection, into request: RestoreRequest, consequence: String,
                            progress: (CopyProgress) -> Void) throws {
        let target = try Connection(path: request.target, mode: .readWrite, busyTimeout: request.busyTimeout)
        defer { try? target.close() }
        try target.execute("PRAGMA synchronous=FULL")
        try InPlaceWrite.run(target, target: request.target, consequence: consequence) {
            guard let handle = sqlite3_backup_init(target.rawHandle, "main", backup.rawHandle, "main") else {
                throw DatabaseError.fromConnection(target.rawHandle, code: sqlite3_errcode(target.rawHandle), path: request.target)
            }
            var finished = false
            defer { if !finished { sqlite3_backup_finish(handle) } }
            let deadline = Deadline(seconds: request.timeout)
            var pageSize = 4096
            if case .integer(let size)? = try backup.scalar("PRAGMA page_size") { pageSize = max(512, Int(size)) }
            let pagesPerStep = Int32(max(16, (4 << 20) / pageSize))
            while true {
                try Interruption.check()
                let rc = sqlite3_backup_step(handle, pagesPerStep)
                if rc == SQLITE_DONE { break }
                if rc == SQLITE_OK {
                    let total = Int(sqlite3_backup_pagecount(handle))
                    progress(CopyProgress(pagesCopied: total - Int(sqlite3_backup_remaining(handle)), pageCount: total))
                    continue
                }
                if rc & 0xFF == SQLITE_BUSY || rc & 0xFF == SQLITE_LOCKED {
                    if deadline.passed {
                        throw DatabaseError(code: ResultCode(rawValue: rc), message: DatabaseError.lockedMessage(waited: Clock.now() - deadline.start),
                                            path: request.target)
                    }
                    usleep(10_000)
                    continue
                }
                // The backup's error is its own: the connection's message may say "not an error".
                var error = DatabaseError(code: ResultCode(rawValue: rc), message: String(cString: sqlite3_errstr(rc)), path: request.target)
                if sqlite3_errcode(target.rawHandle) & 0xFF == rc & 0xFF {
                    error.message = String(cString: sqlite3_errmsg(target.rawHandle))
                }
                if rc & 0xFF == SQLITE_READONLY {
                    error.message += " (a WAL-mode target must have the backup's page size; restore into a new file instead)"
                }
                throw error
            }
            let total = Int(sqlite3_backup_pagecount(handle))
            finished = true
            let rc = sqlite3_backup_finish(handle)
            if rc != SQLITE_OK {
                throw DatabaseError(code: ResultCode(rawValue: rc), message: String(cString: sqlite3_errstr(rc)), path: request.target)
            }
            progress(CopyProgress(pagesCopied: total, pageCount: total))
        }
    }
}
