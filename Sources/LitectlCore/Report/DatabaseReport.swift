// `litectl report DB`: one self-contained HTML page on a database's health and
// space — its header, the check's verdict, a treemap of its pages, the stats
// table, the planner statistics, and growth against an earlier stats report.
// The report is built on Stats/ (the page statistics and their comparison),
// Check/ (the findings) and, for two databases, Diff/ (ComparisonReport);
// the check runs on its own connection beside the statistics scan.
import Dispatch
import Foundation

/// What a report shows and how it judges.
public struct ReportOptions: Sendable {
    /// The check's settings (quick_check, thresholds, busy timeout).
    public var check = CheckOptions()
    /// Warnings fail the verdict too, as `check --strict`.
    public var strict = false
    public var busyTimeout = Connection.defaultBusyTimeout
    /// An earlier `stats --format json` report to show growth against: its path (for messages) and bytes.
    public var earlierStats: EarlierStats?
    /// Changed rows shown per table in a comparison (the counts are exact).
    public var rowsPerTable = 20
    /// What the comparison compares (tables, exclusions, keys).
    public var diff = DiffOptions()
    /// When the report was made (shown in its header).
    public var generatedAt = Date()
    /// The program that made it, for the footer: `litectl 0.1.0`.
    public var generator = "litectl"

    public struct EarlierStats: Sendable {
        public var path: String
        public var json: [UInt8]
        public init(path: String, json: [UInt8]) {
            self.path = path
            self.json = json
        }
    }

    public init() {}
}

/// A report page and its verdict.
public struct ReportOutcome: Sendable {
    /// The HTML document.
    public var html: [UInt8]
    /// True when the check fails (an error, or a warning under `strict`), or
    /// when the two databases of a comparison differ.
    public var findings: Bool
}

public enum DatabaseReport {
    /// The report on the database at `path`, read-only. The header, the page
    /// statistics and sqlite_stat1 come from one read transaction; the check
    /// reads its own snapshot on a second connection at the same time.
    /// Throws when the file cannot be read at all (missing, not a database,
    /// locked); a corrupt file gives a report of its check's errors.
    public static func make(path: String, options: ReportOptions = ReportOptions()) throws -> ReportOutcome {
        try FileCheck.requireDatabaseFile(path, writable: false)
        var settings = options.check
        settings.busyTimeout = options.busyTimeout
        let checkOptions = settings
        let checked = Locked<CheckReport?>(nil)
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            let report = DatabaseCheck.check(path: path, options: checkOptions)
            checked.withLock { $0 = report }
        }
        var facts: DatabaseFacts?
        var factsError: DatabaseError?
        do {
            facts = try DatabaseFacts.read(path: path, busyTimeout: options.busyTimeout)
        } catch let error as DatabaseError {
            factsError = error
        } catch {
            factsError = DatabaseError(code: .error, message: "\(error)", path: path)
        }
        var growth: StatsComparison?
        var growthError: (any Error)?
        if let earlier = options.earlierStats, let stats = facts?.stats {
            do {
                growth = try StatsComparison(oldJSON: earlier.json, oldPath: earlier.path, new: stats, tables: true)
            } catch {
                growthError = error
            }
        }
        group.wait()
        let check = checked.withLock { $0! }
        if let failure = check.failure { throw failure }
        if let growthError { throw growthError }
        if let factsError, check.findings.isEmpty { throw factsError }

        var page = DatabaseReportPage(path: path, facts: facts, factsError: factsError, check: check,
                                      growth: growth, options: options)
        let html = page.render()
        return ReportOutcome(html: html, findings: check.fails(strict: options.strict))
    }
}

/// What the report reads from the database itself, in one read transaction.
struct DatabaseFacts {
    var fileSize: Int64?
    var walSize: Int64?
    var pageSize: Int64 = 0
    var pageCount: Int64 = 0
    var journalMode = ""
    var encoding = ""
    var userVersion: Int64 = 0
    var applicationID: Int64 = 0
    var autoVacuum: Int64 = 0
    /// sqlite_stat1's rows (tbl, idx, stat), nil when the table is missing.
    var statistics: [[Value]]?
    var stats: FileStats?

