// A connection to one SQLite database, with explicit open modes and the
// defensive settings every connection to a user's file gets.
// See https://www.sqlite.org/c3ref/open.html and https://www.sqlite.org/security.html
import CSQLite
import Foundation

/// How a connection opens its file.
public enum OpenMode: Sendable {
    /// `mode=ro`: never writes, never creates the file.
    case readOnly
    /// `mode=rw`: may write, never creates the file.
    case readWrite
    /// `mode=rwc`: creates the file when it is missing.
    case create
}

/// What a read-only open does when the database's rollback journal is hot
/// (an application stopped inside a write transaction; see HotJournal).
public enum HotJournalRead: Sendable {
    /// Read the last committed state from a private copy rolled back by SQLite.
    case committedCopy
    /// Fail with SQLITE_READONLY_ROLLBACK (for a caller that must see the
    /// file itself, and for the copy's own rollback).
    case fail
}

/// One connection to one database. It owns its `sqlite3*` handle; `deinit`
/// closes it, `close()` closes it and reports statements left open.
///
/// Not `Sendable`: a connection belongs to one thread at a time. Code that works
/// on many files in parallel opens one connection per task.
public final class Connection {
    /// The path as the caller gave it (used in messages).
    public let path: String
    public let mode: OpenMode
    var handle: OpaquePointer?
    /// True when a read-only WAL database in a read-only folder was opened as
    /// immutable (see `init`); SQLite then reports its journal mode as "delete".
    public private(set) var isImmutable = false
    /// Files this connection reads, for removing the -wal/-shm a read-only
    /// open makes SQLite create (see WALLeftovers).
    private var watches: [WALLeftovers.Watch] = []
    /// The file this connection holds open, counted in `openFiles`.
    private var openedFile: FileIdentity?
    /// Set when the database's rollback journal was hot: this connection reads
    /// a private copy of its last committed state (see HotJournal), which
    /// `hotJournal` describes. The source and its journal were not written.
    private var rolledBack: RolledBackCopy?
    /// Private copies of attached databases whose journal was hot, kept while
    /// the connection is open.
    private var attachedCopies: [RolledBackCopy] = []
    /// The page sources this connection reads through PageVFS, kept until it closes.
    private var pageSources: [PageVFS.Registration] = []
    public var hotJournal: HotJournalCopy? { rolledBack?.info }
    /// The file SQLite reads for `main`: `path`, or the private copy of its
    /// committed state when its journal was hot.
    public var readPath: String { rolledBack?.path ?? path }

    /// The files this process holds open through connections, by identity,
    /// with how many: a second connection to one of them skips the file
    /// check (see `init`), whose close of its own descriptor would drop the
    /// POSIX locks the first connection's SQLite holds on the file.
    private static let openFiles = Locked<[FileIdentity: Int]>([:])

    /// The default time to wait for another process's lock, in milliseconds.
    public static let defaultBusyTimeout = 5_000

