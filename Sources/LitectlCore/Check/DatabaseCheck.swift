// `litectl check`: runs SQLite's own consistency checks (integrity_check or
// quick_check, foreign_key_check) and litectl's lint checks on one database,
// read-only, and returns findings; `checkAll` does many files in parallel,
// each on its own connection opened inside its worker.
// See https://www.sqlite.org/pragma.html#pragma_integrity_check
import CSQLite
import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `check` looks at, beyond SQLite's own checks.
public struct CheckOptions: Sendable {
    /// `quick_check` instead of `integrity_check` (faster; misses an index out of step with its table).
    public var quick = false
    /// A freelist above this share of the file (in percent) is a warning.
    public var maxFreePercent: Double = 25
    /// `sqlite_stat1` row counts off by more than this factor from the real ones are a warning.
    public var maxStatisticsDrift: Double = 2
    public var expectUserVersion: Int64?
    public var expectApplicationID: Int64?
    /// Compared case-insensitively with `PRAGMA journal_mode`.
    public var expectJournalMode: String?
    public var busyTimeout = Connection.defaultBusyTimeout
    /// How many integrity_check messages to ask SQLite for at most.
    public var maxIntegrityMessages = 100
    /// Connections that share integrity_check's work on one large file
    /// (1: one full integrity_check on one connection).
    public var integrityConnections = 1
    /// Files smaller than this are checked on one connection whatever
    /// `integrityConnections` says (threads cost more than they save there).
    public var parallelIntegrityMinimumBytes: Int64 = 64 << 20
    /// A database that holds no table is a note instead of an error.
    public var allowEmpty = false
    /// Checks left out (`--skip RULE`) or findings of a check on one object
    /// left out (`--skip RULE:OBJECT`).
    public var skips: [CheckSkip] = []
    /// The schema the database must have (`--expect-schema FILE.sql`).
    public var expectedSchema: ReferenceSchema?

    public init() {}

    /// Whether `--skip` leaves out the whole check.
    func skipsWhole(_ kind: CheckKind) -> Bool { skips.contains { $0.check == kind && $0.object == nil } }

    /// Whether `--skip` leaves out this finding.
    func skips(_ finding: Finding) -> Bool {
        skips.contains { skip in
            skip.check == finding.check && (skip.object == nil || finding.object.map { sameSQLName($0, skip.object!) } == true)
        }
    }
}

/// One `--skip RULE[:OBJECT]`: a check left out, or its findings on one object.
public struct CheckSkip: Sendable, Equatable {
    public var check: CheckKind
    /// The table, index, view or trigger (compared as SQLite compares names);
    /// nil for the whole check.
    public var object: String?

    public init(check: CheckKind, object: String? = nil) {
        self.check = check
        self.object = object
    }

    /// Parses `RULE` or `RULE:OBJECT` (the object is everything after the
    /// first colon, so it may hold colons). The `open` check cannot be
    /// skipped: nothing else looks at a file SQLite cannot open.
    public static func parse(_ text: String) throws -> CheckSkip {
        let name = text.prefix { $0 != ":" }
        let object = name.count < text.count ? String(text[text.index(after: name.endIndex)...]) : nil
        guard let check = CheckKind(rawValue: String(name)) else {
            throw DatabaseError(code: .misuse, message: "--skip: unknown check '\(name)' (checks: \(CheckKind.allCases.filter { $0 != .open }.map(\.rawValue).joined(separator: ", ")))")
        }
        if check == .open {
            throw DatabaseError(code: .misuse, message: "--skip: the open check cannot be skipped (nothing else looks at a file SQLite cannot open)")
        }
        if object?.isEmpty == true {
            throw DatabaseError(code: .misuse, message: "--skip \(text): name an object after the colon, or give the check alone")
        }
        return CheckSkip(check: check, object: object)
    }
}

public enum DatabaseCheck {
    /// Checks the file at `path`. Never throws: a file that cannot be checked
    /// gives a report with `failure` set; a corrupt file gives error findings.
    public static func check(path: String, options: CheckOptions = CheckOptions()) -> CheckReport {
        let started = DispatchTime.now()
        var report = checkFile(path: path, options: options)
        report.findings.removeAll { options.skips($0) }
        report.seconds = secondsSince(started)
        return report
    }

    static func secondsSince(_ start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }

