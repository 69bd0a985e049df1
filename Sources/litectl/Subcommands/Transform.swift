// `litectl transform DB TABLE`: change a table's definition with SQLite's
// 12-step rebuild, with a row-by-row proof that no other value changed.
import ArgumentParser
import Foundation
import LitectlCore

struct Transform: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change a table's columns, keys or options by rebuilding it, proving no data is lost.",
        discussion: """
            Runs SQLite's 12-step table rebuild (https://www.sqlite.org/lang_altertable.html#otheralter) \
            in one BEGIN IMMEDIATE transaction with foreign keys off: renames first \
            (ALTER TABLE ... RENAME COLUMN, which also rewrites indexes, triggers and \
            views), then CREATE TABLE with the new definition, INSERT ... SELECT of every \
            row (rowids kept, unless a new INTEGER PRIMARY KEY gives them: when its values \
            are not the rowids, rows would get new rowids, which is refused unless \
            --allow-conversion), DROP TABLE, \
            ALTER TABLE ... RENAME, and the table's indexes and triggers created again; \
            views are kept and must still compile. Every other part of the CREATE \
            TABLE statement (CHECK constraints, other columns, comments inside them) is \
            kept as written. sqlite_sequence keeps its value when AUTOINCREMENT stays; \
            the sqlite_stat1 rows of the table and of its indexes are put back (those of \
            an automatic index only when it keeps its name and key columns).

            Each change is first run on an empty in-memory copy of the schema, so a \
            change that an index, view or trigger cannot survive fails before the file is \
            touched. Before commit, every value of a column whose type affinity changes \
            (or of every column, when the table becomes STRICT, or with --compare-all) is \
            compared with the old row (matched by rowid, or by the new primary key): same \
            storage class and the same bytes, integer or REAL bits. (A column that keeps \
            its affinity is copied as stored: SQLite converts nothing.) A change of \
            stored values (type affinity or STRICT coercion) is reported per column and \
            refused unless --allow-conversion. foreign_key_check of the table and of the tables that \
            refer to it must find no row that it did not find before (rows told apart by \
            table, rowid and parent: fixing one orphan does not pay for another), and \
            quick_check of the new table must pass; otherwise nothing is changed. So \
            with a full disk ("disk full") and SIGINT, SIGTERM or SIGHUP ("interrupted by \
            SIGTERM", exit status 2): the transaction is rolled back before litectl exits \
            (after SIGKILL the journal stays, as SQLite leaves it for any killed writer, \
            and the next write of DB rolls it back).

            A column may be named by its old or its new (--rename) name. --type takes a \
            type name (INTEGER, VARCHAR(20)). --default takes SQL as written after \
            DEFAULT: a literal (0, -1.5, 'text', x'00', NULL, TRUE, CURRENT_TIMESTAMP) or \
            an expression in parentheses. --add-fk COL=TABLE.COL (or COL=TABLE for its \
            primary key). \
            --column-order lists the columns that come first; the others follow in \
            their order.

            Output: nothing on success unless -v or stdout is a terminal, which print \
            the report (rows, per column what changed and how many values changed, the \
            checks); --json prints it as one JSON object; --sql prints the statements and \
            changes nothing (the file is opened read-only); --dry-run does everything \
            and rolls back.

            Exit status: 0 done (or would be, with --dry-run); 1 refused: values would \
            change without --allow-conversion, foreign keys would be orphaned, or rows do \
            not fit the new definition (NOT NULL, UNIQUE, CHECK) — nothing changed, the \
            report says why; 2 error (no such table or column, a definition SQLite \
            rejects, an index, view or trigger the change would break, a locked file).
            """)

    @Argument(help: ArgumentHelp("The database file.", valueName: "db"))
    var database: String

    @Argument(help: ArgumentHelp("The table to change.", valueName: "table"))
    var table: String

    @Option(name: .customLong("type"), help: ArgumentHelp("Change a column's declared type (repeatable).", valueName: "col=type"))
    var types: [String] = []

    @Option(name: .customLong("rename"), help: ArgumentHelp("Rename a column (repeatable).", valueName: "col=new"))
    var renames: [String] = []

    @Option(name: .customLong("drop"), help: ArgumentHelp("Drop a column (repeatable).", valueName: "col"))
    var drops: [String] = []

    @Option(name: .customLong("default"), help: ArgumentHelp("Set a column's DEFAULT, as SQL (repeatable).", valueName: "col=value"))
    var defaults: [String] = []

    @Option(name: .customLong("drop-default"), help: ArgumentHelp("Remove a column's DEFAULT (repeatable).", valueName: "col"))
    var dropDefaults: [String] = []

    @Option(name: .customLong("not-null"), help: ArgumentHelp("Make a column NOT NULL (repeatable).", valueName: "col"))
    var notNull: [String] = []

    @Option(name: .customLong("null"), help: ArgumentHelp("Let a column hold NULL (repeatable).", valueName: "col"))
    var nullable: [String] = []

    @Option(name: .customLong("collate"), help: ArgumentHelp("Set a column's collation (repeatable).", valueName: "col=name"))
    var collations: [String] = []

    @Option(name: .customLong("pk"), help: ArgumentHelp("Make these columns the PRIMARY KEY.", valueName: "col[,col]"))
    var primaryKey: String?

    @Option(name: .customLong("add-fk"), help: ArgumentHelp("Add a foreign key (repeatable).", valueName: "col=table.col"))
    var addForeignKeys: [String] = []

    @Option(name: .customLong("drop-fk"), help: ArgumentHelp("Drop the foreign keys of a column (repeatable).", valueName: "col"))
    var dropForeignKeys: [String] = []

    @Option(name: .customLong("column-order"), help: ArgumentHelp("Put these columns first, in this order.", valueName: "a,b,..."))
    var columnOrder: String?

    @Flag(name: .customLong("strict"), inversion: .prefixedNo, help: "Make the table STRICT, or not.")
    var strict: Bool?

    @Flag(name: .customLong("without-rowid"), help: "Make the table a WITHOUT ROWID table.")
    var withoutRowid = false

    @Flag(name: .customLong("allow-conversion"), help: "Commit even when stored values change (type affinity, STRICT).")
    var allowConversion = false

    @Flag(name: .customLong("compare-all"), help: "Compare every kept column with the old rows, not only those whose affinity changes.")
    var compareAll = false

    @Flag(name: .customLong("sql"), help: "Print the statements of the rebuild; change nothing.")
    var sqlOnly = false

    @Flag(name: .customLong("dry-run"), help: "Run the rebuild and its checks, print the report, roll back.")
    var dryRun = false

    @OptionGroup var voice: VoiceOptions
    var json: Bool { voice.json }
    var verbose: Bool { voice.verbose }

    @OptionGroup var options: DatabaseOptions

    func validate() throws {
        if sqlOnly && dryRun { throw ValidationError("Give --sql or --dry-run, not both.") }
        if sqlOnly && json { throw ValidationError("--sql prints SQL; it does not go with --json.") }
        _ = try changes()
    }

    /// The changes in the order the rebuild applies them.
    func changes() throws -> [TransformChange] {
        func pair(_ text: String, _ option: String) throws -> (String, String) {
            guard let eq = text.firstIndex(of: "="), eq != text.startIndex, text.index(after: eq) != text.endIndex else {
                throw ValidationError("--\(option) takes COL=VALUE, not '\(text)'.")
            }
            return (String(text[..<eq]), String(text[text.index(after: eq)...]))
        }
        func list(_ text: String, _ option: String) throws -> [String] {
            let names = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard !names.contains(where: \.isEmpty) else { throw ValidationError("--\(option) takes names separated by commas.") }
            return names
        }
        var result: [TransformChange] = []
        result += try renames.map { let (a, b) = try pair($0, "rename"); return .rename(column: a, to: b) }
        result += drops.map { .drop(column: $0) }
        result += try types.map { let (a, b) = try pair($0, "type"); return .type(column: a, type: b) }
        result += try defaults.map { let (a, b) = try pair($0, "default"); return .setDefault(column: a, sql: b) }
        result += dropDefaults.map { .dropDefault(column: $0) }
        result += notNull.map { .notNull(column: $0) }
        result += nullable.map { .nullable(column: $0) }
        result += try collations.map { let (a, b) = try pair($0, "collate"); return .collate(column: a, collation: b) }
        result += dropForeignKeys.map { .dropForeignKey(column: $0) }
        result += try addForeignKeys.map {
            let (column, target) = try pair($0, "add-fk")
            if let dot = target.lastIndex(of: "."), dot != target.startIndex, target.index(after: dot) != target.endIndex {
                return .addForeignKey(column: column, table: String(target[..<dot]), parentColumn: String(target[target.index(after: dot)...]))
            }
            return .addForeignKey(column: column, table: target, parentColumn: nil)
        }
        if let primaryKey { result.append(.primaryKey(columns: try list(primaryKey, "pk"))) }
        if let columnOrder { result.append(.columnOrder(try list(columnOrder, "column-order"))) }
        if let strict { result.append(.strict(strict)) }
        if withoutRowid { result.append(.withoutRowid) }
        if result.isEmpty { throw ValidationError("Give at least one change (--type, --rename, --drop, ...).") }
        return result
    }

    func run() throws {
        try refuseMoments([database], as: "transformed")
        noteHotJournals(voice)
        Interruption.install(naming: database)
        var request = TransformRequest(table: table, changes: try changes())
        request.allowConversion = allowConversion
        request.compareAll = compareAll
        let mode: TransformMode = sqlOnly ? .sqlOnly : dryRun ? .dryRun : .execute
        let report: TransformReport
        do {
            report = try TableTransformer.run(path: database, request: request, mode: mode, busyTimeout: options.busyTimeout)
        } catch let refusal as TransformRefusal {
            if json { printExact(Self.json(refusal.report, refused: refusal.message).compact) }
            else if voice.talks { printBlock(Self.text(refusal.report)) }
            printError(refusal.description)
            throw ExitStatus.findings
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        if sqlOnly {
            printExact(report.statements.joined(separator: "\n"))
        } else if json {
            printExact(Self.json(report, refused: nil).compact)
        } else if !voice.quiet && (verbose || dryRun || isatty(STDOUT_FILENO) == 1) {
            printBlock(Self.text(report))
        }
    }

    static func text(_ report: TransformReport) -> String {
        var lines: [String] = []
        let state = report.committed ? "transformed" : "not changed"
        lines.append("\(visible(report.path)): \(visible(report.table)): \(state); \(report.rows) rows copied")
        for column in report.columns {
            var line = "  \(visible(column.name))"
            if !column.changes.isEmpty { line += " (" + column.changes.joined(separator: ", ") + ")" }
            switch column.changedValues {
            case nil: line += ": not compared"
            case 0?: line += ": every value unchanged"
            case let n?:
                let detail = column.transitions.map { "\($0.from)→\($0.to) \($0.rows)" }.joined(separator: ", ")
                line += ": \(n) values changed (\(detail))"
            }
            lines.append(line)
        }
        for dropped in report.droppedColumns { lines.append("  \(visible(dropped)): dropped") }
        if let paired = report.pairedRows, let by = report.pairedBy {
            lines.append("  rows matched by \(by): \(paired) of \(report.rows)")
        }
        lines.append("  foreign_key_check: \(report.foreignKeyViolationsBefore) problems before, \(report.foreignKeyViolationsAfter) after")
        lines.append("  quick_check: \(report.quickCheck)")
        for note in report.notes { lines.append("  note: \(note)") }
        return lines.joined(separator: "\n")
    }

    static func json(_ report: TransformReport, refused: String?) -> JSON {
        .object([
            ("path", .string(report.path)),
            ("table", .string(report.table)),
            ("committed", .bool(report.committed)),
            ("refused", .optional(refused, JSON.string)),
            ("rows", .integer(report.rows)),
            ("paired_rows", .optional(report.pairedRows, JSON.integer)),
            ("paired_by", .optional(report.pairedBy, JSON.string)),
            ("columns", .array(report.columns.map { column in
                .object([
                    ("name", .string(column.name)),
                    ("previous_name", .string(column.previousName)),
                    ("changes", .array(column.changes.map(JSON.string))),
                    ("changed_values", .optional(column.changedValues, JSON.integer)),
                    ("transitions", .array(column.transitions.map {
                        .object([("from", .string($0.from)), ("to", .string($0.to)), ("rows", .integer($0.rows))])
                    })),
                ])
            })),
            ("dropped_columns", .array(report.droppedColumns.map(JSON.string))),
            ("foreign_key_problems", .object([("before", .integer(report.foreignKeyViolationsBefore)),
                                              ("after", .integer(report.foreignKeyViolationsAfter))])),
            ("quick_check", .string(report.quickCheck)),
            ("notes", .array(report.notes.map(JSON.string))),
            ("statements", .array(report.statements.map(JSON.string))),
        ])
    }
}