    /// Opens `path`.
    ///
    /// For `.readOnly` and `.readWrite` the file must already exist, be a
    /// regular file and be readable (and writable): each mistake gets its own
    /// message. The first read of `sqlite_schema` happens here, so a file that
    /// is not a database, a corrupt header or a lock held past `busyTimeout`
    /// (milliseconds) fails now, with the path in the error.
    ///
    /// `immutable` (read-only only) adds the `immutable=1` URI parameter: no
    /// locks and no `-wal`/`-shm` files, for a file nothing else can be writing
    /// (a finished backup). See https://www.sqlite.org/uri.html#uriimmutable
    ///
    /// The check of the file's shape (which opens it) is skipped for a file
    /// another connection of this process holds open (`openFiles`).
    ///
    /// A read-only open of a database whose rollback journal is hot reads its
    /// last committed state from a private copy, rolled back by SQLite (see
    /// HotJournal; `hotJournal` then says so), unless `hotJournal` is `.fail`.
    /// `checkFile: false` skips the whole check,
    /// for a second connection to a file this process already has open: the
    /// check opens and closes the file, and closing any descriptor of a file
    /// drops every POSIX lock the process holds on it, the SHARED lock of
    /// the connections already open included (SQLite keeps its own
    /// descriptors open for that reason; a reader of a WAL database without
    /// that lock does not keep the application's last close from
    /// checkpointing and deleting the -wal under it).
    public init(path: String, mode: OpenMode = .readOnly, busyTimeout: Int = Connection.defaultBusyTimeout,
                immutable: Bool = false, checkFile: Bool = true, hotJournal: HotJournalRead = .committedCopy) throws {
        self.path = path
        self.mode = mode
        // A moment of a repository (a path bound to a page source, or one of
        // the `repo:` form): opened through PageVFS, read-only, and nothing
        // of the file system is looked at for it (no file check, no -journal
        // or -wal beside it, no write gate entry: no file has that name).
        if PageVFS.namesSource(path) {
            let registration = try PageVFS.requireSource(named: path, writing: mode != .readOnly)
            try openPages(registration, busyTimeout: busyTimeout)
            return
        }
        // What the run reads is in its protected set (`WriteGate`): no output
        // of the run writes over it or its -wal, -journal or -shm.
        if mode == .readOnly { WriteGate.shared.protect(database: path) } else { try WriteGate.shared.requireChangeable(database: path) }
        // The check and the count are one step under the registry's lock, so
        // that two threads opening one file never close a descriptor of it
        // while the other reads it; the file's shape (the one check that opens
        // it) is skipped for a file a connection of this process has open.
        if let identity = FileIdentity(path) {
            let checked: Result<Void, any Error> = Connection.openFiles.withLock { files in
                let alreadyOpen = files[identity, default: 0] > 0
                if mode != .create && checkFile {
                    do { try FileCheck.requireDatabaseFile(path, writable: mode == .readWrite, shape: !alreadyOpen) } catch { return .failure(error) }
                }
                files[identity, default: 0] += 1
                return .success(())
            }
            try checked.get()
            openedFile = identity
        } else if mode != .create && checkFile {
            try FileCheck.requireDatabaseFile(path, writable: mode == .readWrite)
        }
        do {
            do { try openFile(path: path, mode: mode, busyTimeout: busyTimeout, immutable: immutable) } catch let error as DatabaseError
                        where mode == .readOnly && !immutable && hotJournal == .committedCopy && error.code == .readonlyRollback {
                try openCommittedState(busyTimeout: busyTimeout, firstError: error)
            }
        } catch {
            if let handle { sqlite3_close_v2(handle); self.handle = nil }
            forgetOpenedFile()
            throw error
        }
        // A file this connection created is counted from now on.
        if openedFile == nil, let identity = FileIdentity(path) {
            openedFile = identity
            Connection.openFiles.withLock { $0[identity, default: 0] += 1 }
        }
    }

