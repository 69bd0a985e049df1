// A patch changes its target database and nothing else. A SQL patch is text
// anyone can write or alter, so what it may do is enforced by SQLite itself
// while each statement is prepared: an authorizer refuses ATTACH, DETACH,
// every PRAGMA but the four a diff writes, and load_extension();
// SQLITE_LIMIT_ATTACHED 0 makes ATTACH and VACUUM INTO (which attaches its
// output) fail even past it. Shell dot-commands are not SQL: only the
// `.bail on` that litectl's own patches carry is taken (and skipped).
// See https://www.sqlite.org/c3ref/set_authorizer.html
import CSQLite

/// The statements of one patch run, confined to the target's main database.
final class PatchConfinement {
    /// The pragmas a patch may run: those `diff --format sql` writes.
    static let allowedPragmas: Set<String> = ["foreign_keys", "defer_foreign_keys", "user_version", "application_id"]
    /// Pragmas a patch may read (without an argument): the ones SQLite's own
    /// modules query inside statements a patch runs (FTS3/4 and R*Tree read
    /// `page_size`, FTS5 `data_version`), and other read-only facts.
    static let readablePragmas: Set<String> = ["data_version", "page_size", "page_count", "schema_version", "encoding",
                                               "freelist_count"]

    /// What the authorizer refused last, in words, for the error message.
    private(set) var refused: String?
    private let connection: Connection

    /// Confines `connection` until `end()`.
    init(_ connection: Connection) {
        self.connection = connection
        sqlite3_limit(connection.rawHandle, SQLITE_LIMIT_ATTACHED, 0)
        sqlite3_set_authorizer(connection.rawHandle, { context, action, first, second, _, _ in
            let confinement = Unmanaged<PatchConfinement>.fromOpaque(context!).takeUnretainedValue()
            guard let why = PatchConfinement.refusal(action, first.map { String(cString: $0) }, second.map { String(cString: $0) }) else {
                return SQLITE_OK
            }
            confinement.refused = why
            return SQLITE_DENY
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    func end() {
        sqlite3_set_authorizer(connection.rawHandle, nil, nil)
    }

    /// Why `action` is refused, or nil when a patch may do it. For a PRAGMA,
    /// `first` is its name and `second` its argument (nil when it is read).
    static func refusal(_ action: Int32, _ first: String?, _ second: String?) -> String? {
        switch action {
        case SQLITE_ATTACH:
            return "ATTACH (a patch changes only its target database)"
        case SQLITE_DETACH:
            return "DETACH (a patch changes only its target database)"
        case SQLITE_PRAGMA:
            let name = (first ?? "").lowercased()
            if allowedPragmas.contains(name) || (second == nil && readablePragmas.contains(name)) { return nil }
            return "PRAGMA \(first ?? "") (a patch may set only \(allowedPragmas.sorted().joined(separator: ", ")))"
        case SQLITE_FUNCTION:
            return (second ?? "").lowercased() == "load_extension" ? "load_extension() (a patch loads no code)" : nil
        default:
            return nil
        }
    }

    /// An error that the confinement caused, with its reason: SQLite says
    /// only "not authorized" (or "too many attached databases" for ATTACH
    /// past the limit, "cannot VACUUM from within a transaction" for VACUUM).
    func explain(_ error: DatabaseError, patch: String?) -> DatabaseError {
        let what: String
        if let refused {
            what = refused
        } else if error.message.hasPrefix("too many attached databases") {
            what = "ATTACH or VACUUM INTO (a patch writes no other file)"
        } else if error.message.hasPrefix("cannot VACUUM") {
            what = "VACUUM (a patch writes no other file, and runs inside litectl's transaction)"
        } else {
            return error
        }
        return DatabaseError(code: .auth, message: "the patch is refused, nothing applied: it runs \(what)",
                             path: patch ?? error.path, sql: error.sql)
    }

    /// Takes the sqlite3 shell's dot-commands (`.shell`, `.open`, `.output`,
    /// ...) off the head of `script`: `.bail on`, which litectl's patches
    /// start with so that the shell stops at an error, is blanked (the line
    /// stays, so that line numbers do); any other is refused, naming its
    /// line. A dot-command further down is a syntax error for SQLite, which
    /// `explainSyntax` words the same way.
    static func withoutBail(_ script: String, patch: String?, target: String) throws -> String {
        var lines = script.split(separator: "\n", omittingEmptySubsequences: false)
        for number in lines.indices {
            let line = lines[number].drop { $0 == " " || $0 == "\t" || $0 == "\r" }
            if line.hasPrefix(".") {
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
                guard words.count == 2, words[0] == ".bail", words[1].lowercased() == "on" else {
                    throw shellCommand(String(words.first ?? "."), line: number + 1, patch: patch, target: target)
                }
                lines[number] = ""
            } else if !(line.isEmpty || line.hasPrefix("--")) {
                break
            }
        }
        return lines.joined(separator: "\n")
    }

    /// A syntax error at a line that starts with `.`: a dot-command past the
    /// head of the script, refused in the same words.
    static func explainSyntax(_ error: DatabaseError, patch: String?, target: String) -> DatabaseError {
        guard error.code.primary == .error, let sql = error.sql?.drop(while: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }),
              sql.hasPrefix(".") else { return error }
        let word = sql.prefix { !($0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r") }
        return shellCommand(String(word), line: nil, patch: patch, target: target)
    }

    static func shellCommand(_ word: String, line: Int?, patch: String?, target: String) -> DatabaseError {
        DatabaseError(code: .auth,
                      message: "\(line.map { "line \($0): " } ?? "")\(word): the patch is refused, nothing applied: it holds a sqlite3 shell command, which is not SQL (a patch may start with .bail on, nothing else)",
                      path: patch ?? target)
    }
}
