// One `litectl backup SRC... DEST` run, start to finish, as a library call:
// the destination checked, the folder locked, each source backed up on its
// own (one failing does not stop the others), retention applied after each
// success, and the metrics textfile written at the end. The caller (the
// executable, or a program using the library) is told of each source as it
// finishes and formats what it likes.

/// What a run backs up, and how.
public struct BackupRunRequest: Sendable {
    public var sources: [String]
    /// A folder (each backup named `<source stem>-<UTC timestamp>.db[.gz]`)
    /// or, with one source, a file.
    public var destination: String
    /// gzip level 1-9, or nil for an uncompressed copy.
    public var gzipLevel: Int?
    public var verify: VerifyLevel = .quick
    /// `VACUUM INTO` instead of the backup API.
    public var vacuum = false
    /// Seconds to wait for locks: the sources', the destination folder's.
    public var timeout: Double = 60
    /// Replace an existing destination file.
    public var replaceExisting = false
    /// Retention after each backup (a folder destination only).
    public var retention = RetentionPolicy()
    public var shrink = SourceShrinkPolicy()
    /// Where to write the Prometheus textfile, if anywhere.
    public var metricsFile: String?

    public init(sources: [String], destination: String) {
        self.sources = sources
        self.destination = destination
    }
}

/// What became of one source.
public struct BackupRunResult: Sendable {
    public var source: String
    /// The backup made, or nil when it failed (`error`).
    public var outcome: BackupOutcome?
    public var error: DatabaseError?
    /// Backups and manifests of this source that retention removed.
    public var pruned: [String] = []
    public var prunedManifests: [String] = []
}

/// What retention would remove were a backup made now (`--dry-run`).
public struct RetentionPreview: Sendable {
    public var source: String
    public var backups: [String]
    /// Manifests whose backup does not exist.
    public var danglingManifests: [String]
}

public enum BackupRun {
    /// The folder that holds the backups, after checking the destination:
    /// a folder, or a file in an existing folder (one source, no retention).
    public static func folder(of request: BackupRunRequest) throws -> (folder: String, isFolder: Bool) {
        let destination = request.destination
        if DurableFolder.isFolder(destination) { return (destination, true) }
        func refuse(_ why: String) -> DatabaseError { DatabaseError(code: .cantopen, message: why, path: destination) }
        if destination.hasSuffix("/") { throw refuse("no such folder") }
        if request.sources.count > 1 { throw refuse("not a folder (several sources need a destination folder)") }
        if !request.retention.isEmpty { throw refuse("the --keep-* options need a destination folder") }
        let parent = DurableFolder.parent(of: destination)
        if !DurableFolder.isFolder(parent) { throw refuse("no such folder: \(parent)") }
        return (parent, false)
    }

    /// What retention would remove from the destination folder were each
    /// source backed up now (the new backup the newest, holding data).
    public static func preview(_ request: BackupRunRequest, now: Double? = nil) throws -> [RetentionPreview] {
        let (folder, _) = try folder(of: request)
        let now = now ?? Clock.wall()
        return try request.sources.map { source in
            let resolved = FilePaths.resolved(source)
            let catalog = try Retention.catalog(folder: folder, source: resolved)
            let keep = Retention.kept(times: catalog.map(\.manifest.startedAt) + [now],
                                      holdsData: catalog.map { EmptySource.holdsData(pageCount: $0.manifest.pageCount) } + [true],
                                      policy: request.retention)
            return RetentionPreview(source: source,
                                    backups: catalog.indices.filter { !keep.contains($0) }.map { catalog[$0].backupPath },
                                    danglingManifests: try Retention.danglingManifests(folder: folder, source: resolved).map(\.manifestPath))
        }
    }

    /// Backs up every source. Throws only when the run cannot start (the
    /// destination, the folder's lock); each source's failure is in its
    /// result, and `report` is called as each finishes. A metrics file that
    /// cannot be written is `metricsError` (the backups stand).
    public static func run(_ request: BackupRunRequest, progress: (String, CopyProgress) -> Void = { _, _ in },
                           report: (BackupRunResult) -> Void = { _ in }) throws -> (results: [BackupRunResult], metricsError: DatabaseError?) {
        let (folder, isFolder) = try folder(of: request)
        // The run's protected set, before anything is written: its sources
        // (and their -wal, -journal, -shm) and the destination folder's backups.
        for source in request.sources { WriteGate.shared.protect(database: source, what: "a database being backed up", changeable: false) }
        let owner = isFolder ? WriteGate.shared.protect(tree: folder, what: "the backup folder \(folder)", kind: .backupFolder) : nil
        if let path = request.metricsFile {
            try BackupMetrics.require(path, apartFrom: request.sources.map { FilePaths.resolved($0) }, otherInputs: [])
        }
        let lock = try FolderLock(folder: folder, timeout: request.timeout, owner: owner)
        defer { lock.release() }
        TemporaryFiles.removeStale(in: folder, owner: owner)
        var results: [BackupRunResult] = []
        var metrics: [BackupMetric] = []
        for source in request.sources {
            var job = BackupRequest(source: source, destination: request.destination, destinationIsFolder: isFolder)
            job.gzipLevel = request.gzipLevel
            job.verify = request.verify
            job.copy.vacuum = request.vacuum
            job.copy.timeout = request.timeout
            job.replaceExisting = request.replaceExisting
            job.shrink = request.shrink
            job.owner = owner
            let started = Clock.wall()
            var result = BackupRunResult(source: source)
            do {
                let outcome = try BackupJob.run(job) { progress(source, $0) }
                result.outcome = outcome
                // A run that flags a shrink leaves the older backups be: the last good one may be among them.
                if isFolder && !request.retention.isEmpty && outcome.shrink == nil {
                    let catalog = try Retention.catalog(folder: folder, source: outcome.manifest.source)
                    let doomed = Retention.toPrune(catalog, policy: request.retention).filter { $0.backupPath != outcome.backupPath }
                    try Retention.prune(doomed, owner: owner)
                    result.pruned = doomed.map(\.backupPath)
                    let dangling = try Retention.danglingManifests(folder: folder, source: outcome.manifest.source)
                    result.prunedManifests = try Retention.removeDangling(dangling, owner: owner).map(\.manifestPath)
                }
                let m = outcome.manifest
                metrics.append(BackupMetric(source: m.source, success: true, finishedAt: m.finishedAt,
                                            durationSeconds: m.durationSeconds, bytes: m.compressedBytes ?? m.bytes,
                                            verified: m.verification.result == "ok" ? 1 : -1, shrunk: outcome.shrink != nil))
            } catch {
                let failure = error as? DatabaseError ?? DatabaseError(code: .error, message: "\(error)", path: source)
                result.error = failure
                metrics.append(BackupMetric(source: FilePaths.resolved(source), success: false, finishedAt: nil,
                                            durationSeconds: Clock.wall() - started, bytes: 0,
                                            verified: failure.code.primary == .corrupt ? 0 : -1))
            }
            results.append(result)
            report(result)
        }
        var metricsError: DatabaseError?
        if let path = request.metricsFile {
            do { try BackupMetrics.write(metrics, to: path) } catch {
                metricsError = error as? DatabaseError ?? DatabaseError(code: .ioerr, message: "\(error)", path: path)
            }
        }
        return (results, metricsError)
    }
}
