// `litectl transform`: changes a table's definition with SQLite's 12-step
// rebuild (https://www.sqlite.org/lang_altertable.html#otheralter) in one
// transaction (rolled back on any error, a full disk or a signal), with foreign keys off during the move, and proves the result
// before commit: every kept value compared row by row with the old table,
// foreign_key_check no worse than before, quick_check of the new table.
// Each change runs first on an empty copy of the schema (SchemaReplica), so a
// change that would break an index, view or trigger fails before the file is
// touched.

/// One change to a table's definition.
public enum TransformChange: Sendable, Equatable {
    case rename(column: String, to: String)
    case type(column: String, type: String)
    case drop(column: String)
    case setDefault(column: String, sql: String)
    case dropDefault(column: String)
    case notNull(column: String)
    case nullable(column: String)
    case collate(column: String, collation: String)
    case primaryKey(columns: [String])
    case addForeignKey(column: String, table: String, parentColumn: String?)
    case dropForeignKey(column: String)
    case columnOrder([String])
    case strict(Bool)
    case withoutRowid
}

public struct TransformRequest: Sendable {
    public var table: String
    public var changes: [TransformChange]
    /// Commit even when stored values change (type affinity, STRICT coercion).
    public var allowConversion = false
    /// Compare every kept column with the old rows, not only those whose
    /// affinity changes (the others SQLite copies as stored).
    public var compareAll = false
    public init(table: String, changes: [TransformChange]) {
        self.table = table
        self.changes = changes
    }
}

public enum TransformMode: Sendable {
    /// Run and commit.
    case execute
    /// Run every step and every check, then roll back.
    case dryRun
    /// Only work out the statements (on the empty schema copy).
    case sqlOnly
}

/// What happened to one column of the new table.
public struct TransformColumnOutcome: Sendable {
    public var name: String
    /// The column's name before a --rename.
    public var previousName: String
    /// The changes asked for, in words ("type TEXT → INTEGER").
    public var changes: [String]
    /// Rows whose stored value differs from the old one (type or bytes); nil
    /// when the column was not compared (the same affinity, so SQLite copied
    /// every value as stored, and no --compare-all) or could not be.
    public var changedValues: Int64?
    /// For changed values: (old storage class, new storage class, rows).
    public var transitions: [(from: String, to: String, rows: Int64)]
}

public struct TransformReport: Sendable {
    public var path: String
    public var table: String
    public var committed = false
    /// Rows copied into the new table.
    public var rows: Int64 = 0
    /// Rows of the new table matched to an old row for the comparison (by
    /// rowid when kept, else by the new primary key).
    public var pairedRows: Int64?
    /// How rows were matched: "rowid", "primary key" or nil (not compared).
    public var pairedBy: String?
    public var columns: [TransformColumnOutcome] = []
    public var droppedColumns: [String] = []
    public var foreignKeyViolationsBefore: Int64 = 0
    public var foreignKeyViolationsAfter: Int64 = 0
    public var quickCheck = "not run"
    public var notes: [String] = []
    /// The statements of the rebuild, as a script a person could run.
    public var statements: [String] = []

    /// Columns whose values changed.
    public var convertedColumns: [TransformColumnOutcome] { columns.filter { ($0.changedValues ?? 0) > 0 } }
}

/// The transform was possible but its result is not acceptable (values would
/// change without --allow-conversion, foreign keys would be orphaned, rows do
/// not fit a new constraint). Nothing was changed.
public struct TransformRefusal: Error, CustomStringConvertible {
    public var message: String
    public var report: TransformReport
    public var description: String { "\(report.path): \(message)" }
}

public enum TableTransformer {
    public static func run(path: String, request: TransformRequest, mode: TransformMode,
                           busyTimeout: Int = Connection.defaultBusyTimeout) throws -> TransformReport {
        let connection = try Connection(path: path, mode: mode == .sqlOnly ? .readOnly : .readWrite, busyTimeout: busyTimeout)
        if mode == .sqlOnly {
            return try connection.readTransaction {
                let plan = try TransformPlanner.plan(connection, request)
                var report = TransformReport(path: path, table: plan.table)
                report.statements = plan.script(try KeptRows.read(connection, table: plan.table, keepsAutoincrement: plan.keepsAutoincrement,
                                                                   indexes: plan.statisticsIndexes))
                report.notes = plan.notes
                return report
            }
        }
        // PRAGMA foreign_keys is a no-op inside a transaction: set it first.
        try connection.execute("PRAGMA foreign_keys=OFF")
        connection.useSorterThreads()  // the recreated indexes sort on every core
        // All or nothing under a signal or a full disk too (Files/InPlaceWrite.swift).
        return try InPlaceWrite.run(connection, target: path, consequence: "nothing was changed, \(DurableFolder.baseName(of: path)) is as it was") {
            try connection.writeTransaction(commit: mode == .execute) {
                var report = try execute(connection, request)
                report.committed = mode == .execute
                return report
            }
        }
    }