    static func read(path: String, busyTimeout: Int) throws -> DatabaseFacts {
        // Before SQLite opens the file: a read-only connection to a WAL
        // database creates an empty -wal when there is none.
        var facts = DatabaseFacts(fileSize: FileCheck.size(of: path), walSize: FileCheck.size(of: path + "-wal"))
        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        try? connection.execute("PRAGMA mmap_size=\(Int64(1) << 40)")
        try connection.readTransaction {
            func integer(_ pragma: String) throws -> Int64 {
                try connection.scalar("PRAGMA main.\(pragma)")?.integerValue ?? 0
            }
            facts.pageSize = try integer("page_size")
            facts.pageCount = try integer("page_count")
            facts.userVersion = try integer("user_version")
            facts.applicationID = try integer("application_id")
            facts.autoVacuum = try integer("auto_vacuum")
            facts.journalMode = try connection.journalMode()
            if case .text(let bytes)? = try connection.scalar("PRAGMA main.encoding") {
                facts.encoding = String(decoding: bytes, as: UTF8.self)
            }
            if try connection.scalar("SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = 'sqlite_stat1'") != nil {
                facts.statistics = try connection.rows("SELECT tbl, idx, stat FROM main.sqlite_stat1 ORDER BY tbl, idx")
            }
            facts.stats = try FileStats.read(connection, path: path, fileSize: facts.fileSize, walSize: facts.walSize,
                                             progress: nil)
        }
        return facts
    }
}

/// The single-database page.
struct DatabaseReportPage {
    let path: String
    let facts: DatabaseFacts?
    let factsError: DatabaseError?
    let check: CheckReport
    let growth: StatsComparison?
    let options: ReportOptions
    var html = HTMLText()

    /// Byte budgets of the sections that grow with the database, so that the
    /// page stays a few MB whatever the file holds; past them a section says
    /// how much it leaves out.
    static let findingsBudget = 400_000
    static let objectsBudget = 2_200_000
    static let statisticsBudget = 400_000
    static let growthBudget = 250_000
    /// Findings shown per check at most.
    static let findingsPerCheck = 100

    init(path: String, facts: DatabaseFacts?, factsError: DatabaseError?, check: CheckReport,
         growth: StatsComparison?, options: ReportOptions) {
        self.path = path
        self.facts = facts
        self.factsError = factsError
        self.check = check
        self.growth = growth
        self.options = options
    }

    mutating func render() -> [UInt8] {
        let name = DurableFolder.baseName(of: path)
        ReportPage.begin(&html, title: "litectl report: \(name)")
        header(name)
        verdict()
        space()
        objects()
        planner()
        if growth != nil { growthSection() }
        ReportPage.end(&html, generator: "Made by \(options.generator) with SQLite \(Connection.sqliteVersion) on \(reportTimestamp(options.generatedAt)).")
        return html.bytes
    }

    // MARK: Header

    mutating func header(_ name: String) {
        html.markup("<header><h1>")
        html.text(name)
        html.markup("</h1><div class=\"muted\">Database report, \(reportTimestamp(options.generatedAt))</div>\n")
        var pairs: [(String, String)] = [("file", path)]
        if let facts {
            pairs += [
                ("size", facts.fileSize.map { "\(humanBytes($0)) (\($0) bytes)" } ?? "unknown"),
                ("WAL", facts.walSize.map { "\(humanBytes($0)) (\($0) bytes)" } ?? "none"),
                ("page size", "\(facts.pageSize) bytes"),
                ("pages", "\(facts.pageCount)"),
                ("journal mode", facts.journalMode),
                ("encoding", facts.encoding),
                ("user_version", "\(facts.userVersion)"),
                ("application_id", "\(facts.applicationID) (0x\(HTMLText.hex(UInt32(truncatingIfNeeded: facts.applicationID), digits: 8)))"),
                ("auto_vacuum", ["none", "full", "incremental"][Int(max(0, min(2, facts.autoVacuum)))]),
            ]
        } else if let size = FileCheck.size(of: path) {
            pairs.append(("size", "\(humanBytes(size)) (\(size) bytes)"))
        }
        pairs += [("SQLite", Connection.sqliteVersion), ("made", reportTimestamp(options.generatedAt))]
        html.facts(pairs)
        html.markup("<nav class=\"muted\"><a href=\"#check\">Check</a> · <a href=\"#space\">Space</a> · <a href=\"#objects\">Tables and indexes</a> · <a href=\"#planner\">Planner statistics</a>")
        if growth != nil { html.markup(" · <a href=\"#growth\">Growth</a>") }
        html.markup("</nav></header>\n")
    }

