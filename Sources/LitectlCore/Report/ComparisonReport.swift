// `litectl report A B`: one HTML page on what changed between two databases —
// the schema differences, per table the rows inserted, updated and deleted as
// bars, and the first changed rows of each table side by side with the changed
// cells marked. Built on Diff/: the diff engine does the comparing, exactly as
// `litectl diff` does; a consumer here keeps the counts and a sample of rows.

public enum ComparisonReport {
    /// The comparison of the databases at `pathA` and `pathB`, both read-only,
    /// each in one read transaction (the diff engine's). Throws what `diff`
    /// would fail with (a missing file, a non-database, a table it cannot read).
    public static func make(pathA: String, pathB: String, options: ReportOptions = ReportOptions()) throws -> ReportOutcome {
        let sides = [try SideFacts.read(pathA, busyTimeout: options.busyTimeout),
                     try SideFacts.read(pathB, busyTimeout: options.busyTimeout)]
        let collector = ComparisonCollector(rowsPerTable: options.rowsPerTable)
        let summary = try DiffEngine.run(pathA: pathA, pathB: pathB, options: options.diff, consumer: collector,
                                         busyTimeout: options.busyTimeout)
        var page = ComparisonReportPage(sides: sides, summary: summary, collector: collector, options: options)
        return ReportOutcome(html: page.render(), findings: !summary.identical)
    }
}

/// The header facts of one side of a comparison.
struct SideFacts {
    var path: String
    var fileSize: Int64?
    var pageSize: Int64 = 0
    var pageCount: Int64 = 0
    var encoding = ""
    var journalMode = ""
    var userVersion: Int64 = 0

    static func read(_ path: String, busyTimeout: Int) throws -> SideFacts {
        var facts = SideFacts(path: path, fileSize: FileCheck.size(of: path))
        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        try connection.readTransaction {
            facts.pageSize = try connection.scalar("PRAGMA main.page_size")?.integerValue ?? 0
            facts.pageCount = try connection.scalar("PRAGMA main.page_count")?.integerValue ?? 0
            facts.userVersion = try connection.scalar("PRAGMA main.user_version")?.integerValue ?? 0
            facts.journalMode = try connection.journalMode()
            if case .text(let bytes)? = try connection.scalar("PRAGMA main.encoding") {
                facts.encoding = String(decoding: bytes, as: UTF8.self)
            }
        }
        return facts
    }
}

/// A `DiffConsumer` that keeps each table's counts and its first changed
/// rows, formatted as `diff` prints values, within fixed bounds of memory.
final class ComparisonCollector: DiffConsumer {
    enum Operation: String { case insert, delete, update }

    /// One changed row: the values of the columns kept (nil for the others).
    struct SampleRow {
        var operation: Operation
        var old: [ShownValue?]?
        var new: [ShownValue?]?
        var changed: [Int]
    }

    struct TableChanges {
        var plan: TablePlan
        var counts = ChangeCounts()
        var rows: [SampleRow] = []
        /// The columns kept for every row (keys first, then the first others).
        var baseColumns: [Int]
    }

    let rowsPerTable: Int
    /// Rows kept across all tables, and cells, at most (memory stays flat on a huge diff).
    static let maxRows = 5_000
    static let maxCells = 200_000
    /// Columns kept for every row of a table; changed ones are kept besides.
    static let baseColumnLimit = 30

    var comparison: SchemaComparison?
    /// By name's bytes (ASCII case folded, as SQLite matches names): two
    /// names Swift would call equal (é and e + U+0301) are two tables.
    var tables: [[UInt8]: TableChanges] = [:]
    private var current: TableChanges?
    private var keptRows = 0
    private var keptCells = 0

    init(rowsPerTable: Int) { self.rowsPerTable = rowsPerTable }

    var rebuildsChangedTables: Bool { false }
    var wantsRowidsForKeylessTables: Bool { false }

    func begin(_ diff: SchemaComparison) throws { comparison = diff }

    func beginTable(_ plan: TablePlan) throws {
        let keys = plan.mode == .multiset ? [] : plan.keyIndexes
        let others = plan.columns.indices.filter { !keys.contains($0) }
        current = TableChanges(plan: plan, baseColumns: keys + others.prefix(max(0, Self.baseColumnLimit - keys.count)))
    }

    private func keep() -> Bool {
        guard let current, current.rows.count < rowsPerTable, keptRows < Self.maxRows, keptCells < Self.maxCells else { return false }
        return true
    }

    private func shown(_ row: DiffRow, _ columns: [Int], width: Int) -> [ShownValue?] {
        var values = [ShownValue?](repeating: nil, count: width)
        for i in columns where i < row.count { values[i] = ReportValues.diffForm(row.cell(at: i)) }
        keptCells += columns.count
        return values
    }

