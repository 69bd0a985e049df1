// One connection with several databases under aliases: a main file (or an
// empty in-memory main) plus files attached with ATTACH, read-only unless the
// caller asks for writes. `litectl query` and `litectl tables` run on it.
// See https://www.sqlite.org/lang_attach.html and https://www.sqlite.org/limits.html#max_attached
import CSQLite

/// One entry of `PRAGMA database_list`.
public struct AttachedDatabase: Sendable, Equatable {
    /// The schema name: `main`, `temp`, or an alias.
    public var name: String
    /// The file's absolute path as SQLite reports it ("" for in-memory and temp).
    public var file: String
    /// The path as the caller gave it (nil for `temp` and an in-memory main).
    public var givenPath: String?
}

/// A main connection that attaches and detaches databases by alias and runs
/// statements with streamed results.
///
/// Every file opens with `mode=ro` unless `writable` is true; the path is
/// bound to `ATTACH ? AS alias` as a `file:` URI (so `?`, `#` and `%` in a
/// name are literal) and checked to exist first, so nothing is ever created.
/// Not `Sendable`, like its connection.
public final class AttachedSession {
    public let connection: Connection
    /// True when the files were opened read-write (`--write`).
    public let writable: Bool
    /// Paths as given, by alias (including `main` when it is a file).
    private var givenPaths: [String: String] = [:]

    /// Opens `mainPath` as `main` (read-only unless `writable`), or an empty
    /// in-memory database when `mainPath` is nil.
    public init(mainPath: String?, writable: Bool = false, busyTimeout: Int = Connection.defaultBusyTimeout) throws {
        self.writable = writable
        if let mainPath {
            connection = try Connection(path: mainPath, mode: writable ? .readWrite : .readOnly, busyTimeout: busyTimeout)
            givenPaths["main"] = mainPath
        } else {
            connection = try Connection(inMemory: busyTimeout)
        }
    }

    // MARK: Aliases

    /// The most databases this SQLite build lets one connection attach
    /// (`SQLITE_LIMIT_ATTACHED`; 10 on Debian's build).
    public var attachLimit: Int {
        Int(sqlite3_limit(connection.rawHandle, SQLITE_LIMIT_ATTACHED, -1))
    }

    /// Fails unless `alias` is a plain identifier (a letter or `_`, then
    /// letters, digits or `_`), not `main` or `temp` in any case.
    public static func validateAlias(_ alias: String) throws {
        guard let first = alias.unicodeScalars.first else {
            throw DatabaseError(code: .error, message: "empty alias: give a name such as 'staging'")
        }
        let isLetter: (Unicode.Scalar) -> Bool = { ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || $0 == "_" }
        guard isLetter(first), alias.unicodeScalars.allSatisfy({ isLetter($0) || ($0 >= "0" && $0 <= "9") }) else {
            throw DatabaseError(code: .error, message: "invalid alias '\(alias)': use letters, digits and _, starting with a letter or _")
        }
        let lower = alias.lowercased()
        guard lower != "main", lower != "temp" else {
            throw DatabaseError(code: .error, message: "invalid alias '\(alias)': main and temp are reserved schema names")
        }
    }

    /// Attaches the database file at `path` as `alias`.
    ///
    /// Fails with a clear message when the alias is invalid or taken, the file
    /// is missing (it is never created), is not a database, or the attach limit
    /// is reached.
    public func attach(_ path: String, as alias: String) throws {
        try Self.validateAlias(alias)
        let current = try databases()
        if current.contains(where: { sameSQLName($0.name, alias) }) {
            throw DatabaseError(code: .error, message: "alias '\(alias)' is already in use", path: path)
        }
        let attachedCount = current.filter { $0.name != "main" && $0.name != "temp" }.count
        if attachedCount >= attachLimit {
            throw DatabaseError(
                code: .error,
                message: "cannot attach as '\(alias)': this SQLite allows at most \(attachLimit) attached databases "
                    + "(SQLITE_LIMIT_ATTACHED); to run one query over many files, use --each",
                path: path)
        }
        // A moment of a repository: its image through PageVFS, read-only
        // whatever `writable` says of the files (a moment cannot change).
        if PageVFS.namesSource(path) {
            let registration = try PageVFS.requireSource(named: path)
            connection.keep(registration)
            do {
                let statement = try connection.prepare("ATTACH ?1 AS \(quoteIdentifier(alias))")
                try statement.bind(.text(registration.uri), at: 1)
                try statement.step()
                _ = try connection.scalar("SELECT 1 FROM \(quoteIdentifier(alias)).sqlite_schema LIMIT 1")
            } catch let error as DatabaseError {
                try? connection.execute("DETACH \(quoteIdentifier(alias))")
                throw Self.attachFailure(error, path: path)
            }
            givenPaths[alias] = path
            return
        }
        try FileCheck.requireDatabaseFile(path, writable: writable)
        connection.watchAttachedFile(path, readOnly: !writable)
        do {
            try attachFile(path, as: alias, path: path)
        } catch let error as DatabaseError where !writable && error.code == .readonlyRollback {
            // A hot journal: its last committed state, from a private copy
            // rolled back by SQLite (see HotJournal), as a read-only open reads it.
            do {
                guard let copy = try connection.committedCopyForAttach(path) else {
                    try attachFile(path, as: alias, path: path)
                    givenPaths[alias] = path
                    return
                }
                try attachFile(copy, as: alias, path: path)
            } catch let error as DatabaseError {
                throw Self.attachFailure(error, path: path)
            }
        }
        givenPaths[alias] = path
    }

