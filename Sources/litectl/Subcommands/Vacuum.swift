// `litectl vacuum DB`: compact a database in place or into a new file, and
// say what it gave back.
import ArgumentParser
import Foundation
import LitectlCore

extension AutoVacuumMode: ExpressibleByArgument {}

struct Vacuum: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compact a database (VACUUM, VACUUM INTO, incremental_vacuum) and report the space given back.",
        discussion: """
            Without --into the database is compacted where it is, all or nothing. When no \
            other process has DB open (as /proc shows; as another user than root, other \
            users' processes count as having it open), DB is in rollback-journal mode and \
            has one link and no extended attributes (ACLs, security labels), a compacted copy is made with VACUUM INTO beside it (which keeps \
            rowids) and renamed over it with DB's owner, group and mode. Otherwise (or with \
            --in-place) VACUUM runs in the file: SQLite rebuilds it in a temporary copy and \
            writes it back through its journal, so the database is whole at every moment. \
            Like SQLite's VACUUM it may then give new rowids to tables with neither an \
            INTEGER PRIMARY KEY nor an index (the report names them; --into keeps rowids). \
            In WAL mode the WAL is checkpointed afterwards (TRUNCATE) so the file shrinks \
            at once; a reader that holds the checkpoint back is reported. VACUUM needs the \
            write lock for its whole run (--timeout waits for it). On any error, a full disk \
            ("disk full") or SIGINT, SIGTERM or SIGHUP ("interrupted by SIGTERM"), DB is \
            left as it was (its transaction rolled back, or the copy removed) and the exit \
            status is 2; after SIGKILL an in-place VACUUM leaves DB's journal, as SQLite \
            does for any killed writer, and the next write of DB (a vacuum, say) rolls it \
            back. See docs/safety.md (installed as /usr/local/share/doc/litectl/safety.md).

            --into FILE writes a compacted copy instead and leaves DB untouched (read-only, \
            one snapshot): VACUUM INTO a hidden temporary file beside FILE, which is \
            fsynced and renamed (VACUUM INTO alone writes under the final name and never \
            syncs); an existing FILE is replaced only with --force, never when it is DB \
            itself (also through a link) or has a FILE-wal or FILE-journal beside it (SQLite \
            would apply it to the new file): those are refused (exit 2); on an error or signal \
            the temporary file goes, after SIGKILL the next run into that folder removes \
            it. The copy keeps DB's journal mode.

            --page-size N (512 to 65536, a power of two) and --auto-vacuum \
            none|full|incremental change settings that take a VACUUM to apply (a page size \
            change in WAL mode leaves WAL for the VACUUM and comes back; when coming back \
            fails, the VACUUM is kept, the database is in DELETE mode, a warning says so and \
            the exit status is 1; a run killed between the steps leaves it in DELETE mode, \
            with the old or the new page size as the VACUUM's journal decides). --incremental N \
            runs PRAGMA incremental_vacuum(N) instead (0: every free page), which needs \
            auto_vacuum=incremental.

            Before writing, the free disk space is checked: VACUUM needs about the size of \
            the pages in use twice (its temporary copy, in the folder SQLite uses for \
            temporary files: $SQLITE_TMPDIR, $TMPDIR, /var/tmp, /usr/tmp or /tmp; and the \
            rollback journal or WAL beside DB), VACUUM INTO once where FILE goes. When it \
            is short the run is refused with the space needed and free (exit 2).

            --dry-run writes nothing: from the page statistics (as litectl stats reads \
            them) it reports the free pages (given back in full), the unused bytes on \
            b-tree pages (given back in part, as pages are packed afresh), the least and \
            most the file would shrink by, and the space check.

            Prints, before and after: file size (and WAL), page size, pages, free pages, \
            auto_vacuum, and the space given back, on a terminal or with -v: when stdout \
            is not a terminal (cron) nothing is printed on success, and -q prints \
            nothing anywhere (a dry run prints its report on a pipe too); --json prints one object (path, mode, into, before, after, \
            reclaimed_bytes, checkpoint_complete, rowids_may_change, wal_not_restored, \
            in_place_because (why a full VACUUM ran in the file; null when a copy was \
            renamed over it), seconds; a dry run: path, dry_run, \
            before, freelist_bytes, unused_bytes, pointer_map_pages, min_reclaim_bytes, \
            max_reclaim_bytes, space [{folder, needed, available, enough, for}]). Exit \
            status: 0 done, 1 done but left in DELETE mode, 2 error (including not enough space).
            """)

    @Argument(help: ArgumentHelp("Database file.", valueName: "db"))
    var databasePath: String

    @Option(help: ArgumentHelp("Write a compacted copy to this file instead of compacting DB.", valueName: "file"))
    var into: String?

    @Flag(help: "With --into: replace an existing file.")
    var force = false

    @Flag(help: "Run VACUUM in DB's own file even when no other process has it open (for a DB other hosts or containers may have open).")
    var inPlace = false

    @Option(help: ArgumentHelp("Page size of the result (512 to 65536, a power of two).", valueName: "bytes"))
    var pageSize: Int?

    @Option(help: ArgumentHelp("auto_vacuum of the result: none, full or incremental.", valueName: "mode"))
    var autoVacuum: AutoVacuumMode?

    @Option(help: ArgumentHelp("Free up to N pages with PRAGMA incremental_vacuum instead of a VACUUM (0: all).", valueName: "n"))
    var incremental: Int?

    @Flag(help: "Report what a vacuum would give back and the space it needs; write nothing.")
    var dryRun = false

    @OptionGroup var voice: VoiceOptions
    var quiet: Bool { voice.quiet }
    var json: Bool { voice.json }

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        if let pageSize, !(512...65536).contains(pageSize) || pageSize & (pageSize - 1) != 0 {
            throw ValidationError("--page-size must be a power of two from 512 to 65536.")
        }
        if let incremental {
            if incremental < 0 { throw ValidationError("--incremental must be 0 or more pages.") }
            if into != nil || pageSize != nil || autoVacuum != nil {
                throw ValidationError("--incremental frees pages in place: it takes no --into, --page-size or --auto-vacuum.")
            }
        }
        if force && into == nil { throw ValidationError("--force applies with --into.") }
        if inPlace && into != nil { throw ValidationError("--in-place and --into exclude each other.") }
    }

    var request: VacuumRequest {
        var request = VacuumRequest(path: databasePath)
        request.into = into
        request.replace = force
        request.pageSize = pageSize
        request.autoVacuum = autoVacuum
        request.incrementalPages = incremental
        request.inPlace = inPlace
        request.busyTimeout = database.busyTimeout
        return request
    }

    func run() throws {
        try refuseMoments([databasePath, into], as: "vacuumed")
        noteHotJournals(voice)
        Interruption.install(naming: databasePath)
        if dryRun { return try runDry() }
        let report: VacuumReport
        do {
            report = try LitectlCore.Vacuum.run(request)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        show(report)
        if let reason = report.walNotRestored {
            // Said even with -q: applications that count on WAL now block readers behind writers.
            printError("\(databasePath): warning: the VACUUM is done, but the database is now in DELETE journal mode: switching back to WAL failed (\(reason.replacingNewlines())); run PRAGMA journal_mode=WAL on it")
            throw ExitStatus.findings
        }
    }

    func show(_ report: VacuumReport) {
        if json {
            printExact(JSON.object([
                ("path", .string(databasePath)),
                ("mode", .string(report.mode.rawValue)),
                ("into", .optional(into) { .string($0) }),
                ("before", Self.json(report.before)),
                ("after", Self.json(report.after)),
                ("reclaimed_bytes", .integer(report.reclaimedBytes)),
                ("checkpoint_complete", .bool(report.checkpointComplete)),
                ("rowids_may_change", .array(report.rowidsMayChange.map { .string($0) })),
                ("wal_not_restored", .optional(report.walNotRestored) { .string($0) }),
                ("in_place_because", .optional(report.inPlaceBecause) { .string($0) }),
                ("seconds", .number((report.seconds * 1000).rounded() / 1000)),
            ]).compact)
            return
        }
        // Silent on success off a terminal (cron mails nothing; docs/output.md); -v says it anyway.
        guard voice.talks else { return }
        let title: String
        switch report.mode {
        case .vacuum: title = "VACUUM"
        case .vacuumInto: title = "VACUUM INTO \(into ?? "")"
        case .incremental: title = "PRAGMA incremental_vacuum(\(incremental ?? 0))"
        }
        printOut("\(databasePath): \(title) in \(String(format: "%.2f", report.seconds)) s")
        if voice.verbose && report.mode == .vacuum {
            printOut(report.inPlaceBecause.map { "ran in the file, in one transaction (\($0))" }
                     ?? "a compacted copy was renamed over it (no other process had it open)")
        }
        printTable([("", "before", report.mode == .vacuumInto ? "copy" : "after")] + Self.rows(report.before, report.after))
        let base = report.before.fileSize + (report.before.walSize ?? 0)
        let share = base > 0 ? String(format: " (%.1f%%)", Double(report.reclaimedBytes) * 100 / Double(base)) : ""
        if report.reclaimedBytes >= 0 {
            printOut("gave back \(humanBytes(report.reclaimedBytes))\(share)")
        } else {
            printOut("grew by \(humanBytes(-report.reclaimedBytes))")
        }
        if !report.rowidsMayChange.isEmpty {
            printOut("note: SQLite's VACUUM gives new rowids to tables with neither an INTEGER PRIMARY KEY nor an index: "
                + report.rowidsMayChange.joined(separator: ", ") + " (--into keeps them)")
        }
        if !report.checkpointComplete {
            printOut("note: another connection held the WAL checkpoint back; the file shrinks at the next checkpoint")
        }
    }

    func runDry() throws {
        let estimate: VacuumEstimate
        do {
            estimate = try LitectlCore.Vacuum.estimate(request)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        let enough = estimate.space.allSatisfy(\.isMet)
        if json {
            printExact(JSON.object([
                ("path", .string(databasePath)),
                ("dry_run", .bool(true)),
                ("before", Self.json(estimate.before)),
                ("freelist_bytes", .integer(estimate.freelistBytes)),
                ("unused_bytes", .integer(estimate.unusedBytes)),
                ("pointer_map_pages", .integer(estimate.pointerMapPages)),
                ("min_reclaim_bytes", .integer(estimate.minimumReclaim)),
                ("max_reclaim_bytes", .integer(estimate.maximumReclaim)),
                ("space", .array(estimate.space.map { need in
                    .object([("folder", .string(need.folder)), ("needed", .integer(need.needed)),
                             ("available", .optional(need.available) { .integer($0) }), ("enough", .bool(need.isMet)),
                             ("for", .array(need.purposes.map { .string($0) }))])
                })),
            ]).compact)
            return
        }
        guard !quiet else { return }
        let b = estimate.before
        printOut("\(databasePath): dry run, nothing written")
        printTable([
            ("file size", humanBytes(b.fileSize) + (b.walSize.map { " (+ \(humanBytes($0)) WAL)" } ?? ""), ""),
            ("pages", "\(b.pageCount) of \(b.pageSize) bytes", ""),
            ("free pages", "\(b.freelistPages) (\(humanBytes(estimate.freelistBytes)))", ""),
            ("unused on pages", humanBytes(estimate.unusedBytes), ""),
            ("would give back", estimate.minimumReclaim == estimate.maximumReclaim ? humanBytes(estimate.minimumReclaim)
                : "\(humanBytes(estimate.minimumReclaim)) to \(humanBytes(estimate.maximumReclaim))", ""),
        ])
        for need in estimate.space {
            printOut("space: needs about \(humanBytes(need.needed)) in \(need.folder) (\(need.purposes.joined(separator: " and "))), "
                + "\(need.available.map(humanBytes) ?? "unknown") free\(need.isMet ? "" : ": NOT ENOUGH")")
        }
        if !enough { printOut("a vacuum now would be refused for lack of space") }
    }

    static func rows(_ a: FileState, _ b: FileState) -> [(String, String, String)] {
        func size(_ s: FileState) -> String { humanBytes(s.fileSize) + (s.walSize.map { $0 > 0 ? " (+ \(humanBytes($0)) WAL)" : "" } ?? "") }
        return [
            ("file size", size(a), size(b)),
            ("page size", "\(a.pageSize)", "\(b.pageSize)"),
            ("pages", "\(a.pageCount)", "\(b.pageCount)"),
            ("free pages", "\(a.freelistPages)", "\(b.freelistPages)"),
            ("auto_vacuum", a.autoVacuum.rawValue, b.autoVacuum.rawValue),
        ]
    }

    func printTable(_ rows: [(String, String, String)]) {
        let w0 = rows.map { $0.0.count }.max() ?? 0, w1 = rows.map { $0.1.count }.max() ?? 0
        for row in rows {
            var line = row.0.padding(toLength: w0, withPad: " ", startingAt: 0) + "  " + row.1
            if !row.2.isEmpty { line = line.padding(toLength: w0 + 2 + w1, withPad: " ", startingAt: 0) + "  " + row.2 }
            printOut(line)
        }
    }

    static func json(_ s: FileState) -> JSON {
        .object([
            ("file_size", .integer(s.fileSize)),
            ("wal_size", .optional(s.walSize) { .integer($0) }),
            ("page_size", .integer(s.pageSize)),
            ("page_count", .integer(s.pageCount)),
            ("freelist_pages", .integer(s.freelistPages)),
            ("auto_vacuum", .string(s.autoVacuum.rawValue)),
            ("journal_mode", .string(s.journalMode)),
        ])
    }
}
