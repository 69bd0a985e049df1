// A patch changes its target database and nothing else. A SQL patch is text
// anyone can write or alter, so what it may do is enforced by SQLite itself
// while each statement is prepared: an authorizer refuses ATTACH, DETACH,
// every PRAGMA but the four a diff writes, and load_extension();
// SQLITE_LIMIT_ATTACHED 0 makes ATTACH and VACUUM INTO (which attaches its
// output) fail even past it. A migration is confined the same way (its own
// policy of pragmas), but for the databases `--allow-attach` names. Shell
// dot-commands are not SQL: only the `.bail on` that litectl's own patches
// carry is taken (and skipped).
// See https://www.sqlite.org/c3ref/set_authorizer.html
import CSQLite

/// A database besides the target that a confined script may write (a
/// migration's `--allow-attach NAME=PATH`): litectl attaches it under NAME
/// itself; the script's own `ATTACH 'PATH' AS NAME` of the same file, and
/// `DETACH NAME`, are then no-ops.
public struct AttachableDatabase: Sendable, Equatable {
    public var name: String
    public var path: String
    public init(name: String, path: String) { self.name = name; self.path = path }
}

/// The statements of one patch (or migration) run, confined to the target's
/// main database and the databases `attachable` names.
final class PatchConfinement {
    /// What a kind of script may do.
    struct Policy: Sendable {
        /// "patch" or "migration", for messages.
        var noun: String
        /// Pragmas it may set (or run with an argument).
        var settable: Set<String>
        /// Pragmas it may read (without an argument).
        var readable: Set<String>
        /// Pragmas whose argument names what they read (a table, a limit).
        var readableWithArgument: Set<String> = []

        /// A patch: the pragmas `diff --format sql` writes.
        static let patch = Policy(noun: "patch", settable: ["foreign_keys", "defer_foreign_keys", "user_version", "application_id"],
                                  readable: PatchConfinement.readablePragmas)
        /// A migration: what a schema change needs (SQLite's 12-step
        /// rebuild sets legacy_alter_table and reads foreign_key_check and
        /// table_info), nothing that changes how or where SQLite writes
        /// (journal_mode, synchronous, locking_mode, writable_schema,
        /// schema_version, mmap_size, temp_store_directory, busy_timeout...).
        static let migration = Policy(
            noun: "migration",
            settable: ["foreign_keys", "defer_foreign_keys", "legacy_alter_table", "recursive_triggers", "case_sensitive_like",
                       "user_version", "application_id", "optimize", "analysis_limit"],
            readable: PatchConfinement.readablePragmas.union([
                "foreign_keys", "defer_foreign_keys", "legacy_alter_table", "recursive_triggers", "user_version", "application_id",
                "journal_mode", "auto_vacuum", "cache_size", "database_list", "collation_list", "function_list", "module_list",
                "pragma_list", "compile_options", "optimize", "integrity_check", "quick_check", "foreign_key_check", "table_list"]),
            readableWithArgument: ["table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
                                   "foreign_key_check", "integrity_check", "quick_check", "table_list"])
    }

    /// The pragmas a patch may run: those `diff --format sql` writes.
    static let allowedPragmas: Set<String> = Policy.patch.settable
    /// Pragmas a patch may read (without an argument): the ones SQLite's own
    /// modules query inside statements a patch runs (FTS3/4 and R*Tree read
    /// `page_size`, FTS5 `data_version`), and other read-only facts.
    static let readablePragmas: Set<String> = ["data_version", "page_size", "page_count", "schema_version", "encoding",
                                               "freelist_count"]

    /// What the authorizer refused last, in words, for the error message.
    private(set) var refused: String?
    private let connection: Connection
    let policy: Policy
    /// The attachable databases' files (device, inode), as given.
    private let attachable: [(database: AttachableDatabase, device: UInt64, inode: UInt64)]

    /// Where each attachable database is attached from, by name, when not
    /// from its own path (a dry run attaches copies).
    private let attachFrom: [String: String]

    /// Confines `connection` until `end()` (and again from `resume()`).
    /// With `attachable`, the caller attaches those databases itself
    /// (`attachAll`), each from `attachFrom[name]` when given.
    init(_ connection: Connection, policy: Policy = .patch, attachable: [AttachableDatabase] = [],
         attachFrom: [String: String] = [:]) {
        self.connection = connection
        self.policy = policy
        self.attachFrom = attachFrom
        self.attachable = attachable.compactMap { database in
            FileIdentity(database.path).map { (database, $0.device, $0.inode) }
        }
        sqlite3_limit(connection.rawHandle, SQLITE_LIMIT_ATTACHED, Int32(attachable.count))
        resume()
    }

