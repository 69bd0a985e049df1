// `litectl snapshots --repo URL [DB]`: the snapshots in a repository.
import ArgumentParser
import Foundation
import LitectlCore

struct Snapshots: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the snapshots in a repository.",
        discussion: """
            One line per snapshot, oldest first: id (the first 8 hex digits; any unique \
            prefix names a snapshot), database, host, time (UTC), pages, bytes added to the \
            repository by that backup, tags. DB filters by database name or path. --json \
            prints one JSON object per snapshot (JSON Lines) with every recorded field: \
            id, database, path, hostname, time, time_unix, tags, page_size, page_count, \
            bytes, list, parent, pages_sha256 (database_sha256 before repository version 3), \
            logical_hash, header, pages_new, \
            bytes_added, duration_seconds, strategy, verification.

            Exit status: 0 listed, 1 a snapshot could not be read (named on stderr; the \
            others are listed), 2 error.
            """)

    @Argument(help: ArgumentHelp("Only the snapshots of this database (name or path).", valueName: "db"))
    var database: String?

    @OptionGroup var options: RepoOptions

    @Option(help: ArgumentHelp("Only snapshots with this tag (repeatable: any of them).", valueName: "tag"))
    var tag: [String] = []

    @OptionGroup var voice: VoiceOptions
    var json: Bool { voice.json }

    func run() throws {
        do {
            let repository = try options.open(quiet: voice.quiet)
            let (all, damaged) = try repository.snapshots()
            let resolved = database.map { BackupJob.resolvedPath($0) }
            let shown = all.filter { s in
                (database == nil || s.database == database || s.path == database || s.path == resolved)
                    && (tag.isEmpty || s.tags.contains { tag.contains($0) })
            }
            if json {
                for s in shown { printExact(s.json.compact) }
            } else if !voice.quiet {
                var rows = [["ID", "DATABASE", "HOST", "TIME", "PAGES", "ADDED", "TAGS"]]
                for s in shown {
                    rows.append([s.shortID, visible(s.database), visible(s.hostname), String(Timestamp.iso8601(s.time).prefix(19)) + "Z",
                                 String(s.pageCount), humanBytes(s.bytesAdded), visible(s.tags.joined(separator: ","))])
                }
                let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
                for row in rows {
                    printOut(zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
                        .trimmingCharacters(in: .whitespaces))
                }
            }
            for d in damaged { printError("\(repository.location)/\(d.key): unreadable snapshot: \(d.error)") }
            if !damaged.isEmpty { throw ExitStatus.findings }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
    }
}
