// The database salvage writes: a hidden temporary file beside OUT, built in
// one transaction with the damaged file's page size, text encoding,
// auto-vacuum mode, user_version and application_id, then fsynced and renamed
// to OUT (never over an existing file unless asked). Schema text comes from
// an untrusted file, so each statement must be one CREATE of the expected
// kind, and an authorizer refuses anything that would read data while it runs
// (CREATE TABLE ... AS SELECT), attach files or change settings.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The new database a recovery writes.
final class RecoveredDatabase {
    struct Settings {
        var pageSize = 4096
        var encoding = TextEncoding.utf8
        /// 0 none, 1 full, 2 incremental.
        var autoVacuum = 0
        var userVersion: Int32 = 0
        var applicationID: Int32 = 0
        var wal = false
        /// The largest value a row may hold (bounds what schema expressions may allocate).
        var maxLength = 1_000_000_000
    }

    let finalPath: String
    /// The damaged database (OUT may never be it).
    let source: String
    let replace: Bool
    let settings: Settings
    let db: Connection
    private let temporary: TemporaryFile

    /// Creates the temporary file beside `path`, or fails when `path` exists
    /// and `replace` is false, or may not be replaced (see `checkTarget`),
    /// before anything is written.
    init(path: String, source: String, replace: Bool, permissions: mode_t, settings: Settings) throws {
        finalPath = path
        self.source = source
        self.replace = replace
        self.settings = settings
        let folder = DurableFolder.parent(of: path)
        let stem = DurableFolder.baseName(of: path)
        try RecoveredDatabase.checkTarget(path, source: source, replace: replace)
        // What an earlier run killed with SIGKILL left here for this OUT.
        TemporaryFiles.removeStale(in: folder, stem: stem)
        temporary = try TemporaryFile(in: folder, stem: stem, permissions: permissions)
        do {
            db = try Connection(path: temporary.path, mode: .readWrite)
            let handle = db.rawHandle
            var ignored: Int32 = 0
            // Our own new file: the schema is written as the damaged file had it,
            // virtual tables included, which needs writable_schema (and so no
            // defensive mode). trusted_schema stays off.
            _ = litectl_db_config_bool(handle, SQLITE_DBCONFIG_DEFENSIVE, 0, &ignored)
            sqlite3_limit(handle, SQLITE_LIMIT_LENGTH, Int32(clamping: settings.maxLength))
            // The indexes are made after the rows: a sort each, on every core.
            sqlite3_limit(handle, SQLITE_LIMIT_WORKER_THREADS, Connection.sorterThreads)
            let encoding: String
            switch settings.encoding {
            case .utf8: encoding = "UTF-8"
            case .utf16le: encoding = "UTF-16le"
            case .utf16be: encoding = "UTF-16be"
            }
            try db.execute("""
                PRAGMA page_size = \(settings.pageSize);
                PRAGMA encoding = '\(encoding)';
                PRAGMA auto_vacuum = \(settings.autoVacuum);
                PRAGMA journal_mode = OFF;
                PRAGMA synchronous = OFF;
                PRAGMA locking_mode = EXCLUSIVE;
                PRAGMA cache_size = -65536;
                PRAGMA foreign_keys = OFF;
                PRAGMA recursive_triggers = OFF;
                PRAGMA user_version = \(settings.userVersion);
                PRAGMA application_id = \(settings.applicationID);
                PRAGMA writable_schema = ON;
                BEGIN;
                """)
        } catch {
            temporary.discard()
            throw error
        }
    }

