// `litectl recover DAMAGED OUT`: salvage a damaged database into a new one,
// reading its pages directly, and report what was recovered and what was lost.
import ArgumentParser
import Foundation
import LitectlCore

struct Recover: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Salvage the schema and rows of a damaged database into a new database.",
        discussion: """
            DAMAGED is read page by page by litectl's own page reader, never through \
            SQLite's b-tree code (which gives up at the first bad page), and never \
            written; a -wal beside it is read too (its committed frames, checksums \
            checked). OUT is built in a hidden temporary file beside it, fsynced and \
            renamed into place; an existing OUT is refused unless --force. A table \
            whose b-trees the reader finds sound, with indexes that hold exactly its \
            rows in order, is copied by SQLite record by record with its indexes (as \
            VACUUM copies), while the reader proves it; the others are salvaged row by \
            row.

            What is recovered: the schema from whatever sqlite_schema pages survive \
            (tables whose schema row is lost get a table recovered_root_N with columns \
            c0, c1, ...); every row on every readable leaf page reachable from a table's \
            root, with its rowid (INTEGER PRIMARY KEY values kept), WITHOUT ROWID tables \
            from their index-format pages, long values from their overflow chains; rows \
            on pages no b-tree reaches any more (the children of a damaged page) when \
            they fit a damaged table's columns; the page size, text encoding, \
            auto_vacuum, user_version, application_id and journal mode. UNIQUE indexes \
            are made before the rows, other indexes, views and triggers after them. \
            An R*Tree whose shadow rows no longer form a sound tree is built again \
            through its module from the entries its nodes still hold (the report \
            counts those lost; an entry the module refuses, a box whose minimum is \
            above its maximum, goes to lost_and_found); a virtual table whose CREATE statement no longer \
            parses is left out. \
            A row that cannot be placed in its table (on a page no b-tree reaches that \
            fits no table, out of place on a damaged page, refused by a constraint of \
            the new schema, with a value lost to a broken overflow chain, or whose \
            record is damaged, read as far as it goes) goes to the table \
            lost_and_found (rootpgno, pgno, cell, nfield, id, reason, c0, ...). Free \
            pages are read for rows a damaged table lost to a corrupt freelist; other \
            rows on free pages are deleted rows and are left out (--no-freelist \
            ignores free pages altogether).

            The report (on stdout; --json for one compact JSON object, -q for none; when \
            stdout is not a terminal, only when something was damaged or lost, or with -v) \
            gives per table the rows \
            recovered, rows sent to lost_and_found, pages read and pages damaged, and \
            for the file the damaged pages and what was wrong; and per foreign key the \
            rows left without their parent row (it was on a lost page), which \
            PRAGMA foreign_key_check, and so check, finds in OUT. A progress bar is \
            drawn on stderr when it is a terminal.

            Exit status: 0 the source was sound and every row was copied; 1 something \
            was damaged or lost (OUT holds what could be recovered, and may hold rows \
            whose parent row was lost: the report lists them); 2 nothing could be done \
            (DAMAGED missing or no database, OUT not writable or existing), and no OUT \
            is written.
            """)

    @Argument(help: ArgumentHelp("The damaged database (read only).", valueName: "damaged"))
    var damaged: String

    @Argument(help: ArgumentHelp("The new database to write.", valueName: "out"))
    var output: String

    @Flag(help: "Replace OUT if it exists.")
    var force = false

    @Flag(help: "Ignore free pages (do not look there for rows a damaged table lost).")
    var noFreelist = false

    @OptionGroup var voice: VoiceOptions

    func run() throws {
        try refuseMoments([damaged, output], as: "read or written by recover (it reads and writes files)")
        TemporaryFiles.installSignalCleanup()
        var request = RecoveryRequest(source: damaged, output: output)
        request.replace = force
        request.readFreelist = !noFreelist
        let bar = ProgressBar(label: "recover")
        let report: RecoveryReport
        do {
            report = try Recovery.run(request) { bar.update($0) }
            bar.clear()
        } catch {
            bar.clear()
            printError(describe(error))
            throw ExitStatus.error
        }
        if voice.json {
            printExact(report.json.compact)
        } else if voice.talks || (!voice.quiet && report.exitCode != 0) {
            // Off a terminal a sound copy is silent (docs/output.md); what was damaged or lost is always said.
            for line in report.lines { printOut(line) }
        }
        if report.exitCode != 0 { throw ExitStatus.findings }
    }
}