    /// ATTACH of `file` (the database at `path`, or the private copy of its
    /// committed state), then a first read of its schema. Detached again when that read fails.
    private func attachFile(_ file: String, as alias: String, path: String) throws {
        let uri = Connection.fileURI(file) + "?mode=" + (writable ? "rw" : "ro")
        do {
            let statement = try connection.prepare("ATTACH ?1 AS \(quoteIdentifier(alias))")
            try statement.bind(.text(uri), at: 1)
            try statement.step()
        } catch let error as DatabaseError {
            throw Self.attachFailure(error, path: path)
        }
        // SQLite opens lazily: read the schema now so a non-database fails here.
        do {
            _ = try connection.scalar("SELECT 1 FROM \(quoteIdentifier(alias)).sqlite_schema LIMIT 1")
        } catch let error as DatabaseError {
            try? connection.execute("DETACH \(quoteIdentifier(alias))")
            throw error.code == .readonlyRollback ? error : Self.attachFailure(error, path: path)
        }
    }

    /// `error` from attaching `path`, worded as `Connection` words open failures.
    private static func attachFailure(_ error: DatabaseError, path: String) -> DatabaseError {
        var error = error
        error.path = path
        error.sql = nil
        switch error.code.primary {
        case .notadb: error.message = "not a SQLite database"
        case .corrupt: error.message = "corrupt database (\(error.message))"
        case .busy, .locked: error.message = "database is locked by another process"
        default: break
        }
        return error
    }

    /// Detaches `alias`. Statements of this session must be finished (they are
    /// once `run`'s callbacks return).
    public func detach(_ alias: String) throws {
        let statement = try connection.prepare("DETACH \(quoteIdentifier(alias))")
        try statement.step()
        givenPaths[alias] = nil
    }

    /// The databases of the connection (`PRAGMA database_list`), in its order.
    public func databases() throws -> [AttachedDatabase] {
        var list: [AttachedDatabase] = []
        let statement = try connection.prepare("SELECT name, file FROM pragma_database_list ORDER BY seq")
        try statement.forEachRow { row in
            let name = row.string(at: 0)
            list.append(AttachedDatabase(name: name, file: row.string(at: 1), givenPath: givenPaths[name]))
        }
        return list
    }

    /// With `writable`: a warning when more than one file can be written and
    /// main is in WAL mode (a transaction across attached WAL databases is
    /// atomic per file, not as a whole: https://www.sqlite.org/lang_attach.html).
    public func walAtomicityWarning() throws -> String? {
        guard writable else { return nil }
        // (A moment of a repository is attached read-only whatever --write says.)
        let files = try databases().filter { $0.name != "temp" && !$0.file.isEmpty && !PageVFS.namesSource($0.givenPath ?? "") }
        guard files.count > 1 else { return nil }
        guard try connection.journalMode() == "wal" else { return nil }
        return "warning: \(files.count) writable databases and main is in WAL mode: a transaction that changes "
            + "several of them is atomic in each file but not across files"
    }

    // MARK: Running SQL

    /// Runs every statement of `script` in order with `parameters` bound.
    /// For each statement that returns columns, `body` gets its result to
    /// stream; statements without columns run to completion. Stops at the
    /// first error.
    public func run(_ script: String, parameters: QueryParameters = QueryParameters(),
                    _ body: (QueryResult) throws -> Void) throws {
        try Self.run(script, on: connection, writable: writable, parameters: parameters, body)
    }

