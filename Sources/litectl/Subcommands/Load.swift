// `litectl load DB INPUT`: a dump (SQL, CSV, JSON Lines, or a dump folder)
// loaded into a database, all or nothing.
import ArgumentParser
import Foundation
import LitectlCore

struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load a dump (SQL script, CSV or JSON Lines file, or dump folder) into a database, all or nothing.",
        discussion: """
            The inverse of litectl dump. DB is made when it does not exist: built in a \
            hidden temporary file beside it, fsynced and renamed into place only when \
            everything loaded (a killed run's file is removed by the next load there). An \
            existing DB is changed inside one BEGIN IMMEDIATE transaction. On any error \
            nothing stays: the transaction rolls back, a new DB never appears, exit status \
            2 and one line naming the file, the line and SQLite's message. So with a full \
            disk ("disk full") and SIGINT, SIGTERM or SIGHUP ("interrupted by SIGTERM"): \
            the transaction is rolled back before litectl exits; after SIGKILL an existing \
            DB keeps its journal, as SQLite leaves it for any killed writer, and the next \
            write of DB rolls it back.

            INPUT is a SQL script (- reads stdin), a .csv or .jsonl file of one table's rows \
            (--table names the table; by default the file's name, as dump names the files), \
            or a folder dump --format csv|jsonl wrote: its schema.sql, then every table's \
            file, sqlite_sequence and the statistics tables last, then its triggers (held \
            back so that none fires while rows load). --format says what INPUT is when its \
            name does not (.csv, .jsonl, .ndjson; anything else is SQL).

            A script runs statement by statement as the sqlite3 shell reads it (memory \
            stays at one statement), with foreign-key enforcement off: its BEGIN, COMMIT \
            and PRAGMA foreign_keys are skipped (one transaction holds everything), a plain \
            ROLLBACK fails the load (a dump that stopped at a damaged table ends so), \
            PRAGMA page_size, auto_vacuum and encoding take effect on a new or empty DB \
            (before the transaction), PRAGMA journal_mode=... runs after the commit. The \
            connection runs in defensive mode (no writable_schema: a sqlite3 .dump of \
            virtual tables needs the sqlite3 shell), except that a statement writing a \
            virtual table's shadow table runs without it, as litectl dump refills FTS and \
            R*Tree indexes that way. ATTACH and DETACH are refused (a load writes DB and \
            no other file). sqlite3 shell commands are refused, but .bail.

            Into an existing, non-empty DB, foreign_key_check runs before the commit: a \
            row the load leaves without its parent (one that foreign_key_check did not \
            report before the load; rows are told apart by table, rowid, parent and key) \
            fails the load with those rows named (exit 2, nothing loaded). Orphans that \
            were there before are left as they were.

            CSV and JSON Lines values are typed as dump writes them (litectl dump --help; \
            docs/dump.md, installed as /usr/local/share/doc/litectl/dump.md); an unquoted CSV field that has none of the typed forms is TEXT, \
            JSON true and false are 1 and 0. The column names come from the CSV header or \
            the JSON keys (rowid sets the rowid). Rows loaded into sqlite_sequence replace \
            the row of the same name. Triggers on the table fire.

            The table must exist, unless --create makes it (in the same transaction as \
            the rows; a table of that name already there is an error): its columns are \
            the CSV header's names or the JSON keys in the order they first appear \
            (rowid, _rowid_ and oid set the rowid and are not columns), each typed from \
            its values as sqlite-utils detects types: INTEGER when every value is an \
            integer, REAL when they are integers and reals (integers become reals \
            there, as in sqlite-utils), TEXT when there is text (numbers stored as the \
            file writes them, as sqlite-utils does), BLOB when there is a BLOB (x'..'); \
            a column of only NULLs is INTEGER from CSV and TEXT from JSON Lines, as \
            sqlite-utils makes them. No value loses exactness: integers and reals keep \
            every digit and bit, and a column mixing reals with integers beyond 2^53 \
            (which a REAL column would round) is BLOB, which keeps each as it is. Values \
            are read as load always reads them, so unlike sqlite-utils a quoted CSV \
            field is TEXT, an empty one NULL (sqlite-utils keeps '' in a TEXT column), \
            and only Inf/-Inf are infinities. The file is read twice (types, then rows), \
            so --create takes a file, not stdin.

            Prints nothing on success; -v one line (statements, rows changed, files); \
            --json one object (database, created, statements, rows_changed, files \
            [{path, table, rows}]). Exit status: 0 loaded, 2 error (DB as it was).
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case sql, csv, jsonl
    }

    @Argument(help: ArgumentHelp("The database to load into (made when missing).", valueName: "db"))
    var databasePath: String

    @Argument(help: ArgumentHelp("A SQL script (- for stdin), a .csv or .jsonl file, or a dump folder.", valueName: "input"))
    var input: String

    @Option(help: ArgumentHelp("The table a CSV or JSON Lines file's rows go into (default: from the file name).", valueName: "name"))
    var table: String?

    @Option(help: "What INPUT is: sql, csv or jsonl (default: from its name).")
    var format: Format?

    @Flag(help: "Make the table of a CSV or JSON Lines file, with column types inferred from its values.")
    var create = false

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }
    var json: Bool { voice.json }

    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        if table != nil && (resolvedFormat == .sql || isFolder) {
            throw ValidationError("--table applies to one CSV or JSON Lines file.")
        }
        if input == "-" && table == nil && resolvedFormat != .sql {
            throw ValidationError("Rows on stdin need --table.")
        }
        if create && (resolvedFormat == .sql || isFolder) {
            throw ValidationError("--create applies to one CSV or JSON Lines file (a SQL script or dump folder makes its own tables).")
        }
        if create && input == "-" {
            throw ValidationError("--create reads the file twice (the types, then the rows): give a file, not stdin.")
        }
    }

    var isFolder: Bool { input != "-" && DurableFolder.isFolder(input) }

    var resolvedFormat: Format {
        if let format { return format }
        switch RowFileFormat.of(path: input) {
        case .csv?: return .csv
        case .jsonl?: return .jsonl
        case nil: return .sql
        }
    }

    func run() throws {
        try refuseMoments([databasePath], as: "loaded into")
        Interruption.install(naming: databasePath)
        let source: LoadInput
        if isFolder {
            source = .folder(input)
        } else {
            switch resolvedFormat {
            case .sql: source = .script(input)
            case .csv: source = .rows(path: input, format: .csv, table: table ?? RowFileDump.tableName(forFile: input))
            case .jsonl: source = .rows(path: input, format: .jsonl, table: table ?? RowFileDump.tableName(forFile: input))
            }
        }
        let summary: LoadSummary
        do {
            summary = try Loader.load(into: databasePath, from: source, createTable: create, busyTimeout: database.busyTimeout)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        if json {
            printExact(JSON.object([
                ("database", .string(databasePath)),
                ("created", .bool(summary.createdDatabase)),
                ("statements", .integer(Int64(summary.statements))),
                ("rows_changed", .integer(summary.rowsChanged)),
                ("files", .array(summary.files.map { file in
                    .object([("path", .string(file.path)), ("table", .string(file.table)), ("rows", .integer(file.rows))])
                })),
            ]).compact)
        } else if verbose {
            var line = "\(databasePath)\(summary.createdDatabase ? " (new)" : ""): \(summary.statements) statements, \(summary.rowsChanged) rows changed"
            if !summary.files.isEmpty { line += ", \(summary.files.count) files" }
            printOut(line)
        }
    }
}
