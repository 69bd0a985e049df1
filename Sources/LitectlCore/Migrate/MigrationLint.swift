// `litectl migrate lint DB DIR`: runs the pending migrations on a private
// temporary copy of the database, confined as `migrate` runs them, looks at
// the schema after each statement and at each file's whole effect, and
// reports destructive or risky changes with the rows they touch, counted in
// the real data as it was before the file (MigrationLintRule lists the
// rules). The database is only read, once, by the backup API; the copy is a
// TemporaryFile with its journal in memory, so no file is left behind.
import CSQLite

public struct MigrationLintRequest: Sendable {
    public var database: String
    public var folder: String
    /// The version to lint up (or down) to; nil for the newest migration.
    public var target: Int64?
    public var busyTimeout = Connection.defaultBusyTimeout
    /// Seconds the copy waits for the database's locks.
    public var copyTimeout: Double = 60
    /// Where the copy goes; nil for $TMPDIR or /tmp.
    public var temporaryFolder: String?

    public init(database: String, folder: String) {
        self.database = database
        self.folder = folder
    }
}

public enum MigrationLinter {
    static let temporaryStem = "litectl-lint"

    /// Lints the steps from the database's version to the target (edited
    /// files already applied are not the lint's business: `migrate status`).
    /// A file that fails on the data is a finding (MF101-MF107); the files
    /// after it are not linted. Throws only when the lint cannot run.
    public static func lint(_ request: MigrationLintRequest) throws -> MigrationLintReport {
        let started = Clock.now()
        let migrations = try MigrationFolder.read(request.folder)
        let plan: MigrationPlan
        do {
            let connection = try Connection(path: request.database, mode: .readOnly, busyTimeout: request.busyTimeout)
            defer { try? connection.close() }
            plan = try connection.readTransaction {
                try MigrationPlan(migrations: migrations, current: try MigrationRunner.userVersion(connection),
                                  target: request.target, ledger: try MigrationLedger.read(connection), path: request.database)
            }
        }
        var report = MigrationLintReport(path: request.database, folder: request.folder, fromVersion: plan.currentVersion,
                                         toVersion: plan.currentVersion, files: [], notLinted: [], findings: [], seconds: 0)
        guard !plan.steps.isEmpty else {
            report.seconds = Clock.now() - started
            return report
        }

        let folder = request.temporaryFolder ?? TemporaryFiles.folder(nil)
        TemporaryFiles.removeStale(in: folder, stem: temporaryStem)
        let copy = try TemporaryFile(in: folder, stem: temporaryStem, permissions: 0o600)
        defer { copy.discard() }
        try ScratchCopy.make(of: request.database, into: copy, in: folder, timeout: request.copyTimeout, purpose: "lint's copy")
        let connection = try Connection(path: copy.path, mode: .readWrite, busyTimeout: request.busyTimeout)
        defer { try? connection.close() }
        // The journal in memory: the copy is thrown away, and no -journal
        // file can outlive a signal. Temporary tables are SQLite's own
        // unlinked files.
        _ = try connection.rows("PRAGMA journal_mode=MEMORY")
        try connection.execute("PRAGMA foreign_keys=OFF")
        let confinement = PatchConfinement(connection, policy: .migration)
        defer { confinement.end() }
        confinement.end()

        for (index, step) in plan.steps.enumerated() {
            try Interruption.check(path: request.database)
            var linter = FileLinter(connection: connection, confinement: confinement, step: step)
            let ok = try linter.run()
            report.files.append((step.file.name, step.version))
            report.findings += linter.findings
            guard ok else {
                report.notLinted = plan.steps[(index + 1)...].map(\.file.name)
                break
            }
            report.toVersion = step.toVersion
        }
        report.seconds = Clock.now() - started
        return report
    }
}

/// The lint of one migration file on the copy.
struct FileLinter {
    let connection: Connection
    let confinement: PatchConfinement
    let step: MigrationStep
    var findings: [MigrationLintFinding] = []

    /// Where a statement starts, for findings and for attributing a file-wide one.
    struct Place { var statement: Int; var line: Int }

    // What the statements did, in order.
    var tableDrops: [(name: String, original: String?, place: Place)] = []
    var tableRenames: [(from: String, to: String, original: String?, place: Place)] = []
    var columnDrops: [(original: String, column: String, place: Place)] = []
    var columnRenames: [(original: String, from: String, to: String, place: Place)] = []
    var objectDrops: [String: Place] = [:]   // "view:name", "trigger:name", "index:name", lower-cased
    /// The name each table had before the file, by its name now.
    var origin: [[UInt8]: String] = [:]