    /// How many statements of `script` return columns, known before any runs:
    /// each is prepared (never stepped) in order, and counting stops at the
    /// first that cannot be prepared yet (it needs a table an earlier one
    /// makes), so this is a lower bound. A caller whose output holds one
    /// result (CSV) refuses a script that gives several before running it.
    public func resultCountBeforeRunning(_ script: String) -> Int {
        var count = 0
        try? connection.forEachStatement(in: script) { statement in
            if statement.columnCount > 0 { count += 1 }
        }
        return count
    }

    /// `run` on any connection (fan-out uses it on one connection per file).
    static func run(_ script: String, on connection: Connection, writable: Bool, parameters: QueryParameters,
                    _ body: (QueryResult) throws -> Void) throws {
        var ranAny = false
        // ATTACH in the SQL would bypass the checks of `attach` (and, on an
        // in-memory main, create a missing file): deny it while preparing the
        // caller's statements (https://www.sqlite.org/c3ref/set_authorizer.html).
        sqlite3_set_authorizer(connection.rawHandle, { _, action, _, _, _, _ in
            action == SQLITE_ATTACH ? SQLITE_DENY : SQLITE_OK
        }, nil)
        defer { sqlite3_set_authorizer(connection.rawHandle, nil, nil) }
        do {
            try runStatements(script, on: connection, writable: writable, parameters: parameters, ranAny: &ranAny, body)
        } catch var error as DatabaseError {
            if error.code.primary == .auth {
                error.message = "ATTACH in SQL is not allowed: use --attach ALIAS=PATH (\(error.message))"
            }
            if error.path == ":memory:" { error.path = nil }  // no file to name
            throw error
        }
        if !ranAny {
            throw DatabaseError(code: .misuse, message: "no SQL statement to run")
        }
    }

    private static func runStatements(_ script: String, on connection: Connection, writable: Bool, parameters: QueryParameters,
                                      ranAny: inout Bool, _ body: (QueryResult) throws -> Void) throws {
        try connection.forEachStatement(in: script) { statement in
            ranAny = true
            if !writable && !statement.isReadOnly {
                throw DatabaseError(
                    code: .readonly,
                    message: "write statement refused: litectl query opens databases read-only; pass --write to allow changes",
                    path: connection.path == ":memory:" ? nil : connection.path, sql: statement.sql)
            }
            try parameters.bind(to: statement)
            if statement.columnCount == 0 {
                while try statement.step() {}
            } else {
                try body(QueryResult(statement: statement))
            }
        }
    }
}

/// The result of one statement, read as it streams.
public struct QueryResult {
    let statement: Statement

    /// Column names in statement order.
    public var columns: [String] { statement.columnNames }

    /// The statement's SQL text.
    public var sql: String { statement.sql }

    /// Steps through every row; the `Row` view is valid only inside `body`.
    public func forEachRow(_ body: (Row) throws -> Void) throws {
        try statement.forEachRow(body)
    }
}

/// Named parameter values for `:name`, `@name` and `$name`.
public struct QueryParameters: Sendable {
    /// Values by bare name (without the prefix).
    public var values: [String: Value]

    public init(_ values: [String: Value] = [:]) {
        self.values = values
    }

    /// A value from the command line: INTEGER when it is a decimal 64-bit
    /// integer, REAL when it is a finite decimal number, TEXT otherwise
    /// (always TEXT when `forceText`).
    public static func parse(_ text: String, forceText: Bool = false) -> Value {
        if forceText { return .text(text) }
        if let integer = Int64(text) { return .integer(integer) }
        let numeric = text.unicodeScalars.allSatisfy { ($0 >= "0" && $0 <= "9") || "+-.eE".unicodeScalars.contains($0) }
        if numeric, text.unicodeScalars.contains(where: { $0 >= "0" && $0 <= "9" }),
           let real = Double(text), real.isFinite {
            return .real(real)
        }
        return .text(text)
    }

    /// Binds every parameter of `statement` by name. A parameter with no value,
    /// or a nameless `?`, is an error (SQLite would silently bind NULL).
    func bind(to statement: Statement) throws {
        let count = statement.parameterCount
        guard count > 0 else { return }
        for index in 1...count {
            guard let name = statement.parameterName(at: index) else {
                throw DatabaseError(code: .range, message: "nameless parameter ?\(index): use named parameters (:name) with --param name=VALUE",
                                    sql: statement.sql)
            }
            let bare = String(name.dropFirst())
            guard let value = values[bare] else {
                throw DatabaseError(code: .range, message: "no value for parameter \(name): pass --param \(bare)=VALUE",
                                    sql: statement.sql)
            }
            try statement.bind(value, at: index)
        }
    }
}
