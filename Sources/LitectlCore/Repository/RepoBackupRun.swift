// One `litectl backup DB... --repo URL` or `litectl backup --config FILE` run as
// a library call: the settings (the command line's, over a host config file's),
// the snapshots made (RepoBackupBatch), retention for the databases of the run,
// and the metrics textfile. Where the repository is and how to reach it stay
// with the caller, which opens it (an S3 store lives outside the core).

/// Where a repository is and the key to open it, as a command line or a
/// config file gives them.
public struct RepositoryLocation: Sendable, Equatable {
    public var url: String?
    public var endpoint: String?
    public var region: String?
    public var profile: String?
    public var keyFile: String?
    public var passphraseFile: String?
    public init() {}

    /// The repository of a host config file, with these parts (from the
    /// command line) over the file's where given. `backup --config` and
    /// `replicate --config` read it alike.
    public func merging(config: HostConfig) -> RepositoryLocation {
        var l = self
        l.url = config.repository
        l.endpoint = endpoint ?? config.endpoint
        l.region = region ?? config.region
        l.profile = profile ?? config.profile
        // A secret on the command line replaces the file's, whichever kind:
        // a key file and a passphrase file together would leave one unread.
        if keyFile == nil && passphraseFile == nil {
            l.keyFile = config.keyFile
            l.passphraseFile = config.passphraseFile
        }
        return l
    }
}

/// What a repository backup run does. Built from the command line, or from a
/// host config file with the command line's options over it (`merging`).
public struct RepoBackupSettings: Sendable {
    public var location = RepositoryLocation()
    public var sources: [String] = []
    /// Globs of the config file that matched no database (each a failure).
    public var unmatched: [String] = []
    public var tags: [String] = []
    public var retention = RetentionPolicy()
    public var jobs = 1
    /// Seconds to wait for locks (the sources', the repository's).
    public var timeout: Double = 60
    public var verify: VerifyLevel = .quick
    public var metricsFile: String?
    public var shrink = SourceShrinkPolicy()
    /// The host config file the settings came from (an input: never the metrics file).
    public var configFile: String?
    public init() {}

    /// Files the run reads besides the databases: the key, passphrase and config files.
    var otherInputs: [String] { [location.keyFile, location.passphraseFile, configFile].compactMap { $0 } }

    /// The settings of `config` with the command line's over them: the
    /// location's parts, `jobs`, retention (when the command line gives a
    /// rule), the metrics file, the shrink rules, and tags (added) come from
    /// the command line when given; `timeout` and `verify` from the file when
    /// it sets them (docs/repo.md).
    public static func merging(config: HostConfig, commandLine: RepoBackupSettings, jobsGiven: Bool,
                               allowEmptyGiven: Bool, warnShrinkGiven: Bool) -> RepoBackupSettings {
        var s = commandLine
        s.location = commandLine.location.merging(config: config)
        let expanded = config.expandDatabases()
        s.sources = expanded.paths
        s.unmatched = expanded.unmatched
        s.tags = config.tags + commandLine.tags
        if commandLine.retention.isEmpty { s.retention = config.keep }
        if !jobsGiven { s.jobs = config.jobs }
        if let timeout = config.timeout { s.timeout = timeout }
        s.verify = config.verify
        s.metricsFile = commandLine.metricsFile ?? config.metricsFile
        s.shrink = config.shrink
        if allowEmptyGiven { s.shrink.allowEmpty = true }
        if warnShrinkGiven { s.shrink.warnFraction = commandLine.shrink.warnFraction }
        return s
    }
}

/// What a repository backup run did.
public struct RepoBackupRunOutcome: Sendable {
    /// One per source, in the order given.
    public var results: [RepoBatchResult]
    /// Stale locks the run ignored (`litectl unlock` removes them).
    public var staleLocks: [RepoLockInfo]
    /// Snapshots retention forgot after the backups.
    public var forgotten: [Snapshot] = []
    /// A metrics file that could not be written (the snapshots stand).
    public var metricsError: (any Error)?
}

public enum RepoBackupRun {
    /// The snapshots retention would forget were the sources backed up now
    /// (`--dry-run`): of this run's databases only.
    public static func preview(_ settings: RepoBackupSettings, repository: Repository) throws -> [Snapshot] {
        let decision = RepoForget.decide(try repository.snapshots().snapshots, policy: settings.retention)
        let paths = Set(settings.sources.map { FilePaths.resolved($0) })
        return decision.remove.filter { paths.contains($0.path) }
    }

    /// Backs up every source into `repository` (`settings.jobs` at once),
    /// then forgets, by `settings.retention`, older snapshots of this host's
    /// databases just backed up (not of one that shrank: the last good
    /// snapshot may be among the older ones), and writes the metrics file.
    /// `report` is called as each source finishes; each one's failure is in
    /// its result.
    public static func run(_ settings: RepoBackupSettings, repository: Repository,
                           progress: @escaping @Sendable (String, RepoBackupProgress) -> Void = { _, _ in },
                           report: @escaping @Sendable (RepoBatchResult) -> Void = { _ in }) throws -> RepoBackupRunOutcome {
        // The run's protected set, before anything is written: its sources
        // (the repository, its key and config file are in it already).
        for source in settings.sources { WriteGate.shared.protect(database: source, what: "a database being backed up", changeable: false) }
        if let path = settings.metricsFile {
            try BackupMetrics.require(path, apartFrom: settings.sources.map { FilePaths.resolved($0) }, otherInputs: settings.otherInputs)
        }
        var template = RepoBackupRequest(source: "")
        template.tags = settings.tags
        template.verify = settings.verify
        template.copy.timeout = settings.timeout
        template.shrink = settings.shrink
        let (results, stale) = try RepoBackupBatch.run(settings.sources, repository: repository, template: template,
                                                       jobs: settings.jobs, lockTimeout: settings.timeout,
                                                       progress: progress, report: report)
        var outcome = RepoBackupRunOutcome(results: results, staleLocks: stale)
        if !settings.retention.isEmpty {
            let lock = try RepoLock(repository, exclusive: false, command: "forget", timeout: settings.timeout)
            defer { lock.release() }
            let backedUp = Set(results.compactMap { $0.outcome.flatMap { $0.shrink == nil ? Array($0.snapshot.path.utf8) : nil } })
            let decision = RepoForget.decide(try repository.snapshots().snapshots, policy: settings.retention)
            outcome.forgotten = decision.remove.filter { backedUp.contains(Array($0.path.utf8)) && sameBytes($0.hostname, RepoLock.hostname) }
            try RepoForget.remove(outcome.forgotten, from: repository)
        }
        if let path = settings.metricsFile {
            let metrics = results.map { result -> BackupMetric in
                if let o = result.outcome {
                    let s = o.snapshot
                    return BackupMetric(source: s.path, success: true, finishedAt: s.time + s.durationSeconds,
                                        durationSeconds: s.durationSeconds, bytes: o.bytesAdded,
                                        verified: settings.verify == .none ? -1 : 1, shrunk: o.shrink != nil)
                }
                return BackupMetric(source: FilePaths.resolved(result.source), success: false, finishedAt: nil,
                                    durationSeconds: 0, bytes: 0, verified: result.corrupt ? 0 : -1)
            }
            do { try BackupMetrics.write(metrics, to: path, otherInputs: settings.otherInputs) } catch { outcome.metricsError = error }
        }
        return outcome
    }
}