    static func execute(_ connection: Connection, _ request: TransformRequest) throws -> TransformReport {
        let plan = try TransformPlanner.plan(connection, request)
        let path = connection.path
        var report = TransformReport(path: path, table: plan.table)
        let kept = try KeptRows.read(connection, table: plan.table, keepsAutoincrement: plan.keepsAutoincrement,
                                     indexes: plan.statisticsIndexes)
        report.statements = plan.script(kept)
        report.droppedColumns = plan.droppedColumns
        report.notes = plan.notes
        func refuse(_ message: String) -> TransformRefusal { TransformRefusal(message: message, report: report) }
        func run(_ sql: String) throws {
            do { try connection.execute(sql) } catch var error as DatabaseError {
                error.path = path
                throw error
            }
        }

        let checked = plan.foreignKeyTables
        // The transformed table's keys may be renumbered (--add-fk, --drop-fk)
        // or renamed: its rows are told apart by rowid and parent.
        let violationsBefore = try ForeignKeyViolations.read(connection, tables: checked.before, ignoringKeyOf: [plan.table])
        report.foreignKeyViolationsBefore = Int64(violationsBefore.count)
        // Renames first: the columns below go by their new names.
        for sql in plan.renames { try run(sql) }
        if let key = plan.rowidsReplacedBy, !request.allowConversion {
            // The rowids are replaced by the key's values: rows whose rowid is
            // not their key lose it (anything that stored it, FTS content_rowid
            // say, no longer finds them).
            let moved = try connection.scalar("SELECT count(*) FROM \(quoteIdentifier(plan.table)) WHERE rowid IS NOT \(quoteIdentifier(key))")
            if case .integer(let n)? = moved, n > 0 {
                throw refuse("the new INTEGER PRIMARY KEY \(key) would replace the rowids: \(n) row\(n == 1 ? "" : "s") would get \(n == 1 ? "a new rowid" : "new rowids"); nothing was changed (--allow-conversion accepts it)")
            }
        }
        for column in plan.newNotNull {
            let nulls = try connection.scalar("SELECT count(*) FROM \(quoteIdentifier(plan.table)) WHERE \(quoteIdentifier(column)) IS NULL")
            if case .integer(let n) = nulls, n > 0 {
                throw refuse("cannot make \(plan.table).\(column) NOT NULL: \(n) row\(n == 1 ? "" : "s") hold NULL")
            }
        }

        try run(plan.create)
        do {
            try connection.execute(plan.copy)
        } catch let error as DatabaseError where error.code.primary == .constraint {
            throw refuse("the rows do not fit the new definition of \(plan.table): \(error.message)")
        }
        report.rows = connection.changes

        try compare(connection, plan, compareAll: request.compareAll, &report)
        if !request.allowConversion && (!report.convertedColumns.isEmpty
                                        || (report.pairedRows.map { $0 != report.rows } ?? false)) {
            let parts = report.convertedColumns.map { "\($0.name) (\($0.changedValues ?? 0))" }
            var message = "stored values would change"
            if !parts.isEmpty { message += " in " + parts.joined(separator: ", ") }
            if let paired = report.pairedRows, paired != report.rows {
                message += "; \(report.rows - paired) rows could not be matched by \(report.pairedBy ?? "key")"
            }
            throw refuse(message + "; nothing was changed (--allow-conversion accepts the conversions)")
        }

        try run(plan.drop)
        for sql in plan.swap { try run(sql) }
        for sql in plan.recreate {
            // Text the replica stored (one statement); checked again before it runs on the file.
            try SchemaStatement.require(sql, object: "an index or trigger of \(quoteIdentifier(plan.table))", path: path)
            do { try connection.execute(sql) } catch let error as DatabaseError where error.code.primary == .constraint {
                throw refuse("cannot recreate an index on \(plan.table): \(error.message)")
            }
        }
        for sql in kept.statements(table: plan.table) { try run(sql) }
        if !kept.statistics.isEmpty {
            report.notes.append("kept the \(kept.statistics.count) sqlite_stat1 row\(kept.statistics.count == 1 ? "" : "s") of \(plan.table) and its indexes (litectl analyze refreshes them)")
        }

        let violationsAfter: ForeignKeyViolations
        do {
            violationsAfter = try ForeignKeyViolations.read(connection, tables: checked.after, ignoringKeyOf: [plan.table])
        } catch let error as DatabaseError {
            throw refuse("foreign keys would no longer match \(plan.table): \(error.message)")
        }
        report.foreignKeyViolationsAfter = Int64(violationsAfter.count)
        // Which rows, not how many: fixing one orphan does not pay for another.
        let added = violationsAfter.added(since: violationsBefore)
        if !added.isEmpty {
            throw refuse("the change would orphan \(added.count) row\(added.count == 1 ? "" : "s") (foreign_key_check: \(ForeignKeyViolations.describe(added))); nothing was changed")
        }
        let problems = try connection.rows("PRAGMA quick_check(\(quoteIdentifier(plan.table)))")
        let lines = problems.compactMap { row -> String? in if case .text(let b) = row.first { return String(decoding: b, as: UTF8.self) } else { return nil } }
        report.quickCheck = lines.joined(separator: "; ")
        if lines != ["ok"] {
            throw DatabaseError(code: .corrupt, message: "quick_check of the new \(plan.table) failed: \(report.quickCheck)", path: path)
        }
        return report
    }

