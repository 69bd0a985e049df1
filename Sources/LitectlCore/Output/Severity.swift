// How serious a finding is, for every command that reports findings (`check`,
// `migrate lint`): errors fail the run, warnings fail it only where a command
// says so (`--strict`), notes never do.

/// How serious a finding is. Errors fail the check; warnings fail it only
/// with `--strict`; notes never do.
public enum Severity: String, Sendable, Comparable, CaseIterable {
    case note
    case warning
    case error

    var rank: Int {
        switch self {
        case .note: 0
        case .warning: 1
        case .error: 2
        }
    }

    public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rank < rhs.rank }
}
