// `litectl backup DB... --repo URL` and `litectl backup --config FILE`: the
// settings from the options (over the config file's), the repository opened
// here (an S3 store lives outside the core), the run in the core
// (RepoBackupRun), and what it reports formatted.
import ArgumentParser
import Foundation
import LitectlCore

extension Backup {
    /// The settings of this run: the options, over the config file's when one is given.
    func repositorySettings() throws -> RepoBackupSettings {
        var s = RepoBackupSettings()
        s.location = repository.location
        s.sources = paths
        s.tags = tag
        s.retention = policy
        s.jobs = jobs ?? 1
        s.timeout = timeout
        s.verify = verify.level
        s.metricsFile = metricsFile
        s.shrink = shrinkPolicy()
        guard let config else { return s }
        s.configFile = config
        return RepoBackupSettings.merging(config: try HostConfig.load(path: config), commandLine: s, jobsGiven: jobs != nil,
                                          allowEmptyGiven: allowEmpty, warnShrinkGiven: warnShrink != nil)
    }

    func runRepository() throws {
        var failed = false, refusedEmpty = false
        do {
            let settings = try repositorySettings()
            for pattern in settings.unmatched {
                printError("\(config ?? ""): \(pattern): no database matches"); failed = true
            }
            let repo = try RepoOptions.open(settings.location, quiet: voice.quiet)
            if dryRun {
                for s in try RepoBackupRun.preview(settings, repository: repo) {
                    printOut("would remove snapshot \(s.shortID) \(s.database) \(Timestamp.iso8601(s.time))")
                }
                return
            }
            let bar = ProgressBar(label: "")
            let showProgress = settings.jobs == 1 && isatty(STDERR_FILENO) == 1
            let terminal = isatty(STDOUT_FILENO) == 1
            let (quiet, verbose, json, retention) = (voice.quiet, verbose, json, !settings.retention.isEmpty)
            let outcome = try RepoBackupRun.run(settings, repository: repo, progress: { source, p in
                guard showProgress else { return }
                bar.label = "\(DurableFolder.baseName(of: source)) \(p.phase.rawValue)"
                bar.update(CopyProgress(pagesCopied: p.pages, pageCount: p.pageCount))
            }, report: { result in
                bar.clear()
                Self.show(result, quiet: quiet, verbose: verbose || terminal, json: json, retention: retention)
            })
            bar.clear()
            for lock in outcome.staleLocks where !voice.quiet {
                printError("\(repo.location): ignoring a stale \(lock.summary) (remove it with litectl unlock)")
            }
            for result in outcome.results where result.outcome == nil {
                failed = true
                if result.empty { refusedEmpty = true }
            }
            if verbose {
                for s in outcome.forgotten { printOut("forgot snapshot \(s.shortID) \(s.database) \(Timestamp.iso8601(s.time))") }
            }
            if let error = outcome.metricsError { printError(describe(error)); failed = true }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
        // An empty source refused is an error even under --config, where a
        // database that fails is otherwise a finding (exit 1).
        if failed { throw config != nil && !refusedEmpty ? ExitStatus.findings : ExitStatus.error }
    }

    /// One database's result: a line with -v (or a terminal), an object with --json, errors and warnings on stderr.
    static func show(_ result: RepoBatchResult, quiet: Bool, verbose: Bool, json: Bool, retention: Bool) {
        guard let o = result.outcome else {
            printError(result.error ?? "\(result.source): failed")
            if json {
                printExact(JSON.object([("source", .string(result.source)), ("ok", .bool(false)),
                                        ("error", .string(result.error ?? "")), ("snapshot", .null), ("shrunk", .null)]).compact)
            }
            return
        }
        let s = o.snapshot
        if let shrink = o.shrink, !quiet { printError("warning: " + shrink.message(source: result.source, retention: retention)) }
        if json {
            printExact(JSON.object([("source", .string(result.source)), ("ok", .bool(true)), ("error", .null),
                                    ("snapshot", s.json), ("shrunk", o.shrink?.json ?? .null), ("pages_read", .integer(Int64(o.pagesRead))),
                                    ("pages_new", .integer(Int64(o.pagesNew))), ("bytes_added", .integer(o.bytesAdded)),
                                    ("packs_written", .integer(Int64(o.packsWritten)))]).compact)
        } else if !quiet && verbose {
            printOut("\(result.source) -> snapshot \(s.shortID): \(o.pagesRead) pages read, \(o.pagesNew) new, \(humanBytes(o.bytesAdded)) added, \(String(format: "%.2f", o.seconds)) s")
        }
    }
}