    init(connection: Connection, confinement: PatchConfinement, step: MigrationStep) {
        self.connection = connection
        self.confinement = confinement
        self.step = step
    }

    mutating func add(_ rule: MigrationLintRule, _ severity: Severity, _ place: Place?, object: String, count: Int64? = nil,
                      _ message: String) {
        findings.append(MigrationLintFinding(rule: rule, severity: severity, file: step.file.name, version: step.version,
                                             statement: place?.statement, line: place?.line, object: object, count: count,
                                             message: message))
    }

    func count(_ sql: String) throws -> Int64 { try Self.count(connection, sql) }

    static func count(_ connection: Connection, _ sql: String) throws -> Int64 {
        if case .integer(let n)? = try connection.scalar(sql) { return n }
        return 0
    }

    static func isUserTable(_ table: Table) -> Bool {
        table.kind == .ordinary && !sqlNameHasPrefix(table.name, "sqlite_") && !sameSQLName(table.name, MigrationLedger.tableName)
    }

    static func key(_ name: String) -> [UInt8] { sqlNameKey(name) }

    /// Runs the file; false when it fails on the data (the failure is a finding).
    mutating func run() throws -> Bool {
        let before = try connection.readSchema()
        let brokenTriggersBefore = try brokenTriggers(before)
        for table in before.tables where Self.isUserTable(table) { origin[Self.key(table.name)] = table.name }
        try connection.execute("BEGIN IMMEDIATE")
        defer { if sqlite3_get_autocommit(connection.rawHandle) == 0 { try? connection.execute("ROLLBACK") } }
        try connection.execute("SAVEPOINT litectl_lint_file")
        let violationsBefore = try? ForeignKeyViolations.read(connection)
        var current = before
        var failed = false
        do {
            confinement.reset()
            confinement.resume()
            defer { confinement.end() }
            try MigrationScript.forEachStatement(step.file, on: connection) { statement, number, line, fail in
                let place = Place(statement: number, line: line)
                let sql = statement.sql
                do {
                    while try statement.step() {}
                } catch let error as DatabaseError {
                    confinement.end()
                    let reason = confinement.reason(for: error.message)
                    try failure(reason.map { "not allowed in a migration: \($0)" } ?? error.message, sql: sql, place: place)
                    failed = true
                    throw fail(error.message)
                }
                let changes = connection.changes
                confinement.end()
                defer { confinement.resume() }
                let after = try connection.readSchema()
                try statementFindings(sql: sql, changes: changes, before: current, after: after, place: place)
                current = after
            }
        } catch let error as MigrationError {
            // A statement that does not prepare (a syntax error, a table
            // that does not exist, the confinement's refusal) or that ends
            // the transaction: the file fails as `migrate` would.
            if !failed {
                let message = confinement.reason(for: error.message).map { "not allowed in a migration: \($0)" } ?? error.message
                add(.statementFails, .error, error.statement.flatMap { s in error.line.map { Place(statement: s, line: $0) } }, object: step.file.name,
                    "fails: \(message)" + (error.sql.map { " (\($0))" } ?? ""))
            }
            return false
        }
        let after = try connection.readSchema()
        if let violationsBefore {
            do {
                foreignKeyViolations(try ForeignKeyViolations.read(connection).added(since: violationsBefore))
            } catch let error as DatabaseError {
                add(.statementFails, .error, nil, object: step.file.name,
                    "fails: foreign_key_check fails after the file: \(error.message)")
                return false
            }
        }
        try danglingFindings(before: before, after: after, brokenTriggersBefore: brokenTriggersBefore)
        // Counts are of the data as it was before the file: back to it,
        // count, and run the file again to go on to the next.
        let counts = fileFindings(before: before, after: after)
        try connection.execute("ROLLBACK TO litectl_lint_file")
        for count in counts { try count(&self) }
        try connection.execute("DROP TABLE IF EXISTS temp.litectl_lint_probe")
        confinement.reset()
        confinement.resume()
        defer { confinement.end() }
        do {
            try MigrationScript.run(step.file, on: connection)
        } catch {
            throw DatabaseError(code: .error, message: "\(step.file.name) ran once on the lint's copy but not a second time (\(error)); is it deterministic?",
                                path: step.file.path)
        }
        confinement.end()
        // In statement order; findings of the whole file last.
        findings = findings.enumerated().sorted { a, b in
            let (x, y) = (a.element.statement ?? .max, b.element.statement ?? .max)
            return x != y ? x < y : a.offset < b.offset
        }.map(\.element)
        try connection.execute("RELEASE litectl_lint_file")
        try connection.execute("PRAGMA user_version = \(step.toVersion)")
        try connection.execute("COMMIT")
        return true
    }

    // MARK: - Statement by statement