    /// Compares the kept columns of the new table whose values the copy may
    /// have converted (every kept column with `compareAll`) with the old
    /// rows, exactly (CopyComparison). Collations play no part.
    static func compare(_ connection: Connection, _ plan: TransformPlan, compareAll: Bool,
                        _ report: inout TransformReport) throws {
        let compared = plan.columns.filter { !$0.generated && ($0.mayConvert || compareAll) }.map(\.name)
        if plan.columns.contains(where: { !$0.generated && !$0.mayConvert }) && !compareAll {
            report.notes.append("columns that keep their type affinity were copied as stored and not compared (--compare-all compares them)")
        }
        guard !compared.isEmpty else {
            report.columns = plan.columns.map { TransformColumnOutcome(name: $0.name, previousName: $0.previousName,
                                                                       changes: $0.changes, changedValues: nil, transitions: []) }
            return
        }
        let comparison: CopyComparison
        switch plan.pairing {
        case .rowid(let name):
            comparison = try CopyComparison.byRowid(connection, old: plan.table, new: plan.newTable, rowid: name, columns: compared)
            report.pairedBy = "rowid"
        case .primaryKey(let key):
            comparison = try CopyComparison.byKey(connection, old: plan.table, new: plan.newTable, key: key, columns: compared)
            report.pairedBy = "primary key"
        case .none:
            report.columns = plan.columns.map { TransformColumnOutcome(name: $0.name, previousName: $0.previousName,
                                                                       changes: $0.changes, changedValues: nil, transitions: []) }
            report.notes.append("rows were not compared: the new table keeps neither the rowids nor a primary key")
            return
        }
        report.pairedRows = comparison.pairedRows
        let transitions = comparison.transitions
        for column in plan.columns {
            var outcome = TransformColumnOutcome(name: column.name, previousName: column.previousName, changes: column.changes,
                                                 changedValues: nil, transitions: [])
            if let i = compared.firstIndex(of: column.name) {
                outcome.changedValues = comparison.changed[i]
                outcome.transitions = transitions[i]
                    .map { (from: $0.key.from.sqlName, to: $0.key.to.sqlName, rows: $0.value) }
                    .sorted { $0.rows != $1.rows ? $0.rows > $1.rows : ($0.from, $0.to) < ($1.from, $1.to) }
            }
            report.columns.append(outcome)
        }
    }

    static func foreignKeyViolations(_ connection: Connection, _ tables: [String]) throws -> Int64 {
        var total: Int64 = 0
        for table in tables {
            if case .integer(let n) = try connection.scalar("SELECT count(*) FROM pragma_foreign_key_check(?1)", [.text(table)]) {
                total += n
            }
        }
        return total
    }

}
