// Output options every row-printing command shares (query, tables, stats, ...).
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

    /// The format to use: the one asked for, else table for a terminal and
    /// jsonl for a pipe or file (machines read the output there).
    var resolvedFormat: OutputFormat {
        format ?? (isatty(1) == 1 ? .table : .jsonl)
    }

    /// A writer on stdout in the resolved format.
    func makeWriter(sink: ByteSink) -> RowWriter {
        RowWriter(format: resolvedFormat, headers: !noHeaders, sink: sink)
    }
}