    /// The words of an `ALTER TABLE` statement: the table and what it does.
    enum Alter {
        case renameTable(String, to: String)
        case renameColumn(String, from: String, to: String)
        case dropColumn(String, column: String)
    }

    static func alter(_ tokens: [SQLToken]) -> Alter? {
        guard tokens.count > 4, tokens[0].isKeyword("ALTER"), tokens[1].isKeyword("TABLE") else { return nil }
        var i = 2
        if tokens.count > i + 2, tokens[i + 1].isPunctuation(".") { i += 2 }
        guard let table = tokens[i].identifierValue else { return nil }
        var rest = Array(tokens[(i + 1)...])
        if rest.first?.isKeyword("RENAME") == true {
            rest.removeFirst()
            if rest.first?.isKeyword("TO") == true, rest.count > 1, let name = rest[1].identifierValue {
                return .renameTable(table, to: name)
            }
            if rest.first?.isKeyword("COLUMN") == true { rest.removeFirst() }
            if rest.count > 2, rest[1].isKeyword("TO"), let from = rest[0].identifierValue, let to = rest[2].identifierValue {
                return .renameColumn(table, from: from, to: to)
            }
        } else if rest.first?.isKeyword("DROP") == true {
            rest.removeFirst()
            if rest.first?.isKeyword("COLUMN") == true { rest.removeFirst() }
            if let column = rest.first?.identifierValue { return .dropColumn(table, column: column) }
        }
        return nil
    }

    mutating func statementFindings(sql: String, changes: Int64, before: Schema, after: Schema, place: Place) throws {
        let tokens = tokenizeSQL(sql)
        let first = tokens.first?.keyword
        // DELETE or UPDATE with no WHERE anywhere in it: every row.
        if (first == "DELETE" || first == "UPDATE"), !tokens.contains(where: { $0.isKeyword("WHERE") }), changes > 0 {
            let table = targetTable(tokens, after: first == "DELETE" ? "FROM" : (first ?? "")) ?? "?"
            if first == "DELETE" {
                add(.deleteWithoutWhere, .warning, place, object: table, count: changes,
                    "DELETE without WHERE removes all \(changes) row\(changes == 1 ? "" : "s") of \(table)")
            } else {
                add(.updateWithoutWhere, .warning, place, object: table, count: changes,
                    "UPDATE without WHERE rewrites all \(changes) row\(changes == 1 ? "" : "s") of \(table)")
            }
        }
        if first == "PRAGMA" {
            var i = 1
            if tokens.count > 3, tokens[2].isPunctuation(".") { i = 3 }
            if tokens.count > i, tokens[i].isKeyword("FOREIGN_KEYS") {
                add(.pragmaWithoutEffect, .warning, place, object: "foreign_keys",
                    "PRAGMA foreign_keys has no effect inside the migration's transaction (litectl runs each file with foreign keys off and checks them with foreign_key_check before COMMIT)")
            }
        }
        let alter = Self.alter(tokens)
        for table in before.tables where Self.isUserTable(table) && after.table(named: table.name) == nil {
            let key = Self.key(table.name)
            let original = origin[key]
            origin[key] = nil
            if case .renameTable(let from, let to)? = alter, sameSQLName(from, table.name) {
                tableRenames.append((table.name, to, original, place))
                if let original { origin[Self.key(to)] = original }
            } else {
                tableDrops.append((table.name, original, place))
            }
        }
        switch alter {
        case .renameColumn(let table, let from, let to)?:
            if let original = origin[Self.key(table)] { columnRenames.append((original, from, to, place)) }
        case .dropColumn(let table, let column)?:
            if let original = origin[Self.key(table)] { columnDrops.append((original, column, place)) }
        default: break
        }
        for view in before.views where !after.views.contains(where: { sameSQLName($0.name, view.name) }) {
            objectDrops["view:" + view.name.lowercased()] = place
        }
        for trigger in before.triggers where !after.triggers.contains(where: { sameSQLName($0.name, trigger.name) }) {
            objectDrops["trigger:" + trigger.name.lowercased()] = place
        }
        for index in before.indexes where !after.indexes.contains(where: { sameSQLName($0.name, index.name) }) {
            objectDrops["index:" + index.name.lowercased()] = place
        }
    }

    /// The table after `word` (FROM of a DELETE, UPDATE [OR ...]).
    func targetTable(_ tokens: [SQLToken], after word: String) -> String? {
        guard var i = tokens.firstIndex(where: { $0.isKeyword(word) }) else { return nil }
        i += 1
        if word == "UPDATE", i + 1 < tokens.count, tokens[i].isKeyword("OR") { i += 2 }
        guard i < tokens.count else { return nil }
        if i + 2 < tokens.count, tokens[i + 1].isPunctuation(".") { i += 2 }
        return tokens[i].identifierValue
    }