    private func openFile(path: String, mode: OpenMode, busyTimeout: Int, immutable: Bool) throws {
        let modeParameter: String
        var flags = SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        switch mode {
        case .readOnly:
            modeParameter = "ro"; flags |= SQLITE_OPEN_READONLY
        case .readWrite:
            modeParameter = "rw"; flags |= SQLITE_OPEN_READWRITE
        case .create:
            modeParameter = "rwc"; flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        let opening = Clock.now()
        let uri = Connection.fileURI(path) + "?mode=" + modeParameter + (immutable && mode == .readOnly ? "&immutable=1" : "")
        if let watch = WALLeftovers.watch(path, readOnly: mode == .readOnly && !immutable) { watches.append(watch) }
        do {
            try open(uri, flags: flags, busyTimeout: busyTimeout)
            try validateFormat(since: opening)
        } catch let error as DatabaseError
                    where mode == .readOnly && [.readonly, .cantopen].contains(error.code.primary) {
            // SQLite needs a -shm file to read a WAL database and cannot create
            // one in a folder it may not write. With no -wal there and the folder
            // read-only, no writer can be at work either, so reading the file as
            // immutable is safe (https://www.sqlite.org/uri.html#uriimmutable).
            guard FileCheck.isQuiescentWALInReadOnlyFolder(path) else { throw error }
            if let handle { sqlite3_close_v2(handle) }
            handle = nil
            try open(uri + "&immutable=1", flags: flags, busyTimeout: busyTimeout)
            isImmutable = true
            try validateFormat(since: opening)
        }
    }

    /// Opens the last committed state of `path`, whose journal SQLite found
    /// hot: a private copy rolled back (HotJournal), or the file itself when
    /// the journal is no longer hot by the time its SHARED lock is held (it
    /// was rolled back meanwhile, or a writer's RESERVED lock shows it live).
    private func openCommittedState(busyTimeout: Int, firstError: DatabaseError) throws {
        var error = firstError
        for _ in 0..<3 {
            if let handle { sqlite3_close_v2(handle); self.handle = nil }
            // This connection holds nothing of the file now. Another one of
            // this process may: its SQLite's POSIX locks would go with any
            // descriptor of the file that closes.
            forgetOpenedFile()
            let alone = FileIdentity(path).map { id in Connection.openFiles.withLock { $0[id, default: 0] == 0 } } ?? true
            if let copy = try HotJournal.committedCopy(of: path, busyTimeout: busyTimeout, mayCloseSource: alone) {
                // From now on this connection holds the copy open, not the file.
                if let identity = FileIdentity(copy.path) {
                    openedFile = identity
                    Connection.openFiles.withLock { $0[identity, default: 0] += 1 }
                }
                try openFile(path: copy.path, mode: .readOnly, busyTimeout: busyTimeout, immutable: false)
                rolledBack = copy
                return
            }
            if let identity = FileIdentity(path) {
                openedFile = identity
                Connection.openFiles.withLock { $0[identity, default: 0] += 1 }
            }
            do {
                try openFile(path: path, mode: .readOnly, busyTimeout: busyTimeout, immutable: false)
                return
            } catch let again as DatabaseError where again.code == .readonlyRollback {
                error = again
            }
        }
        throw error
    }

    /// The private copy of the committed state of `path`, a database this
    /// connection is about to ATTACH read-only and whose journal SQLite found
    /// hot; kept until the connection closes. nil when the journal is no
    /// longer hot (attach the file itself).
    public func committedCopyForAttach(_ path: String) throws -> String? {
        let alone = FileIdentity(path).map { id in Connection.openFiles.withLock { $0[id, default: 0] == 0 } } ?? true
        guard let copy = try HotJournal.committedCopy(of: path, busyTimeout: busyTimeout, mayCloseSource: alone) else { return nil }
        attachedCopies.append(copy)
        return copy.path
    }

    /// Counts this connection's file as no longer held open by it.
    private func forgetOpenedFile() {
        guard let identity = openedFile else { return }
        openedFile = nil
        Connection.openFiles.withLock { files in
            let left = files[identity, default: 1] - 1
            files[identity] = left > 0 ? left : nil
        }
    }

    /// Opens, read-only, the database image `registration` serves through
    /// PageVFS (a moment of a repository): its label in messages. No file
    /// on disk is read or written for it, so the write gate has nothing of
    /// it to protect; the connection keeps the registration alive.
    public init(pages registration: PageVFS.Registration, busyTimeout: Int = Connection.defaultBusyTimeout) throws {
        self.path = registration.label
        self.mode = .readOnly
        try openPages(registration, busyTimeout: busyTimeout)
    }

    /// Opens `registration`'s image as main, read-only, and keeps it.
    private func openPages(_ registration: PageVFS.Registration, busyTimeout: Int) throws {
        pageSources = [registration]
        let opening = Clock.now()
        do {
            try open(registration.uri, flags: SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_READONLY,
                     busyTimeout: busyTimeout)
            try validateFormat(since: opening)
        } catch {
            if let handle { sqlite3_close_v2(handle); self.handle = nil }
            throw error
        }
        // Immutable as SQLite opens it; `journalMode` reports "wal" only for
        // an image whose header says WAL (the mode the file had).
        isImmutable = (try? PageVFS.prefix(of: registration, count: 20))?.dropFirst(18).first == 2
    }

    /// Copies this connection's main database into `target`'s main with the
    /// backup API, in one step (a private copy to write on: `analyze
    /// --dry-run` of a moment, which cannot be written).
    /// See https://www.sqlite.org/backup.html
    public func copyMain(into target: Connection) throws {
        guard let backup = sqlite3_backup_init(target.rawHandle, "main", rawHandle, "main") else {
            throw DatabaseError.fromConnection(target.rawHandle, code: sqlite3_errcode(target.rawHandle), path: path)
        }
        let step = sqlite3_backup_step(backup, -1)
        let finish = sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE, finish == SQLITE_OK else {
            if let failure = PageVFS.failure(in: rawHandle) { throw DatabaseError(code: .ioerr, message: failure, path: path) }
            throw DatabaseError(code: ResultCode(rawValue: step == SQLITE_DONE ? finish : step), message: "cannot copy the database", path: path)
        }
    }

    /// Keeps `registration` alive while this connection is open (a page
    /// source this connection ATTACHes by its `uri`).
    public func keep(_ registration: PageVFS.Registration) { pageSources.append(registration) }

    /// A private, empty in-memory database (for `query` without a main file).
    public init(inMemory busyTimeout: Int = Connection.defaultBusyTimeout) throws {
        self.path = ":memory:"
        self.mode = .create
        // SQLITE_OPEN_URI: so that ATTACH on it reads `file:` URIs (mode=ro).
        try open(":memory:", flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_URI,
                 busyTimeout: busyTimeout)
    }

    /// SQLite's memory statistics, which litectl never reads, cost a global
    /// mutex on every allocation of every connection: off, once, before the
    /// first connection initializes SQLite.
    private static let memoryStatisticsOff: Void = { _ = litectl_config_memstatus(0) }()

    private func open(_ filename: String, flags: Int32, busyTimeout: Int) throws {
        Connection.memoryStatisticsOff
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(filename, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let error = DatabaseError.fromConnection(db, code: rc, path: path)
            sqlite3_close_v2(db)
            throw error
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        try configureDefensively()
        setBusyTimeout(busyTimeout)
    }

    /// Settings for a file we did not write: no extension loading, defensive
    /// mode (no writes to the schema or to shadow tables through SQL, no
    /// `writable_schema`), and `trusted_schema=OFF` so that views and triggers in
    /// the file cannot call functions with side effects.
    /// See https://www.sqlite.org/security.html#untrusted_sqlite_database_files
    private func configureDefensively() throws {
        let db = handle
        var ignored: Int32 = 0
        for (op, value) in [(SQLITE_DBCONFIG_DEFENSIVE, Int32(1)),
                            (SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0),
                            (SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0)] {
            let rc = litectl_db_config_bool(db, op, value, &ignored)
            if rc != SQLITE_OK { throw DatabaseError.fromConnection(db, code: rc, path: path) }
        }
        try execute("PRAGMA trusted_schema=OFF")
    }

    /// Reads `sqlite_schema` once, so that a non-database or a corrupt header
    /// fails at open time (SQLite itself opens lazily). A lock that outlasts
    /// the busy timeout is reported with the wait made since `since`.
    private func validateFormat(since: Double) throws {
        do {
            let statement = try prepare("SELECT 1 FROM sqlite_schema LIMIT 1")
            _ = try statement.step()
        } catch var error as DatabaseError {
            error.sql = nil
            switch error.code.primary {
            case .notadb:
                error.message = "not a SQLite database"
            case .busy, .locked:
                error.message = DatabaseError.lockedMessage(waited: Clock.now() - since)
            case .corrupt:
                error.message = "corrupt database (\(error.message))"
            default:
                break
            }
            throw error
        }
    }

    deinit {
        if let handle { sqlite3_close_v2(handle) }
        forgetOpenedFile()
        endWatches()
        releaseCopies()
    }

    /// Lets go of the private copies (their files go when no other connection
    /// uses them). Only once SQLite has closed them.
    private func releaseCopies() {
        rolledBack = nil
        attachedCopies = []
    }

    /// Watches a file this connection is about to ATTACH (read-only when
    /// `readOnly`), so that its -wal/-shm leftovers go too when it closes.
    public func watchAttachedFile(_ path: String, readOnly: Bool) {
        if let watch = WALLeftovers.watch(path, readOnly: readOnly) { watches.append(watch) }
    }

    /// `removing` is false while SQLite may still hold the file (a close
    /// deferred until statements finish): the process's own locks would not
    /// stop the removal.
    private func endWatches(removing: Bool = true) {
        for var watch in watches {
            if !removing { watch.removeLeftovers = false }
            WALLeftovers.end(watch)
        }
        watches = []
    }

    /// Closes the connection. Fails (and closes nonetheless, once the
    /// statements go) when statements are still open.
    public func close() throws {
        guard let db = handle else { return }
        handle = nil
        let rc = sqlite3_close(db)
        // A close that failed is finished later by SQLite (close_v2): the
        // file stays open, and counted, until then (here: for good).
        if rc == SQLITE_OK { forgetOpenedFile() }
        endWatches(removing: rc == SQLITE_OK)
        if rc == SQLITE_OK { releaseCopies() }
        if rc != SQLITE_OK {
            var open: [String] = []
            var statement = sqlite3_next_stmt(db, nil)
            while let s = statement {
                open.append(String(cString: sqlite3_sql(s)))
                statement = sqlite3_next_stmt(db, s)
            }
            sqlite3_close_v2(db)
            throw DatabaseError(code: ResultCode(rawValue: rc),
                                message: "closed with \(open.count) statement(s) still open: \(open.joined(separator: "; "))",
                                path: path)
        }
    }

    /// The raw handle, for the parts of the core that call the C API directly
    /// (backup, session). Valid while the connection is open.
    public var rawHandle: OpaquePointer {
        guard let handle else { preconditionFailure("connection to \(path) used after close()") }
        return handle
    }

    // MARK: Settings

    /// The busy timeout in milliseconds: how long a statement waits for another
    /// connection's lock before failing with SQLITE_BUSY.
    public private(set) var busyTimeout: Int = Connection.defaultBusyTimeout

    public func setBusyTimeout(_ milliseconds: Int) {
        busyTimeout = milliseconds
        sqlite3_busy_timeout(rawHandle, Int32(clamping: milliseconds))
    }

    /// Lets this connection's sorts (CREATE INDEX, large ORDER BY) use
    /// auxiliary threads, one per online core beyond the first, where SQLite's
    /// default is none (`PRAGMA threads`). Results are the same; only index
    /// builds of large tables get faster on more than one core.
    public func useSorterThreads() {
        sqlite3_limit(rawHandle, SQLITE_LIMIT_WORKER_THREADS, Connection.sorterThreads)
    }

    /// One auxiliary sorter thread per online core beyond the first, at most 8
    /// (SQLite's own cap in Debian's build).
    public static var sorterThreads: Int32 {
        Int32(clamping: max(0, min(ProcessInfo.processInfo.activeProcessorCount - 1, 8)))
    }

    /// The journal mode of `schema` in lower case ("wal", "delete", ...). An
    /// immutable fallback open (only ever of a WAL database) reports "wal", the file's
    /// own mode, where SQLite would say "delete".
    public func journalMode(of schema: String = "main") throws -> String {
        if isImmutable && schema == "main" { return "wal" }
        let value = try scalar("PRAGMA \(quoteIdentifier(schema)).journal_mode")
        guard case .text(let bytes)? = value else { return "" }
        return String(decoding: bytes.map(asciiLower), as: UTF8.self)
    }

    /// True when no write can happen through this connection's main database.
    public var isReadOnly: Bool { sqlite3_db_readonly(rawHandle, "main") == 1 }

    /// The SQLite library version (e.g. "3.40.1").
    public static var sqliteVersion: String { String(cString: sqlite3_libversion()) }

    // MARK: Running SQL

    /// Prepares one statement.
    public func prepare(_ sql: String) throws -> Statement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(rawHandle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK else { throw DatabaseError.fromConnection(handle, code: rc, path: path, sql: sql) }
        guard let statement else {
            throw DatabaseError(code: .misuse, message: "no SQL statement in the text", path: path, sql: sql)
        }
        return Statement(handle: statement, connection: self)
    }

    /// Runs every statement of `script` in order, calling `body` with each one
    /// prepared (before it is stepped); statements are prepared one at a time,
    /// so a later one may use a table an earlier one created. `body` steps the
    /// statement as it likes; it is finalized afterwards.
    public func forEachStatement(in script: String, _ body: (Statement) throws -> Void) throws {
        let bytes = Array(script.utf8CString)
        try bytes.withUnsafeBufferPointer { buffer in
            guard var cursor = buffer.baseAddress else { return }
            while cursor.pointee != 0 {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let rc = sqlite3_prepare_v2(rawHandle, cursor, -1, &statement, &tail)
                guard rc == SQLITE_OK else {
                    let rest = String(cString: cursor).trimmingWhitespace()
                    throw DatabaseError.fromConnection(handle, code: rc, path: path, sql: rest)
                }
                if let statement {
                    try body(Statement(handle: statement, connection: self))
                }
                guard let tail, tail > cursor else { break }
                cursor = tail
            }
        }
    }

    /// Runs every statement of `script`, discarding rows.
    public func execute(_ script: String) throws {
        try forEachStatement(in: script) { statement in
            while try statement.step() {}
        }
    }

    /// Rows the last INSERT, UPDATE or DELETE changed (sqlite3_changes64).
    public var changes: Int64 { sqlite3_changes64(rawHandle) }

    /// Runs `sql` with `arguments` bound and returns the first column of the
    /// first row (nil when there is no row).
    public func scalar(_ sql: String, _ arguments: [Value] = []) throws -> Value? {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        guard try statement.step() else { return nil }
        return statement.value(at: 0)
    }

    /// Every row of `sql` as values (for small results: schema, pragmas).
    public func rows(_ sql: String, _ arguments: [Value] = []) throws -> [[Value]] {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        var result: [[Value]] = []
        while try statement.step() {
            result.append(statement.values())
        }
        return result
    }

    /// Runs `body` inside a read transaction (`BEGIN` then a first read), so
    /// that everything it reads comes from one snapshot of the database.
    public func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN DEFERRED")
        do {
            _ = try scalar("SELECT count(*) FROM sqlite_schema")
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Runs `body` inside `BEGIN IMMEDIATE` (the write lock taken at once, so
    /// a busy database fails before any work) and commits when `commit` is true
    /// and `body` succeeds; otherwise rolls back, leaving the file unchanged.
    public func writeTransaction<T>(commit: Bool = true, _ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute(commit ? "COMMIT" : "ROLLBACK")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    // MARK: Paths

    /// `path` as a SQLite URI filename (https://www.sqlite.org/uri.html): made
    /// absolute, with every byte outside the unreserved set percent-encoded, so
    /// that `?`, `#` and `%` in a name are taken literally.
    public static func fileURI(_ path: String) -> String {
        var absolute = path
        if !path.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            if getcwd(&buffer, buffer.count) != nil {
                let cwd = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                absolute = (cwd == "/" ? "" : cwd) + "/" + path
            }
        }
        var out = "file:"
        for byte in absolute.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        // "file://" would start an authority; collapse a leading double slash.
        while out.hasPrefix("file://") { out.remove(at: out.index(out.startIndex, offsetBy: 5)) }
        return out
    }
}

@available(*, unavailable, message: "a Connection belongs to one thread; open one per task")
extension Connection: Sendable {}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }

    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        var start = scalars.startIndex, end = scalars.endIndex
        while start < end, scalars[start].properties.isWhitespace { start = scalars.index(after: start) }
        while end > start, scalars[scalars.index(before: end)].properties.isWhitespace { end = scalars.index(before: end) }
        return String(scalars[start..<end])
    }
}
