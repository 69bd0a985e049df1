// `litectl dump DB`: the database as a SQL script that rebuilds it exactly, or
// as one CSV / JSON Lines file per table in a folder.
import ArgumentParser
import Foundation
import LitectlCore

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a database out as SQL that rebuilds it exactly, or as CSV / JSON Lines files.",
        discussion: """
            Reads DB read-only in one read transaction (one snapshot, while other \
            processes keep writing) and streams it out with flat memory. The SQL script \
            rebuilds the database in a new, empty file (litectl load NEW.db FILE, or \
            sqlite3 NEW.db < FILE) so that litectl hash finds it identical: page size, \
            auto_vacuum and text encoding first, then in one transaction user_version, \
            application_id, each table's CREATE and rows (in creation order), \
            sqlite_sequence, sqlite_stat1 and sqlite_stat4, indexes, views and triggers \
            (after the rows, so no trigger fires), and PRAGMA journal_mode=WAL for a WAL \
            database. Every value is written with the exact literal writer (REALs bit for \
            bit, TEXT with CR, NUL or bytes that are not UTF-8 as CAST(x'..' AS TEXT) in the \
            database's encoding, BLOBs as x'..'). Rows keep their rowids: a rowid table \
            without an INTEGER PRIMARY KEY is written INSERT INTO t(rowid,...) (the sqlite3 \
            shell's .dump renumbers them unless --preserve-rowids). Generated columns are \
            computed again. A virtual table is created with its CREATE VIRTUAL TABLE and \
            its shadow tables are refilled row for row, so an FTS index or R*Tree comes \
            back as it was.

            --table (repeatable) dumps those tables with their indexes and triggers (and \
            their rows of sqlite_sequence and the statistics tables); --schema-only and \
            --data-only leave out rows or CREATE statements and settings.

            --format csv or jsonl writes one file per table (and sqlite_sequence, \
            sqlite_stat1/4; not shadow tables) into the folder --output names, with \
            schema.sql (the --schema-only script) beside them; litectl load NEW.db FOLDER \
            rebuilds the database from it. Types stay exact: in CSV, TEXT is always quoted \
            and nothing else is (NULL empty, INTEGER digits, REAL with '.' or an exponent, \
            Inf/-Inf, BLOB x'HEX', TEXT that is not UTF-8 t'HEX'); JSON Lines uses the JSON \
            value encoding of every litectl command (docs/output.md); docs/dump.md (installed as \
            /usr/local/share/doc/litectl/dump.md) specifies the formats. A rowid table without \
            an INTEGER PRIMARY KEY gets a rowid column. File names are table names with /, \
            %, control characters and a leading dot as %XX. The folder is written as a \
            hidden temporary folder beside it, every file fsynced, then renamed into place \
            (an existing non-empty folder only with --force, swapped out atomically where \
            the file system allows; --force replaces only a folder of a dump's files: \
            schema.sql, *.csv, *.jsonl); after SIGKILL the hidden folder stays until the next \
            dump there.

            --output FILE writes the SQL script to a hidden temporary file, fsynced and \
            renamed (never over an existing file without --force); without it the script \
            goes to stdout.

            When a table cannot be read to its end (a damaged database) the dump stops: \
            exit status 2 and one line naming the table and the row, the script on stdout \
            ends with ROLLBACK (so loading it changes nothing), and with --output nothing \
            is written. litectl recover salvages what can be read. A text stored in \
            sqlite_schema that is more than one statement (SQLite reads only the first when \
            it opens a file; a hostile file can hide ATTACH or more after it) stops the dump \
            before anything is written, exit status 2, naming the object.

            -v prints what was written (tables, rows, files) when --output is given; \
            --json prints it as one object (output, format, tables [{name, rows, file}], \
            rows, rowids_not_kept); -q leaves out the notes on stderr. Exit status: 0 \
            dumped, 2 error.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case sql, csv, jsonl
    }

    @Argument(help: ArgumentHelp("Database file (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databasePath: String

    @Option(name: .customLong("table"), help: ArgumentHelp("Dump only this table (repeatable).", valueName: "name"))
    var tables: [String] = []

    @Flag(help: "CREATE statements and settings only, no rows.")
    var schemaOnly = false

    @Flag(help: "Rows only, no CREATE statements or settings.")
    var dataOnly = false

    @Option(help: "sql (a script), csv or jsonl (a folder of one file per table).")
    var format: Format = .sql

    @Option(name: .shortAndLong, help: ArgumentHelp("Write the script to this file, or the csv/jsonl files into this folder.", valueName: "path"))
    var output: String?

    @Flag(help: "Replace an existing output file or folder.")
    var force = false

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }
    var json: Bool { voice.json }

    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        if schemaOnly && dataOnly { throw ValidationError("--schema-only and --data-only exclude each other.") }
        if format != .sql && output == nil { throw ValidationError("--format \(format.rawValue) writes a folder: give --output DIR.") }
        if (verbose || json) && output == nil { throw ValidationError("-v and --json report on --output; without it stdout is the script.") }
        if force && output == nil { throw ValidationError("--force applies with --output.") }
    }

    func run() throws {
        noteHotJournals(voice)
        let opened = try moments.open([databasePath], quiet: voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        TemporaryFiles.installSignalCleanup()
        var options = DumpOptions()
        options.tables = tables
        options.includeSchema = !dataOnly
        options.includeData = !schemaOnly
        let summary: DumpSummary
        do {
            switch format {
            case .sql:
                if let output {
                    summary = try SQLDump.write(path: databasePath, options: options, toFile: output, replace: force,
                                                busyTimeout: database.busyTimeout)
                } else {
                    let sink = FileDescriptorSink()
                    summary = try SQLDump.write(path: databasePath, options: options, to: sink, busyTimeout: database.busyTimeout)
                    if let failure = sink.failure {
                        throw DatabaseError(code: failure == ENOSPC ? .full : .ioerr,
                                            message: "cannot write the dump: \(String(cString: strerror(failure)))",
                                            path: "standard output")
                    }
                }
            case .csv, .jsonl:
                summary = try RowFileDump.write(path: databasePath, options: options, format: format == .csv ? .csv : .jsonl,
                                                output: output!, replace: force, busyTimeout: database.busyTimeout)
            }
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        if json {
            printExact(JSON.object([
                ("output", .string(output ?? "")),
                ("format", .string(format.rawValue)),
                ("tables", .array(summary.tables.map { table in
                    .object([("name", .string(table.name)), ("rows", .integer(table.rows)), ("file", .optional(table.file) { .string($0) })])
                })),
                ("rows", .integer(summary.rows)),
                ("rowids_not_kept", .array(summary.rowidsNotKept.map { .string($0) })),
            ]).compact)
        } else if verbose {
            for table in summary.tables {
                printOut("\(table.name): \(table.rows) rows" + (table.file.map { " -> \($0)" } ?? ""))
            }
            printOut("\(summary.tables.count) tables, \(summary.rows) rows -> \(output ?? "")")
        }
        for name in summary.rowidsNotKept where !voice.quiet {
            printError("\(databasePath): note: the rowids of \(name.replacingNewlines()) are not kept (its columns rowid, _rowid_ and oid hide them)")
        }
    }
}