    func inserted(_ plan: TablePlan, new: DiffRow) throws {
        guard keep() else { return }
        let values = shown(new, current!.baseColumns.filter { plan.inB($0) }, width: plan.columns.count)
        current!.rows.append(SampleRow(operation: .insert, old: nil, new: values, changed: []))
        keptRows += 1
    }

    func deleted(_ plan: TablePlan, old: DiffRow) throws {
        guard keep() else { return }
        let values = shown(old, current!.baseColumns.filter { plan.inA($0) }, width: plan.columns.count)
        current!.rows.append(SampleRow(operation: .delete, old: values, new: nil, changed: []))
        keptRows += 1
    }

    func updated(_ plan: TablePlan, old: DiffRow, new: DiffRow, changed: [Int]) throws {
        guard keep() else { return }
        var columns = current!.baseColumns
        for i in changed where !columns.contains(i) { columns.append(i) }
        // Across a change of columns, a dropped column has no new value.
        current!.rows.append(SampleRow(operation: .update, old: shown(old, columns, width: plan.columns.count),
                                       new: shown(new, columns.filter { plan.inB($0) }, width: plan.columns.count),
                                       changed: changed))
        keptRows += 1
    }

    func endTable(_ plan: TablePlan, counts: ChangeCounts) throws {
        guard var table = current else { return }
        current = nil
        table.counts = counts
        if counts.total > 0 { tables[sqlNameKey(plan.name)] = table }
    }

    func finish(_ summary: DiffSummary) throws {}
}

/// The comparison page.
struct ComparisonReportPage {
    let sides: [SideFacts]
    let summary: DiffSummary
    let collector: ComparisonCollector
    let options: ReportOptions
    var html = HTMLText()

    static let schemaBudget = 500_000
    static let barsBudget = 1_500_000
    static let rowsBudget = 2_200_000
    /// Columns shown per table at most (keys, the first others, the changed ones).
    static let columnLimit = 40
    /// A stored CREATE statement is shown up to this many characters.
    static let sqlLimit = 4_000

    init(sides: [SideFacts], summary: DiffSummary, collector: ComparisonCollector, options: ReportOptions) {
        self.sides = sides
        self.summary = summary
        self.collector = collector
        self.options = options
    }

    var changedTables: [(name: String, counts: ChangeCounts)] { summary.tables.filter { $0.counts.total > 0 } }

    mutating func render() -> [UInt8] {
        let a = DurableFolder.baseName(of: sides[0].path), b = DurableFolder.baseName(of: sides[1].path)
        ReportPage.begin(&html, title: "litectl report: \(a) → \(b)")
        header(a, b)
        schema()
        counts()
        rows()
        ReportPage.end(&html, generator: "Made by \(options.generator) with SQLite \(Connection.sqliteVersion) on \(reportTimestamp(options.generatedAt)).")
        return html.bytes
    }

    mutating func header(_ a: String, _ b: String) {
        html.markup("<header><h1>")
        html.text(a)
        html.markup(" → ")
        html.text(b)
        html.markup("</h1><div class=\"muted\">Comparison report, \(reportTimestamp(options.generatedAt)): what it takes to go from A to B, as <code>litectl diff</code> finds it</div>\n")
        html.markup("<table><thead><tr><th></th><th>A</th><th>B</th></tr></thead><tbody>\n")
        func row(_ label: String, _ value: (SideFacts) -> String) {
            html.markup("<tr><th>")
            html.text(label)
            html.markup("</th>")
            for side in sides {
                html.markup("<td class=\"name\">")
                html.text(value(side), limit: 1_000)
                html.markup("</td>")
            }
            html.markup("</tr>\n")
        }
        row("file") { $0.path }
        row("size") { $0.fileSize.map { "\(humanBytes($0)) (\($0) bytes)" } ?? "unknown" }
        row("pages") { "\($0.pageCount) of \($0.pageSize) bytes" }
        row("encoding") { $0.encoding }
        row("journal mode") { $0.journalMode }
        row("user_version") { "\($0.userVersion)" }
        html.markup("</tbody></table>\n")
        let changed = changedTables
        let inserted = changed.reduce(0) { $0 + $1.counts.inserted }
        let updated = changed.reduce(0) { $0 + $1.counts.updated }
        let deleted = changed.reduce(0) { $0 + $1.counts.deleted }
        html.markup("<p>")
        if summary.identical {
            html.markup("<span class=\"verdict ok\">Identical</span> same schema, same rows, value for value")
        } else {
            html.markup("<span class=\"verdict warning\">Different</span> ")
            html.text("\(summary.schemaChanges.count) schema change\(summary.schemaChanges.count == 1 ? "" : "s"); "
                      + "\(changed.count) table\(changed.count == 1 ? "" : "s") with changed rows: "
                      + "\(inserted) inserted, \(updated) updated, \(deleted) deleted")
        }
        html.markup("</p>\n<nav class=\"muted\"><a href=\"#schema\">Schema</a> · <a href=\"#tables\">Rows per table</a> · <a href=\"#rows\">Changed rows</a></nav></header>\n")
    }

