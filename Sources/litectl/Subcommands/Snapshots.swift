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
            bytes_added, duration_seconds, strategy, verification (and replica, for the \
            snapshots `litectl replicate` writes: each is the base of a chain of states).

            Databases that `litectl replicate` follows can be restored to any moment of a \
            range: the table ends with each one's ranges (database, host, from, to, the \
            chains and states in it). --ranges lists only those (with --json: one object per \
            range: database, path, hostname, from, to, from_unix, to_unix, chains, states).

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

    @Flag(help: "List the time ranges each replicated database can be restored to, not the snapshots.")
    var ranges = false

    func run() throws {
        do {
            let repository = try options.open(quiet: voice.quiet)
            let (all, damaged) = try repository.snapshots()
            let resolved = database.map { BackupJob.resolvedPath($0) }
            let shown = all.filter { s in
                (database == nil || sameBytes(s.database, database!) || sameBytes(s.path, database!) || sameBytes(s.path, resolved!))
                    && (tag.isEmpty || s.tags.contains { tag.contains($0) })
            }
            let spans = repository.holdsSegments && (ranges || !json)
                ? try repository.restorableRanges(all).filter { r in database == nil || sameBytes(r.database, database!) || sameBytes(r.path, database!) || sameBytes(r.path, resolved!) }
                : []
            if ranges {
                if !voice.quiet || json { printRanges(spans) }
            } else if json {
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
                if !spans.isEmpty { printOut(""); printRanges(spans) }
            }
            for d in damaged { printError("\(repository.location)/\(d.key): unreadable snapshot: \(d.error)") }
            if !damaged.isEmpty { throw ExitStatus.findings }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
    }

    /// The restorable ranges: a table, or one JSON object per range.
    func printRanges(_ spans: [RestorableRange]) {
        if json {
            for r in spans {
                printExact(JSON.object([("database", .string(r.database)), ("path", .string(r.path)), ("hostname", .string(r.hostname)),
                                      ("from", .string(Timestamp.iso8601(r.from))), ("to", .string(Timestamp.iso8601(r.to))),
                                      ("from_unix", .number(r.from)), ("to_unix", .number(r.to)),
                                      ("chains", .array(r.chains.map { .string($0) })), ("states", .integer(Int64(r.states)))]).compact)
            }
            return
        }
        var rows = [["RESTORABLE", "HOST", "FROM", "TO", "CHAINS", "STATES"]]
        for r in spans {
            rows.append([r.database, r.hostname, Timestamp.iso8601(r.from), Timestamp.iso8601(r.to), String(r.chains.count), String(r.states)])
        }
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
        for row in rows {
            printOut(zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces))
        }
    }
}
