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
            range, to the microsecond: the table ends with each one's ranges (database, \
            host, from, to, both included, the chains and states in it), then a GAP line \
            for each span no restore rebuilds (its first moment, the moment restores work \
            again, the cause) and the time of each one's last commit shipped. --ranges lists \
            only those (with --json: one object per range or gap, in time order: database, \
            path, hostname, restorable (false: a gap), from, to (a gap's: the first moment \
            restorable again, null when none is), from_unix, to_unix, chains, states, \
            last_commit, last_commit_unix, and for a gap object and cause). Every chain is \
            read: its base's page list, every segment, the states in order from 1 replayed \
            against the digests they recorded, every page of each state in the index and in \
            a pack that is there (verify --read-data reads the packs), and where a chain \
            continues another, the state it recorded of it.

            A chain that cannot be restored at every moment (a damaged or missing segment, \
            states that clash, a pack gone) is named on stderr with the cause, one line \
            each; its moments before the damage are still listed, and a restore lands on \
            them; the other chains and databases are listed. With --json its base \
            snapshot's object has a chain_damaged field (the cause).

            Exit status: 0 listed, 1 a snapshot could not be read or a chain has a gap \
            (named on stderr; the others are listed), 2 error.
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
            func wanted(_ database_: String, _ path: String) -> Bool {
                database == nil || sameBytes(database_, database!) || sameBytes(path, database!) || sameBytes(path, resolved!)
            }
            var damagedChains: [DamagedChain] = []
            var histories: [DatabaseHistory] = []
            if repository.holdsSegments {
                let health = try repository.chainHealth(all, unresolvable: try repository.pageResolver())
                histories = health.databases.filter { wanted($0.database, $0.path) }
                damagedChains = health.damaged.filter { wanted($0.database, $0.path) }
            }
            let spans = histories
            let damagedBases = Dictionary(damagedChains.map { ($0.chain, $0.cause) }) { a, _ in a }
            if ranges {
                if !voice.quiet || json { printRanges(spans) }
            } else if json {
                for s in shown {
                    guard let cause = damagedBases[s.id], case .object(var fields) = s.json else { printExact(s.json.compact); continue }
                    fields.append(("chain_damaged", .string(cause)))
                    printExact(JSON.object(fields).compact)
                }
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
            for d in damagedChains { printError(damagedChainLine(d, then: "the moments it cannot restore are listed as gaps")) }
            if !damaged.isEmpty || !damagedChains.isEmpty { throw ExitStatus.findings }
        } catch let code as ExitCode {
            throw code
        } catch {
            throw fail(error)
        }
    }

    /// Each database's history: its restorable ranges in a table, then its
    /// gaps and last commit, one line each; or one JSON object per range or gap.
    func printRanges(_ histories: [DatabaseHistory]) {
        if json {
            for h in histories {
                for span in h.spans {
                    var fields: [(String, JSON)] = [("database", .string(h.database)), ("path", .string(h.path)), ("hostname", .string(h.hostname)),
                                                    ("restorable", .bool(span.restorable)),
                                                    ("from", .string(Timestamp.iso8601Micros(span.from))), ("to", .optional(span.to) { .string(Timestamp.iso8601Micros($0)) }),
                                                    ("from_unix", .number(span.from)), ("to_unix", .optional(span.to) { .number($0) }),
                                                    ("chains", .array(span.chains.map { .string($0) })), ("states", .integer(Int64(span.states))),
                                                    ("last_commit", .string(Timestamp.iso8601Micros(h.lastCommit))), ("last_commit_unix", .number(h.lastCommit))]
                    if !span.restorable { fields += [("object", .string(span.object)), ("cause", .string(span.cause))] }
                    printExact(JSON.object(fields).compact)
                }
            }
            return
        }
        var rows = [["RESTORABLE", "HOST", "FROM", "TO", "CHAINS", "STATES"]]
        for h in histories {
            for r in h.ranges {
                rows.append([visible(h.database), visible(h.hostname), Timestamp.iso8601Micros(r.from), r.to.map(Timestamp.iso8601Micros) ?? "",
                             String(r.chains.count), String(r.states)])
            }
        }
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max()! }
        for row in rows {
            printOut(zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces))
        }
        for h in histories {
            let name = "\(visible(h.database)) (\(visible(h.path)) on \(visible(h.hostname)))"
            for g in h.gaps {
                let until = g.to.map { "until \(Timestamp.iso8601Micros($0))" } ?? "on"
                printOut("GAP \(name): cannot be restored from \(Timestamp.iso8601Micros(g.from)) \(until): \(visible(g.cause))")
            }
            printOut("last commit shipped of \(name): \(Timestamp.iso8601Micros(h.lastCommit))")
        }
    }
}

/// The one line that names a chain that cannot be read back: the database,
/// the cause, and what the command did about it.
func damagedChainLine(_ d: DamagedChain, then: String) -> String {
    "\(d.name) cannot be read: \(d.cause); \(then)"
}

/// A damaged chain in JSON: chain, database, path, hostname, cause.
func damagedChainJSON(_ d: DamagedChain) -> JSON {
    .object([("chain", .string(d.chain)), ("database", .string(d.database)), ("path", .string(d.path)),
             ("hostname", .string(d.hostname)), ("cause", .string(d.cause))])
}