    // MARK: - A statement that fails

    /// Names the failure and counts the rows behind it, where the rule can:
    /// a NOT NULL, UNIQUE or CHECK constraint the data violates.
    mutating func failure(_ message: String, sql: String, place: Place) throws {
        let tokens = tokenizeSQL(sql)
        let text = sql.split(whereSeparator: { $0 == "\n" || $0 == "\t" || $0 == "\r" }).joined(separator: " ")
        let shown = text.count > 80 ? String(text.prefix(79)) + "…" : text
        let conn = connection
        if message.hasPrefix("Cannot add a NOT NULL column with default value NULL"), let table = alterTable(tokens) {
            let rows = try count("SELECT count(*) FROM main.\(quoteIdentifier(table))")
            add(.notNullViolated, .error, place, object: table, count: rows,
                "fails on the data: a NOT NULL column without a DEFAULT is added to \(table), whose \(rows) row\(rows == 1 ? "" : "s") would hold NULL in it")
            return
        }
        if message.hasPrefix("NOT NULL constraint failed: ") {
            let target = String(message.dropFirst("NOT NULL constraint failed: ".count))
            let (table, column) = splitQualified(target)
            let rows = try probe(tokens, sql: sql, table: table) { source in
                try Self.count(conn, "SELECT count(*) FROM \(source) WHERE \(quoteIdentifier(column)) IS NULL")
            }
            add(.notNullViolated, .error, place, object: target, count: rows,
                "fails on the data: NOT NULL on \(target), where \(rows.map { "\($0) row\($0 == 1 ? "" : "s") of the data hold" } ?? "rows hold") NULL (\(shown))")
            return
        }
        if message.hasPrefix("UNIQUE constraint failed: ") {
            let target = String(message.dropFirst("UNIQUE constraint failed: ".count))
            let columns = target.split(separator: ",").map { splitQualified(String($0.drop { $0 == " " })) }
            guard let table = columns.first?.0, !target.hasPrefix("index '") else {
                add(.uniqueViolated, .error, place, object: target, "fails on the data: \(message) (\(shown))")
                return
            }
            let duplicates: (String) throws -> Int64 = { source in
                let names = columns.map { quoteIdentifier($0.1) }
                return try Self.count(conn, "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM \(source) WHERE "
                                 + names.map { "\($0) IS NOT NULL" }.joined(separator: " AND ")
                                 + " GROUP BY \(names.joined(separator: ", ")))")
            }
            var rows: Int64?
            if tokens.first?.isKeyword("CREATE") == true {
                rows = try duplicates("main.\(quoteIdentifier(table))")
            } else {
                rows = try probe(tokens, sql: sql, table: table, duplicates)
            }
            add(.uniqueViolated, .error, place, object: target, count: rows,
                "fails on the data: UNIQUE on \(target), where \(rows.map { "\($0) row\($0 == 1 ? "" : "s") repeat" } ?? "rows repeat") an earlier row's value (\(shown))")
            return
        }
        if message.hasPrefix("CHECK constraint failed") {
            var rows: Int64?
            var table = "?"
            if let altered = alterTable(tokens) {
                table = altered
                rows = try count("SELECT count(*) FROM main.\(quoteIdentifier(altered))")
            } else if let into = insertTarget(tokens) {
                table = into.name
                rows = try probe(tokens, sql: sql, table: into.name) { source in
                    let all = try Self.count(conn, "SELECT count(*) FROM \(source)")
                    try conn.execute("INSERT OR IGNORE INTO main.\(quoteIdentifier(into.name)) SELECT * FROM \(source)")
                    return all - conn.changes
                }
            }
            add(.checkViolated, .error, place, object: table, count: rows,
                "fails on the data: \(message) on \(table), which \(rows.map { "\($0) row\($0 == 1 ? "" : "s")" } ?? "rows") of the data violate (\(shown))")
            return
        }
        add(.statementFails, .error, place, object: step.file.name, "fails on the data: \(message) (\(shown))")
    }

    func splitQualified(_ qualified: String) -> (String, String) {
        guard let dot = qualified.lastIndex(of: ".") else { return (qualified, qualified) }
        return (String(qualified[..<dot]), String(qualified[qualified.index(after: dot)...]))
    }

    func alterTable(_ tokens: [SQLToken]) -> String? {
        guard tokens.count > 3, tokens[0].isKeyword("ALTER"), tokens[1].isKeyword("TABLE") else { return nil }
        if tokens[3].isPunctuation("."), tokens.count > 4 { return tokens[4].identifierValue }
        return tokens[2].identifierValue
    }

