// `litectl analyze DB [TABLE|INDEX...]`: refreshes the query planner's
// statistics and shows sqlite_stat1 before and after.
import ArgumentParser
import LitectlCore

struct Analyze: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run ANALYZE and show the query planner's statistics before and after.",
        discussion: """
            Opens DB read-write (the only one of check, stats and analyze that writes to \
            the file) and, inside one write transaction, runs ANALYZE on the whole \
            database or on the tables and indexes named (an unknown name fails before \
            anything is written), or PRAGMA optimize with --optimize. Shows \
            sqlite_stat1 per index before and after: the table's row count and the \
            average number of rows per distinct value of each key prefix. With \
            --dry-run the transaction is rolled back: the file is left byte for byte as \
            it was.

            Columns: table, index (null for a table-only row), before_rows, before, \
            after_rows, after, changed (1 when the stored stat changed). Exit status: 0 \
            done, 2 error (missing file, read-only file, lock held past --timeout).
            """)

    @Argument(help: ArgumentHelp("Database file (with --dry-run, or a moment: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databasePath: String

    @Argument(help: ArgumentHelp("Tables or indexes to analyze (default: all).", valueName: "table-or-index"))
    var targets: [String] = []

    @Flag(name: .long, help: "Run PRAGMA optimize instead of ANALYZE.")
    var optimize = false

    @Flag(name: .long, help: "Analyze inside a transaction, show the result, and roll back.")
    var dryRun = false

    @OptionGroup var output: OutputOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        if optimize && !targets.isEmpty { throw ValidationError("--optimize works on the whole database; name no tables.") }
    }

    func run() throws {
        if !dryRun { try refuseMoments([databasePath], as: "analyzed in place (analyze --dry-run reads one)") }
        let opened = try moments.open([databasePath], quiet: output.voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        var options = AnalyzeOptions()
        options.targets = targets
        options.optimize = optimize
        options.dryRun = dryRun
        options.busyTimeout = database.busyTimeout
        let result: AnalyzeResult
        do {
            result = try Analyzer.run(path: databasePath, options: options)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        let sink = FileDescriptorSink()
        let writer = output.makeWriter(sink: sink)
        writer.begin(columns: AnalyzeResult.columns)
        for entry in result.entries { writer.write(result.row(entry)) }
        writer.finish()
        try sink.flush()
        if dryRun && output.resolvedFormat == .table && !output.voice.quiet {
            printOut("(dry run: rolled back, nothing written)")
        }
    }
}
