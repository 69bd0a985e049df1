// How much a command says, the same on every command: -q prints no report
// (errors still go to stderr, the exit status tells), -v says more, --json
// prints compact JSON for machines. docs/output.md lists what each prints.
import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

struct VoiceOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Print no report on stdout and no notes or warnings on stderr; errors still print, and the exit status tells.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Say more: what was done, and warnings even when stdout is not a terminal.")
    var verbose = false

    @Flag(help: "Print JSON on stdout (compact: one document, or one object per line where the command reports per item).")
    var json = false

    func validate() throws {
        if quiet && verbose { throw ValidationError("-q and -v contradict each other: give one.") }
        if quiet && json { throw ValidationError("-q prints nothing, --json prints JSON: give one.") }
    }

    /// Whether a report for people goes to stdout: -v, or a terminal, and never with -q or --json.
    var talks: Bool { !quiet && !json && (verbose || isatty(STDOUT_FILENO) == 1) }
}