    private static func checkFile(path: String, options: CheckOptions) -> CheckReport {
        var report = CheckReport(path: path)
        // Before SQLite opens the file: a read-only connection to a WAL database
        // creates an empty -wal when there is none.
        let fileSize = FileCheck.size(of: path)
        let walSize = FileCheck.size(of: path + "-wal")

        let connection: Connection
        do {
            connection = try Connection(path: path, mode: .readOnly, busyTimeout: options.busyTimeout)
        } catch let error as DatabaseError {
            if error.code.primary == .corrupt {
                report.findings.append(Finding(.error, .open, object: nil,
                                               "SQLite cannot open the database: \(error.message)", identity: ["corrupt"]))
                report.ran = [(check: CheckKind.open, seconds: 0)]
            } else if error.code.primary == .notadb, let size = fileSize, FileCheck.shapeProblem(path, size: size) == nil,
                      (try? FileCheck.readPrefix(of: path, count: 16)) == DatabaseHeader.magic {
                // The SQLite signature is there and the file is whole, the rest
                // of the header is not sound: a damaged database, not some other
                // kind of file (nor a truncated one: an error, as everywhere).
                report.findings.append(Finding(.error, .open, object: nil,
                                               "the database header is damaged: SQLite cannot open the database", identity: ["header"]))
                report.ran = [(check: CheckKind.open, seconds: 0)]
            } else {
                report.failure = error
            }
            return report
        } catch {
            report.failure = DatabaseError(code: .error, message: "\(error)", path: path)
            return report
        }
        defer { try? connection.close() }
        // Reading through a memory map roughly halves integrity_check's time
        // on a large file (no copy into the page cache). SQLite caps it at its
        // compile-time SQLITE_MAX_MMAP_SIZE.
        try? connection.execute("PRAGMA mmap_size=\(Int64(1) << 40)")

        var checker = Checker(connection: connection, options: options, path: path)
        if !options.skipsWhole(.hotJournal) {
            if let hot = connection.hotJournal { checker.hotJournal(hot) }
            checker.ran.append((.hotJournal, 0))
        }
        do {
            try connection.readTransaction {
                checker.run(fileSize: fileSize, walSize: walSize)
            }
        } catch let error as DatabaseError {
            if error.code.primary == .corrupt {
                checker.findings.append(Finding(.error, .integrity, object: nil, "database disk image is malformed: \(error.message)",
                                                identity: ["malformed"]))
            } else if checker.findings.isEmpty {
                report.failure = error
            } else {
                checker.findings.append(Finding(.error, .integrity, object: nil, "check stopped: \(error.message)",
                                                identity: ["stopped"]))
            }
        } catch {
            report.failure = DatabaseError(code: .error, message: "\(error)", path: path)
        }
        report.findings = checker.findings
        report.ran = [(check: CheckKind.open, seconds: 0)] + checker.ran
        report.skipped = CheckKind.allCases.filter { options.skipsWhole($0) }
        return report
    }

    /// Checks every path with up to `parallelism` files at a time, each on a
    /// connection opened in its own worker thread. `onReport` is called once
    /// per file, in the order of `paths`, as soon as that file and every file
    /// before it are done (under a lock: it is never called concurrently).
    /// Returns the reports in the order of `paths`.
    @discardableResult
    public static func checkAll(paths: [String], options: CheckOptions, parallelism: Int,
                                onReport: @escaping @Sendable (CheckReport) -> Void = { _ in }) -> [CheckReport] {
        struct State {
            var next = 0
            var reports: [CheckReport?]
            var delivered = 0
        }
        let state = Locked(State(reports: Array(repeating: nil, count: paths.count)))
        let workers = max(1, min(parallelism, paths.count))
        let work: @Sendable (Int) -> Void = { _ in
            while true {
                let index: Int? = state.withLock { s in
                    guard s.next < paths.count else { return nil }
                    defer { s.next += 1 }
                    return s.next
                }
                guard let index else { return }
                let report = check(path: paths[index], options: options)
                state.withLock { s in
                    s.reports[index] = report
                    while s.delivered < paths.count, let ready = s.reports[s.delivered] {
                        onReport(ready)
                        s.delivered += 1
                    }
                }
            }
        }
        if workers == 1 {
            work(0)
        } else {
            DispatchQueue.concurrentPerform(iterations: workers, execute: work)
        }
        return state.withLock { $0.reports.map { $0! } }
    }
}


