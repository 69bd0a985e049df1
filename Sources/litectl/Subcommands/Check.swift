// `litectl check DB...`: the pre-release gate — SQLite's consistency checks
// and litectl's lint checks, with findings a pipeline can act on.
import ArgumentParser
import Foundation
import LitectlCore

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check databases: integrity, foreign keys, and common schema and upkeep problems.",
        discussion: """
            Each DB is opened read-only and checked inside one read transaction. \
            Errors: PRAGMA integrity_check (or quick_check with --quick, which does not \
            compare indexes with their tables) and PRAGMA foreign_key_check, whatever the \
            foreign_keys setting; a database SQLite cannot open because it is corrupt; \
            an expectation given with --expect-* that fails (asked for explicitly, so it \
            fails the check without --strict); a file that holds no table (a \
            0-byte file, which SQLite opens as an empty database, or an empty schema: \
            what a wiped database looks like), unless --allow-empty. Warnings: a foreign key whose child columns \
            no index starts with (with the CREATE INDEX that fixes it); an ordinary table \
            without a PRIMARY KEY; a non-unique index whose columns (same order, \
            collation and direction) lead another full index on the same table \
            (with the DROP INDEX); indexes but no sqlite_stat1, a table with rows and \
            indexes but no sqlite_stat1 row, or a row count there off by more than a \
            factor of 2 (and by at least 100 rows) from the real one; a freelist above \
            --max-free-percent of the file; a -wal file larger than the database; a hot \
            rollback journal (a writer stopped inside a transaction: the other checks \
            then run on the last committed state, read from a private copy rolled back \
            in $TMPDIR; the file and its journal are not written). Notes \
            (never fail): that --quick was used; an empty database with --allow-empty.

            Output: on a terminal (or with -v), one line per finding (`PATH: SEVERITY \
            [CHECK] OBJECT: MESSAGE`, then `  fix: SQL` when there is one) and `PATH: \
            ok` for a sound database; when stdout is not a terminal only the findings \
            that fail the check print (errors, and warnings with --strict), so a \
            passing run prints nothing and cron mails nothing; -q prints nothing. --json prints one JSON object per database, \
            one per line, keys in this order: path, status (ok, findings or error), \
            error (null or the message), findings [{severity, check, object, message, \
            fix, fingerprint, baseline}]. --format table|csv|tsv|json|jsonl|markdown prints the findings as rows (path, severity, check, object, \
            message, fix, fingerprint, baseline) in that format; --format junit prints one JUnit XML \
            document (a testsuite per database, a testcase per check, the findings that \
            fail a check as its failure, every finding in system-out); --format sarif \
            prints one SARIF 2.1.0 log (a rule per check, a result per finding with the \
            database as its artifact, the object as its logical location and the \
            fingerprint in partialFingerprints). Checks: open, integrity, empty, foreign-key, \
            unindexed-foreign-key, no-primary-key, redundant-index, statistics, freelist, \
            wal-size, hot-journal, expectation, schema, baseline.

            Release gate: --write-baseline FILE records the warnings and errors found \
            (per database: check, object, and a fingerprint that stays the same when \
            unrelated parts of the database change) and exits 0 once it is written; \
            --baseline FILE then accepts them: an accepted finding is said with \
            "(accepted by the baseline)" (JSON: "baseline": "accepted") and never \
            fails, even with --strict; a new finding, or one whose fingerprint changed \
            (more orphan rows, say), fails as without a baseline; a baseline entry \
            that no longer matches a finding is a note ([baseline]), so that \
            baselines do not rot. The file format is in docs/check.md. --skip \
            RULE[:OBJECT] leaves out a check, or its findings on one table or index \
            (repeatable). --expect-schema FILE.sql compares the schema with the \
            CREATE statements in FILE (as `sqlite3 DB .schema` prints them; \
            whitespace, comments, quoting, keyword case and the order of objects do \
            not count): each table, index, view or trigger that is missing, \
            unexpected or defined otherwise is one error. Lint findings on the tables \
            the GeoPackage and MBTiles specifications define are notes.

            -j N checks N databases at a time, each on its own connection; reports come \
            out in the order the databases were given. With --connections N (N > 1), a database of 64 MiB or more in \
            rollback-journal mode is checked on N connections at once, all \
            reading one snapshot (the first connection's read transaction keeps writers \
            from committing): one runs quick_check on the whole file (b-tree structure, \
            freelist, pages used twice or never), the others integrity_check(TABLE) for \
            each table (its indexes compared with it); together they cover what one \
            integrity_check covers, and a message both report is shown once. WAL \
            databases are checked on one connection (this SQLite build cannot share a \
            WAL snapshot between connections). The split costs about 20% more CPU in \
            all, so it only pays when cores are idle; it is off by default. Files are \
            read through a memory map.

            Exit status: 0 every database is sound (only notes, or warnings without \
            --strict); 1 a finding fails the check (an error, or a warning with \
            --strict); 2 a database could not be checked (missing, not a database, \
            truncated, locked), with one line on stderr naming it, in the words every \
            command uses — the others are still checked.
            """)

    enum JournalMode: String, ExpressibleByArgument, CaseIterable {
        case delete, truncate, persist, memory, wal, off
    }

    /// The row formats every command has, and the two CI servers read.
    enum CheckFormat: String, ExpressibleByArgument, CaseIterable {
        case table, csv, tsv, json, jsonl, markdown, junit, sarif

        var rows: OutputFormat? { OutputFormat(rawValue: rawValue) }
    }

    @Argument(help: ArgumentHelp("Database files (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databases: [String]

    @Flag(name: .long, help: "Run quick_check instead of integrity_check (faster; misses an index out of step with its table).")
    var quick = false

    @Flag(name: .long, help: "Fail on warnings too.")
    var strict = false

    @Option(name: .long, help: ArgumentHelp("Warn when free pages exceed this share of the file, in percent.", valueName: "percent"))
    var maxFreePercent: Double = 25

    @Option(name: .long, help: ArgumentHelp("Fail unless PRAGMA user_version is N.", valueName: "n"))
    var expectUserVersion: Int64?

    @Option(name: .long, help: ArgumentHelp("Fail unless PRAGMA application_id is N (decimal, or hex with 0x).", valueName: "n"))
    var expectApplicationId: String?

    @Option(name: .long, help: ArgumentHelp("Fail unless the journal mode is this one.", valueName: "mode"))
    var expectJournalMode: JournalMode?

    @Option(name: .long, help: ArgumentHelp(
        "Fail on each object whose definition differs from the CREATE statements in this file (as `sqlite3 DB .schema` prints them).",
        valueName: "file.sql"))
    var expectSchema: String?

    @Flag(name: .long, help: "A database that holds no table is a note, not an error.")
    var allowEmpty = false

    @Option(name: .long, help: ArgumentHelp(
        "Accept the findings recorded in this file by --write-baseline: only new or changed ones fail.", valueName: "file"))
    var baseline: String?

    @Option(name: .long, help: ArgumentHelp(
        "Record the warnings and errors found in this file (replacing only a baseline) and exit 0.", valueName: "file"))
    var writeBaseline: String?

    @Option(name: .long, help: ArgumentHelp(
        "Leave out a check, or its findings on one object (repeatable).", valueName: "rule[:object]"))
    var skip: [String] = []

    @Option(name: [.customShort("j"), .long], help: ArgumentHelp("Check this many databases at a time.", valueName: "n"))
    var jobs: Int = 1

    @Option(name: .long, help: ArgumentHelp(
        "Connections that share integrity_check on one large database (default 1).",
        valueName: "n"))
    var connections: Int = 1

    @Option(name: .long, help: ArgumentHelp(
        "Output format: table, csv, tsv, json, jsonl, markdown (the findings as rows), junit or sarif.",
        valueName: "format"))
    var format: CheckFormat?

    @Flag(name: .long, help: "Leave out the header line (table, csv, tsv, markdown).")
    var noHeaders = false

    @OptionGroup var voice: VoiceOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("-j must be 1 or more.") }
        guard connections >= 1 else { throw ValidationError("--connections must be 1 or more.") }
        guard maxFreePercent >= 0, maxFreePercent <= 100 else { throw ValidationError("--max-free-percent must be between 0 and 100.") }
        if voice.json && format != nil { throw ValidationError("Give --json or --format, not both.") }
        if let text = expectApplicationId, Self.parseInteger(text) == nil {
            throw ValidationError("--expect-application-id: '\(text)' is not an integer.")
        }
        if baseline != nil && writeBaseline != nil {
            throw ValidationError("Give --baseline (check against it) or --write-baseline (record a new one), not both.")
        }
        for text in skip {
            do { _ = try CheckSkip.parse(text) } catch let error as DatabaseError { throw ValidationError(error.message + ".") }
        }
    }

    static func parseInteger(_ text: String) -> Int64? {
        if text.lowercased().hasPrefix("0x") { return UInt32(text.dropFirst(2), radix: 16).map { Int64(Int32(bitPattern: $0)) } }
        return Int64(text)
    }

    func run() throws {
        noteHotJournals(voice)
        let opened = try moments.open(databases, quiet: voice.quiet, eachOnItsOwn: true)
        defer { withExtendedLifetime(opened) {} }
        let started = Date().timeIntervalSince1970
        var options = CheckOptions()
        options.quick = quick
        options.maxFreePercent = maxFreePercent
        options.expectUserVersion = expectUserVersion
        options.expectApplicationID = expectApplicationId.flatMap(Self.parseInteger)
        options.expectJournalMode = expectJournalMode?.rawValue
        options.busyTimeout = database.busyTimeout
        options.integrityConnections = connections
        options.allowEmpty = allowEmpty
        options.skips = skip.compactMap { try? CheckSkip.parse($0) }
        // The files the run reads are in its protected set: --write-baseline
        // never replaces the reference schema or a database checked.
        var matcher: BaselineMatcher?
        do {
            if let expectSchema {
                WriteGate.shared.protect(file: expectSchema, what: "the reference schema of --expect-schema")
                options.expectedSchema = try ReferenceSchema.load(path: expectSchema)
            }
            if let baseline {
                WriteGate.shared.protect(file: baseline, what: "the baseline this run reads")
                matcher = try CheckBaseline.read(path: baseline).matcher(for: databases, file: baseline)
            }
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }

        let strict = self.strict, voice = self.voice, skips = options.skips
        let terminal = isatty(1) == 1
        // Text and --json stream one database at a time; the other formats,
        // and --write-baseline (which writes the file before saying anything),
        // come once every database is checked.
        let streams = writeBaseline == nil && format == nil
        let printedNotes = streams && !voice.json && !voice.quiet && (terminal || voice.verbose)
        let present: @Sendable (CheckReport) -> Void = { report in
            if let failure = report.failure {
                printError(failure.description)
                if voice.json { printExact(report.json(strict: strict).compact) }
                return
            }
            if voice.json {
                printExact(report.json(strict: strict).compact)
                fflush(nil)
                return
            }
            guard !voice.quiet else { return }
            // On a terminal or with -v every finding; otherwise (cron, CI logs)
            // only those that fail the check, so that a passing run prints nothing.
            for finding in report.findings where terminal || voice.verbose || finding.fails(strict: strict) {
                var line = "\(report.path): \(finding.severity.rawValue) [\(finding.check.rawValue)] "
                if let object = finding.object { line += "\(object): " }
                printOut(line + finding.message + CheckText.baselineSuffix(finding))
                if let fix = finding.fix { printOut("  fix: \(fix)") }
            }
            if (terminal || voice.verbose) && !report.fails(strict: strict)
                && report.findings.allSatisfy({ $0.severity == .note || $0.baseline == .accepted }) {
                printOut("\(report.path): ok")
            }
            fflush(nil)
        }
        let streamMatcher = matcher
        var reports = DatabaseCheck.checkAll(paths: databases, options: options, parallelism: jobs) { report in
            guard streams else { return }
            present(streamMatcher.map { $0.apply(report, skips: skips) } ?? report)
        }

        if let writeBaseline {
            if reports.contains(where: { $0.failure != nil }) {
                for report in reports { if let failure = report.failure { printError(failure.description) } }
                printError("\(writeBaseline): not written: a database could not be checked")
                throw ExitStatus.error
            }
            let recorded = CheckBaseline(reports: reports)
            do {
                try recorded.save(to: writeBaseline)
            } catch {
                printError(describe(error))
                throw ExitStatus.error
            }
            matcher = recorded.matcher(for: databases, file: writeBaseline)
            if voice.verbose && format == nil && !voice.json {
                let count = recorded.databases.map(\.entries.count).reduce(0, +)
                printOut("\(writeBaseline): recorded \(count) finding\(count == 1 ? "" : "s") of \(recorded.databases.count) database\(recorded.databases.count == 1 ? "" : "s")")
            }
        }
        if let matcher { reports = reports.map { matcher.apply($0, skips: skips) } }
        if !streams {
            if format == nil {
                for report in reports { present(report) }
            } else {
                for report in reports { if let failure = report.failure { printError(failure.description) } }
            }
        }
        let status: Int32 = reports.contains(where: { $0.failure != nil }) ? 2 : reports.contains(where: { $0.fails(strict: strict) }) ? 1 : 0

        switch format {
        case nil:
            break
        case .junit?:
            if !voice.quiet {
                printExact(String(CheckJUnit.document(reports, strict: strict, baseline: baseline ?? writeBaseline, started: started).dropLast()))
            }
        case .sarif?:
            if !voice.quiet {
                printExact(CheckSARIF.log(reports, version: LitectlVersion.string, exitCode: status, baseline: baseline ?? writeBaseline).pretty)
            }
        case let rowFormat?:
            let sink = FileDescriptorSink()
            let writer = RowWriter(format: rowFormat.rows!, headers: !noHeaders, sink: voice.quiet ? DiscardSink() : sink)
            writer.begin(columns: ["path", "severity", "check", "object", "message", "fix", "fingerprint", "baseline"])
            for report in reports {
                for f in report.findings {
                    writer.write([.text(report.path), .text(f.severity.rawValue), .text(f.check.rawValue),
                                  f.object.map { .text($0) } ?? .null, .text(f.message), f.fix.map { .text($0) } ?? .null,
                                  .text(f.fingerprint), f.baseline.map { .text($0.rawValue) } ?? .null])
                }
            }
            writer.finish()
            try sink.flush()
        }

        // Baseline entries that match nothing any more: said where a pipe
        // would not otherwise show them, so that a baseline does not rot.
        if let matcher, !voice.quiet, !printedNotes {
            let stale = reports.filter { $0.findings.contains { $0.baseline == .absent } }
            if !stale.isEmpty {
                let count = stale.map { $0.findings.filter { $0.baseline == .absent }.count }.reduce(0, +)
                printError("note: \(matcher.file): \(count) accepted finding\(count == 1 ? "" : "s") no longer occur\(count == 1 ? "s" : "") (in \(stale.map(\.path).joined(separator: ", "))); check --write-baseline rewrites it")
            }
        }

        if status == 2 { throw ExitStatus.error }
        if status == 1 { throw ExitStatus.findings }
    }
}