    /// Confines the connection again after `end()`.
    func resume() {
        sqlite3_set_authorizer(connection.rawHandle, { context, action, first, second, _, _ in
            let confinement = Unmanaged<PatchConfinement>.fromOpaque(context!).takeUnretainedValue()
            return confinement.decide(action, first.map { String(cString: $0) }, second.map { String(cString: $0) })
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The authorizer's answer: SQLITE_OK, SQLITE_DENY (the reason kept in
    /// `refused`), or SQLITE_IGNORE for a script's ATTACH or DETACH of a
    /// database litectl attached itself (the statement does nothing).
    private func decide(_ action: Int32, _ first: String?, _ second: String?) -> Int32 {
        if !attachable.isEmpty {
            if action == SQLITE_ATTACH, let file = first, let identity = FileIdentity(file),
               attachable.contains(where: { $0.device == identity.device && $0.inode == identity.inode }) {
                return SQLITE_IGNORE
            }
            if action == SQLITE_DETACH, let name = first,
               attachable.contains(where: { sameSQLName($0.database.name, name) }) {
                return SQLITE_IGNORE
            }
        }
        guard let why = refusal(action, first, second) else { return SQLITE_OK }
        refused = why
        return SQLITE_DENY
    }

    /// Attaches the attachable databases under their names (before the
    /// first transaction: the confinement lets only these in).
    func attachAll() throws {
        for (database, _, _) in attachable {
            let path = attachFrom[database.name] ?? database.path
            connection.watchAttachedFile(path, readOnly: false)
            // The confinement would take this for the script's own ATTACH: it is let through.
            letThrough = true
            defer { letThrough = false }
            let statement = try connection.prepare("ATTACH ?1 AS \(quoteIdentifier(database.name))")
            try statement.bind(.text(Array((Connection.fileURI(path) + "?mode=rw").utf8)), at: 1)
            _ = try statement.step()
        }
    }

    /// True while `attachAll` runs its own ATTACH statements.
    private var letThrough = false

    func end() {
        sqlite3_set_authorizer(connection.rawHandle, nil, nil)
    }

    /// Why `action` is refused, or nil when the script may do it. For a
    /// PRAGMA, `first` is its name and `second` its argument (nil when it is read).
    func refusal(_ action: Int32, _ first: String?, _ second: String?) -> String? {
        if letThrough && action == SQLITE_ATTACH { return nil }
        switch action {
        case SQLITE_ATTACH:
            return attachable.isEmpty ? "ATTACH (a \(policy.noun) changes only its target database)"
                : "ATTACH of \(first.map { "'\($0)'" } ?? "a computed file name") (a \(policy.noun) may attach only the databases --allow-attach names, by the same file)"
        case SQLITE_DETACH:
            return "DETACH (a \(policy.noun) changes only its target database\(attachable.isEmpty ? "" : " and those --allow-attach names"))"
        case SQLITE_PRAGMA:
            let name = (first ?? "").lowercased()
            if policy.settable.contains(name) || (second == nil && policy.readable.contains(name))
                || (second != nil && policy.readableWithArgument.contains(name)) { return nil }
            return "PRAGMA \(first ?? "") (a \(policy.noun) may set only \(policy.settable.sorted().joined(separator: ", ")))"
        case SQLITE_FUNCTION:
            return (second ?? "").lowercased() == "load_extension" ? "load_extension() (a \(policy.noun) loads no code)" : nil
        default:
            return nil
        }
    }

    /// Forgets the last refusal (before the next script).
    func reset() { refused = nil }

    /// Why the last statement was refused, in words, when it was: what the
    /// authorizer refused, or ATTACH / VACUUM INTO past the attached
    /// limit. Nil when `message` (SQLite's) is not the confinement's doing.
    func reason(for message: String) -> String? {
        if let refused { return refused }
        if message.hasPrefix("too many attached databases") {
            return "ATTACH or VACUUM INTO (a \(policy.noun) writes no other file)"
        }
        if message.hasPrefix("cannot VACUUM") {
            return "VACUUM (a \(policy.noun) writes no other file, and runs inside litectl's transaction)"
        }
        return nil
    }

    /// An error that the confinement caused, with its reason: SQLite says
    /// only "not authorized" (or "too many attached databases" for ATTACH
    /// past the limit, "cannot VACUUM from within a transaction" for VACUUM).
    func explain(_ error: DatabaseError, patch: String?) -> DatabaseError {
        let what: String
        if let reason = reason(for: error.message) {
            what = reason
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
