// `litectl tables [DB...] [--attach ALIAS=PATH]...`: the tables and views of
// every database, with kind, row counts and columns on request.
import ArgumentParser
import Foundation
import LitectlCore

struct Tables: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the tables and views of databases and attached databases.",
        discussion: """
            One row per table or view: db (the file as given), schema (main, or the \
            alias of an --attach), name, type (table, view, virtual, shadow for a \
            virtual table's storage, internal for sqlite_sequence, sqlite_stat1 and \
            the like), without_rowid and strict (1 or 0); with --counts, rows \
            (count(*) of each table, a full scan; empty for views and for virtual \
            tables that cannot be read); with --columns, columns (each column's name \
            and declared type, separated by ", "). Objects are listed by file, by \
            schema, then by name.

            Each DB is opened read-only on its own (so any number of files may be \
            given); --attach ALIAS=PATH attaches PATH to the first DB (or to an empty \
            in-memory main when no DB is given), under the attach limit of SQLite \
            (10 on Debian). Output formats as for litectl query.

            Exit status: 0 success; 2 when a file cannot be read (each gets one line \
            on stderr; the others are still listed); 64 a usage error.
            """)

    @Argument(help: ArgumentHelp("Database files (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databases: [String] = []

    @Option(name: .customLong("attach"), help: ArgumentHelp(
        "Attach PATH as ALIAS to the first DB (repeatable).", valueName: "alias=path"))
    var attachments: [String] = []

    @Flag(name: .long, help: "Count the rows of each table.")
    var counts = false

    @Flag(name: .long, help: "List each table's columns.")
    var columns = false

    @OptionGroup var output: OutputOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        if databases.isEmpty && attachments.isEmpty {
            throw ValidationError("Give at least one DB or --attach ALIAS=PATH.")
        }
        for spec in attachments where !spec.contains("=") || spec.hasPrefix("=") {
            throw ValidationError("Expected ALIAS=PATH, got '\(spec)'.")
        }
    }

    func run() throws {
        noteHotJournals(output.voice)
        let opened = try moments.open(databases + attachments.map { String($0[$0.index(after: $0.firstIndex(of: "=")!)...]) }, quiet: output.voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        fflush(nil)  // what went through stdio so far comes first
        let sink = FileDescriptorSink()
        let writer = output.makeWriter(sink: sink)
        var header = ["db", "schema", "name", "type", "without_rowid", "strict"]
        if counts { header.append("rows") }
        if columns { header.append("columns") }
        writer.begin(columns: header)
        var failed = false
        let mains: [String?] = databases.isEmpty ? [nil] : databases
        for (index, main) in mains.enumerated() {
            do {
                let session = try AttachedSession(mainPath: main, busyTimeout: database.busyTimeout)
                if index == 0 {
                    for spec in attachments {
                        let cut = spec.firstIndex(of: "=")!
                        try session.attach(String(spec[spec.index(after: cut)...]), as: String(spec[..<cut]))
                    }
                }
                for entry in try session.tableList(counts: counts) {
                    var row: [Value] = [.text(entry.file), .text(entry.schema), .text(entry.name), .text(entry.type),
                                        .integer(entry.withoutRowid ? 1 : 0), .integer(entry.strict ? 1 : 0)]
                    if counts { row.append(entry.rowCount.map { .integer($0) } ?? .null) }
                    if columns {
                        row.append(.text(entry.columns.map { $0.declaredType.isEmpty ? $0.name : "\($0.name) \($0.declaredType)" }
                            .joined(separator: ", ")))
                    }
                    writer.write(row)
                }
            } catch {
                try? sink.flush()
                printError(describe(error))
                failed = true
            }
        }
        writer.finish()
        try sink.flush()
        if failed { throw ExitStatus.error }
    }
}
