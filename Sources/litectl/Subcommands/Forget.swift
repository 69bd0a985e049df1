// `litectl forget --repo URL --keep-*`: retention for repository snapshots.
import ArgumentParser
import LitectlCore

struct Forget: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove repository snapshots that the retention rules do not keep.",
        discussion: """
            The rules are the folder backup's (and restic's forget): keep the newest N \
            snapshots, and the newest snapshot of each of the last H hours, D days, W weeks \
            (Monday first), M months (UTC) that have one; a snapshot kept by any rule stays. \
            They apply to each database (host and path) on its own; DB limits them to one \
            database (name or path). Only snapshot objects are removed: the pages they alone \
            used stay until `litectl prune` (or --prune here). --dry-run lists what would go. \
            forget takes a shared lock (removing snapshots never harms a backup or a \
            prune running beside it); with --prune, an exclusive one.

            --keep-within DURATION (7d, 36h, 90m, 1d12h) keeps every snapshot taken in the \
            last DURATION, and every chain of `litectl replicate` with a moment in it: every \
            moment of that time stays restorable. Chains (a base snapshot and its segments) \
            are forgotten only by --keep-within, whole (their segments first, then their \
            base), and the newest chain of each database never; the other rules apply to the \
            other snapshots. Segments whose base snapshot is gone are removed too.

            A chain that cannot be read back (a damaged or missing segment, states that \
            clash) is named on stderr with the cause, one line each: it is judged by the \
            newest moment its segments hold when each of them reads back, and kept when \
            one does not; every other chain and database is decided as ever (with \
            --json: damaged_chains, each with chain, database, path, hostname, cause).

            Exit status: 0 done (with --dry-run: listed), 1 done, but a chain could not \
            be read (named on stderr), 2 error.
            """)

    @Argument(help: ArgumentHelp("Only the snapshots of this database (name or path).", valueName: "db"))
    var database: String?

    @OptionGroup var options: RepoOptions
    @OptionGroup var keep: KeepOptions

    @Option(help: ArgumentHelp("Keep every snapshot of the last DURATION and every moment replicated in it (7d, 36h, 90m, 1d12h; a unit is needed here: a bare 7 is refused).", valueName: "duration"),
            transform: DurationArgument.parseWithUnit)
    var keepWithin: DurationArgument?

    @Flag(help: "Change nothing; list the snapshots that would be removed.")
    var dryRun = false

    @Flag(help: "Run prune afterwards.")
    var prune = false

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }
    var json: Bool { voice.json }

    @OptionGroup var lockWait: DatabaseOptions
    var timeout: Double { lockWait.seconds(default: 60) }

    func validate() throws {
        try keep.check()
        if keep.policy.isEmpty && keepWithin == nil { throw ValidationError("Give at least one --keep-* option.") }
    }

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let repository = try options.open(quiet: voice.quiet)
            let lock = dryRun ? nil : try RepoLock(repository, exclusive: prune, command: "forget", timeout: timeout)
            defer { lock?.release() }
            var damaged: [DamagedChain] = []
            let (decision, chains) = try RepoForget.decide(try repository.snapshots().snapshots, policy: keep.policy,
                                                           within: keepWithin?.seconds,
                                                           database: database, repository: repository) { damaged.append($0) }
            if !dryRun {
                try RepoForget.remove(chains, from: repository)
                try RepoForget.remove(decision.remove, from: repository)
            }
            var pruneReport: PruneReport?
            if prune { pruneReport = try RepoPrune.run(repository, dryRun: dryRun, lock: lock) }
            let removedChains = Set(chains.map(\.chain))
            for d in damaged {
                printError(damagedChainLine(d, then: removedChains.contains(d.chain)
                    ? "\(dryRun ? "would be removed" : "removed"): every moment its segments hold is older than --keep-within"
                    : "kept"))
            }
            for d in pruneReport?.damagedChains ?? [] { printError(damagedChainLine(d, then: pruneDamageNote)) }
            if json {
                var fields: [(String, JSON)] = [("dry_run", .bool(dryRun)),
                                                ("kept", .array(decision.keep.map { .string($0.id) })),
                                                ("removed", .array(decision.remove.map { .string($0.id) })),
                                                ("removed_chains", .array(chains.map { .string($0.chain) })),
                                                ("damaged_chains", .array(damaged.map(damagedChainJSON)))]
                if let pruneReport { fields.append(("prune", pruneJSON(pruneReport))) }
                printExact(JSON.object(fields).compact)
            } else if !voice.quiet && (verbose || dryRun) {
                for s in decision.remove {
                    printOut("\(dryRun ? "would remove" : "removed") snapshot \(s.shortID) \(s.database) \(Timestamp.iso8601(s.time))")
                }
                for c in chains {
                    let what = c.base.map { "\($0.database) \(Timestamp.iso8601($0.time)) to \(Timestamp.iso8601(c.lastTime))" } ?? "whose base is gone"
                    printOut("\(dryRun ? "would remove" : "removed") chain \(c.chain.prefix(8)) \(what) (\(c.segments.count) segment(s))")
                }
                if let pruneReport { printOut(pruneSummary(pruneReport, dryRun: dryRun)) }
            }
            if !damaged.isEmpty || !(pruneReport?.damagedChains.isEmpty ?? true) { throw ExitStatus.findings }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
    }
}