    // MARK: Check

    mutating func verdict() {
        html.markup("<section id=\"check\"><h2>Check</h2>\n")
        let errors = check.findings.filter { $0.severity == .error }.count
        let warnings = check.findings.filter { $0.severity == .warning }.count
        let notes = check.findings.count - errors - warnings
        let fails = check.fails(strict: options.strict)
        let cls = errors > 0 || fails ? "error" : (warnings > 0 ? "warning" : "ok")
        var words: String
        if errors > 0 {
            words = "Fails: \(count(errors, "error"))"
            if warnings > 0 { words += ", \(count(warnings, "warning"))" }
        } else if warnings > 0 {
            words = fails ? "Fails (--strict): \(count(warnings, "warning"))" : "Passes with \(count(warnings, "warning")) (fails with --strict)"
        } else {
            words = "Sound: no errors, no warnings"
        }
        if notes > 0 { words += "; \(count(notes, "note"))" }
        html.markup("<p><span class=\"verdict \(cls)\">")
        html.text(words)
        html.markup("</span> <span class=\"muted\">\(options.check.quick ? "quick_check" : "integrity_check"), foreign_key_check and litectl's lint checks, as <code>litectl check</code> runs them</span></p>\n")
        let start = html.count
        for severity in [Severity.error, .warning, .note] {
            let group = check.findings.filter { $0.severity == severity }
            guard !group.isEmpty else { continue }
            html.markup("<h3><span class=\"sev \(severity.rawValue)\">\(severity.rawValue)</span> \(count(group.count, severity.rawValue))</h3>\n")
            html.markup("<table class=\"findings\"><thead><tr><th>check</th><th>object</th><th>finding</th></tr></thead><tbody>\n")
            var perCheck: [CheckKind: Int] = [:]
            var left = 0
            for finding in group {
                perCheck[finding.check, default: 0] += 1
                if perCheck[finding.check]! > Self.findingsPerCheck || html.count - start > Self.findingsBudget {
                    left += 1
                    continue
                }
                html.markup("<tr><td><code>\(finding.check.rawValue)</code></td>")
                html.nameCell(finding.object ?? "")
                html.markup("<td>")
                html.text(finding.message, limit: 2_000)
                if let fix = finding.fix {
                    html.markup("<div class=\"fix\">fix: <code>")
                    html.text(fix, limit: 2_000)
                    html.markup("</code></div>")
                }
                html.markup("</td></tr>\n")
            }
            if left > 0 {
                html.markup("<tr><td colspan=\"3\" class=\"more\">… \(left) more \(severity.rawValue) finding\(left == 1 ? "" : "s") not shown: <code>litectl check</code> lists them all</td></tr>\n")
            }
            html.markup("</tbody></table>\n")
        }
        html.markup("</section>\n")
    }

    // MARK: Space