    /// The table an INSERT writes: its name and the tokens that spell it.
    func insertTarget(_ tokens: [SQLToken]) -> (name: String, first: Int, last: Int)? {
        guard let first = tokens.first, first.isKeyword("INSERT") || first.isKeyword("REPLACE"),
              let into = tokens.firstIndex(where: { $0.isKeyword("INTO") }), into + 1 < tokens.count else { return nil }
        var last = into + 1
        if last + 2 < tokens.count, tokens[last + 1].isPunctuation(".") { last += 2 }
        guard let name = tokens[last].identifierValue else { return nil }
        return (name, into + 1, last)
    }

    /// Runs the failed INSERT into a probe: a temporary table with the
    /// target's columns and no constraint, then `measure` on it. Nil when the
    /// statement is not an INSERT into `table`.
    func probe(_ tokens: [SQLToken], sql: String, table: String, _ measure: (String) throws -> Int64) throws -> Int64? {
        guard let target = insertTarget(tokens), sameSQLName(target.name, table) else { return nil }
        let bytes = Array(sql.utf8)
        let rewritten = String(decoding: bytes[..<tokens[target.first].start], as: UTF8.self) + "temp.litectl_lint_probe"
            + String(decoding: bytes[tokens[target.last].end...], as: UTF8.self)
        try connection.execute("DROP TABLE IF EXISTS temp.litectl_lint_probe")
        try connection.execute("CREATE TEMP TABLE litectl_lint_probe AS SELECT * FROM main.\(quoteIdentifier(table)) WHERE 0")
        defer { try? connection.execute("DROP TABLE IF EXISTS temp.litectl_lint_probe") }
        confinement.resume()
        do {
            defer { confinement.end() }
            let statement = try connection.prepare(rewritten)
            while try statement.step() {}
        } catch {
            return nil
        }
        return try measure("temp.litectl_lint_probe")
    }

    // MARK: - The file's whole effect

    mutating func foreignKeyViolations(_ added: [ForeignKeyViolations.Violation]) {
        var groups: [String: Int64] = [:]
        var order: [String] = []
        for violation in added {
            let key = String(decoding: violation.table, as: UTF8.self) + " → " + String(decoding: violation.parent, as: UTF8.self)
            if groups[key] == nil { order.append(key) }
            groups[key, default: 0] += 1
        }
        for key in order {
            let n = groups[key]!
            add(.foreignKeyViolated, .error, nil, object: key, count: n,
                "fails on the data: after the file, foreign_key_check finds \(n) row\(n == 1 ? "" : "s") of \(key) without a parent (migrate rolls the file back)")
        }
    }

    /// Triggers that do not compile, with SQLite's reason: renaming a new
    /// table makes SQLite test every view and trigger of the schema (legacy_alter_table off),
    /// and each one found is dropped (in a savepoint rolled back) to look for the next.
    func brokenTriggers(_ schema: Schema) throws -> [String: String] {
        var broken: [String: String] = [:]
        confinement.end()
        try connection.execute("SAVEPOINT litectl_lint_triggers")
        defer {
            try? connection.execute("ROLLBACK TO litectl_lint_triggers")
            try? connection.execute("RELEASE litectl_lint_triggers")
        }
        let legacy = try connection.scalar("PRAGMA legacy_alter_table")
        try connection.execute("PRAGMA legacy_alter_table=OFF")
        defer { if legacy == .integer(1) { try? connection.execute("PRAGMA legacy_alter_table=ON") } }
        try connection.execute("CREATE TABLE main.litectl_lint_rename_a(x)")
        for _ in 0..<(schema.triggers.count + schema.views.count + 1) {
            do {
                try connection.execute("ALTER TABLE main.litectl_lint_rename_a RENAME TO litectl_lint_rename_b")
                break
            } catch let error as DatabaseError {
                if let trigger = schema.triggers.first(where: { error.message.hasPrefix("error in trigger \($0.name)") }) {
                    broken[trigger.name.lowercased()] = error.message
                    try connection.execute("DROP TRIGGER main.\(quoteIdentifier(trigger.name))")
                } else if let view = schema.views.first(where: { error.message.hasPrefix("error in view \($0.name)") }) {
                    try connection.execute("DROP VIEW main.\(quoteIdentifier(view.name))")
                } else {
                    break
                }
            }
        }
        return broken
    }

