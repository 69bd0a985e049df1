// `litectl hash DB...`: a logical content hash of each database.
import ArgumentParser
import LitectlCore

struct Hash: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a content hash of each database's schema and data.",
        discussion: """
            Prints one line per database, `SHA256  PATH` (like sha256sum). Two databases \
            have the same hash exactly when they hold the same schema (the SQL of every \
            table, index, view and trigger, whitespace outside quotes normalized; \
            user_version and application_id) and the same data: every value compared \
            exactly, with its storage class (1, 1.0, '1' and x'31' all differ), TEXT by \
            its bytes and REALs by their bits. The statistics tables sqlite_stat1 and \
            sqlite_stat4 count (diff compares them too: equal hashes, identical diff). \
            Page size, VACUUM, free pages, the rowids of tables without an INTEGER \
            PRIMARY KEY (VACUUM may renumber them), row order and shadow tables of \
            virtual tables do not count. \
            Rows of each table are hashed as a multiset (duplicates count). \
            The databases are opened read-only, each read in one transaction.

            --table limits the hash to the named tables (their rows and, unless \
            --data-only, their CREATE statements and those of their indexes and \
            triggers). --per-table adds one line per table: `SHA256  ROWS  TABLE`. \
            --json prints one object per database (path, digest, and with --per-table \
            tables [{name, digest, rows}]).

            Rows are read straight from the database's b-tree pages (on every core), \
            as SQLite's own SELECT would return them; a table the page reader cannot \
            read (a virtual table, pages in a -wal whose snapshot it cannot pin down, \
            a damaged page) is read with SQL statements instead, and --verbose says \
            so on stderr. The hash is the same either way.

            Exit status: 0 when every database was hashed, 2 when any could not be.
            """)

    @Argument(help: ArgumentHelp("Database files (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databases: [String]

    @Option(name: .customLong("table"), help: ArgumentHelp("Hash only this table (repeatable).", valueName: "name"))
    var tables: [String] = []

    @Flag(help: "Hash the schema only.")
    var schemaOnly = false

    @Flag(help: "Hash the data only.")
    var dataOnly = false

    @Flag(help: "Also print each table's data hash and row count.")
    var perTable = false

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        if schemaOnly && dataOnly { throw ValidationError("--schema-only and --data-only exclude each other.") }
    }

    func run() throws {
        noteHotJournals(voice)
        let opened = try moments.open(databases, quiet: voice.quiet, eachOnItsOwn: true)
        defer { withExtendedLifetime(opened) {} }
        var options = ContentHashOptions()
        options.tables = tables
        options.includeSchema = !dataOnly
        options.includeData = !schemaOnly
        var failed = false
        for path in databases {
            do {
                let result = try ContentHasher.hash(path: path, options: options, busyTimeout: database.busyTimeout)
                if voice.verbose {
                    for note in result.notes { printError("note: \(path): \(note)") }
                }
                if voice.json {
                    var fields: [(String, JSON)] = [("path", .string(path)), ("digest", .string(result.digest))]
                    if perTable {
                        fields.append(("tables", .array(result.tables.map {
                            .object([("name", .string($0.name)), ("digest", .string($0.digest)), ("rows", .integer($0.rows))])
                        })))
                    }
                    printExact(JSON.object(fields).compact)
                } else if !voice.quiet {
                    printOut("\(result.digest)  \(path)")
                    if perTable {
                        for table in result.tables { printOut("  \(table.digest)  \(table.rows)  \(table.name)") }
                    }
                }
            } catch {
                printError(describe(error))
                failed = true
            }
        }
        if failed { throw ExitStatus.error }
    }
}