    mutating func space() {
        html.markup("<section id=\"space\"><h2>Space</h2>\n")
        guard let stats = facts?.stats else {
            html.markup("<p class=\"muted\">The page statistics could not be read")
            if let factsError {
                html.markup(": ")
                html.text(factsError.message, limit: 1_000)
            }
            html.markup(".</p></section>\n")
            return
        }
        let layout = TreemapLayout(stats)
        let freeShare = stats.pageCount == 0 ? 0 : Double(stats.freelistPages) * 100 / Double(stats.pageCount)
        html.markup("<p>")
        html.text("\(stats.pageCount) pages of \(stats.pageSize) bytes (\(humanBytes(stats.pageCount * stats.pageSize))); "
                  + "\(stats.usedPages) in b-trees with \(humanBytes(stats.bytesInUse)) in use; "
                  + "\(stats.freelistPages) free (\(Figures.percent(freeShare))); "
                  + "\(Figures.percent(stats.unusedPercent)) of the file unused (free pages and unused bytes on pages).")
        html.markup("</p>\n")
        guard layout.totalPages > 0 else {
            html.markup("<p class=\"muted\">The database has no pages.</p></section>\n")
            return
        }
        html.markup("<div class=\"legend\"><span>Area: pages. Colour: <span class=\"legend-what\">unused bytes</span> <span class=\"ramp\"></span> 0% → 50% and more</span>")
        html.markup("<label><input type=\"radio\" name=\"colour\" value=\"unused\" checked> by unused bytes</label>")
        html.markup("<label><input type=\"radio\" name=\"colour\" value=\"fragmentation\"> by fragmentation</label>")
        html.markup("<span><span class=\"swatch\" style=\"background:#e4e4e4\"></span> free pages</span>")
        html.markup("<span>Outlined: a table with its indexes. Hover a block for its figures.</span></div>\n")
        layout.render(into: &html, stats: stats)
        let others = layout.blocks.first { $0.kind == .others }
        if let others {
            html.markup("<p class=\"muted\">")
            html.text("The \(others.name) (\(others.count) b-trees, \(others.pages) pages) are too small to draw one by one: they are one grey block, and listed below.")
            html.markup("</p>")
        }
        html.markup("</section>\n")
    }

    // MARK: Tables and indexes

    mutating func objects() {
        html.markup("<section id=\"objects\"><h2>Tables and indexes</h2>\n")
        guard let stats = facts?.stats else {
            html.markup("<p class=\"muted\">Not available.</p></section>\n")
            return
        }
        html.markup("<p class=\"muted\">As <code>litectl stats</code> gives them, largest first; click a heading to sort.</p>\n")
        html.markup("<table class=\"sortable\" id=\"objects-table\"><thead><tr><th>name</th><th>kind</th><th>table</th><th class=\"n\">entries</th><th class=\"n\">pages</th><th class=\"n\">bytes</th><th class=\"n\">share</th><th class=\"n\">unused</th><th class=\"n\">overflow pages</th><th class=\"n\">depth</th><th class=\"n\">fragmentation</th></tr></thead><tbody>\n")
        let start = html.count
        var left = 0, leftPages: Int64 = 0
        for object in stats.objects {
            if html.count - start > Self.objectsBudget {
                left += 1
                leftPages += object.pages
                continue
            }
            let bytes = object.bytes(pageSize: stats.pageSize)
            let unused = bytes == 0 ? 0 : Double(object.unused) * 100 / Double(bytes)
            html.markup("<tr>")
            html.nameCell(object.name)
            html.markup("<td>\(object.kind.rawValue)</td>")
            html.nameCell(object.table)
            html.numberCell("\(object.entries)")
            html.numberCell("\(object.pages)")
            html.numberCell(humanBytes(bytes), sortValue: "\(bytes)")
            html.numberCell(Figures.percent(stats.sharePercent(object)), sortValue: Figures.decimal(stats.sharePercent(object), places: 4))
            html.numberCell(Figures.percent(unused), sortValue: Figures.decimal(unused, places: 4))
            html.numberCell("\(object.overflowPages)")
            html.numberCell("\(object.depth)")
            html.numberCell(Figures.percent(object.fragmentationPercent), sortValue: Figures.decimal(object.fragmentationPercent, places: 4))
            html.markup("</tr>\n")
        }
        if left > 0 {
            html.markup("<tr class=\"fixed\"><td colspan=\"11\" class=\"more\">… \(left) smaller objects (\(leftPages) pages) not listed: <code>litectl stats</code> lists them all</td></tr>\n")
        }
        html.markup("</tbody></table></section>\n")
    }

