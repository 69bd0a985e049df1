// Output options every row-printing command shares (query, tables, stats,
// analyze, check --format, ...), with the voice every command has: --json is
// --format json, -q prints no rows.
import ArgumentParser
import LitectlCore

#if canImport(Glibc)
import Glibc
#endif

extension OutputFormat: ExpressibleByArgument {}

struct OutputOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Output format: table, csv, tsv, json, jsonl or markdown (default: table on a terminal, jsonl otherwise).",
        valueName: "format"))
    var format: OutputFormat?

    @Flag(name: .long, help: "Leave out the header line (table, csv, tsv, markdown).")
    var noHeaders = false

    @OptionGroup var voice: VoiceOptions

    func validate() throws {
        if voice.json, let format, format != .json { throw ValidationError("--json is --format json: give one of them.") }
    }

    /// The format to use: the one asked for (--json: json), else table for a
    /// terminal and jsonl for a pipe or file (machines read the output there).
    var resolvedFormat: OutputFormat {
        if voice.json { return .json }
        return format ?? (isatty(1) == 1 ? .table : .jsonl)
    }

    /// A writer on `sink` in the resolved format; with -q, one that writes nothing.
    func makeWriter(sink: ByteSink) -> RowWriter {
        RowWriter(format: resolvedFormat, headers: !noHeaders, sink: voice.quiet ? DiscardSink() : sink)
    }
}