    mutating func schema() {
        html.markup("<section id=\"schema\"><h2>Schema</h2>\n")
        guard !summary.schemaChanges.isEmpty else {
            html.markup("<p>No schema differences: the same tables, indexes, views and triggers, the same user_version and application_id.</p></section>\n")
            return
        }
        html.markup("<table><thead><tr><th></th><th>object</th><th>name</th><th>what changed</th></tr></thead><tbody>\n")
        let start = html.count
        var left = 0
        for change in summary.schemaChanges {
            if html.count - start > Self.schemaBudget { left += 1; continue }
            let sign: String
            switch change.operation {
            case .added: sign = "<span class=\"sev added\">added</span>"
            case .dropped: sign = "<span class=\"sev error\">dropped</span>"
            case .changed: sign = "<span class=\"sev warning\">changed</span>"
            }
            html.markup("<tr><td>\(sign)</td><td>\(change.objectType)</td>")
            html.nameCell(change.name)
            html.markup("<td>")
            if !change.details.isEmpty {
                html.text(change.details.joined(separator: "; "), limit: 2_000)
            }
            for (label, sql) in [("A", change.oldSQL), ("B", change.newSQL)] {
                guard let sql else { continue }
                html.markup("<pre class=\"sql\"><span class=\"muted\">\(label): </span>")
                html.text(sql, limit: Self.sqlLimit, lineBreaks: true)
                html.markup("</pre>")
            }
            html.markup("</td></tr>\n")
        }
        if left > 0 { html.markup("<tr><td colspan=\"4\" class=\"more\">… \(left) more schema changes: <code>litectl diff --schema-only</code> lists them all</td></tr>\n") }
        html.markup("</tbody></table></section>\n")
    }

    mutating func counts() {
        html.markup("<section id=\"tables\"><h2>Rows per table</h2>\n")
        let changed = changedTables
        guard !changed.isEmpty else {
            html.markup("<p>No table has changed rows.</p></section>\n")
            return
        }
        let largest = Double(max(1, changed.map { $0.counts.total }.max() ?? 1))
        html.markup("<div class=\"legend\"><span><span class=\"swatch ins\"></span> inserted</span><span><span class=\"swatch upd\"></span> updated</span><span><span class=\"swatch del\"></span> deleted</span></div>\n")
        html.markup("<table class=\"bars sortable\" id=\"tables-table\"><thead><tr><th>table</th><th class=\"n\">inserted</th><th class=\"n\">updated</th><th class=\"n\">deleted</th><th>rows changed</th><th>note</th></tr></thead><tbody>\n")
        let start = html.count
        var left = 0
        for table in changed {
            if html.count - start > Self.barsBudget { left += 1; continue }
            let c = table.counts
            html.markup("<tr>")
            html.nameCell(table.name)
            html.numberCell("\(c.inserted)")
            html.numberCell("\(c.updated)")
            html.numberCell("\(c.deleted)")
            html.markup("<td class=\"bar\" data-v=\"\(c.total)\">")
            for (n, cls) in [(c.inserted, "ins"), (c.updated, "upd"), (c.deleted, "del")] where n > 0 {
                html.markup("<span class=\"\(cls)\" style=\"width:\(Figures.decimal(Double(n) * 100 / largest, places: 3))%\"></span>")
            }
            html.markup("</td><td class=\"muted\">")
            html.text(note(table.name))
            html.markup("</td></tr>\n")
        }
        if left > 0 { html.markup("<tr class=\"fixed\"><td colspan=\"6\" class=\"more\">… \(left) more tables: <code>litectl diff --summary</code> lists them all</td></tr>\n") }
        html.markup("</tbody></table></section>\n")
    }

    func note(_ table: String) -> String {
        if let comparison = collector.comparison {
            let key = sqlNameKey(table)
            if comparison.addedTables.contains(where: { sqlNameKey($0.name) == key }) { return "new table" }
            if comparison.droppedTables.contains(where: { sqlNameKey($0.name) == key }) { return "table dropped" }
            if comparison.changedTables.contains(where: { sqlNameKey($0.b.name) == key }) { return "definition changed: compared on every column (an added one against its DEFAULT)" }
        }
        if let plan = collector.tables[sqlNameKey(table)]?.plan {
            if plan.mode == .multiset { return "no primary key: compared as a multiset of rows" }
            if plan.mode == .rowid { return "matched by rowid" }
        }
        return ""
    }

