// `litectl backup DB... --repo URL` and `litectl backup --config FILE`:
// snapshots into a repository, retention after them, the metrics textfile.
import ArgumentParser
import Foundation
import LitectlCore

extension Backup {
    func runRepository() throws {
        var sources = paths
        var options = repository
        var tags = tag
        var keep = policy
        var jobCount = jobs ?? 1
        var lockTimeout = timeout
        var verifyLevel = verify.level
        var metricsPath = metricsFile
        var shrink = shrinkPolicy()
        var failed = false, refusedEmpty = false
        do {
            if let config {
                let host = try HostConfig.load(path: config)
                options.repo = host.repository
                options.endpoint = options.endpoint ?? host.endpoint
                options.region = options.region ?? host.region
                options.profile = options.profile ?? host.profile
                options.keyFile = options.keyFile ?? host.keyFile
                options.passphraseFile = options.passphraseFile ?? host.passphraseFile
                let expanded = host.expandDatabases()
                sources = expanded.paths
                for pattern in expanded.unmatched {
                    printError("\(config): \(pattern): no database matches"); failed = true
                }
                tags = host.tags + tags
                if keep.isEmpty { keep = host.keep }
                jobCount = jobs ?? host.jobs
                if let t = host.timeout { lockTimeout = t }
                verifyLevel = host.verify
                metricsPath = metricsPath ?? host.metricsFile
                shrink = shrinkPolicy(default: host.shrink)
            }
            let repo = try options.open()
            if dryRun {
                let decision = RepoForget.decide(try repo.snapshots().snapshots, policy: keep)
                for s in decision.remove where sources.contains(where: { BackupJob.resolvedPath($0) == s.path }) {
                    printOut("would remove snapshot \(s.shortID) \(s.database) \(Timestamp.iso8601(s.time))")
                }
                return
            }
            var template = RepoBackupRequest(source: "")
            template.tags = tags
            template.verify = verifyLevel
            template.copy.timeout = lockTimeout
            template.shrink = shrink
            let bar = ProgressBar(label: "")
            let showProgress = jobCount == 1 && isatty(STDERR_FILENO) == 1
            let terminal = isatty(STDOUT_FILENO) == 1
            let (results, stale) = try RepoBackupBatch.run(sources, repository: repo, template: template, jobs: jobCount,
                                                           lockTimeout: lockTimeout, progress: { source, p in
                guard showProgress else { return }
                bar.label = "\(DurableFolder.baseName(of: source)) \(p.phase.rawValue)"
                bar.update(CopyProgress(pagesCopied: p.pages, pageCount: p.pageCount))
            })
            bar.clear()
            for lock in stale where !voice.quiet { printError("\(repo.location): ignoring a stale \(lock.summary) (remove it with litectl unlock)") }
            var metrics: [BackupMetric] = []
            for result in results {
                if let o = result.outcome {
                    let s = o.snapshot
                    metrics.append(BackupMetric(source: s.path, success: true, finishedAt: s.time + s.durationSeconds,
                                                durationSeconds: s.durationSeconds, bytes: o.bytesAdded,
                                                verified: verifyLevel == .none ? -1 : 1, shrunk: o.shrink != nil))
                    if let shrink = o.shrink, !voice.quiet { printError("warning: " + shrink.message(source: result.source, retention: !keep.isEmpty)) }
                    if json {
                        printExact(JSON.object([("source", .string(result.source)), ("ok", .bool(true)), ("error", .null),
                                              ("snapshot", s.json), ("shrunk", o.shrink?.json ?? .null), ("pages_read", .integer(Int64(o.pagesRead))),
                                              ("pages_new", .integer(Int64(o.pagesNew))), ("bytes_added", .integer(o.bytesAdded)),
                                              ("packs_written", .integer(Int64(o.packsWritten)))]).compact)
                    } else if !voice.quiet && (verbose || terminal) {
                        printOut("\(result.source) -> snapshot \(s.shortID): \(o.pagesRead) pages read, \(o.pagesNew) new, \(humanBytes(o.bytesAdded)) added, \(String(format: "%.2f", o.seconds)) s")
                    }
                } else {
                    failed = true
                    if result.empty { refusedEmpty = true }
                    printError(result.error ?? "\(result.source): failed")
                    metrics.append(BackupMetric(source: BackupJob.resolvedPath(result.source), success: false, finishedAt: nil,
                                                durationSeconds: 0, bytes: 0, verified: result.corrupt ? 0 : -1))
                    if json {
                        printExact(JSON.object([("source", .string(result.source)), ("ok", .bool(false)),
                                              ("error", .string(result.error ?? "")), ("snapshot", .null), ("shrunk", .null)]).compact)
                    }
                }
            }
            if !keep.isEmpty {
                // Retention for the databases of this run only, after their backups.
                let lock = try RepoLock(repo, exclusive: false, command: "forget", timeout: lockTimeout)
                defer { lock.release() }
                // Not those that shrank: the last good snapshot may be among the older ones.
                let backedUp = Set(results.compactMap { $0.outcome.flatMap { $0.shrink == nil ? $0.snapshot.path : nil } })
                let decision = RepoForget.decide(try repo.snapshots().snapshots, policy: keep)
                let doomed = decision.remove.filter { backedUp.contains($0.path) && $0.hostname == RepoLock.hostname }
                try RepoForget.remove(doomed, from: repo)
                if verbose { for s in doomed { printOut("forgot snapshot \(s.shortID) \(s.database) \(Timestamp.iso8601(s.time))") } }
            }
            if let metricsPath {
                do { try BackupMetrics.write(metrics, to: metricsPath) } catch { printError(describe(error)); failed = true }
            }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
        // An empty source refused is an error even under --config, where a
        // database that fails is otherwise a finding (exit 1).
        if failed { throw config != nil && !refusedEmpty ? ExitStatus.findings : ExitStatus.error }
    }
}
