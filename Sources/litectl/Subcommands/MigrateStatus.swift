// `litectl migrate status DB DIR`: the migrations of a folder, applied or
// pending, beside the database's user_version and litectl's ledger.
import ArgumentParser
import Foundation
import LitectlCore

struct MigrateStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "List the migrations of DIR: applied, pending, edited since they ran, skipped, or missing.",
        discussion: """
            One line per migration: version, state and file. States: applied (at or below \
            the database's user_version, and the file's SHA-256 is the one recorded in \
            _litectl_migrations when it ran), unrecorded (applied, but no checksum was \
            recorded: before litectl kept its ledger, or by another tool), edited (applied, \
            and the file changed since), skipped (at or below the database's version, never \
            ran, while the ledger records a later migration: a file added after later ones \
            ran, from a merge say; migrate refuses to run until it is renumbered above the \
            version), pending (above the database's version), missing \
            (recorded as applied, but no file of that version is in DIR). A first line \
            gives the database's version and the newest migration. The database is only \
            read.

            --json prints one JSON object: path, folder, version, newest, pending, \
            entries [{version, file, state, down, applied_at, recorded_sha256, \
            file_sha256}]. Exit status: 0 when nothing is wrong (pending files are not \
            a problem), 1 when a file is edited, skipped or missing or the database is newer than \
            every migration, 2 error.
            """)

    @Argument(help: ArgumentHelp("The database file.", valueName: "db"))
    var database: String

    @Argument(help: ArgumentHelp("The folder of NNNN_name.sql files.", valueName: "dir"))
    var folder: String

    @OptionGroup var voice: VoiceOptions
    var json: Bool { voice.json }

    @OptionGroup var options: DatabaseOptions

    func run() throws {
        try refuseMoments([database], as: "read by migrate status")
        noteHotJournals(voice)
        let report: MigrationStatusReport
        do {
            report = try MigrationStatusReader.read(database: database, folder: folder, busyTimeout: options.busyTimeout)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        if json {
            printExact(JSON.object([
                ("path", .string(report.path)), ("folder", .string(report.folder)),
                ("version", .integer(report.version)), ("newest", .integer(report.newest)),
                ("pending", .integer(Int64(report.pending))),
                ("entries", .array(report.entries.map { entry in
                    .object([("version", .integer(entry.version)), ("file", .string(entry.file)),
                             ("state", .string(entry.state.rawValue)), ("down", .bool(entry.hasDown)),
                             ("applied_at", .optional(entry.appliedAt, JSON.string)),
                             ("recorded_sha256", .optional(entry.recordedSHA256, JSON.string)),
                             ("file_sha256", .optional(entry.fileSHA256, JSON.string))])
                })),
            ]).compact)
        } else if !voice.quiet {
            var head = "\(report.path): version \(report.version); newest migration \(report.newest); \(report.pending) pending"
            if report.databaseIsNewer { head += "; the database is newer than every migration" }
            printOut(head)
            for entry in report.entries {
                var line = "\(String(entry.version).leftPadded(4)) \(entry.state.rawValue.padding(10)) \(entry.file)"
                if let at = entry.appliedAt { line += "  (applied \(at))" }
                printOut(line)
            }
        }
        if report.hasProblems { throw ExitStatus.findings }
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
    func padding(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}
