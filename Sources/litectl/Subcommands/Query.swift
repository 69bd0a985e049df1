// `litectl query [DB] [--attach ALIAS=PATH]... SQL`: SQL across several
// databases through ATTACH, read-only by default, and `--each` fan-out over
// many files.
import ArgumentParser
import Foundation
import LitectlCore

struct Query: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run SQL on a database and attached databases, or on many files at once.",
        usage: """
            litectl query [DB] [--attach ALIAS=PATH]... SQL
            litectl query [DB] [--attach ALIAS=PATH]... -f FILE
            litectl query --each GLOB_OR_PATH... [-j N] SQL
            """,
        discussion: """
            The first argument is the main database when two are given (DB then SQL); \
            with one argument it is the SQL and main is an empty in-memory database, so \
            that `litectl query --attach a=a.db --attach b=b.db 'SELECT ...'` joins two \
            files. SQL may also come from -f FILE, or from stdin when SQL (or FILE) is -. \
            Several statements may be given; each statement that returns columns prints \
            its own result, in order (a header line even when it has no rows). \
            Statements that return no columns run silently. csv and tsv hold one \
            result: SQL with several statements that return columns is refused (exit \
            64) rather than written as one file that no CSV reader splits (sqlite3 \
            prints them back to back, headers in among the rows): run one statement \
            per file, or use json (one array per statement) or jsonl. The refusal comes \
            before anything runs, except for a statement that reads a table an earlier \
            one makes: it is refused when it is reached, after the statements before \
            it ran and their result was printed.

            Read-only by default: every file opens with mode=ro (never created, never \
            changed), and a statement that would write is refused with a message naming \
            --write (temporary tables too). ATTACH inside the SQL is refused, with or \
            without --write: use --attach, whose paths are checked and never created. \
            With --write, files open read-write; litectl warns on stderr when \
            more than one file is writable and main is in WAL mode, because SQLite \
            commits across attached WAL databases atomically per file only.

            --attach ALIAS=PATH attaches PATH under ALIAS (letters, digits and _, \
            starting with a letter or _; not main or temp; unique). Paths are bound as \
            file: URIs, so names with ?, # or % work; a missing file is an error. This \
            SQLite allows a limited number of attached databases (SQLITE_LIMIT_ATTACHED, \
            10 on Debian); for more files use --each.

            --param NAME=VALUE binds :NAME, @NAME and $NAME: an INTEGER when VALUE is a \
            decimal 64-bit integer, a REAL when it is another finite decimal number, TEXT \
            otherwise; --param-text NAME=VALUE always binds TEXT. A parameter in the SQL \
            without a value is an error (rather than SQLite's silent NULL); values not \
            used by the SQL are ignored. Nameless ? parameters are not supported.

            --each GLOB_OR_PATH (repeatable; quote globs so that litectl expands them) \
            runs the SQL on every matching file, -j N at a time (default: the number of \
            cores), each read-only on its own connection: no ATTACH limit, at most N \
            files open. The output is one combined result per statement with a leading \
            db column (the path), files in path order. A file that fails (missing, not a \
            database, an SQL error, a different number of columns) gets one line on \
            stderr and no rows; the others still run. Each file's rows are held in memory \
            until its turn in path order.

            Output (--format): table on a terminal, jsonl otherwise; --json is --format \
            json, one JSON document: a statement's rows as an array of objects, and \
            with several statements an array of the arrays of those that return \
            columns; -q prints no rows (the SQL still runs). csv and tsv print \
            NULL as an empty field and BLOBs as hex; JSON prints integers as integers, \
            REALs in the shortest form that reads back bit for bit, BLOBs as \
            {"blob": "HEX"}. Rows stream: memory stays flat for any result size (the \
            table format sizes its columns from the first 1,000 rows).

            DB and the PATH of --attach may be moments of a repository (repo:NAME@WHEN, \
            docs/moments.md), read-only: `litectl query app.db --attach old=repo:app.db@-1h \
            'SELECT ...'` joins the file with its state an hour ago. --follow runs the SQL \
            again each time a moment at latest gets a newer state (looked for every \
            --interval, default 1s), or, with --every N, every N whether or not one \
            arrived (a watch: moments at latest move to their newest state first, local \
            files are read as they are then; no moment is needed), printing each result \
            in full once it is complete (a blank line between table results), until \
            --count results or an interrupt. A run that fails because the repository \
            changed under it (a prune moved the pages) reads its index again and runs \
            once more.

            Exit status: 0 success; 1 with --each when any file failed; 2 an error \
            (a missing file, an SQL error, a refused write); 64 a usage error.
            """)

    @Argument(help: ArgumentHelp("[DB] SQL: the main database (optional) and the SQL (- for stdin).",
                                 valueName: "db-or-sql"))
    var arguments: [String] = []

    @Option(name: [.customShort("f"), .customLong("file")], help: ArgumentHelp(
        "Read the SQL from FILE (- for stdin).", valueName: "file"))
    var sqlFile: String?

    @Option(name: .customLong("attach"), help: ArgumentHelp(
        "Attach PATH as ALIAS (repeatable).", valueName: "alias=path"))
    var attachments: [String] = []

    @Option(name: .customLong("param"), help: ArgumentHelp(
        "Bind :NAME, @NAME, $NAME to VALUE, typed INTEGER/REAL when numeric, else TEXT (repeatable).",
        valueName: "name=value"))
    var parameters: [String] = []

    @Option(name: .customLong("param-text"), help: ArgumentHelp(
        "Bind :NAME, @NAME, $NAME to VALUE as TEXT (repeatable).", valueName: "name=value"))
    var textParameters: [String] = []

    @Flag(name: .long, help: "Open the databases read-write and allow statements that change them.")
    var write = false

    @Option(name: .customLong("each"), help: ArgumentHelp(
        "Run the SQL on every file the glob or path names (repeatable).", valueName: "glob-or-path"))
    var eachPatterns: [String] = []

    @Option(name: [.customShort("j"), .customLong("jobs")], help: ArgumentHelp(
        "With --each: how many files to query at once (default: the number of cores).", valueName: "n"))
    var jobs: Int?

    @Flag(help: "Run the SQL again each time a moment at latest (repo:NAME@latest) gets a newer state.")
    var follow = false

    @Option(help: ArgumentHelp("With --follow: how often to look for a newer state (default: 1s).", valueName: "duration"),
            transform: DurationArgument.parse)
    var interval: DurationArgument?

    @Option(help: ArgumentHelp("With --follow: run the SQL every DURATION (start to start), whether or not a newer state arrived, instead of when one does.", valueName: "duration"),
            transform: DurationArgument.parse)
    var every: DurationArgument?

    @Option(help: ArgumentHelp("With --follow: stop after this many results (default: until interrupted).", valueName: "n"))
    var count: Int?

    @OptionGroup var output: OutputOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    /// (main database, SQL text source) from the positional arguments.
    private var roles: (database: String?, sql: String?) {
        switch (arguments.count, sqlFile != nil) {
        case (0, _): return (nil, nil)
        case (1, true): return (arguments[0], nil)
        case (1, false): return (nil, arguments[0])
        default: return (arguments[0], arguments[1])
        }
    }

    func validate() throws {
        if arguments.count > 2 || (arguments.count == 2 && sqlFile != nil) {
            throw ValidationError("Too many arguments: give [DB] SQL, or [DB] -f FILE.")
        }
        if roles.sql == nil && sqlFile == nil {
            throw ValidationError("Missing SQL: give it as an argument, with -f FILE, or - to read stdin.")
        }
        if arguments.count == 1, sqlFile == nil, arguments[0] != "-", FileManager.default.fileExists(atPath: arguments[0]) {
            throw ValidationError("Missing SQL after the database '\(arguments[0])': give it as a second argument, with -f FILE, or - to read stdin.")
        }
        if !eachPatterns.isEmpty {
            if roles.database != nil { throw ValidationError("--each runs on each file as main: give no DB argument.") }
            if !attachments.isEmpty { throw ValidationError("--each cannot be combined with --attach.") }
            if write { throw ValidationError("--each is read-only: it cannot be combined with --write.") }
        } else if jobs != nil {
            throw ValidationError("-j/--jobs only applies with --each.")
        }
        if let jobs, jobs < 1 { throw ValidationError("-j/--jobs must be 1 or more.") }
        if !follow && (interval != nil || count != nil || every != nil) { throw ValidationError("--interval, --every and --count apply with --follow.") }
        if interval != nil && every != nil { throw ValidationError("Give --interval (run when a newer state arrives) or --every (run every DURATION), not both.") }
        if let every, every.seconds <= 0 { throw ValidationError("--every must be more than 0.") }
        if let count, count < 1 { throw ValidationError("--count must be 1 or more.") }
        if let interval, interval.seconds <= 0 { throw ValidationError("--interval must be more than 0.") }
        if follow && (write || !eachPatterns.isEmpty) { throw ValidationError("--follow reads moments: it cannot be combined with --write or --each.") }
        for spec in attachments + parameters + textParameters where !spec.contains("=") || spec.hasPrefix("=") {
            throw ValidationError("Expected NAME=VALUE, got '\(spec)'.")
        }
    }

    /// The paths of --attach, as given.
    private var attachedPaths: [String] { attachments.map { split($0).1 } }

    func run() throws {
        noteHotJournals(output.voice)
        fflush(nil)  // what went through stdio so far comes first
        try refuseMoments(eachPatterns, as: "a file of --each (give it as DB or with --attach)")
        if write { try refuseMoments([roles.database], as: "opened with --write") }
        let opened = try moments.open([roles.database] + attachedPaths, quiet: output.voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        if follow && every == nil && !opened.moments.contains(where: { $0.reference.when == "latest" }) {
            printError("--follow needs a moment at latest (repo:NAME@latest) as DB or with --attach (or --every N, to run every N)")
            throw ExitCode(64)
        }
        let sink = FileDescriptorSink()
        do {
            let sql = try readSQL()
            let parameters = try boundParameters()
            if !eachPatterns.isEmpty {
                try runEach(sql: sql, parameters: parameters, sink: sink)
                return
            }
            guard follow else { return try runOnce(sql: sql, parameters: parameters, sink: sink, first: true) }
            var results = 0
            while true {
                let started = ProcessInfo.processInfo.systemUptime
                // Each result is printed once complete: a run tried again
                // (`again`) never prints a part twice.
                let result = MemorySink()
                try again(opened) { try runOnce(sql: sql, parameters: parameters, sink: result, first: results == 0) }
                sink.write(result.bytes)
                try sink.flush()
                results += 1
                guard results < count ?? Int.max else { break }
                if let every {
                    // The next run every DURATION from the start of this one, on the newest states.
                    let rest = every.seconds - (ProcessInfo.processInfo.systemUptime - started)
                    if rest > 0 { Thread.sleep(forTimeInterval: rest) }
                    _ = try again(opened) { try opened.refresh() }
                } else {
                    // The next result once a moment at latest has a newer state.
                    while try !again(opened, { try opened.refresh() }) {
                        Thread.sleep(forTimeInterval: interval?.seconds ?? 1)
                    }
                }
            }
        } catch let exit as ExitCode {
            try? sink.flush()
            throw exit
        } catch let several as FanOutQuery.SeveralResults {
            try? sink.flush()
            printError(refusal(several))
            throw ExitCode(64)
        } catch {
            try? sink.flush()
            printError(describe(error))
            throw ExitStatus.error
        }
    }

    /// Runs `body` of --follow; when it fails (not for a usage error), the
    /// moments are opened again with the repository's index read anew (a
    /// prune since the last run moved the pages they name) and `body` runs
    /// once more: its error, then, is the run's.
    private func again<T>(_ opened: OpenMoments, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let error where opened.isEmpty || error is ExitCode || error is FanOutQuery.SeveralResults {
            throw error
        } catch {
            try opened.reload()
            return try body()
        }
    }

    /// Runs the SQL once on a new session and prints its results; `first`
    /// is false for the next runs of --follow (a blank line before a table).
    private func runOnce(sql: String, parameters: QueryParameters, sink: ByteSink, first: Bool) throws {
        let session = try AttachedSession(mainPath: roles.database, writable: write, busyTimeout: database.busyTimeout)
        for spec in attachments {
            let (alias, path) = split(spec)
            try session.attach(path, as: alias)
        }
        if let warning = try session.walAtomicityWarning() { printError(warning) }
        let writer = output.makeWriter(sink: sink)
        // csv and tsv hold one table: a script that gives several results is refused,
        // before anything runs when preparing the statements tells (most scripts).
        let oneResult = Self.holdsOneResult(writer.format) && !output.voice.quiet
        if oneResult, case let count = session.resultCountBeforeRunning(sql), count > 1 {
            throw FanOutQuery.SeveralResults(count: count, statementSQL: nil)
        }
        // json is one document: with several statements, an array of the
        // arrays of those that return columns; one statement, its array.
        let document = writer.format == .json && !output.voice.quiet
        let several = document && SQLScript.statementCount(sql) > 1
        if several { sink.write(Array("[".utf8)) }
        var results = 0
        try session.run(sql, parameters: parameters) { result in
            // A statement that could not be prepared before the first ran (it needs a
            // table the script makes): refused before it is stepped.
            if oneResult && results > 0 { throw FanOutQuery.SeveralResults(count: results + 1, statementSQL: result.sql) }
            // People read table and markdown: a blank line between results.
            if results > 0 || !first, [.table, .markdown].contains(writer.format) { sink.write([0x0A]) }
            if results > 0 && several { sink.write(Array(",".utf8)) }
            results += 1
            writer.begin(columns: result.columns)
            defer { writer.finish() }
            try result.forEachRow { writer.write($0) }
        }
        if several { sink.write(Array("]\n".utf8)) } else if document && results == 0 { sink.write(Array("[]\n".utf8)) }
        try sink.flush()
    }

    private func runEach(sql: String, parameters: QueryParameters, sink: FileDescriptorSink) throws {
        try FanOutQuery.checkSyntax(sql)
        let (paths, unmatched) = FanOutQuery.expand(eachPatterns)
        for pattern in unmatched { printError("\(pattern): no file matches") }
        if paths.isEmpty { throw DatabaseError(code: .cantopen, message: "--each matched no database file") }
        let writer = output.makeWriter(sink: sink)
        let failures = try FanOutQuery.run(
            paths: paths, script: sql, parameters: parameters,
            jobs: jobs ?? ProcessInfo.processInfo.activeProcessorCount, busyTimeout: database.busyTimeout,
            maximumResults: Self.holdsOneResult(writer.format) && !output.voice.quiet ? 1 : nil,
            into: writer,
            onFailure: { _, error in
                try? sink.flush()
                printError(error.description)
            })
        try sink.flush()
        if failures > 0 || !unmatched.isEmpty { throw ExitStatus.findings }
    }

    /// The one line that refuses several results in csv or tsv.
    private func refusal(_ several: FanOutQuery.SeveralResults) -> String {
        let format = output.resolvedFormat.rawValue
        let which = several.statementSQL.map { ": `\(String($0.trimmingCharacters(in: .whitespacesAndNewlines).prefix(80)))` returns result \(several.count)" }
            ?? " (\(several.count) statements return columns)"
        return "--format \(format) holds one result, and the SQL gives several\(which); run one statement per \(format) file, or use --format json or jsonl"
    }

    /// csv and tsv are one table each (a header, then rows): several results
    /// run together would read as one table with stray header rows.
    static func holdsOneResult(_ format: OutputFormat) -> Bool { format == .csv || format == .tsv }

    private func readSQL() throws -> String {
        let source = sqlFile ?? roles.sql!
        if sqlFile == nil && source != "-" { return source }
        if source == "-" {
            return String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        guard let data = FileManager.default.contents(atPath: source) else {
            throw DatabaseError(code: .cantopen, message: "cannot read the SQL file", path: source)
        }
        return String(decoding: data, as: UTF8.self)
    }

    private func boundParameters() throws -> QueryParameters {
        var values: [String: Value] = [:]
        for (specs, forceText) in [(parameters, false), (textParameters, true)] {
            for spec in specs {
                var (name, text) = split(spec)
                if let first = name.first, ":@$".contains(first) { name.removeFirst() }
                values[name] = QueryParameters.parse(text, forceText: forceText)
            }
        }
        return QueryParameters(values)
    }

    private func split(_ spec: String) -> (String, String) {
        let index = spec.firstIndex(of: "=")!
        return (String(spec[..<index]), String(spec[spec.index(after: index)...]))
    }
}
