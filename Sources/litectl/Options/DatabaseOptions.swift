// Options every command that opens databases shares.
import ArgumentParser
import LitectlCore

struct DatabaseOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "How long to wait for another process's lock before giving up, in milliseconds.",
        valueName: "ms"))
    var busyTimeout: Int = Connection.defaultBusyTimeout

    func validate() throws {
        guard busyTimeout >= 0 else { throw ValidationError("--busy-timeout must be 0 or more milliseconds.") }
    }
}