/// The checks on one open connection, inside one read transaction.
struct Checker {
    let connection: Connection
    let options: CheckOptions
    let path: String
    var findings: [Finding] = []
    /// The checks that ran, with their seconds.
    var ran: [(check: CheckKind, seconds: Double)] = []
    /// The tables a file format's specification defines (GeoPackage,
    /// MBTiles), whose lint findings are notes; see `SpecificationTables`.
    var specification = SpecificationTables.none

    init(connection: Connection, options: CheckOptions, path: String) {
        self.connection = connection
        self.options = options
        self.path = path
    }

    mutating func run(fileSize: Int64?, walSize: Int64?) {
        let schema: Schema?
        do {
            schema = try connection.readSchema()
        } catch {
            schema = nil
            add(.error, .integrity, nil, "cannot read the schema: \(message(error))", identity: ["schema unreadable"])
        }
        if !options.skipsWhole(.integrity) {
            let started = DispatchTime.now()
            integrity(schema)
            ran.append((.integrity, DatabaseCheck.secondsSince(started)))
        }
        guard let schema else { return }
        let applicationID: Int64
        if case .integer(let id)? = try? connection.scalar("PRAGMA main.application_id") { applicationID = id } else { applicationID = 0 }
        specification = SpecificationTables(schema: schema, applicationID: applicationID)
        step(.empty) { try $0.emptiness(fileSize: fileSize) }
        step(.foreignKey) { try $0.foreignKeyCheck() }
        step(.unindexedForeignKey) { $0.unindexedForeignKeys(schema) }
        step(.noPrimaryKey) { $0.tablesWithoutPrimaryKey(schema) }
        step(.redundantIndex) { $0.redundantIndexes(schema) }
        step(.statistics) { try $0.statistics(schema) }
        step(.freelist) { try $0.freelist() }
        step(.walSize) { checker in
            if let walSize, let fileSize, walSize > fileSize {
                checker.add(.warning, .walSize, nil,
                            "the -wal file (\(walSize) bytes) is larger than the database (\(fileSize) bytes): checkpoints are not keeping up",
                            fix: "PRAGMA wal_checkpoint(TRUNCATE);")
            }
        }
        if options.expectUserVersion != nil || options.expectApplicationID != nil || options.expectJournalMode != nil {
            step(.expectation) { try $0.expectations() }
        }
        if let reference = options.expectedSchema {
            step(.schema) { $0.findings += reference.differences(from: schema) }
        }
    }

    /// A warning for a database whose rollback journal is hot: the checks
    /// below ran on its last committed state (a private copy rolled back);
    /// the file itself holds a stopped writer's uncommitted pages until the
    /// next read-write open rolls them back, which needs write access and,
    /// from a backup's point of view, has not happened yet.
    mutating func hotJournal(_ hot: HotJournalCopy) {
        var text = "the rollback journal \(DurableFolder.baseName(of: hot.journal)) is hot: a writer stopped inside a transaction (crashed or killed)"
        switch hot.superJournal {
        case .none, .pending:
            text += "; the file holds its uncommitted pages until a read-write open rolls them back (any application, or `sqlite3 DB 'PRAGMA quick_check'`); these checks ran on the last committed state, read from a private copy"
        case .committed:
            text += ", after its multi-file transaction committed (the super-journal is gone); a read-write open deletes the journal; these checks ran on the file as it stands"
        }
        add(.warning, .hotJournal, nil, text)
    }

    /// An error for a file that holds no table or index: SQLite opens a
    /// 0-byte file as an empty database, so a wiped file passes every other
    /// check (docs/safety.md: a source that shrank to nothing). A note with
    /// `--allow-empty`.
    mutating func emptiness(fileSize: Int64?) throws {
        guard case .integer(0)? = try connection.scalar(
            "SELECT count(*) FROM sqlite_schema WHERE type IN ('table','index') AND rootpage > 0") else { return }
        var text = fileSize == 0
            ? "the file is empty (0 bytes): SQLite reads it as a database without tables"
            : "the database holds no tables"
        text += options.allowEmpty ? " (allowed by --allow-empty)" : " (--allow-empty if that is meant)"
        add(options.allowEmpty ? .note : .error, .empty, nil, text)
    }

