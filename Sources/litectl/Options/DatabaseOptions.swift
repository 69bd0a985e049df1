// The one lock-wait option every command shares: --timeout DURATION, for a
// lock another process holds on a database, a backup folder or a repository.
// `--busy-timeout MS`, the spelling some commands had, stays as a hidden alias.
import ArgumentParser
import LitectlCore

struct DatabaseOptions: ParsableArguments {
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp(
        "How long to wait for a lock another process holds (on a database, a backup folder or a repository) before giving up: seconds (2.5) or a duration (90s, 5m, 1h30m) (default: 5; backup, restore, migrate, forget, prune, replicate and repo upgrade: 60).",
        valueName: "duration"), transform: DurationArgument.parse)
    var timeout: DurationArgument?

    @Option(name: .customLong("busy-timeout"), parsing: .unconditional, help: .hidden)
    var busyTimeoutMilliseconds: Int?

    func validate() throws {
        if let busyTimeoutMilliseconds, busyTimeoutMilliseconds < 0 { throw ValidationError("--busy-timeout must be 0 or more milliseconds.") }
        if timeout != nil && busyTimeoutMilliseconds != nil { throw ValidationError("Give --timeout (seconds), not also --busy-timeout.") }
    }

    /// The wait in seconds, `fallback` when none was given.
    func seconds(default fallback: Double) -> Double {
        timeout?.seconds ?? busyTimeoutMilliseconds.map { Double($0) / 1000 } ?? fallback
    }

    /// The wait in milliseconds for SQLite's busy handler, `fallback` seconds
    /// when none was given (at most a day).
    func milliseconds(default fallback: Double) -> Int {
        Int((min(seconds(default: fallback), 86_400) * 1000).rounded())
    }

    /// The busy timeout of commands that open databases (default 5 s).
    var busyTimeout: Int { milliseconds(default: Double(Connection.defaultBusyTimeout) / 1000) }
}
