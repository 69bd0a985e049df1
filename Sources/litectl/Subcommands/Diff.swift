// `litectl diff A B`: what differs between two databases, for people, as a
// SQL patch, or as JSON.
import ArgumentParser
import LitectlCore

#if canImport(Glibc)
import Glibc
#endif

enum DiffFormat: String, ExpressibleByArgument, CaseIterable {
    case text, sql, json, jsonl, changeset
}

struct Diff: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare two databases row by row and schema object by schema object.",
        discussion: """
            Rows are matched by the declared primary key (composite keys, WITHOUT ROWID \
            tables, INTEGER PRIMARY KEY = rowid). A table without a primary key is \
            compared as a multiset of whole rows (a row deleted and re-inserted under \
            a new rowid is no change), unless --key TABLE=COL,... names key columns or \
            --rowid asks to match by rowid as sqldiff does. A row whose key holds a \
            NULL has no key (SQLite lets any number of rows of a rowid table hold \
            NULL in a primary key that is not the INTEGER PRIMARY KEY, and in a \
            UNIQUE column named by --key): such rows are compared as a multiset of \
            whole rows too, in every format (the sql patch deletes them by rowid; \
            a changeset cannot carry them, which a note on stderr says). Values compare exactly: \
            1, 1.0, '1' and x'31' all differ, TEXT compares by its bytes (a NOCASE \
            column's 'abc' and 'ABC' differ), REALs by their bits. Generated columns \
            and hidden columns of virtual tables are not compared; shadow tables of \
            virtual tables never are (the virtual table's rows are). The statistics \
            tables sqlite_stat1 and sqlite_stat4 are compared like tables without a \
            primary key (as sqldiff compares sqlite_stat1); --exclude sqlite_stat1 \
            leaves them out.

            The schema diff reports tables added, dropped or changed (columns added, \
            dropped, renamed, reordered, with a new type, NOT NULL, default, collation \
            or key position), \
            indexes, views and triggers added, dropped or changed (their SQL compared \
            with whitespace normalized), user_version and application_id.

            -q prints nothing: the exit status says whether A and B differ. --json is \
            --format json. Formats (--format): text (default): one line per schema change, then per \
            table `NAME: +inserted -deleted ~updated` and the changed rows (key, and \
            for updates the changed columns as old → new; at most 1000 rows per table \
            are listed, the counts are exact; on a terminal a value longer than 200 \
            characters is cut and marked …[TEXT of N bytes], whole with -v, on a pipe \
            and in json); --summary prints the counts only. Colour \
            on a terminal unless NO_COLOR is set; progress on stderr when it is a \
            terminal (every 100,000 rows of a table). \
            sql: a script that, run with the sqlite3 CLI on A, makes A equal to B: one \
            transaction; PRAGMA foreign_keys=OFF before it and defer_foreign_keys \
            inside; A's triggers dropped first and B's created last, so that none fires \
            during the patch; a table whose columns were renamed, dropped or added at \
            the end is altered in place (ALTER TABLE RENAME COLUMN, DROP COLUMN, ADD \
            COLUMN, kept only where they give B's CREATE TABLE text exactly) and its \
            rows patched like any other table's; any other table whose definition \
            changed is dropped, created as in B and filled with B's rows (then B's \
            indexes); new tables created and \
            filled; virtual tables written through the table, never their shadow \
            tables; generated columns never written; sqlite_sequence, user_version and \
            application_id set as in B; a missing sqlite_stat1 made by ANALYZE \
            sqlite_schema (as the sqlite3 shell's .dump does). Rows of tables without a \
            primary key are written by rowid when the table differs, so the patched \
            table has B's rowids too (whatever --key says: a --key may repeat). An \
            update that changes a column of a UNIQUE index is written as a DELETE with \
            the table's deletes and an INSERT with its inserts, so rows that swap \
            UNIQUE values (or pass them round a cycle) never collide. Values are exact \
            SQL literals for A's text encoding (REALs bit for bit; TEXT with CR or NUL, \
            and in a UTF-16 A with U+FFFE or U+FFFF, as CAST(x'..' AS TEXT) of its \
            bytes in that encoding); TEXT that is not UTF-8 cannot go into a UTF-16 A \
            exactly and is an error. Nothing is printed when A and B are equal. \
            json / jsonl: one object per change: {"type":"schema", "object", "name", \
            "operation", "details", "old_sql", "new_sql"} and {"type":"row", "table", \
            "operation" (insert, delete, update), "match" (key, rowid, multiset), \
            "key", "old", "new"} with values in litectl's lossless JSON encoding (the \
            same as query's); for updates old and new hold the changed columns only. \
            changeset: the session extension's binary changeset (for \
            sqlite3changeset_apply or litectl patch) with the row changes of tables \
            that have a primary key and the same definition on both sides; other \
            tables that differ (no primary key, generated columns, schema changes) are \
            left out and named on stderr.

            --ignore-column TABLE.COL leaves a column out of the comparison (it is still \
            written in INSERTs of the sql format). --table limits the diff to the named \
            tables (their indexes and triggers; views and database settings are then \
            left out); --exclude leaves tables or views out.

            Both databases are opened read-only, each read inside one transaction (one \
            consistent snapshot, WAL included), on separate connections: A and B may \
            differ in page size and text encoding. The same file given twice is \
            identical at once. A missing B is an error and is never created.

            A table whose columns changed but whose key did not is compared row by row \
            on every column: an added column's value against its DEFAULT (what A's rows \
            hold once the column is added), a dropped column's against NULL (a row \
            whose dropped column held a value is an update, shown as value → (column \
            dropped)), a renamed column (same position and definition, new name) by \
            its values. In json, old holds A's columns and new B's. See docs/diff.md.

            Files that share history (a backup and its source, a copy changed by a \
            migration) are compared page by page first: a b-tree subtree whose pages \
            are byte-identical in A and B (overflow pages included) holds the same \
            rows on both sides, so only the key ranges between such subtrees are read \
            row by row. This applies to tables with the same definition on both \
            sides, in files with the same page size and UTF-8 text; a table with a \
            page in either -wal is read in full. --full-scan reads every row.

            Rows are decoded straight from the b-tree pages (SQLite's own file handle, \
            inside the read transaction; pages of a -wal when the snapshot's frames can \
            be pinned down) wherever a table's b-tree order is the comparison's key \
            order: tables keyed by rowid or INTEGER PRIMARY KEY, and WITHOUT ROWID \
            tables whose key sorts BINARY ascending, in UTF-8 files. Each side is read \
            on its own threads, in key-ordered parts when there are cores to spare. \
            Other tables (no primary key, another key, virtual tables, a -wal whose \
            snapshot cannot be pinned down) are read with SQL statements; --verbose \
            names them on stderr. The result is the same either way.

            Exit status: 0 identical (after filters), 1 different, 2 error.
            """)

    @Argument(help: ArgumentHelp("The first database (the one a sql patch applies to) (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "a"))
    var a: String

    @Argument(help: ArgumentHelp("The second database (the target).", valueName: "b"))
    var b: String

    @Option(name: .customLong("format"), help: ArgumentHelp("Output format: text (default), sql, json, jsonl or changeset.", valueName: "format"))
    var formatOption: DiffFormat?
    /// --json is --format json.
    var format: DiffFormat { voice.json ? .json : formatOption ?? .text }

    @Flag(help: "Counts only: one line per changed table and per schema change (text format).")
    var summary = false

    @Option(name: .customLong("table"), help: ArgumentHelp("Compare only this table (repeatable).", valueName: "name"))
    var tables: [String] = []

    @Option(name: .customLong("exclude"), help: ArgumentHelp("Leave this table or view out (repeatable).", valueName: "name"))
    var excluded: [String] = []

    @Option(name: .customLong("ignore-column"), help: ArgumentHelp("Leave TABLE.COL out of comparisons (repeatable).", valueName: "table.col"))
    var ignoredColumns: [String] = []

    @Option(name: .customLong("key"), help: ArgumentHelp("Key columns for a table without a primary key: TABLE=COL,... (repeatable).", valueName: "table=cols"))
    var keys: [String] = []

    @Flag(help: "Match rows of tables without a primary key by rowid (as sqldiff does).")
    var rowid = false

    @Flag(help: "Compare the schema only.")
    var schemaOnly = false

    @Flag(help: "Compare the data only (tables present in both; a sql patch writes the columns both name alike).")
    var dataOnly = false

    @Flag(help: "Read every row, even where A and B share identical b-tree pages.")
    var fullScan = false

    @OptionGroup var voice: VoiceOptions
    var verbose: Bool { voice.verbose }

    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        if schemaOnly && dataOnly { throw ValidationError("--schema-only and --data-only exclude each other.") }
        for key in keys where !key.contains("=") { throw ValidationError("--key takes TABLE=COL,... (got \(key)).") }
        for column in ignoredColumns where !column.contains(".") {
            throw ValidationError("--ignore-column takes TABLE.COLUMN (got \(column)).")
        }
        if summary && format != .text { throw ValidationError("--summary goes with the text format.") }
        if voice.json, let formatOption, formatOption != .json { throw ValidationError("--json is --format json: give one of them.") }
    }

    func run() throws {
        noteHotJournals(voice)
        let opened = try moments.open([a, b], quiet: voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        TemporaryFiles.installSignalCleanup()  // a keyless table's residue may go to a temporary file
        var options = DiffOptions()
        options.tables = tables
        options.excluded = excluded
        options.ignoredColumns = ignoredColumns
        options.schemaOnly = schemaOnly
        options.dataOnly = dataOnly
        options.matchRowid = rowid
        options.skipSharedPages = !fullScan
        for key in keys {
            let parts = key.split(separator: "=", maxSplits: 1).map(String.init)
            options.keys[parts[0]] = parts.count > 1 ? parts[1].split(separator: ",").map(String.init) : []
        }
        // -q: the exit status alone says whether A and B differ (as diff -q, cmp -s).
        let sink: ByteSink = voice.quiet ? DiscardSink() : FileDescriptorSink()
        let consumer: DiffConsumer
        switch format {
        case .sql:
            consumer = SQLPatchWriter(sink: sink)
        case .changeset:
            consumer = ChangesetWriter(sink: sink)
        case .json, .jsonl:
            consumer = DiffReportWriter(sink: sink, style: format == .json ? .json : .jsonl)
        case .text:
            let colour = isatty(1) == 1 && getenv("NO_COLOR") == nil
            // On a terminal, long values are cut (-v shows them whole, as pipes and --json do).
            let cut = isatty(1) == 1 && !verbose ? DiffReportWriter.terminalValueLimit : nil
            consumer = DiffReportWriter(sink: sink, style: summary ? .summary : .text, colour: colour, valueLimit: cut)
        }
        let result: DiffSummary
        do {
            // Progress only on a terminal, on stderr.
            let showProgress = isatty(2) == 1
            result = try DiffEngine.run(pathA: a, pathB: b, options: options, consumer: consumer,
                                        busyTimeout: database.busyTimeout,
                                        progress: showProgress ? { table, rows in
                                            let line = table.map { "\r\u{1B}[Kdiff: \(TerminalText.visible($0)): \(rows) rows compared" } ?? "\r\u{1B}[K"
                                            _ = line.withCString { write(2, $0, strlen($0)) }
                                        } : nil)
            try sink.flush()
        } catch {
            try? sink.flush()
            printError(describe(error))
            throw ExitStatus.error
        }
        if verbose {
            for note in result.notes { printError("note: \(note)") }
        }
        if let writer = consumer as? ChangesetWriter, !voice.quiet {
            for table in writer.skippedTables { printError("note: table \(table.name) is not in the changeset: \(table.reason)") }
            for table in writer.nullKeyRowsLeftOut {
                printError("note: table \(table.name): \(table.rows) changed row\(table.rows == 1 ? "" : "s") with NULL in the primary key "
                           + "not in the changeset (a changeset addresses rows by key)")
            }
        }
        if !result.identical { throw ExitStatus.findings }
    }
}