    /// Runs one check unless `--skip` leaves it out; a SQLite error inside it
    /// becomes an error finding of that check (a corrupt page met by a lint
    /// query, say).
    private mutating func step(_ kind: CheckKind, _ body: (inout Checker) throws -> Void) {
        guard !options.skipsWhole(kind) else { return }
        let started = DispatchTime.now()
        do {
            try body(&self)
        } catch {
            add(.error, kind, nil, "could not run this check: \(message(error))", identity: ["could not run"])
        }
        ran.append((kind, DatabaseCheck.secondsSince(started)))
    }

    /// Adds a finding. A lint finding (no-primary-key, unindexed-foreign-key,
    /// redundant-index, statistics) on a table whose shape a file format's
    /// specification prescribes (`table`, the object's table) is a note: the
    /// user cannot change it without breaking the format.
    mutating func add(_ severity: Severity, _ kind: CheckKind, _ object: String?, _ text: String, fix: String? = nil,
                      identity: [String] = [], table: String? = nil) {
        var severity = severity, text = text, fix = fix
        if severity == .warning, [.noPrimaryKey, .unindexedForeignKey, .redundantIndex, .statistics].contains(kind),
           let format = specification.definer(of: table ?? object) {
            severity = .note
            text += " (the \(format) specification defines this table so; not a warning)"
            fix = nil
        }
        findings.append(Finding(severity, kind, object: object, text, fix: fix, identity: identity))
    }

    private func message(_ error: any Error) -> String {
        (error as? DatabaseError)?.message ?? "\(error)"
    }

    // MARK: SQLite's own checks

    /// integrity_check (or quick_check): each message but "ok" is an error,
    /// attributed to the index or b-tree it names when it names one.
    mutating func integrity(_ schema: Schema?) {
        let pragma = options.quick ? "quick_check" : "integrity_check"
        var roots: [Int64: String] = [:]
        if let rows = try? connection.rows("SELECT rootpage, name FROM main.sqlite_schema WHERE rootpage > 0") {
            for row in rows {
                if case .integer(let page) = row[0], case .text(let name) = row[1] {
                    roots[page] = String(decoding: name, as: UTF8.self)
                }
            }
        }
        let messages = parallelIntegrity(schema)
            ?? Checker.integrityMessages(connection, "PRAGMA main.\(pragma)(\(options.maxIntegrityMessages))", pragma: pragma)
        for line in messages {
            let object = line.hasPrefix("\(pragma) stopped") ? nil : Checker.objectNamed(in: line, roots: roots)
            add(.error, .integrity, object, line, identity: [Checker.withoutNumbers(line)])
        }
        if options.quick {
            add(.note, .integrity, nil, "quick_check: indexes were not compared with their tables (run without --quick for that)")
        }
    }

    /// The messages of one integrity pragma ("ok" left out). An error that
    /// stops it (a page too damaged to read) becomes the last message.
    static func integrityMessages(_ connection: Connection, _ sql: String, pragma: String) -> [String] {
        var messages: [String] = []
        do {
            let statement = try connection.prepare(sql)
            try statement.forEachRow { row in
                let text = row.string(at: 0)
                if text == "ok" { return }
                for line in text.split(separator: "\n") where !line.hasPrefix("*** in database") {
                    messages.append(String(line))
                }
            }
        } catch {
            messages.append("\(pragma) stopped: \((error as? DatabaseError)?.message ?? "\(error)")")
        }
        return messages
    }

