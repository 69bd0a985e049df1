// `litectl restore BACKUP TARGET`: verify a backup, then put it back.
import ArgumentParser
import Foundation
import LitectlCore

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify a backup, then restore it into a database file.",
        discussion: """
            The backup (.db or .db.gz) is verified first as litectl verify does \
            (SHA-256 against its manifest when there is one, integrity_check, or \
            quick_check with --quick); a bad backup restores nothing (exit 2).

            A TARGET that does not exist is written to a temporary file beside it and \
            renamed into place, with the backup's permission bits. An existing TARGET is \
            refused unless --force; then its current content is first copied to \
            TARGET.before-restore-<UTC timestamp> (-2, -3... when that name is taken; unless \
            --no-keep), and the backup lands \
            all or nothing. When no other process has TARGET open (as /proc shows; as \
            another user than root, other users' processes count as having it open), \
            TARGET is in rollback-journal mode and has one link and no extended attributes \
            (ACLs, security labels), a complete copy is built beside it and renamed over \
            it, with TARGET's owner, group and mode. Otherwise \
            (or with --in-place) the backup is copied in through SQLite's backup API in \
            one write transaction on TARGET: processes that have TARGET open see the old \
            content until the restore commits and the new content after. Other \
            connections' locks are waited for up to --timeout. A WAL-mode TARGET must have \
            the backup's page size. A TARGET that is not a database at all (a destroyed \
            header) is kept the same way and replaced by a rename.

            On any error, a full disk ("disk full") or SIGINT, SIGTERM or SIGHUP \
            ("interrupted by SIGTERM"), TARGET is left as it was, its transaction rolled \
            back before litectl exits 2. After SIGKILL an in-place restore leaves TARGET's \
            journal, as SQLite does for any killed writer: the next restore (or any \
            write) rolls it back first. docs/safety.md (installed as \
            /usr/local/share/doc/litectl/safety.md) says how this is tested.

            Silent on success (-v prints what was done; --json one object: backup, \
            target, sha256, sha256_matches, check, replaced_existing, kept_old). TARGET \
            is never the backup itself, its manifest, or a link to them; in_place_because \
            says why an existing TARGET was written in place (null: renamed). Exit status: 0 \
            restored, 2 anything else (nothing changed).
            
            With --repo URL, BACKUP names a snapshot: an id (any unique prefix) or latest, \
            with --db NAME (the database's file name or path) and --at TIME (the newest \
            snapshot or replicated state at or before TIME). TIME is RFC 3339 with Z or an \
            offset (2026-12-07T09:00:00+01:00; fractions of a second allowed; without a \
            zone, UTC), a date (up to its end), a time before now (-10m, -2h, -1d, -1h30m; \
            --at -10m works as --at=-10m does), or epoch seconds (1765098000); a time written \
            to the second means up to the end of that second. The file is rebuilt in a temporary file beside \
            TARGET, then each page is checked against its id and the ids' SHA-256 against \
            the snapshot's (the file's SHA-256 for snapshots of repositories before version \
            3), and its logical hash against the snapshot's (a damaged page names its \
            pack), before it lands as above: the file is proven to \
            be, byte for byte, the copy the backup made and checked (quick_check by \
            default, as the snapshot's verification says). --verify quick or full runs \
            quick_check or integrity_check on it again (a restore drill); without it, \
            quick_check runs only when the backup skipped its check. The logical hash is \
            summed page by page; on the host that made the backups, the pages the last \
            backup of the database decoded take their row sums from its cache (see \
            docs/repository.md, installed as /usr/local/share/doc/litectl/repository.md; LITECTL_CACHE_DIR= decodes every row). --json prints what \
            was restored.
            
            A folder as BACKUP holds backups as backup DB FOLDER/ writes them \
            (NAME-<UTC time>.db[.gz], each with its manifest): the newest backup of --db \
            (its file name, app.db, or its path; not needed when the folder holds one \
            database's backups), started at or before --at when given, that passes \
            verification is restored; newer ones that fail are passed over with a warning \
            naming them (-v and --json name the one restored).

            For a container that restores at boot: --if-db-not-exists does nothing and exits \
            0 when TARGET exists (the application's data is never overwritten; -v says so), \
            and --if-replica-exists does nothing and exits 0 when there is nothing to \
            restore yet (no snapshot of --db in the repository, no backup of it in the \
            folder, no backup file; -v says so), as Litestream's -if-db-not-exists and \
            -if-replica-exists do. A repository or folder that cannot be read stays an \
            error (exit 2). docs/repo.md shows the boot-time recipe with replicate --exec.

            A restore killed with SIGKILL leaves its hidden temporary file \
            (.TARGET.tmp-* or .TARGET.before-restore-*.tmp-*) beside TARGET; the next \
            restore of that TARGET removes it (only such files of that TARGET, and only \
            when the process that made them is gone).
            """)

    @Argument(help: ArgumentHelp("The backup file, or a folder of backups (the newest one of --db that passes verification); with --repo: a snapshot id or prefix, or latest.", valueName: "backup"))
    var backup: String

    @Argument(help: ArgumentHelp("The database to restore into.", valueName: "target"))
    var target: String

    @OptionGroup(title: "Repository") var repository: RepoOptions

    @Option(help: ArgumentHelp("With --repo and latest, or a folder of backups: the newest snapshot or backup of this database (its file name or path).", valueName: "name"))
    var db: String?

    @Option(parsing: .unconditional,
            help: ArgumentHelp("With --repo and latest: the newest state at or before TIME (of a folder of backups: the newest backup started at or before TIME): RFC 3339 with Z or an offset (2026-12-07T09:00:00Z, 2026-12-07T09:00:00.5+01:00; without one, UTC), a date (its end), a time before now (-10m, -2h, -1d, -1h30m: --at -10m and --at=-10m alike), or epoch seconds (1765098000).", valueName: "time"),
            transform: MomentArgument.parse)
    var at: MomentArgument?

    @Flag(help: "Overwrite an existing TARGET.")
    var force = false

    @Flag(help: "Do nothing and exit 0 when TARGET exists (-v says so): a restore at boot, before the application starts.")
    var ifDbNotExists = false

    @Flag(help: "Do nothing and exit 0 when there is no backup to restore: no snapshot of the database in the repository, no backup of it in the folder, no backup file (-v says so). A repository that cannot be opened is still an error.")
    var ifReplicaExists = false

    @Flag(help: "With --force, do not keep TARGET's old content.")
    var noKeep = false

    @Flag(help: "With --force, write into TARGET's own file in one transaction even when no other process has it open (for a TARGET other hosts or containers may have open).")
    var inPlace = false

    @Flag(help: "quick_check instead of integrity_check when verifying the backup (the same as --verify quick).")
    var quick = false

    @Option(help: ArgumentHelp("The SQLite check of what is restored: quick (quick_check), full (integrity_check) or none. Default: full for a backup file; with --repo, quick only when the snapshot's copy was not checked at backup time.", valueName: "level"))
    var verify: Backup.VerifyChoice?

    @OptionGroup var lockWait: DatabaseOptions
    var timeout: Double { lockWait.seconds(default: 60) }

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }
    var json: Bool { voice.json }

    func validate() throws {
        if noKeep && !force { throw ValidationError("--no-keep only applies with --force.") }
        if inPlace && !force { throw ValidationError("--in-place only applies with --force.") }
        if quick && verify != nil { throw ValidationError("--quick is --verify quick: give one of them.") }
        if ifDbNotExists && force { throw ValidationError("--if-db-not-exists leaves an existing TARGET alone, --force overwrites it: give one of them.") }
        if !repository.isGiven { try repository.requireNoRepositoryOptions() }
    }

    func run() throws {
        try refuseMomentAsBackup()
        try refuseMoments([target], as: "restored into")
        Interruption.install(naming: target)
        // A restore at boot: an existing TARGET is the application's own data.
        if ifDbNotExists && DurableFolder.exists(target) {
            if verbose { printOut("\(target) exists: nothing restored (--if-db-not-exists)") }
            return
        }
        if repository.isGiven { return try runRepository() }
        let fromFolder = DurableFolder.isFolder(backup)
        if (db != nil || at != nil) && !fromFolder {
            printError("--db and --at select a snapshot or a backup of a folder: they need --repo, or a folder as BACKUP"); throw ExitCode(64)
        }
        if ifReplicaExists {
            // No backup to restore: nothing to do (a folder that cannot be
            // read, or several databases without --db, are still errors).
            var none = !DurableFolder.exists(backup)
            if fromFolder {
                do { none = try BackupFolderChoice.candidates(in: backup, database: db, at: at?.seconds).isEmpty } catch {
                    printError(describe(error)); throw ExitStatus.error
                }
            }
            if none {
                if verbose { printOut("\(backup): \(fromFolder ? BackupFolderChoice.noneMessage(database: db, at: at?.seconds) : "no such backup"): nothing restored (--if-replica-exists)") }
                return
            }
        }
        var request = RestoreRequest(backup: backup, target: target)
        request.database = db
        request.at = at?.seconds
        request.force = force
        request.keepOld = !noKeep
        request.inPlace = inPlace
        request.verify = quick ? .quick : verify?.level ?? .full
        request.timeout = timeout
        request.busyTimeout = lockWait.milliseconds(default: 60)
        let bar = ProgressBar(label: DurableFolder.baseName(of: target))
        do {
            let outcome = try LitectlCore.Restore.run(request, progress: bar.update)
            bar.clear()
            if json {
                let check = outcome.check
                printExact(JSON.object([("backup", .string(outcome.backup)), ("target", .string(target)),
                                        ("sha256", .string(check.sha256)), ("sha256_matches", .optional(check.sha256Matches) { .bool($0) }),
                                        ("check", .string(check.checkMode == .full ? "integrity_check" : "quick_check")),
                                        ("replaced_existing", .bool(outcome.replacedExisting)),
                                        ("kept_old", .optional(outcome.keptOld) { .string($0) }),
                                        ("in_place_because", .optional(outcome.inPlaceBecause) { .string($0) })]).compact)
            } else if verbose {
                if let kept = outcome.keptOld { printOut("kept the old content of \(target) as \(kept)") }
                printOut("restored \(outcome.backup) into \(target)" + Self.how(outcome.replacedExisting, outcome.inPlaceBecause))
            }
            if !voice.quiet { for skipped in outcome.skipped { printError("warning: passed over \(skipped)") } }
        } catch {
            bar.clear()
            printError(describe(error))
            throw ExitStatus.error
        }
    }

    /// How an existing TARGET was replaced, for -v.
    static func how(_ replacedExisting: Bool, _ inPlaceBecause: String?) -> String {
        guard replacedExisting else { return "" }
        return inPlaceBecause.map { " in place, in one transaction (\($0))" } ?? " by a rename (no other process had it open)"
    }

    func runRepository() throws {
        let bar = ProgressBar(label: DurableFolder.baseName(of: target))
        do {
            let repo = try repository.open(quiet: voice.quiet)
            let snapshots = try repo.snapshots().snapshots
            if ifReplicaExists {
                // No such snapshot, or none of the database: nothing to restore yet.
                do { _ = try SnapshotSelector.select(backup, from: snapshots, database: db, at: nil, location: repo.location) } catch let error as StoreError where error.kind == .notFound {
                    bar.clear()
                    if verbose { printOut("\(error.description): nothing restored (--if-replica-exists)") }
                    return
                }
            }
            // The newest snapshot or replicated state at or before --at.
            let quiet = voice.quiet
            let point = try ReplicaSelector.select(backup, from: snapshots, database: db, at: at?.seconds,
                                                   repository: repo, note: { if !quiet { printError("warning: " + $0) } })
            var request = try point.request(target: target, repository: repo)
            request.otherInputs = [repository.keyFile, repository.passphraseFile].compactMap { $0 }
            let snapshot = request.snapshot
            var state: ReplicaState?
            if case .state(_, let s) = point { state = s }
            request.force = force
            request.keepOld = !noKeep
            request.inPlace = inPlace
            request.timeout = timeout
            request.verify = quick ? .quick : verify?.level
            let level = request.verify ?? RepoRestore.defaultCheck(for: snapshot)
            let outcome = try RepoRestore.run(request, repository: repo, progress: bar.update)
            bar.clear()
            if json {
                printExact(JSON.object([("snapshot", .string(snapshot.id)), ("state", .optional(state) { .integer(Int64($0.number)) }),
                                      ("database", .string(snapshot.database)),
                                      ("time", .string(Timestamp.iso8601(snapshot.time))), ("target", .string(target)),
                                      ("pages", .integer(Int64(outcome.pages))), ("bytes_fetched", .integer(outcome.bytesFetched)),
                                      ("replaced_existing", .bool(outcome.replacedExisting)),
                                      ("kept_old", .optional(outcome.keptOld) { .string($0) }),
                                      ("in_place_because", .optional(outcome.inPlaceBecause) { .string($0) }),
                                      ("logical_hash", snapshot.logicalHash.isEmpty ? .null : .string(snapshot.logicalHash)),
                                      ("hash_pages_reused", .integer(Int64(outcome.hashPagesReused))),
                                      ("hash_pages_decoded", .integer(Int64(outcome.hashPagesDecoded)))]).compact)
            } else if verbose {
                if let kept = outcome.keptOld { printOut("kept the old content of \(target) as \(kept)") }
                if outcome.replacedExisting { printOut("replaced \(target)" + Self.how(true, outcome.inPlaceBecause)) }
                let check = level == .none ? "the copy passed \(snapshot.verification.dropLast(3)) at backup time" : "\(level == .full ? "integrity_check" : "quick_check") ok"
                if let state {
                    printOut("restored state \(state.number) of chain \(snapshot.shortID) of \(snapshot.database) (observed \(Timestamp.iso8601(state.observed))) into \(target): \(outcome.pages) pages; every page matches its id, the ids the state's digest; \(check)")
                } else {
                    printOut("restored snapshot \(snapshot.shortID) of \(snapshot.database) (\(Timestamp.iso8601(snapshot.time))) into \(target): \(outcome.pages) pages; \(snapshot.pagesSHA256 == nil ? "SHA-256" : "every page matches its id; the ids' SHA-256") \(snapshot.logicalHash.isEmpty ? "matches (no logical hash recorded)" : "and logical hash match (\(outcome.hashPagesReused) pages' row sums from this host's cache, \(outcome.hashPagesDecoded) pages decoded)"); \(check)")
                }
            }
        } catch {
            bar.clear()
            throw fail(error)
        }
    }

    /// A moment given as BACKUP (`restore repo:app.db@-1h out.db`): a usage
    /// error, one line saying how a moment is restored (exit 64). A local
    /// file so named is reached as ./repo:...
    private func refuseMomentAsBackup() throws {
        guard backup.utf8.starts(with: MomentReference.prefix.utf8) else { return }
        let how: String
        if let reference = try? MomentReference.parse(backup), let point = try? PointInTime.parse(reference.when) {
            let db = Self.shellWord(reference.database), out = Self.shellWord(target)
            switch point {
            case .latest: how = "litectl restore --repo URL latest --db \(db) \(out)"
            case .snapshot(let id): how = "litectl restore --repo URL \(id) \(out)"
            case .time: how = "litectl restore --repo URL latest --db \(db) --at \(Self.shellWord(reference.when)) \(out)"
            }
        } else {
            how = "litectl restore --repo URL latest --db NAME --at WHEN \(Self.shellWord(target))"
        }
        printError("\(backup): a moment of a repository is not a backup to restore from; restore it with \(how) (a local file so named is ./\(backup))")
        throw ExitCode(64)
    }

    /// `word` as a shell reads it back: bare when plain, else in single quotes.
    private static func shellWord(_ word: String) -> String {
        let plain = !word.isEmpty && word.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || "-_./:+@,=".utf8.contains($0) }
        return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
