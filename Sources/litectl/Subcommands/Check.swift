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
            fails the check without --strict). Warnings: a file that holds no table (a \
            0-byte file, which SQLite opens as an empty database, or an empty schema: \
            what a wiped database looks like); a foreign key whose child columns \
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
            (never fail): that --quick was used.

            Output: on a terminal (or with -v), one line per finding (`PATH: SEVERITY \
            [CHECK] OBJECT: MESSAGE`, then `  fix: SQL` when there is one) and `PATH: \
            ok` for a sound database; when stdout is not a terminal only the findings \
            that fail the check print (errors, and warnings with --strict), so a \
            passing run prints nothing and cron mails nothing; -q prints nothing. --json prints one JSON object per database, \
            one per line, keys in this order: path, status (ok, findings or error), \
            error (null or the message), findings [{severity, check, object, message, \
            fix}]. --format prints the findings as rows (path, severity, check, object, \
            message, fix) in that format. Checks: open, integrity, empty, foreign-key, \
            unindexed-foreign-key, no-primary-key, redundant-index, statistics, freelist, \
            wal-size, hot-journal, expectation.

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

    @Argument(help: ArgumentHelp("Database files.", valueName: "db"))
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

    @Option(name: [.customShort("j"), .long], help: ArgumentHelp("Check this many databases at a time.", valueName: "n"))
    var jobs: Int = 1

    @Option(name: .long, help: ArgumentHelp(
        "Connections that share integrity_check on one large database (default 1).",
        valueName: "n"))
    var connections: Int = 1

    @OptionGroup var output: OutputOptions
    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("-j must be 1 or more.") }
        guard connections >= 1 else { throw ValidationError("--connections must be 1 or more.") }
        guard maxFreePercent >= 0, maxFreePercent <= 100 else { throw ValidationError("--max-free-percent must be between 0 and 100.") }
        if output.voice.json && output.format != nil { throw ValidationError("Give --json or --format, not both.") }
        if let text = expectApplicationId, Self.parseInteger(text) == nil {
            throw ValidationError("--expect-application-id: '\(text)' is not an integer.")
        }
    }

    static func parseInteger(_ text: String) -> Int64? {
        if text.lowercased().hasPrefix("0x") { return UInt32(text.dropFirst(2), radix: 16).map { Int64(Int32(bitPattern: $0)) } }
        return Int64(text)
    }

    func run() throws {
        noteHotJournals(output.voice)
        var options = CheckOptions()
        options.quick = quick
        options.maxFreePercent = maxFreePercent
        options.expectUserVersion = expectUserVersion
        options.expectApplicationID = expectApplicationId.flatMap(Self.parseInteger)
        options.expectJournalMode = expectJournalMode?.rawValue
        options.busyTimeout = database.busyTimeout
        options.integrityConnections = connections

        let strict = self.strict, json = output.voice.json, voice = output.voice
        let rowFormat = output.format
        let terminal = isatty(1) == 1
        let reports = DatabaseCheck.checkAll(paths: databases, options: options, parallelism: jobs) { report in
            if let failure = report.failure {
                printError(failure.description)
                if json { printExact(report.json(strict: strict).compact) }
                return
            }
            guard rowFormat == nil else { return }
            if json {
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
                printOut(line + finding.message)
                if let fix = finding.fix { printOut("  fix: \(fix)") }
            }
            if (terminal || voice.verbose) && !report.fails(strict: strict) && report.findings.allSatisfy({ $0.severity == .note }) {
                printOut("\(report.path): ok")
            }
            fflush(nil)
        }

        if rowFormat != nil {
            let sink = FileDescriptorSink()
            let writer = output.makeWriter(sink: sink)
            writer.begin(columns: ["path", "severity", "check", "object", "message", "fix"])
            for report in reports {
                for f in report.findings {
                    writer.write([.text(report.path), .text(f.severity.rawValue), .text(f.check.rawValue),
                                  f.object.map { .text($0) } ?? .null, .text(f.message), f.fix.map { .text($0) } ?? .null])
                }
            }
            writer.finish()
            try sink.flush()
        }

        if reports.contains(where: { $0.failure != nil }) { throw ExitStatus.error }
        if reports.contains(where: { $0.fails(strict: strict) }) { throw ExitStatus.findings }
    }
}