    /// integrity_check split over several connections, for a large file in
    /// rollback-journal mode: `quick_check` on the whole file (every b-tree's
    /// structure, the freelist, pages used twice or never) and
    /// `integrity_check(TABLE)` for each table (its b-tree and its indexes
    /// compared with it), taken by workers from one queue, biggest work first
    /// in practice because quick_check goes first. Together they cover what
    /// one full integrity_check covers; a message both report is shown once.
    /// All connections read one snapshot: this connection's read transaction
    /// holds a SHARED lock, so no writer can commit until they are done. Nil
    /// (do it serially) when the split does not apply or a worker cannot open.
    func parallelIntegrity(_ schema: Schema?) -> [String]? {
        guard !options.quick, options.integrityConnections > 1, let schema,
              (FileCheck.size(of: path) ?? 0) >= options.parallelIntegrityMinimumBytes else { return nil }
        guard let mode = try? connection.journalMode(), mode != "wal" else { return nil }
        let tables = schema.tables.filter { $0.kind != .virtual }.map(\.name)
        guard tables.count >= 2 else { return nil }
        let tasks = ["PRAGMA main.quick_check(\(options.maxIntegrityMessages))"]
            + tables.map { "PRAGMA main.integrity_check(\(quoteIdentifier($0)))" }
        struct State {
            var next = 0
            var results: [[String]?]
            var failed = false
        }
        let state = Locked(State(results: Array(repeating: nil, count: tasks.count)))
        let path = self.path, options = self.options
        DispatchQueue.concurrentPerform(iterations: min(options.integrityConnections, tasks.count)) { _ in
            guard let worker = try? Connection(path: path, mode: .readOnly, busyTimeout: options.busyTimeout) else {
                state.withLock { $0.failed = true }
                return
            }
            defer { try? worker.close() }
            try? worker.execute("PRAGMA mmap_size=\(Int64(1) << 40)")
            do {
                try worker.readTransaction {
                    while true {
                        let index: Int? = state.withLock { s in
                            guard !s.failed, s.next < tasks.count else { return nil }
                            defer { s.next += 1 }
                            return s.next
                        }
                        guard let index else { return }
                        let messages = Checker.integrityMessages(worker, tasks[index], pragma: "integrity_check")
                        state.withLock { $0.results[index] = messages }
                    }
                }
            } catch {
                state.withLock { $0.failed = true }
            }
        }
        return state.withLock { s -> [String]? in
            guard !s.failed, s.results.allSatisfy({ $0 != nil }) else { return nil }
            var seen = Set<String>()
            return s.results.flatMap { $0! }.filter { seen.insert($0).inserted }
        }
    }

    /// `text` with every run of digits replaced by `#`: integrity_check names
    /// pages, cells and rowids, which move when unrelated parts of the file
    /// change (a VACUUM, rows added elsewhere).
    static func withoutNumbers(_ text: String) -> String {
        var out = "", inNumber = false
        for c in text {
            if c.isASCII && c.isNumber {
                if !inNumber { out.append("#") }
                inNumber = true
            } else {
                out.append(c)
                inNumber = false
            }
        }
        return out
    }

    /// The object an integrity_check message names: "... in index NAME",
    /// "NULL value in TABLE.COLUMN", "Tree N page ..." (N a root page).
    static func objectNamed(in line: String, roots: [Int64: String]) -> String? {
        if let range = line.range(of: " index ", options: .backwards) {
            let rest = line[range.upperBound...]
            let name = rest.prefix { $0 != " " }
            if !name.isEmpty { return String(name) }
        }
        if let range = line.range(of: "NULL value in ") {
            let rest = line[range.upperBound...]
            if let dot = rest.lastIndex(of: ".") { return String(rest[..<dot]) }
        }
        if line.hasPrefix("Tree ") {
            let digits = line.dropFirst(5).prefix { $0.isNumber }
            if let page = Int64(digits), let name = roots[page] { return name }
        }
        return nil
    }

    /// foreign_key_check, whatever the foreign_keys setting: one error per
    /// foreign key with orphan rows (their count and the first rowids).
    mutating func foreignKeyCheck() throws {
        struct Group { var table: String; var parent: String; var columns: [String] = []; var count = 0; var rowids: [String] = [] }
        // The child columns of each foreign key (foreign_key_check names it
        // by its id, which renumbers when another foreign key is added).
        var keyColumns: [String: [String]] = [:]
        var groups: [String: Group] = [:]
        var order: [String] = []
        let statement = try connection.prepare("PRAGMA main.foreign_key_check")
        try statement.forEachRow { row in
            let table = row.string(at: 0), parent = row.string(at: 2)
            let key = "\(table)\u{0}\(parent)\u{0}\(row.int64(at: 3))"
            if groups[key] == nil {
                let id = row.int64(at: 3)
                if keyColumns[table] == nil {
                    keyColumns[table] = []
                    let list = try connection.prepare("SELECT id, seq, \"from\" FROM pragma_foreign_key_list(?) ORDER BY id, seq")
                    try list.bind([.text(Array(table.utf8))])
                    try list.forEachRow { fk in keyColumns[table]!.append("\(fk.int64(at: 0))\u{0}\(fk.string(at: 2))") }
                }
                let columns = keyColumns[table]!.filter { $0.hasPrefix("\(id)\u{0}") }.map { String($0.drop { $0 != "\u{0}" }.dropFirst()) }
                groups[key] = Group(table: table, parent: parent, columns: columns)
                order.append(key)
            }
            groups[key]!.count += 1
            if groups[key]!.rowids.count < 5 { groups[key]!.rowids.append(row.isNull(at: 1) ? "NULL" : String(row.int64(at: 1))) }
        }
        for key in order {
            let g = groups[key]!
            let more = g.count > g.rowids.count ? ", …" : ""
            add(.error, .foreignKey, g.table,
                "\(g.count) row\(g.count == 1 ? "" : "s") of \(g.table) refer\(g.count == 1 ? "s" : "") to a missing row of \(g.parent) (rowid \(g.rowids.joined(separator: ", "))\(more))",
                identity: [g.parent] + g.columns + [String(g.count)])
        }
    }

