// Text on one line, for `--` comments and one-line messages (the schema's,
// SQLite's and the files' own messages name objects whose names may hold
// newlines).

extension String {
    /// The string on one line: CR and LF as spaces (for `--` comments and
    /// messages on one line).
    public func replacingNewlines() -> String {
        String(unicodeScalars.map { $0 == "\n" || $0 == "\r" ? " " : Character($0) })
    }
}
