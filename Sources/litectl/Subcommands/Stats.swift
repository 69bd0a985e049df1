// `litectl stats DB`: where the file's pages go, per table and index, with
// growth against an earlier report.
import ArgumentParser
import Foundation
import LitectlCore

struct Stats: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show how a database's pages are used, per table and index.",
        discussion: """
            Reads the dbstat virtual table in one pass, read-only, inside one read \
            transaction; the figures follow sqlite3_analyzer's definitions. One row per \
            b-tree (each table, each index, sqlite_schema), or with --tables one row per \
            table with all its indexes, largest first; --top N keeps the N largest.

            Columns: name, kind (table, index or table+indexes), table, pages, bytes, \
            share_percent (of PRAGMA page_count), leaf_pages, interior_pages, \
            overflow_pages, entries (rows of a table, keys of an index), payload (bytes, \
            overflow included), unused (bytes on the object's pages), unused_percent, \
            avg_payload and max_payload (bytes per entry), overflow_entries (entries that \
            spill onto overflow pages), depth (b-tree levels), fragmentation_percent \
            (leaf pages that do not follow the page before them in file order, in \
            percent of the pages after the first — sqlite3_analyzer's "non-sequential \
            pages").

            On a terminal (table format) the file totals come first — page size, \
            pages, pages in b-trees and bytes in use, freelist and pointer-map pages, \
            unused share (free pages plus unused bytes on pages), WAL size — then, per \
            object, a bar drawing its share of the file and the columns that say what \
            holds the space (name, share, kind, pages, size, share %, entries, avg \
            payload, unused %, overflow pages, depth, fragmentation %); the other \
            formats give every column. --format json prints \
            one compact document (as does --json) with the keys path, page_size, page_count, freelist_pages, \
            pointer_map_pages, used_pages, bytes_in_use, unused_percent, file_size, \
            wal_size, objects [rows], tables [rows]: keep it, and a later `stats \
            --compare OLD.json` shows what grew. Other formats print the rows only.

            --compare OLD.json prints, per object, old_pages, new_pages, page_change, \
            byte_change, growth_percent, old_entries, new_entries, entry_change, largest \
            growth first (objects only in one report included, their missing side null).

            Progress goes to stderr when it is a terminal (off with NO_COLOR or \
            --no-progress). Exit status: 0 done, 2 error.
            """)

    @Argument(help: ArgumentHelp("Database file (or moments: repo:NAME@WHEN, docs/moments.md).", valueName: "db"))
    var databasePath: String

    @Option(name: .long, help: ArgumentHelp("Show only the N largest objects.", valueName: "n"))
    var top: Int?

    @Flag(name: .long, help: "One row per table with all its indexes instead of one per b-tree.")
    var tables = false

    @Option(name: .long, help: ArgumentHelp("Show growth against an earlier `stats --format json` report.", valueName: "old.json"))
    var compare: String?

    @Flag(name: .long, help: "No progress on stderr.")
    var noProgress = false

    @OptionGroup var output: OutputOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup(title: "Moments of a repository") var moments: MomentSourceOptions

    func validate() throws {
        if let top, top < 1 { throw ValidationError("--top must be 1 or more.") }
    }

    func run() throws {
        noteHotJournals(output.voice)
        let opened = try moments.open([databasePath], quiet: output.voice.quiet)
        defer { withExtendedLifetime(opened) {} }
        let showProgress = !noProgress && isatty(2) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
        var lastShown = 0.0
        let stats: FileStats
        do {
            stats = try FileStats.read(path: databasePath, busyTimeout: database.busyTimeout,
                                       progress: showProgress ? { done, total in
                                           let now = Date().timeIntervalSince1970
                                           guard now - lastShown > 0.2 else { return }
                                           lastShown = now
                                           let percent = total > 0 ? min(100, done * 100 / total) : 0
                                           FileHandle.standardError.write(Data("\rstats: \(done)/\(total) pages (\(percent)%)".utf8))
                                       } : nil)
            if showProgress && lastShown > 0 { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        } catch {
            if showProgress && lastShown > 0 { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            printError(describe(error))
            throw ExitStatus.error
        }

        let sink = FileDescriptorSink()
        let format = output.resolvedFormat
        if let compare {
            let comparison: StatsComparison
            do {
                guard let data = FileManager.default.contents(atPath: compare) else {
                    throw DatabaseError(code: .cantopen, message: "cannot read the file", path: compare)
                }
                comparison = try StatsComparison(oldJSON: Array(data), oldPath: compare, new: stats, tables: tables)
            } catch {
                printError(describe(error))
                throw ExitStatus.error
            }
            if format == .table && !output.noHeaders && !output.voice.quiet {
                let change = comparison.newPageCount - comparison.oldPageCount
                printOut("file: \(comparison.oldPageCount) → \(comparison.newPageCount) pages (\(change >= 0 ? "+" : "")\(change), \(change >= 0 ? "+" : "-")\(humanBytes(abs(change) * comparison.pageSize)))")
                printOut("")
                fflush(nil)
            }
            let writer = output.makeWriter(sink: sink)
            writer.begin(columns: StatsComparison.columns)
            for change in comparison.changes.prefix(top ?? Int.max) { writer.write(comparison.row(change)) }
            writer.finish()
            try sink.flush()
            return
        }

        var list = tables ? stats.tables : stats.objects
        if let top { list = Array(list.prefix(top)) }
        if format == .json {
            var document = stats
            if tables { document.tables = list } else { document.objects = list }
            sink.write(Array((document.json.compact + "\n").utf8))
            try sink.flush()
            return
        }
        let bars = format == .table && isatty(1) == 1
        if format == .table && !output.noHeaders && !output.voice.quiet {
            let width = stats.summary.map { $0.0.count }.max() ?? 0
            for (label, value) in stats.summary {
                printOut(label + String(repeating: " ", count: width - label.count) + "  " + value)
            }
            printOut("")
            fflush(nil)
        }
        let writer = output.makeWriter(sink: sink)
        if format == .table {
            // For people: the columns that answer "what holds the space", the bar first.
            let wanted = ["name", "kind", "pages", "bytes", "share_percent", "entries", "avg_payload", "unused_percent",
                          "overflow_pages", "depth", "fragmentation_percent"]
            let positions = wanted.map { FileStats.columns.firstIndex(of: $0)! }
            writer.begin(columns: ["name"] + (bars ? ["share"] : []) + wanted.dropFirst().map {
                $0 == "bytes" ? "size" : $0.replacingOccurrences(of: "_percent", with: " %").replacingOccurrences(of: "_", with: " ")
            })
            for object in list {
                let row = stats.row(object)
                var cells = positions.map { row[$0] }
                cells[3] = .text(humanBytes(object.bytes(pageSize: stats.pageSize)))
                if bars { cells.insert(.text(Self.bar(stats.sharePercent(object))), at: 1) }
                writer.write(cells)
            }
        } else {
            writer.begin(columns: FileStats.columns)
            for object in list { writer.write(stats.row(object)) }
        }
        writer.finish()
        try sink.flush()
    }

    /// A bar 25 cells wide for 100%, in eighths of a cell.
    static func bar(_ percent: Double) -> String {
        let eighths = Int((max(0, min(100, percent)) * 25 * 8 / 100).rounded())
        let partial = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]
        var text = String(repeating: "█", count: eighths / 8) + partial[eighths % 8]
        if text.isEmpty && percent > 0 { text = "▏" }
        return text
    }
}