    // MARK: Planner statistics

    mutating func planner() {
        html.markup("<section id=\"planner\"><h2>Planner statistics</h2>\n")
        let lint: Set<CheckKind> = [.statistics, .redundantIndex, .unindexedForeignKey]
        let flagged = check.findings.filter { lint.contains($0.check) }
        if flagged.isEmpty {
            html.markup("<p>The check flags no index: no missing or stale statistics, no redundant index, no foreign key without an index.</p>\n")
        } else {
            html.markup("<p>What the check flags about indexes and statistics:</p><table><thead><tr><th>check</th><th>object</th><th>finding</th></tr></thead><tbody>\n")
            let start = html.count
            var left = 0
            for finding in flagged {
                if html.count - start > Self.findingsBudget / 2 { left += 1; continue }
                html.markup("<tr><td><code>\(finding.check.rawValue)</code></td>")
                html.nameCell(finding.object ?? "")
                html.markup("<td>")
                html.text(finding.message, limit: 2_000)
                if let fix = finding.fix {
                    html.markup("<div class=\"fix\">fix: <code>")
                    html.text(fix, limit: 2_000)
                    html.markup("</code></div>")
                }
                html.markup("</td></tr>\n")
            }
            if left > 0 { html.markup("<tr><td colspan=\"3\" class=\"more\">… \(left) more</td></tr>\n") }
            html.markup("</tbody></table>\n")
        }
        guard let facts else { html.markup("</section>\n"); return }
        guard let rows = facts.statistics else {
            html.markup("<p>There is no <code>sqlite_stat1</code>: the query planner guesses the size of every table (<code>litectl analyze</code> or <code>ANALYZE</code> makes it).</p></section>\n")
            return
        }
        // Each table's rows now, from the page statistics, beside what sqlite_stat1 says.
        var rowsNow: [[UInt8]: Int64] = [:]
        for object in facts.stats?.objects ?? [] where object.kind == .table { rowsNow[sqlNameKey(object.name)] = object.entries }
        html.markup("<p><code>sqlite_stat1</code>: \(rows.count) row\(rows.count == 1 ? "" : "s"). Its first number is the row count the planner works from; the others, the average rows per distinct value of each key prefix.</p>\n")
        html.markup("<table class=\"sortable\" id=\"stat1-table\"><thead><tr><th>table</th><th>index</th><th>stat</th><th class=\"n\">rows now</th></tr></thead><tbody>\n")
        let start = html.count
        var left = 0
        for row in rows {
            if html.count - start > Self.statisticsBudget { left += 1; continue }
            html.markup("<tr>")
            for (i, value) in row.prefix(3).enumerated() {
                html.markup(i == 2 ? "<td class=\"v\">" : "<td class=\"name\">")
                html.value(ReportValues.queryForm(value), lineBreaks: false)
                html.markup("</td>")
            }
            var now: Int64?
            if case .text(let bytes) = row[0] { now = rowsNow[sqlNameKey(String(decoding: bytes, as: UTF8.self))] }
            if let now { html.numberCell("\(now)") } else { html.markup("<td></td>") }
            html.markup("</tr>\n")
        }
        if left > 0 { html.markup("<tr class=\"fixed\"><td colspan=\"4\" class=\"more\">… \(left) more rows</td></tr>\n") }
        html.markup("</tbody></table></section>\n")
    }

    // MARK: Growth