    /// The event that most likely broke an object whose error is `message`: the
    /// last drop or rename of a name the message mentions.
    func culprit(_ message: String) -> Place? {
        var places: [(String, Place)] = tableDrops.map { ($0.name, $0.place) } + tableRenames.map { ($0.from, $0.place) }
        places += columnDrops.map { ($0.column, $0.place) } + columnRenames.map { ($0.from, $0.place) }
        let words = Set(message.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).map { $0.lowercased() })
        return places.last { words.contains($0.0.lowercased()) }?.1
    }

    mutating func danglingFindings(before: Schema, after: Schema, brokenTriggersBefore: [String: String]) throws {
        for view in after.views {
            guard let problem = view.problem else { continue }
            if before.views.contains(where: { sameSQLName($0.name, view.name) && $0.problem != nil }) { continue }
            add(.viewBroken, .error, culprit(problem), object: view.name,
                "view \(view.name) no longer compiles after the file: \(problem)")
        }
        let brokenAfter = try brokenTriggers(after)
        for trigger in after.triggers {
            guard let problem = brokenAfter[trigger.name.lowercased()], brokenTriggersBefore[trigger.name.lowercased()] == nil else { continue }
            add(.triggerBroken, .error, culprit(problem), object: trigger.name,
                "trigger \(trigger.name) on \(trigger.table) no longer compiles after the file: \(problem)")
        }
        func dangling(_ schema: Schema) -> [(table: String, key: String, why: String)] {
            var out: [(String, String, String)] = []
            for table in schema.tables where Self.isUserTable(table) {
                for fk in table.foreignKeys {
                    let key = "\(table.name.lowercased())(\(fk.columns.joined(separator: ",").lowercased())) → \(fk.parentTable.lowercased())"
                    guard let parent = schema.table(named: fk.parentTable) else {
                        out.append((table.name, key, "its parent table \(fk.parentTable) does not exist"))
                        continue
                    }
                    let missing = fk.parentColumns.compactMap { $0 }.filter { name in
                        !parent.columns.contains { sameSQLName($0.name, name) }
                    }
                    if !missing.isEmpty {
                        out.append((table.name, key, "its parent \(fk.parentTable) has no column \(missing.joined(separator: ", "))"))
                    }
                }
            }
            return out
        }
        let danglingBefore = Set(dangling(before).map(\.key))
        for item in dangling(after) where !danglingBefore.contains(item.key) {
            add(.foreignKeyDangling, .error, culprit(item.why), object: item.key,
                "the foreign key \(item.key) dangles after the file: \(item.why)")
        }
    }

    typealias Count = (inout FileLinter) throws -> Void

    /// Findings about the file's whole effect; those that count rows of the
    /// data before the file come back as closures to run once it is rolled back.
    mutating func fileFindings(before: Schema, after: Schema) -> [Count] {
        var counts: [Count] = []
        for table in before.tables where Self.isUserTable(table) {
            let name = table.name
            let drop = tableDrops.last { $0.original.map { sameSQLName($0, name) } ?? false }
            let final = after.table(named: name)
            let renamedTo = after.tables.first { table in
                origin[Self.key(table.name)].map { sameSQLName($0, name) } ?? false
            }?.name
            if let drop, let final, Self.isUserTable(final) {
                counts += rebuild(old: table, new: final, before: before, after: after, place: drop.place)
            } else if let drop, final == nil, renamedTo == nil {
                counts.append { linter in
                    let rows = try linter.count("SELECT count(*) FROM main.\(quoteIdentifier(name))")
                    linter.add(.tableDropped, rows > 0 ? .error : .warning, drop.place, object: name, count: rows,
                               "table \(name) is dropped, holding \(rows) row\(rows == 1 ? "" : "s")")
                }
            } else if drop == nil, let renamedTo, !sameSQLName(renamedTo, name) {
                let place = tableRenames.last { $0.original.map { sameSQLName($0, name) } ?? false }?.place
                add(.tableRenamed, .warning, place, object: name,
                    "table \(name) is renamed to \(renamedTo): applications and queries that use \(name) break")
            }
            if drop == nil, let current = final ?? renamedTo.flatMap({ after.table(named: $0) }) {
                for dropped in columnDrops where sameSQLName(dropped.original, name) {
                    guard table.columns.contains(where: { sameSQLName($0.name, dropped.column) }) else { continue }
                    let column = dropped.column
                    counts.append { linter in
                        let values = try linter.count("SELECT count(\(quoteIdentifier(column))) FROM main.\(quoteIdentifier(name))")
                        linter.add(.columnDropped, values > 0 ? .error : .warning, dropped.place, object: "\(current.name).\(column)",
                                   count: values, "column \(name).\(column) is dropped, holding \(values) non-NULL value\(values == 1 ? "" : "s")")
                    }
                }
                for renamed in columnRenames where sameSQLName(renamed.original, name) {
                    add(.columnRenamed, .warning, renamed.place, object: "\(name).\(renamed.from)",
                        "column \(name).\(renamed.from) is renamed to \(renamed.to): applications and queries that use \(renamed.from) break")
                }
                uniqueIndexes(old: table, new: current, before: before, after: after, place: nil)
            }
        }
        for view in before.views where !after.views.contains(where: { sameSQLName($0.name, view.name) }) {
            add(.viewDropped, .warning, objectDrops["view:" + view.name.lowercased()], object: view.name,
                "view \(view.name) is dropped and not re-created")
        }
        for trigger in before.triggers where !after.triggers.contains(where: { sameSQLName($0.name, trigger.name) }) {
            guard after.table(named: trigger.table) != nil else { continue }
            let place = objectDrops["trigger:" + trigger.name.lowercased()]
            let how = tableDrops.contains { $0.original.map { sameSQLName($0, trigger.table) } ?? false }
                ? "dropped with its table in the rebuild of \(trigger.table)" : "dropped"
            add(.triggerDropped, .warning, place, object: trigger.name,
                "trigger \(trigger.name) on \(trigger.table) is \(how) and not re-created")
        }
        return counts
    }

    /// A signature of a unique index: its columns, lower-cased (and where clause).
    static func uniqueKeys(_ schema: Schema, table: String) -> [String: Index] {
        var keys: [String: Index] = [:]
        for index in schema.indexes(on: table) where index.unique && index.origin != .primaryKey && !index.hasExpressions {
            keys[index.parts.map { ($0.name ?? "?").lowercased() }.joined(separator: ",") + (index.partial ? " partial" : "")] = index
        }
        return keys
    }

    mutating func uniqueIndexes(old: Table, new: Table, before: Schema, after: Schema, place: Place?,
                                renames: [String: String] = [:]) {
        let kept = Self.uniqueKeys(after, table: new.name)
        for (key, index) in Self.uniqueKeys(before, table: old.name).sorted(by: { $0.key < $1.key }) {
            let renamedKey = key.split(separator: ",").map { renames[String($0)] ?? String($0) }.joined(separator: ",")
            guard kept[key] == nil, kept[renamedKey] == nil else { continue }
            let columns = index.parts.map { $0.name ?? "?" }.joined(separator: ", ")
            let what = index.origin == .unique ? "the UNIQUE constraint" : "the unique index \(index.name)"
            add(.uniqueIndexDropped, .warning, place ?? objectDrops["index:" + index.name.lowercased()], object: index.name,
                "\(what) on \(old.name)(\(columns)) is dropped: duplicates are no longer refused")
        }
    }

    /// The body of a CREATE TABLE after its name, as comparable tokens.
    static func body(_ sql: String?) -> [String] {
        let tokens = tokenizeSQL(sql ?? "")
        guard let open = tokens.firstIndex(where: { $0.isPunctuation("(") }) else { return [] }
        return tokens[open...].map { token in
            switch token.kind {
            case .word: token.text.uppercased()
            case .quotedIdentifier: (token.identifierValue ?? token.text).uppercased()
            default: token.text
            }
        }
    }

    static func indexSignature(_ schema: Schema, table: String) -> [String] {
        schema.indexes(on: table).map { index in
            "\(index.unique) \(index.origin.rawValue) \(index.partial) "
                + index.parts.map { "\(($0.name ?? "expr").lowercased()) \($0.descending) \($0.collation.lowercased())" }.joined(separator: ",")
        }.sorted()
    }

    /// SQLite's type affinity of a declared type (https://www.sqlite.org/datatype3.html#determination_of_column_affinity).
    static func affinity(_ declared: String) -> String {
        let type = declared.uppercased()
        if type.contains("INT") { return "INTEGER" }
        if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") { return "TEXT" }
        if type.contains("BLOB") || type.isEmpty { return "BLOB" }
        if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") { return "REAL" }
        return "NUMERIC"
    }

    mutating func rebuild(old: Table, new: Table, before: Schema, after: Schema, place: Place) -> [Count] {
        var counts: [Count] = []
        let name = old.name
        if Self.body(old.sql) == Self.body(new.sql)
            && Self.indexSignature(before, table: name) == Self.indexSignature(after, table: new.name) {
            add(.rebuildUnchanged, .warning, place, object: name,
                "table \(name) is rebuilt (dropped and re-created) with the same definition and indexes: the rebuild changes nothing but costs a copy of every row")
            return []
        }
        var renames: [String: String] = [:]
        for renamed in columnRenames where sameSQLName(renamed.original, name) { renames[renamed.from.lowercased()] = renamed.to }
        for column in old.columns where column.hidden == .normal || column.isGenerated {
            let newName = renames[column.name.lowercased()] ?? column.name
            guard let replacement = new.columns.first(where: { sameSQLName($0.name, newName) }) else {
                guard !column.isGenerated else { continue }
                let columnName = column.name
                counts.append { linter in
                    let values = try linter.count("SELECT count(\(quoteIdentifier(columnName))) FROM main.\(quoteIdentifier(name))")
                    linter.add(.columnDropped, values > 0 ? .error : .warning, place, object: "\(name).\(columnName)", count: values,
                               "column \(name).\(columnName) is dropped in the rebuild of \(name), holding \(values) non-NULL value\(values == 1 ? "" : "s")")
                }
                continue
            }
            let (was, becomes) = (Self.affinity(column.declaredType), Self.affinity(replacement.declaredType))
            if was != becomes && !column.isGenerated {
                let columnName = column.name
                let shownOld = column.declaredType.isEmpty ? "no type" : column.declaredType
                let shownNew = replacement.declaredType.isEmpty ? "no type" : replacement.declaredType
                counts.append { linter in
                    try linter.connection.execute("DROP TABLE IF EXISTS temp.litectl_lint_probe")
                    try linter.connection.execute("CREATE TEMP TABLE litectl_lint_probe(o, v \(becomes))")
                    try linter.connection.execute("INSERT INTO temp.litectl_lint_probe SELECT \(quoteIdentifier(columnName)), \(quoteIdentifier(columnName)) FROM main.\(quoteIdentifier(name))")
                    // Changed: another storage class, or (same class) other bytes or another number.
                    let altered = try linter.count("""
                        SELECT count(*) FROM temp.litectl_lint_probe WHERE typeof(o) IS NOT typeof(v)
                          OR (typeof(o) IN ('text', 'blob') AND CAST(o AS BLOB) IS NOT CAST(v AS BLOB))
                          OR (typeof(o) IN ('integer', 'real') AND o IS NOT v)
                        """)
                    try linter.connection.execute("DROP TABLE temp.litectl_lint_probe")
                    if altered > 0 {
                        linter.add(.typeChangeAltersValues, .error, place, object: "\(name).\(columnName)", count: altered,
                                   "column \(name).\(columnName) changes type from \(shownOld) to \(shownNew) (affinity \(was) to \(becomes)), which alters \(altered) stored value\(altered == 1 ? "" : "s") (storage class or value)")
                    } else {
                        linter.add(.affinityChanged, .warning, place, object: "\(name).\(columnName)", count: 0,
                                   "column \(name).\(columnName) changes type from \(shownOld) to \(shownNew) (affinity \(was) to \(becomes)): no stored value changes, but new values will be stored differently")
                    }
                }
            }
            if column.notNull && !replacement.notNull && column.primaryKeyPosition == 0 {
                add(.notNullRemoved, .note, place, object: "\(name).\(column.name)",
                    "column \(name).\(column.name) loses NOT NULL in the rebuild of \(name)")
            }
        }
        let oldNames = Set(old.columns.map { (renames[$0.name.lowercased()] ?? $0.name).lowercased() })
        for column in new.columns where !oldNames.contains(column.name.lowercased()) && column.notNull && column.defaultSQL == nil
            && column.primaryKeyPosition == 0 && !column.isGenerated {
            add(.requiredColumnAdded, .warning, place, object: "\(name).\(column.name)",
                "column \(name).\(column.name) is added NOT NULL without a DEFAULT: INSERTs that leave it out now fail")
        }
        func fkKey(_ fk: ForeignKey) -> String {
            "\(fk.columns.map { (renames[$0.lowercased()] ?? $0).lowercased() }) \(fk.parentTable.lowercased()) \(fk.parentColumns.map { $0?.lowercased() ?? "" })"
        }
        let newKeys = Set(new.foreignKeys.map { "\($0.columns.map { $0.lowercased() }) \($0.parentTable.lowercased()) \($0.parentColumns.map { $0?.lowercased() ?? "" })" })
        for fk in old.foreignKeys where !newKeys.contains(fkKey(fk)) {
            add(.foreignKeyRemoved, .warning, place, object: "\(name)(\(fk.columns.joined(separator: ", ")))",
                "the foreign key \(name)(\(fk.columns.joined(separator: ", "))) → \(fk.parentTable) is removed in the rebuild of \(name): rows without a parent are no longer refused")
        }
        if old.autoincrement && !new.autoincrement {
            add(.autoincrementRemoved, .warning, place, object: name,
                "table \(name) loses AUTOINCREMENT in the rebuild: the rowids of deleted rows may be used again")
        }
        uniqueIndexes(old: old, new: new, before: before, after: after, place: place, renames: renames)
        return counts
    }
}