    // MARK: Lints

    /// A foreign key's child columns with no index starting with them: every
    /// delete or key update in the parent scans the child table.
    mutating func unindexedForeignKeys(_ schema: Schema) {
        for table in schema.tables where table.kind == .ordinary {
            let indexes = schema.indexes(on: table.name).filter { !$0.partial }
            for key in table.foreignKeys {
                let columns = key.columns.map(sqlNameKey)
                if columns.count == 1, table.hasRowidAlias, sqlNameKey(table.primaryKey[0].name) == columns[0] { continue }
                if !table.withoutRowid, table.kind == .ordinary,
                   columns.count == 1, [sqlNameKey("rowid"), sqlNameKey("oid"), sqlNameKey("_rowid_")].contains(columns[0]) { continue }
                // A WITHOUT ROWID table is its own primary-key index (it has no
                // entry in sqlite_schema's index list).
                let keyParts = table.withoutRowid ? [table.primaryKey.map { sqlNameKey($0.name) }] : []
                let covered = (indexes.map { $0.parts.compactMap { $0.name.map(sqlNameKey) } } + keyParts).contains { parts in
                    guard parts.count >= columns.count else { return false }
                    return Set(parts.prefix(columns.count)) == Set(columns)
                }
                if covered { continue }
                let indexName = ([table.name] + key.columns + ["idx"]).joined(separator: "_")
                let fix = "CREATE INDEX \(quoteIdentifier(indexName)) ON \(quoteIdentifier(table.name))("
                    + key.columns.map(quoteIdentifier).joined(separator: ", ") + ");"
                add(.warning, .unindexedForeignKey, table.name,
                    "foreign key (\(key.columns.joined(separator: ", "))) → \(key.parentTable) has no index on its child column\(key.columns.count == 1 ? "" : "s"): deletes and key updates in \(key.parentTable) scan \(table.name)",
                    fix: fix, identity: [key.parentTable] + key.columns)
            }
        }
    }

    /// Ordinary tables with no PRIMARY KEY: rows have no stable identity (a
    /// VACUUM may renumber rowids) and tools cannot match them across copies.
    mutating func tablesWithoutPrimaryKey(_ schema: Schema) {
        for table in schema.tables where table.kind == .ordinary && !table.withoutRowid && table.problem == nil {
            if table.primaryKey.isEmpty {
                add(.warning, .noPrimaryKey, table.name, "table \(table.name) has no PRIMARY KEY")
            }
        }
    }

    /// A non-unique, non-partial index whose key columns (with their order
    /// and collation) are the leading columns of another full index on the
    /// same table: every query it serves, the longer one serves too.
    mutating func redundantIndexes(_ schema: Schema) {
        func key(_ part: Index.Part) -> [UInt8]? {
            part.name.map { sqlNameKey($0) + [0] + sqlNameKey(part.collation) + [0, part.descending ? 1 : 0] }
        }
        let candidates = schema.indexes.filter { !$0.partial && !$0.hasExpressions && !$0.parts.isEmpty }
        for index in candidates where !index.unique && !index.isAutomatic {
            let mine = index.parts.compactMap(key)
            let covering = candidates.filter { other in
                guard other.name != index.name, sameSQLName(other.table, index.table),
                      other.parts.count >= mine.count else { return false }
                let theirs = other.parts.prefix(mine.count).compactMap(key)
                guard theirs == mine else { return false }
                // Two identical non-unique indexes: report only the later name.
                if other.parts.count == mine.count && !other.unique && !other.isAutomatic {
                    return Array(other.name.utf8).lexicographicallyPrecedes(Array(index.name.utf8))
                }
                return true
            }
            guard let other = covering.min(by: { $0.parts.count < $1.parts.count }) else { continue }
            let how = other.parts.count == mine.count ? "duplicates" : "is a leading part of"
            add(.warning, .redundantIndex, index.name,
                "index \(index.name) \(how) index \(other.name) on \(index.table): it costs space and write time and serves no query the other cannot",
                fix: "DROP INDEX \(quoteIdentifier(index.name));", identity: [how, other.name], table: index.table)
        }
    }