    /// Fails when `path` is a folder, or exists and may not be replaced, or
    /// is `source` itself (even with `replace`: the rename would destroy the
    /// damaged original), or has a -wal or -journal beside it that SQLite
    /// would replay onto the new file.
    static func checkTarget(_ path: String, source: String, replace: Bool) throws {
        if DurableFolder.isFolder(path) {
            throw DatabaseError(code: .cantopen, message: "is a folder; give the path of the new database file", path: path)
        }
        if DurableFolder.exists(path) && !replace {
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (give --force to replace it)", path: path)
        }
        try SeparateOutput.require(path, apartFrom: source, what: "the damaged database")
        let folder = DurableFolder.parent(of: path)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder", path: folder)
        }
    }

    // MARK: Schema

    /// The kinds of schema statement salvage runs.
    enum Kind: String {
        case table = "TABLE", index = "INDEX", uniqueIndex = "UNIQUE INDEX", view = "VIEW", trigger = "TRIGGER"
    }

    /// Runs `sql`, which must be a single `CREATE <kind>` statement; throws
    /// with SQLite's message when it is refused.
    func create(_ kind: Kind, sql: String) throws {
        guard RecoveredDatabase.isCreate(kind, sql) else {
            throw DatabaseError(code: .error, message: "not a CREATE \(kind.rawValue) statement")
        }
        let handle = db.rawHandle
        sqlite3_set_authorizer(handle, { _, action, _, _, _, _ in
            switch action {
            case SQLITE_SELECT, SQLITE_RECURSIVE, SQLITE_ATTACH, SQLITE_DETACH, SQLITE_PRAGMA, SQLITE_TRANSACTION,
                 SQLITE_SAVEPOINT, SQLITE_ANALYZE, SQLITE_ALTER_TABLE,
                 SQLITE_DROP_INDEX, SQLITE_DROP_TABLE, SQLITE_DROP_TRIGGER, SQLITE_DROP_VIEW, SQLITE_DROP_VTABLE:
                return SQLITE_DENY
            default:
                return SQLITE_OK
            }
        }, nil)
        defer { sqlite3_set_authorizer(handle, nil, nil) }
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let text = Array(sql.utf8CString)
        try text.withUnsafeBufferPointer { buffer in
            let rc = sqlite3_prepare_v2(handle, buffer.baseAddress, Int32(buffer.count), &statement, &tail)
            guard rc == SQLITE_OK, let statement else {
                throw DatabaseError(code: ResultCode(rawValue: rc), message: String(cString: sqlite3_errmsg(handle)))
            }
            defer { sqlite3_finalize(statement) }
            if let tail, !RecoveredDatabase.isBlank(String(cString: tail)) {
                throw DatabaseError(code: .error, message: "more than one statement")
            }
            let step = sqlite3_step(statement)
            guard step == SQLITE_DONE else {
                throw DatabaseError(code: ResultCode(rawValue: step), message: String(cString: sqlite3_errmsg(handle)))
            }
        }
    }

    /// Writes a virtual table's schema row as it was (its module is not run:
    /// its shadow tables are ordinary tables, recovered with the others).
    /// Its tbl_name is its name, as SQLite writes it for every table (a
    /// damaged tbl_name would make SQLite call the schema malformed).
    func addVirtualTable(name: String, sql: String) throws {
        guard RecoveredDatabase.startsWith(sql, ["CREATE", "VIRTUAL", "TABLE"]) else {
            throw DatabaseError(code: .error, message: "not a CREATE VIRTUAL TABLE statement")
        }
        let exists = try db.scalar("SELECT count(*) FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE", [.text(name)])
        guard exists == .integer(0) else { throw DatabaseError(code: .error, message: "an object named \(name) already exists") }
        let statement = try db.prepare("INSERT INTO main.sqlite_schema(type, name, tbl_name, rootpage, sql) VALUES ('table', ?1, ?1, 0, ?2)")
        try statement.bind([.text(name), .text(sql)])
        try statement.step()
    }

    /// What a CREATE VIRTUAL TABLE statement declares (its table's name and
    /// module), read by SQLite's own parser: the statement is prepared, never
    /// run, so that a damaged one is refused here rather than written into
    /// the new schema, where SQLite would call the whole schema malformed.
    func virtualTableDeclaration(_ sql: String) throws -> (name: String, module: String) {
        guard RecoveredDatabase.startsWith(sql, ["CREATE", "VIRTUAL", "TABLE"]) else {
            throw DatabaseError(code: .error, message: "not a CREATE VIRTUAL TABLE statement")
        }
        final class Declared { var name: String?; var module: String? }
        let declared = Declared()
        let handle = db.rawHandle
        sqlite3_set_authorizer(handle, { context, action, first, second, _, _ in
            if action == SQLITE_CREATE_VTABLE, let context {
                let declared = Unmanaged<Declared>.fromOpaque(context).takeUnretainedValue()
                declared.name = first.map { String(cString: $0) }
                declared.module = second.map { String(cString: $0) }
            }
            return SQLITE_OK
        }, Unmanaged.passUnretained(declared).toOpaque())
        defer { sqlite3_set_authorizer(handle, nil, nil) }
        let statement: OpaquePointer
        do { statement = try prepareOne(sql) } catch let error as DatabaseError {
            throw DatabaseError(code: error.code, message: "its CREATE VIRTUAL TABLE statement is refused: \(error.message)")
        }
        sqlite3_finalize(statement)
        guard let name = declared.name, let module = declared.module else {
            throw DatabaseError(code: .error, message: "not a CREATE VIRTUAL TABLE statement")
        }
        return (name, module)
    }

    /// Makes a virtual table through its module (which makes its shadow
    /// tables), when `sql` is one CREATE VIRTUAL TABLE statement using one
    /// of `modules` (an authorizer refuses any other while it is prepared).
    func createVirtualTable(_ sql: String, modules: Set<String>) throws {
        final class Allowed { let modules: Set<String>; init(_ modules: Set<String>) { self.modules = modules } }
        let allowed = Allowed(modules)
        let handle = db.rawHandle
        sqlite3_set_authorizer(handle, { context, action, _, second, _, _ in
            switch action {
            case SQLITE_CREATE_VTABLE:
                guard let context, let second else { return SQLITE_DENY }
                let allowed = Unmanaged<Allowed>.fromOpaque(context).takeUnretainedValue()
                return allowed.modules.contains(asciiUpper(String(cString: second))) ? SQLITE_OK : SQLITE_DENY
            case SQLITE_INSERT, SQLITE_UPDATE, SQLITE_READ:
                return SQLITE_OK
            default:
                return SQLITE_DENY
            }
        }, Unmanaged.passUnretained(allowed).toOpaque())
        let statement: OpaquePointer
        do {
            statement = try prepareOne(sql)
        } catch {
            sqlite3_set_authorizer(handle, nil, nil)
            throw error
        }
        // The module's own statements (PRAGMA page_size, CREATE TABLE of its
        // shadow tables) run while the statement steps: no authorizer then.
        sqlite3_set_authorizer(handle, nil, nil)
        defer { sqlite3_finalize(statement) }
        let step = sqlite3_step(statement)
        guard step == SQLITE_DONE else {
            throw DatabaseError(code: ResultCode(rawValue: step), message: String(cString: sqlite3_errmsg(handle)))
        }
    }

    /// Prepares `sql`, which must be one statement; throws with SQLite's message.
    private func prepareOne(_ sql: String) throws -> OpaquePointer {
        let handle = db.rawHandle
        var statement: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let text = Array(sql.utf8CString)
        return try text.withUnsafeBufferPointer { buffer in
            let rc = sqlite3_prepare_v2(handle, buffer.baseAddress, Int32(buffer.count), &statement, &tail)
            guard rc == SQLITE_OK, let statement else {
                throw DatabaseError(code: ResultCode(rawValue: rc), message: String(cString: sqlite3_errmsg(handle)))
            }
            if let tail, !RecoveredDatabase.isBlank(String(cString: tail)) {
                sqlite3_finalize(statement)
                throw DatabaseError(code: .error, message: "more than one statement")
            }
            return statement
        }
    }

    /// True when `sql` starts with CREATE and then `kind`'s words (ASCII
    /// case-insensitive), as SQLite stores every schema statement.
    static func isCreate(_ kind: Kind, _ sql: String) -> Bool {
        let words = ["CREATE"] + kind.rawValue.split(separator: " ").map(String.init)
        if startsWith(sql, words) { return true }
        // CREATE TEMP/TEMPORARY never reach a file's schema; IF NOT EXISTS is not stored.
        return false
    }

    static func startsWith(_ sql: String, _ words: [String]) -> Bool {
        var rest = Substring(sql)
        for word in words {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
            guard asciiUpper(String(rest.prefix(word.count))) == word else { return false }
            rest = rest.dropFirst(word.count)
            // The word must end there (CREATE TABLEX is no CREATE TABLE).
            if let next = rest.first, next.isLetter || next.isNumber || next == "_" { return false }
        }
        return true
    }

    /// True for text that holds no SQL (spaces, semicolons, comments).
    static func isBlank(_ text: String) -> Bool {
        var rest = Substring(text)
        while let c = rest.first {
            if c == " " || c == "\t" || c == "\n" || c == "\r" || c == ";" {
                rest = rest.dropFirst()
            } else if rest.hasPrefix("--") {
                rest = rest.drop { $0 != "\n" }
            } else if rest.hasPrefix("/*") {
                guard let end = rest.range(of: "*/") else { return true }
                rest = rest[end.upperBound...]
            } else {
                return false
            }
        }
        return true
    }

    /// The name of the newest table in the schema (the one a CREATE just made).
    func newestTable() throws -> String? {
        guard case .text(let name)? = try db.scalar("SELECT name FROM main.sqlite_schema WHERE type = 'table' ORDER BY rowid DESC LIMIT 1") else {
            return nil
        }
        return String(decoding: name, as: UTF8.self)
    }

    /// True when an object of this name exists (names compare as SQLite compares them).
    func hasObject(_ name: String) throws -> Bool {
        try db.scalar("SELECT count(*) FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE", [.text(name)]) != .integer(0)
    }

    // MARK: Finishing

    /// Sends what has been written so far to the disk (while another thread
    /// may be writing): the fsync before the rename then has less to wait for.
    func flushWritten() {
        // The temporary file's own descriptor, kept open: closing another one
        // would drop the locks SQLite holds on the file (POSIX locks belong
        // to the process, per file).
        guard temporary.descriptor >= 0 else { return }
        _ = fdatasync(temporary.descriptor)
    }

    /// Commits, puts the journal mode the damaged file had, closes, fsyncs
    /// and renames the file to OUT.
    func commit() throws {
        do {
            try db.execute("PRAGMA writable_schema = OFF; COMMIT;")
            if settings.wal {
                try db.execute("PRAGMA locking_mode = NORMAL; PRAGMA journal_mode = WAL;")
            }
            try db.close()
            try temporary.commit(as: finalPath, replace: replace)
        } catch {
            try? db.close()
            temporary.discard()
            throw error
        }
    }

    /// Removes the temporary file (after an error).
    func discard() {
        try? db.close()
        temporary.discard()
    }
}