/// The --keep-* options of backup (backups in a folder, or snapshots) and forget (snapshots).
struct KeepOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Keep the newest N backups (snapshots) of each database.", valueName: "n")) var keepLast = 0
    @Option(help: ArgumentHelp("Keep the newest backup (snapshot) of each of the last N hours.", valueName: "n")) var keepHourly = 0
    @Option(help: ArgumentHelp("Keep the newest backup (snapshot) of each of the last N days.", valueName: "n")) var keepDaily = 0
    @Option(help: ArgumentHelp("Keep the newest backup (snapshot) of each of the last N weeks.", valueName: "n")) var keepWeekly = 0
    @Option(help: ArgumentHelp("Keep the newest backup (snapshot) of each of the last N months.", valueName: "n")) var keepMonthly = 0

    var policy: RetentionPolicy {
        RetentionPolicy(last: keepLast, hourly: keepHourly, daily: keepDaily, weekly: keepWeekly, monthly: keepMonthly)
    }

    func check() throws {
        for (name, n) in [("--keep-last", keepLast), ("--keep-hourly", keepHourly), ("--keep-daily", keepDaily),
                          ("--keep-weekly", keepWeekly), ("--keep-monthly", keepMonthly)] where n < 0 {
            throw ValidationError("\(name) must be 0 or more.")
        }
    }
}

func pruneJSON(_ r: PruneReport) -> JSON {
    .object([("packs_deleted", .integer(Int64(r.packsDeleted))), ("packs_rewritten", .integer(Int64(r.packsRewritten))),
             ("packs_kept", .integer(Int64(r.packsKept))), ("bytes_freed", .integer(r.bytesFreed)),
             ("bytes_repacked", .integer(r.bytesRepacked)), ("pages_live", .integer(Int64(r.pagesLive))),
             ("pages_removed", .integer(Int64(r.pagesRemoved))), ("lists_deleted", .integer(Int64(r.listsDeleted))),
             ("index_objects_replaced", .integer(Int64(r.indexObjectsReplaced))),
             ("damaged_chains", .array(r.damagedChains.map(damagedChainJSON)))])
}

/// What prune did about a damaged chain.
let pruneDamageNote = "the pages its other segments name are kept"


func pruneSummary(_ r: PruneReport, dryRun: Bool) -> String {
    "\(dryRun ? "would free" : "freed") \(humanBytes(r.bytesFreed)): \(r.packsDeleted) pack(s) deleted, \(r.packsRewritten) rewritten (\(humanBytes(r.bytesRepacked)) of live pages moved), \(r.packsKept) kept; \(r.pagesRemoved) page(s) and \(r.listsDeleted) page list(s) no snapshot needs"
}
