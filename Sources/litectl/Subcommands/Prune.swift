// `litectl prune --repo URL`: reclaim the space of pages no snapshot needs.
import ArgumentParser
import LitectlCore

struct Prune: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove pages and objects that no snapshot of a repository needs.",
        discussion: """
            Under an exclusive lock (it waits for backups and followers to let their \
            shared locks go, up to --timeout, its lock in place so that new ones wait for \
            it; backups wait for it, up to their --timeout): packs no \
            snapshot needs are deleted; packs whose live pages are under half their size \
            are rewritten with only those pages; the index is rewritten; page lists no \
            snapshot needs and packs left by killed runs are deleted. The order (new packs, \
            new index, old index, old packs) keeps the repository whole if prune is killed \
            at any moment. --dry-run reports what would be freed.

            A chain of `litectl replicate` with a segment that does not read back, or that \
            names a page the index lacks, is named on stderr with the cause, one line each \
            (with --json: damaged_chains): the pages its other segments name are kept, and \
            the rest of the repository is pruned as ever. (The pages only an unreadable \
            segment names cannot be known, nor restored without it.)

            Exit status: 0 done, 1 done, but a chain is damaged (named on stderr), 2 error.
            """)

    @OptionGroup var options: RepoOptions

    @Flag(help: "Change nothing; report what would be freed.")
    var dryRun = false

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var lockWait: DatabaseOptions

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let repository = try options.open(quiet: voice.quiet)
            let lock = try RepoLock(repository, exclusive: true, command: "prune", timeout: lockWait.seconds(default: 60))
            defer { lock.release() }
            for stale in lock.ignoredStale where !voice.quiet {
                printError("\(repository.location): ignoring a stale \(stale.summary) (remove it with litectl unlock)")
            }
            let report = try RepoPrune.run(repository, dryRun: dryRun, lock: lock)
            for d in report.damagedChains { printError(damagedChainLine(d, then: pruneDamageNote)) }
            if voice.json { printExact(pruneJSON(report).compact) }
            else if !voice.quiet && (voice.verbose || dryRun) { printOut(pruneSummary(report, dryRun: dryRun)) }
            if !report.damagedChains.isEmpty { throw ExitStatus.findings }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
    }
}
