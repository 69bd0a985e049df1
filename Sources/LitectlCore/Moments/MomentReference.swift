// A moment reference as a command line writes it, `repo:NAME@WHEN`: the
// database NAME the repository lists (as `restore --db` takes it) at WHEN
// (`latest`, a snapshot id, or a time: Output/PointInTime.swift). Built on
// Repository/ (Moments/ opens a repository's states through PageVFS); this
// file reads only the words.

/// `repo:NAME@WHEN`, read.
public struct MomentReference: Sendable, Equatable {
    /// NAME, as `restore --db` takes it (a file name or the path the repository lists).
    public var database: String
    /// WHEN as written: `latest`, a snapshot id or a prefix of one, or a time.
    public var when: String
    /// The whole reference as given, for messages.
    public var text: String

    public init(database: String, when: String, text: String? = nil) {
        self.database = database
        self.when = when
        self.text = text ?? "repo:\(database)@\(when)"
    }

    /// The prefix that makes an argument a moment reference (a local file
    /// whose name starts with it is reached as `./repo:...`).
    public static let prefix = "repo:"

    /// The reference `text` spells; nil when it does not start with `repo:`
    /// (a local path: `./repo:x` is a file). A text that starts with `repo:`
    /// but is not `repo:NAME@WHEN` with a WHEN that reads throws a usage
    /// error (ValidationErrorText), one line. NAME may itself hold `@`: the
    /// last `@` begins WHEN (no WHEN holds one).
    public static func parse(_ text: String) throws -> MomentReference? {
        guard text.utf8.starts(with: prefix.utf8) else { return nil }
        let rest = String(decoding: text.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
        let form = "a moment is repo:NAME@WHEN (NAME: a database the repository lists; WHEN: latest, a snapshot id or a time like \(PointInTime.timeForms)); a local file whose name starts with repo: is ./\(text)"
        guard let at = rest.utf8.lastIndex(of: UInt8(ascii: "@")) else {
            throw ValidationErrorText("\(text): no @WHEN; \(form)")
        }
        let database = String(decoding: rest.utf8[rest.utf8.startIndex..<at], as: UTF8.self)
        let when = String(decoding: rest.utf8[rest.utf8.index(after: at)...], as: UTF8.self)
        guard !database.isEmpty else { throw ValidationErrorText("\(text): no database NAME; \(form)") }
        guard !when.isEmpty else { throw ValidationErrorText("\(text): no WHEN after @; \(form)") }
        guard !database.utf8.contains(0), !when.utf8.contains(0) else { throw ValidationErrorText("\(text): a NUL byte in the reference") }
        do {
            _ = try PointInTime.parse(when)
        } catch let error as ValidationErrorText {
            throw ValidationErrorText("\(text): WHEN \(error.description)")
        }
        return MomentReference(database: database, when: when, text: text)
    }
}