    mutating func growthSection() {
        guard let growth, let earlier = options.earlierStats else { return }
        html.markup("<section id=\"growth\"><h2>Growth</h2>\n<p>")
        let change = growth.newPageCount - growth.oldPageCount
        html.text("Against ")
        html.markup("<code>")
        html.text(earlier.path)
        html.markup("</code>: ")
        html.text("the file went from \(growth.oldPageCount) to \(growth.newPageCount) pages (\(change >= 0 ? "+" : "")\(change), \(change >= 0 ? "+" : "-")\(humanBytes(abs(change) * growth.pageSize))). Per table with its indexes, largest change first; rows are the table's own (its indexes' entries are not rows):")
        html.markup("</p>\n")
        let changes = growth.changes.sorted { a, b in
            let da = abs((a.newPages ?? 0) - (a.oldPages ?? 0)), db = abs((b.newPages ?? 0) - (b.oldPages ?? 0))
            return da != db ? da > db : compareNames(a.name, b.name)
        }
        // The comparison's entries sum the table's and its indexes' b-trees
        // (Track with three indexes: 4 x 3,503): rows are the table's own b-tree's entries.
        let oldRows = Self.tableRows(inStatsJSON: earlier.json)
        var newRows: [[UInt8]: Int64] = [:]
        for object in facts?.stats?.objects ?? [] where object.kind == .table { newRows[Array(object.name.utf8)] = object.entries }
        let largest = max(1, changes.map { abs(($0.newPages ?? 0) - ($0.oldPages ?? 0)) }.max() ?? 1)
        html.markup("<table class=\"bars sortable\" id=\"growth-table\"><thead><tr><th>table</th><th class=\"n\">old pages</th><th class=\"n\">new pages</th><th class=\"n\">change</th><th class=\"n\">growth</th><th class=\"n\">rows</th><th>change in pages</th></tr></thead><tbody>\n")
        let start = html.count
        var left = 0
        for c in changes {
            if html.count - start > Self.growthBudget { left += 1; continue }
            let delta = (c.newPages ?? 0) - (c.oldPages ?? 0)
            html.markup("<tr>")
            html.nameCell(c.name)
            html.numberCell(c.oldPages.map(String.init) ?? "—", sortValue: "\(c.oldPages ?? -1)")
            html.numberCell(c.newPages.map(String.init) ?? "—", sortValue: "\(c.newPages ?? -1)")
            html.numberCell("\(delta >= 0 ? "+" : "")\(delta)", sortValue: "\(delta)")
            if let old = c.oldPages, old > 0 {
                let percent = Double(delta) * 100 / Double(old)
                html.numberCell("\(percent >= 0 ? "+" : "")\(Figures.decimal(percent, places: 1))%", sortValue: Figures.decimal(percent))
            } else {
                html.numberCell(c.oldPages == nil ? "new" : "—", sortValue: "1e99")
            }
            let before = c.oldPages == nil ? nil : oldRows[Array(c.name.utf8)]
            let after = c.newPages == nil ? nil : newRows[Array(c.name.utf8)]
            let rowsText = "\(before.map(String.init) ?? "—") → \(after.map(String.init) ?? "—")"
            html.numberCell(rowsText, sortValue: "\((after ?? 0) - (before ?? 0))")
            let width = Double(abs(delta)) * 100 / Double(largest)
            html.markup("<td class=\"bar\" data-v=\"\(delta)\"><span class=\"\(delta >= 0 ? "grow" : "shrink")\" style=\"width:\(Figures.decimal(width))%\"></span></td></tr>\n")
        }
        if left > 0 { html.markup("<tr class=\"fixed\"><td colspan=\"7\" class=\"more\">… \(left) more tables</td></tr>\n") }
        html.markup("</tbody></table></section>\n")
    }

    /// Rows per table in a `stats --format json` report: the entries of each
    /// table's own b-tree (its "objects" of kind "table"), by name bytes;
    /// empty when the report has no such rows.
    static func tableRows(inStatsJSON json: [UInt8]) -> [[UInt8]: Int64] {
        guard let document = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
              let objects = document["objects"] as? [[String: Any]] else { return [:] }
        var rows: [[UInt8]: Int64] = [:]
        for object in objects where object["kind"] as? String == ObjectStats.Kind.table.rawValue {
            if let name = object["name"] as? String, let entries = (object["entries"] as? NSNumber)?.int64Value {
                rows[Array(name.utf8)] = entries
            }
        }
        return rows
    }

    func count(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }
}
