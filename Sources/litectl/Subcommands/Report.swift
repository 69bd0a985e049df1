// `litectl report DB -o FILE.html` and `litectl report A B -o FILE.html`: one
// self-contained HTML page on a database's health and space, or on what
// changed between two databases.
import ArgumentParser
import Foundation
import LitectlCore

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write one HTML page on a database's health and space, or on what changed between two.",
        discussion: """
            With one DB: a header (file, size, WAL, page size, pages, journal mode, \
            encoding, user_version, application_id, auto_vacuum, SQLite version, when \
            the report was made); the check's verdict and findings grouped and \
            coloured by severity (what `litectl check` finds, --quick and --strict as \
            there); a treemap of the file's pages: one rectangle per table and index, \
            its area in proportion to its pages, outlined per table with its indexes, \
            coloured by unused bytes or by fragmentation, free pages a hatched block, \
            a tooltip with the exact figures, and past 300 tables the smallest in one \
            "others" block; the per-table and per-index figures of `litectl stats` in \
            a table sorted by a click on a heading; the planner statistics \
            (sqlite_stat1, beside each table's rows now) and the indexes the check \
            flags (missing or stale statistics, redundant indexes, foreign keys \
            without an index); with --compare OLD.json (a `stats --format json` \
            report) the growth of each table with its indexes, as bars.

            With A and B: the comparison, from the engine of `litectl diff` (rows \
            matched and compared exactly as there): a header for both files, the \
            schema differences with their SQL, per table the rows inserted, updated \
            and deleted as bars, and up to --rows N changed rows per table, A's row \
            over B's with the changed cells marked and values printed as `diff` \
            prints them.

            The page is one file with its style, pictures (SVG) and a small script \
            inline: it opens from disk or a mail, fetches nothing (a Content Security \
            Policy forbids every request, and runs no script but its own), and works \
            without its script (only sorting and the colour switch need it). Every \
            name and value is escaped; control characters show as \\xNN, \
            bidirectional overrides as \\uNNNN; names are cut after 200 characters \
            and values after 256 bytes, with their full length given. Long sections \
            stop at a size budget and say what they leave out, so a page stays under \
            about 5 MB whatever the database holds.

            Databases are opened read-only. With one DB the check runs on its own \
            connection beside the page statistics scan (both read-only, each in one \
            read transaction). The page is written to a hidden temporary file beside \
            FILE, fsynced and renamed; an existing FILE is replaced only with \
            --force, never when it is one of the databases read. Nothing is printed \
            on success; -v says what was written, --json prints one object (output, \
            bytes, findings: whether the check failed or A and B differ).

            Exit status: 0 the report is written and the database passes the check \
            (or A and B are identical); 1 it is written and the check fails (an \
            error, or a warning with --strict) or A and B differ; 2 error (nothing \
            written).
            """)

    @Argument(help: ArgumentHelp("One database, or two to compare (A, then B) (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databases: [String]

    @Option(name: .shortAndLong, help: ArgumentHelp("The HTML file to write.", valueName: "file"))
    var output: String

    @Flag(help: "Replace an existing output file.")
    var force = false

    @Option(help: ArgumentHelp("With one DB: show growth against an earlier `stats --format json` report.", valueName: "old.json"))
    var compare: String?

    @Option(help: ArgumentHelp("With two DBs: changed rows shown per table (the counts are exact).", valueName: "n"))
    var rows: Int = 20

    @Flag(help: "With one DB: run quick_check instead of integrity_check.")
    var quick = false

    @Flag(help: "With one DB: warnings fail the verdict too (as check --strict).")
    var strict = false

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var voice: VoiceOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        guard (1...2).contains(databases.count) else { throw ValidationError("Give one database, or two to compare.") }
        if databases.count == 2 {
            if compare != nil { throw ValidationError("--compare goes with one database.") }
            if quick || strict { throw ValidationError("--quick and --strict go with one database.") }
        }
        guard rows >= 0 else { throw ValidationError("--rows must be 0 or more.") }
    }

    func run() throws {
        noteHotJournals(voice)
        let opened = try moments.open(databases, quiet: voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        TemporaryFiles.installSignalCleanup()
        var options = ReportOptions()
        options.busyTimeout = database.busyTimeout
        options.check.quick = quick
        options.strict = strict
        options.rowsPerTable = rows
        options.generator = "litectl \(LitectlVersion.string)"
        let outcome: ReportOutcome
        do {
            let others = compare.map { [$0] } ?? []
            try ReportFile.requireWritable(output, replace: force, inputs: databases, otherInputs: others)
            if let compare {
                guard let data = FileManager.default.contents(atPath: compare) else {
                    throw DatabaseError(code: .cantopen, message: "cannot read the file", path: compare)
                }
                options.earlierStats = ReportOptions.EarlierStats(path: compare, json: Array(data))
            }
            if databases.count == 2 {
                outcome = try ComparisonReport.make(pathA: databases[0], pathB: databases[1], options: options)
            } else {
                outcome = try DatabaseReport.make(path: databases[0], options: options)
            }
            try ReportFile.write(outcome.html, to: output, replace: force, inputs: databases, otherInputs: others)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        if voice.json {
            printExact(JSON.object([("output", .string(output)), ("bytes", .integer(Int64(outcome.html.count))),
                                    ("findings", .bool(outcome.findings))]).compact)
        } else if voice.verbose {
            printOut("wrote \(output) (\(humanBytes(Int64(outcome.html.count))))")
        }
        if outcome.findings { throw ExitStatus.findings }
    }
}
