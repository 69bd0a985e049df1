// `litectl info DB...`: what each database file is.
import ArgumentParser
import LitectlCore

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a database file is: header, pragmas, objects, WAL state.",
        discussion: """
            For each DB: the 100-byte file header as stored, the same facts as SQLite \
            reports them (page size and count, freelist, schema and user version, \
            application id, journal mode, auto_vacuum, encoding), the file and -wal \
            sizes, object counts and schema size. The database is opened read-only. \
            In WAL mode the header in the file can lag behind the -wal; both are shown.

            --json prints one JSON object per database, one per line (JSON Lines), with \
            these keys in this order: path, file_size, wal_size (null when there is no \
            -wal file), page_size, page_count, freelist_count, schema_version, \
            user_version, application_id, journal_mode, auto_vacuum (none, full or \
            incremental), encoding, objects {tables, virtual_tables, shadow_tables, \
            internal_tables, indexes, automatic_indexes, views, triggers}, \
            schema_sql_bytes, header (null for an empty file; else page_size, \
            write_version, read_version, reserved_bytes, max_payload_fraction, \
            min_payload_fraction, leaf_payload_fraction, change_counter, page_count, \
            page_count_valid, freelist_trunk_page, freelist_count, schema_cookie, \
            schema_format, default_cache_size, largest_root_page, text_encoding, \
            user_version, incremental_vacuum, application_id, version_valid_for, \
            sqlite_version_number), header_behind_wal, sqlite_library_version.

            Exit status: 0 when every database was read, 2 when any could not be \
            (each such file gets one line on stderr; the others are still reported).
            """)

    @Argument(help: ArgumentHelp("Database files (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databases: [String]

    @OptionGroup var voice: VoiceOptions
    var json: Bool { voice.json }

    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func run() throws {
        noteHotJournals(voice)
        let opened = try moments.open(databases, quiet: voice.quiet, eachOnItsOwn: true)
        defer { withExtendedLifetime(opened) {} }
        var failed = false
        for (i, path) in databases.enumerated() {
            do {
                let info = try DatabaseInfo.read(path: path, busyTimeout: database.busyTimeout)
                if json {
                    printExact(info.json.compact)
                } else if !voice.quiet {
                    printBlock((i > 0 ? "\n" : "") + info.text)
                }
            } catch {
                printError(describe(error))
                failed = true
            }
        }
        if failed { throw ExitStatus.error }
    }
}