    mutating func rows() {
        html.markup("<section id=\"rows\"><h2>Changed rows</h2>\n")
        let changed = changedTables.filter { collector.tables[sqlNameKey($0.name)].map { !$0.rows.isEmpty } ?? false }
        guard !changed.isEmpty else {
            html.markup("<p>No changed rows to show.</p></section>\n")
            return
        }
        html.markup("<p class=\"muted\">Up to \(options.rowsPerTable) rows per table, values as <code>litectl diff</code> prints them; A is the old row, B the new one, changed cells marked.</p>\n")
        let start = html.count
        var leftTables = 0
        for entry in changed {
            guard html.count - start <= Self.rowsBudget, let table = collector.tables[sqlNameKey(entry.name)] else { leftTables += 1; continue }
            rows(of: table)
        }
        if leftTables > 0 {
            html.markup("<p class=\"more\">… the changed rows of \(leftTables) more table\(leftTables == 1 ? "" : "s") are left out to keep the page small: <code>litectl diff</code> lists them.</p>\n")
        }
        html.markup("</section>\n")
    }

    mutating func rows(of table: ComparisonCollector.TableChanges) {
        let plan = table.plan
        let keys = plan.mode == .multiset ? [] : plan.keyIndexes
        var columns = table.baseColumns
        for row in table.rows { for i in row.changed where !columns.contains(i) { columns.append(i) } }
        let hidden = max(0, plan.columns.count - min(columns.count, Self.columnLimit))
        columns = Array(columns.prefix(Self.columnLimit))
        html.markup("<h3>")
        html.text(plan.name)
        let c = table.counts
        html.markup(" <span class=\"muted\">+\(c.inserted) ~\(c.updated) −\(c.deleted)</span></h3>\n")
        if hidden > 0 {
            html.markup("<p class=\"muted\">\(hidden) of its \(plan.columns.count) columns not shown (keys, the first columns and the changed ones are).</p>\n")
        }
        html.markup("<div style=\"overflow-x:auto\"><table class=\"rows\"><thead><tr><th></th><th></th>")
        for i in columns {
            html.markup(keys.contains(i) ? "<th class=\"key\">" : "<th>")
            html.text(plan.columns[i])
            if let entry = plan.across?.pairing.entries.first(where: { $0.name == plan.columns[i] }), entry.kind != .kept {
                html.markup(" <span class=\"muted\">(")
                html.text(entry.kind == .renamed ? "renamed from \(entry.nameA!)" : entry.kind.rawValue)
                html.markup(")</span>")
            }
            html.markup("</th>")
        }
        html.markup("</tr></thead><tbody>\n")
        for row in table.rows {
            let changed = Set(row.changed)
            func line(_ values: [ShownValue?], side: String, cls: String, op: String?) {
                html.markup("<tr class=\"\(cls)\">")
                if let op { html.markup("<td class=\"op\"\(row.operation == .update ? " rowspan=\"2\"" : "")>\(op)</td>") }
                html.markup("<td class=\"muted\">\(side)</td>")
                for i in columns {
                    var classes = ["v"]
                    if keys.contains(i) { classes.append("key") }
                    if changed.contains(i) { classes.append("changed") }
                    html.markup("<td class=\"\(classes.joined(separator: " "))\">")
                    if let value = values[i] {
                        html.value(value, lineBreaks: true)
                    } else if side == "A" ? !plan.inA(i) : !plan.inB(i) {
                        html.markup("<span class=\"more\">(no column)</span>")
                    } else {
                        html.markup("<span class=\"more\">…</span>")
                    }
                    html.markup("</td>")
                }
                html.markup("</tr>\n")
            }
            switch row.operation {
            case .insert: line(row.new!, side: "B", cls: "insert pair-end", op: "+")
            case .delete: line(row.old!, side: "A", cls: "delete pair-end", op: "−")
            case .update:
                line(row.old!, side: "A", cls: "old", op: "~")
                line(row.new!, side: "B", cls: "new pair-end", op: nil)
            }
        }
        let shown = table.rows.count
        if c.total > shown {
            html.markup("<tr><td colspan=\"\(columns.count + 2)\" class=\"more\">… \(c.total - shown) more changed rows</td></tr>\n")
        }
        html.markup("</tbody></table></div>\n")
    }
}
