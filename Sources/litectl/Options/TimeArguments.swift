// The two kinds of time an option takes, read the same by every command: a
// duration (`--interval 1h30m`, DurationText) and a moment (`--at -10m`,
// MomentTime). A value that does not read is a usage error (exit 64) naming
// the option and the accepted forms.
import ArgumentParser
import LitectlCore

/// A duration option's value, in seconds: `90`, `2.5`, `90s`, `15m`, `1h30m`, `7d`.
/// Declare options with `transform: DurationArgument.parse` so that a bad
/// value's error lists the accepted forms (ArgumentParser names the option).
struct DurationArgument: ExpressibleByArgument, CustomStringConvertible, Sendable {
    var seconds: Double

    init(seconds: Double) { self.seconds = seconds }

    init?(argument: String) {
        guard let seconds = try? DurationText.seconds(argument) else { return nil }
        self.seconds = seconds
    }

    /// Reads a duration, or throws the reason and the accepted forms.
    static func parse(_ text: String) throws -> DurationArgument {
        DurationArgument(seconds: try DurationText.seconds(text))
    }

    /// A duration that must carry a unit (`--keep-within`: a bare `7` is refused).
    static func parseWithUnit(_ text: String) throws -> DurationArgument {
        DurationArgument(seconds: try DurationText.seconds(text, bareNumbers: false))
    }

    var description: String { DurationText.text(seconds) }
    var defaultValueDescription: String { description }
}

/// A moment option's value (`--at`): the time it names, read when the
/// command line is, against the wall clock then.
struct MomentArgument: ExpressibleByArgument, Sendable {
    var seconds: Double

    init?(argument: String) {
        guard let seconds = try? MomentTime.parse(argument) else { return nil }
        self.seconds = seconds
    }

    init(seconds: Double) { self.seconds = seconds }

    /// Reads a time, or throws the reason and the accepted forms.
    static func parse(_ text: String) throws -> MomentArgument {
        MomentArgument(seconds: try MomentTime.parse(text))
    }
}