    /// Indexes without `sqlite_stat1`, or with row counts there far from the
    /// tables' real ones: the query planner works from wrong sizes.
    mutating func statistics(_ schema: Schema) throws {
        let indexedTables = Set(schema.indexes.map { sqlNameKey($0.table) })
        let userIndexed = schema.tables.filter { $0.kind == .ordinary && indexedTables.contains(sqlNameKey($0.name)) }
        guard !userIndexed.isEmpty else { return }
        guard schema.table(named: "sqlite_stat1") != nil else {
            // Indexes only on tables a format's specification defines: their
            // own small tables, whose plans statistics do not change.
            let specOnly = userIndexed.allSatisfy { specification.definer(of: $0.name) != nil }
            add(.warning, .statistics, nil,
                "the database has indexes but no sqlite_stat1: the query planner guesses table sizes",
                fix: "ANALYZE;", identity: ["no sqlite_stat1"], table: specOnly ? userIndexed[0].name : nil)
            return
        }
        var recorded: [[UInt8]: Int64] = [:]
        let statement = try connection.prepare("SELECT tbl, stat FROM main.sqlite_stat1")
        try statement.forEachRow { row in
            let count = Int64(row.string(at: 1).prefix { $0.isNumber }) ?? 0
            let table = sqlNameKey(row.string(at: 0))
            recorded[table] = max(recorded[table] ?? 0, count)
        }
        for table in userIndexed {
            let actual: Int64
            if case .integer(let n)? = try connection.scalar("SELECT count(*) FROM main.\(quoteIdentifier(table.name))") {
                actual = n
            } else { actual = 0 }
            guard let stat = recorded[sqlNameKey(table.name)] else {
                if actual > 0 {
                    add(.warning, .statistics, table.name,
                        "table \(table.name) has \(actual) rows and indexes but no sqlite_stat1 row",
                        fix: "ANALYZE \(quoteIdentifier(table.name));", identity: ["no sqlite_stat1 row"])
                }
                continue
            }
            let low = Double(min(stat, actual)), high = Double(max(stat, actual))
            // Small tables drift a lot in ratio without changing any plan.
            if high - low >= 100, high > low * options.maxStatisticsDrift {
                add(.warning, .statistics, table.name,
                    "sqlite_stat1 says table \(table.name) has \(stat) rows; it has \(actual)",
                    fix: "ANALYZE \(quoteIdentifier(table.name));", identity: ["row count drift"])
            }
        }
    }

    mutating func freelist() throws {
        guard case .integer(let pages)? = try connection.scalar("PRAGMA main.page_count"),
              case .integer(let free)? = try connection.scalar("PRAGMA main.freelist_count"), pages > 0 else { return }
        let percent = Double(free) * 100 / Double(pages)
        if percent > options.maxFreePercent {
            add(.warning, .freelist, nil,
                "\(free) of \(pages) pages (\(formatPercent(percent))) are free, above the \(formatPercent(options.maxFreePercent)) threshold",
                fix: "VACUUM;")
        }
    }

    mutating func expectations() throws {
        if let expected = options.expectUserVersion,
           case .integer(let actual)? = try connection.scalar("PRAGMA main.user_version"), actual != expected {
            add(.error, .expectation, nil, "user_version is \(actual), expected \(expected)",
                identity: ["user_version", String(actual), String(expected)])
        }
        if let expected = options.expectApplicationID,
           case .integer(let actual)? = try connection.scalar("PRAGMA main.application_id"), actual != expected {
            add(.error, .expectation, nil, "application_id is \(actual), expected \(expected)",
                identity: ["application_id", String(actual), String(expected)])
        }
        if let expected = options.expectJournalMode {
            let actual = try connection.journalMode()
            if sqlNameKey(actual) != sqlNameKey(expected) {
                add(.error, .expectation, nil, "journal_mode is \(actual), expected \(expected.lowercased())",
                    identity: ["journal_mode", actual.lowercased(), expected.lowercased()])
            }
        }
    }
}
