// `litectl verify BACKUP...`: the restore drill — re-check backups later.
import ArgumentParser
import Foundation
import LitectlCore

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-check backups: SHA-256 against the manifest, then integrity_check.",
        discussion: """
            Each BACKUP is a .db or .db.gz made by litectl backup (or any database \
            file), a manifest (<backup>.json: its backup is checked), or a folder: the \
            backup of every litectl manifest in it, in name order (a folder without one \
            is an error). A manifest whose backup file does not exist (a backup killed \
            between writing its manifest and renaming the backup into place) is a bad \
            backup: "BAD PATH: missing: ...".

            For each backup: the SHA-256 of the file is compared with its manifest \
            (<backup>.json) when there is one, a gzip file is decompressed into a \
            temporary file (beside the backup, or in $TMPDIR when that folder is not \
            writable; removed afterwards), and the database is checked with \
            PRAGMA integrity_check (quick_check with --quick), opened read-only and \
            immutable (no -wal or -shm files are made).

            One line per bad backup on stdout, "BAD PATH: reason", and one per good one, \
            "ok PATH", on a terminal or with -v (cron mails only the bad ones); -q prints \
            nothing (the exit status tells). Without a manifest the hash is not \
            compared and the ok line says so. --json prints one \
            object per backup (path, ok, compressed, sha256, manifest, sha256_matches, \
            check, result; compressed, sha256 and check are null for a missing backup).

            Exit status: 0 all good, 1 a backup is bad (hash mismatch, damaged gzip, not \
            a database, failed check, missing beside its manifest), 2 a backup could not \
            be checked (missing without a manifest, unreadable, no room to decompress).
            
            With --repo URL, verifies a repository instead: every snapshot's page list loads, \
            each of its pages is in the index and (repository format 3) the SHA-256 of its \
            page ids is the snapshot's, and every pack the index names exists \
            and is long enough; --read-data reads every pack back and rehashes every page \
            (--read-data-subset PCT: a random PCT% of the packs). Each problem is one BAD \
            line naming the object and the snapshots it damages; exit status 1. A sound \
            repository prints "ok LOCATION: ..." (snapshots, packs, packs read, pages) on \
            a terminal or with -v. Packs no \
            index names (left by killed runs) are not problems: prune removes them. The \
            chains of `litectl replicate` are checked too: every segment reads back as the \
            SHA-256 its name says, belongs to an existing base, and follows the one before \
            with no gap; every page its states name is indexed (and, with --read-data, \
            reads back); the states replayed from the base's page list give the digest \
            each recorded. A damaged chain is named by its base snapshot's id. Then each \
            database's history, as snapshots --ranges says it: every gap (a moment from \
            which a restore no longer rebuilds the database: a segment missing, unreadable \
            or out of order, a state whose pages do not resolve to a pack, a chain that \
            ends before the state the chain continuing it recorded) is one more BAD line \
            naming its first moment (to the microsecond), the moment restores work again \
            (or none), the last moment before it a restore rebuilds, and the cause \
            (--json: gaps, one object each: database, path, hostname, from, to, from_unix, \
            to_unix, chains, object, cause).
            """)

    @Argument(help: ArgumentHelp("Backup files, manifests or folders of backups.", valueName: "backup"))
    var backups: [String] = []

    @OptionGroup(title: "Repository") var repository: RepoOptions

    @Flag(help: "With --repo: read back every pack and rehash every page.")
    var readData = false

    @Option(help: ArgumentHelp("With --repo: read back this share of the packs, chosen at random (0-100).", valueName: "pct"))
    var readDataSubset: Double?

    func validate() throws {
        if repository.isGiven {
            if !backups.isEmpty { throw ValidationError("With --repo, give no backup files.") }
            if let p = readDataSubset, !(p > 0 && p <= 100) { throw ValidationError("--read-data-subset must be above 0 and at most 100.") }
            if readData && readDataSubset != nil { throw ValidationError("Give --read-data or --read-data-subset, not both.") }
        } else {
            if backups.isEmpty { throw ValidationError("Give backup files, manifests or folders (or --repo).") }
            if readData || readDataSubset != nil { throw ValidationError("--read-data applies with --repo.") }
            try repository.requireNoRepositoryOptions()
        }
    }

    @Flag(help: "quick_check instead of integrity_check.")
    var quick = false

    @OptionGroup var voice: VoiceOptions
    var json: Bool { voice.json }

    func run() throws {
        try refuseMoments(backups, as: "verified as a backup file (verify the repository with --repo)")
        TemporaryFiles.installSignalCleanup()
        if repository.isGiven { return try runRepository() }
        var bad = false, error = false
        for argument in backups {
            let items: [VerifyItem]
            do { items = try BackupVerifier.items(for: argument) } catch let failure {
                error = true
                printError(describe(failure))
                continue
            }
            for item in items {
                switch item {
                case .missingBackup(let path, let manifest):
                    bad = true
                    let result = "missing: \(DurableFolder.baseName(of: manifest)) is there but the backup file is not (a backup killed before its rename into place; backup --keep-* removes such manifests)"
                    if json {
                        printExact(JSON.object([
                            ("path", .string(path)), ("ok", .bool(false)), ("compressed", .null), ("sha256", .null),
                            ("manifest", .string(manifest)), ("sha256_matches", .null), ("check", .null), ("result", .string(result)),
                        ]).compact)
                    } else if !voice.quiet {
                        printOut("BAD \(path): \(result)")
                    }
                case .backup(let path):
                    do {
                        let check = try BackupVerifier.verify(path, level: quick ? .quick : .full)
                        if !check.passed { bad = true }
                        report(check, path: path)
                    } catch let failure {
                        error = true
                        printError(describe(failure))
                    }
                }
            }
        }
        if error { throw ExitStatus.error }
        if bad { throw ExitStatus.findings }
    }

    func report(_ check: BackupCheck, path: String) {
        if json {
            printExact(JSON.object([
                ("path", .string(path)), ("ok", .bool(check.passed)), ("compressed", .bool(check.compressed)),
                ("sha256", .string(check.sha256)), ("manifest", .optional(check.manifestPath) { .string($0) }),
                ("sha256_matches", .optional(check.sha256Matches) { .bool($0) }),
                ("check", .string(check.checkMode == .full ? "integrity_check" : "quick_check")),
                ("result", .string(check.checkResult)),
            ]).compact)
        } else if voice.quiet {
            return
        } else if check.passed {
            guard voice.talks else { return }
            let hash = check.sha256Matches == nil ? "no manifest, hash not compared" : "SHA-256 matches the manifest"
            printOut("ok \(path) (\(hash), \(check.checkMode == .full ? "integrity_check" : "quick_check") ok)")
        } else {
            var reasons: [String] = []
            if check.sha256Matches == false { reasons.append("SHA-256 does not match the manifest") }
            if check.checkResult != "ok" { reasons.append(check.checkResult) }
            printOut("BAD \(path): \(reasons.joined(separator: "; "))")
        }
    }

    func runRepository() throws {
        let bar = ProgressBar(label: "reading", unit: "packs")
        do {
            let repo = try repository.open(quiet: voice.quiet)
            var options = RepoVerifyOptions()
            options.readDataPercent = readData ? 100 : (readDataSubset ?? 0)
            let report = try RepoVerify.run(repo, options: options, progress: bar.update)
            bar.clear()
            if json {
                printExact(JSON.object([
                    ("repository", .string(repo.location)), ("ok", .bool(report.problems.isEmpty)),
                    ("snapshots", .integer(Int64(report.snapshots))), ("packs", .integer(Int64(report.packs))),
                    ("packs_read", .integer(Int64(report.packsRead))), ("pages_indexed", .integer(Int64(report.pagesIndexed))),
                    ("pages_read", .integer(Int64(report.pagesRead))), ("unreferenced_packs", .integer(Int64(report.unreferencedPacks))),
                    ("segments", .integer(Int64(report.segments))), ("chains", .integer(Int64(report.chains))),
                    ("problems", .array(report.problems.map { p in
                        .object([("object", .string(p.object)), ("message", .string(p.message)),
                                 ("snapshots", .array(p.snapshots.sorted().map { .string($0) }))])
                    })),
                    ("damaged_snapshots", .array(report.damagedSnapshots.map { .string($0) })),
                    ("gaps", .array(report.histories.flatMap { h in h.gaps.map { g in
                        .object([("database", .string(h.database)), ("path", .string(h.path)), ("hostname", .string(h.hostname)),
                                 ("from", .string(Timestamp.iso8601Micros(g.from))), ("to", .optional(g.to) { .string(Timestamp.iso8601Micros($0)) }),
                                 ("from_unix", .number(g.from)), ("to_unix", .optional(g.to) { .number($0) }),
                                 ("chains", .array(g.chains.map { .string($0) })), ("object", .string(g.object)), ("cause", .string(g.cause))])
                    } })),
                ]).compact)
            } else if !voice.quiet {
                for p in report.problems {
                    let hit = p.snapshots.isEmpty ? "" : "; damages snapshot(s) \(p.snapshots.sorted().map { String($0.prefix(8)) }.joined(separator: ", "))"
                    printOut("BAD \(repo.location)/\(p.object): \(p.message)\(hit)")
                }
                if report.problems.isEmpty && voice.talks {
                    printOut("ok \(repo.location): \(report.snapshots) snapshots, \(report.packs) packs (\(report.packsRead) read back), \(report.pagesIndexed) pages indexed")
                }
            }
            if !report.problems.isEmpty { throw ExitStatus.findings }
        } catch let code as ExitCode {
            throw code
        } catch {
            bar.clear()
            throw fail(error)
        }
    }
}
