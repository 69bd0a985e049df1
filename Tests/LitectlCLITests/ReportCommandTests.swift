// `litectl report` through the built binary: the pages of the real corpus and
// of hostile and very large databases, rendered in headless Chromium (no
// console message, no request), the treemap read back from the browser's DOM
// and held against `stats`, the comparison held against `diff`, and the rules
// of writing the output file. Screenshots stay in .build/test-output/report
// for a person to look at.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct ReportCommandTests {
    // MARK: Reading pages back

    /// `&amp;` `&lt;` `&gt;` `&quot;` `&#39;` `&#NN;` back to characters.
    static func unescape(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var out = ""
        var rest = text[...]
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semi) < 10 else {
                out += "&"; rest = rest[rest.index(after: amp)...]; continue
            }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "nbsp": out += "\u{A0}"
            default:
                if entity.hasPrefix("#"), let code = UInt32(entity.dropFirst()), let scalar = Unicode.Scalar(code) {
                    out.unicodeScalars.append(scalar)
                } else {
                    out += "&" + entity + ";"
                }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }

    /// The attributes of each element `<tag ...>` in `html` (values unescaped).
    static func elements(_ tag: String, in html: String) -> [[String: String]] {
        let element = try! Regex("<\(tag)\\s([^>]*)>")
        let attribute = try! Regex("([a-zA-Z0-9-]+)=\"([^\"]*)\"")
        return html.matches(of: element).map { match in
            var attributes: [String: String] = [:]
            let inside = match.output[1].substring ?? ""
            for a in inside.matches(of: attribute) {
                attributes[String(a.output[1].substring ?? "")] = unescape(a.output[2].substring ?? "")
            }
            return attributes
        }
    }

    /// The text of each cell of each body row of the table with `id`, tags removed.
    static func tableRows(_ id: String, in html: String) -> [[String]] {
        guard let start = html.range(of: "id=\"\(id)\""), let body = html[start.upperBound...].range(of: "<tbody>"),
              let end = html[body.upperBound...].range(of: "</tbody>") else { return [] }
        let rows = html[body.upperBound..<end.lowerBound].components(separatedBy: "</tr>")
        let cell = try! Regex("<td[^>]*>(.*?)</td>").dotMatchesNewlines()
        let tag = try! Regex("<[^>]*>")
        return rows.map { row in
            row.matches(of: cell).map { unescape(Substring(String($0.output[1].substring ?? "").replacing(tag, with: ""))) }
        }.filter { !$0.isEmpty }
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// The treemap drawn in `html` checked against `stats --format json` of `db`:
    /// one rectangle per b-tree (or its pages in the others block), free pages
    /// as a block, every area in proportion to its pages.
    static func checkTreemap(_ html: String, against db: String, exactNames: Bool = true,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stats = try json(try litectl("stats", "--format", "json", db).stdout)
        let objects = try #require(stats["objects"] as? [[String: Any]])
        let pageCount = try #require(stats["page_count"] as? Int)
        let rects = elements("rect", in: html).filter { $0["data-kind"] != nil }
        #expect(!rects.isEmpty, sourceLocation: sourceLocation)
        let width = 1000.0, height = 560.0
        var pagesDrawn = 0
        for rect in rects {
            let pages = Int(rect["data-pages"] ?? "") ?? -1
            pagesDrawn += pages
            let area = (Double(rect["width"] ?? "") ?? -1) * (Double(rect["height"] ?? "") ?? -1)
            let expected = width * height * Double(pages) / Double(pageCount)
            // Coordinates are written to 0.01: an error of ±0.005 on each side.
            let slack = 0.006 * ((Double(rect["width"] ?? "") ?? 0) + (Double(rect["height"] ?? "") ?? 0)) + 0.01
            #expect(abs(area - expected) <= slack, "\(rect["data-name"] ?? ""): area \(area), \(expected) for \(pages) of \(pageCount) pages",
                    sourceLocation: sourceLocation)
        }
        #expect(pagesDrawn == pageCount, "every page drawn once", sourceLocation: sourceLocation)
        let trees = rects.filter { $0["data-kind"] == "table" || $0["data-kind"] == "index" }
        let others = rects.filter { $0["data-kind"] == "others" }.reduce(0) { $0 + (Int($1["data-count"] ?? "") ?? 0) }
        #expect(trees.count + others == objects.count, "one rectangle per b-tree, or counted in the others", sourceLocation: sourceLocation)
        let free = rects.filter { $0["data-kind"] == "free" }.reduce(0) { $0 + (Int($1["data-pages"] ?? "") ?? 0) }
        #expect(free == stats["freelist_pages"] as? Int, sourceLocation: sourceLocation)
        if exactNames {
            var byName: [String: [String: String]] = [:]
            for rect in trees { #expect(byName.updateValue(rect, forKey: rect["data-name"]!) == nil, sourceLocation: sourceLocation) }
            for object in objects where others == 0 {
                let name = object["name"] as! String
                let rect = byName[name]
                #expect(rect?["data-pages"] == String(object["pages"] as! Int), "\(name)", sourceLocation: sourceLocation)
                #expect(rect?["data-kind"] == object["kind"] as? String, "\(name)", sourceLocation: sourceLocation)
                #expect(rect?["data-table"] == object["table"] as? String, "\(name)", sourceLocation: sourceLocation)
            }
        }
    }

    /// Renders `page` in the browser, keeps its screenshot as `name`.png in
    /// the tests' output, and requires no console message and no request.
    static func render(_ page: String, as name: String, in folder: TemporaryFolder, fragment: String = "",
                       sourceLocation: SourceLocation = #_sourceLocation) throws -> BrowserRender {
        let screenshot = try testOutputFolder("report") + "/\(name).png"
        try? FileManager.default.removeItem(atPath: screenshot)
        let result = try HeadlessBrowser.render(page, fragment: fragment, screenshot: screenshot, scratch: folder.path)
        #expect(result.console.isEmpty, "console: \(result.console.joined(separator: "\n"))", sourceLocation: sourceLocation)
        #expect(result.requests.isEmpty, "requests: \(result.requests)", sourceLocation: sourceLocation)
        let png = try Data(contentsOf: URL(fileURLWithPath: screenshot))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), sourceLocation: sourceLocation)
        #expect(png.count > 20_000, "a screenshot of a drawn page, not a blank one", sourceLocation: sourceLocation)
        #expect(result.dom.contains("<svg") || result.dom.contains("id=\"rows\""), sourceLocation: sourceLocation)
        // The treemap's blocks and labels all stay inside the SVG as the browser parsed it
        // (HTML markup inside SVG would end it early and spill them onto the page).
        let source = try String(contentsOfFile: page, encoding: .utf8)
        if let start = result.dom.range(of: "<svg"), let end = result.dom.range(of: "</svg>") {
            let svg = result.dom[start.lowerBound..<end.upperBound]
            #expect(svg.components(separatedBy: "data-kind=").count == result.dom.components(separatedBy: "data-kind=").count,
                    sourceLocation: sourceLocation)
            #expect(svg.components(separatedBy: "<text").count == source.components(separatedBy: "<text").count,
                    sourceLocation: sourceLocation)
            #expect(svg.components(separatedBy: "<title>").count == source.components(separatedBy: "<title>").count - 1,
                    "one tooltip per block", sourceLocation: sourceLocation)
        }
        return result
    }

    static func escapedForCheck(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    // MARK: One database

    @Test(.enabled(if: !realDatabases.isEmpty), arguments: realDatabases)
    func reportOfARealDatabase(_ database: String) throws {
        let folder = try TemporaryFolder("report-real")
        let db = try folder.copy(database)
        let before = try FileFingerprint(db)
        let page = folder.file("report.html")
        let result = try litectl("report", db, "-o", page)
        let check = try litectl("check", "--json", db)
        #expect(result.status == check.status, "exit status as check's: \(result.stderr)")
        #expect(result.stdout.isEmpty && result.stderr.isEmpty, "nothing printed: \(result.stdout) \(result.stderr)")
        #expect(try FileFingerprint(db) == before)
        #expect(Set(try folder.listing()) == [DurableFolder.baseName(of: db), "report.html"], "no leftover, no -wal")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.utf8.count < 1_000_000)

        // Every finding of `check` is on the page, in its severity's group.
        let findings = try #require(try Self.json(check.stdout)["findings"] as? [[String: Any]])
        for finding in findings {
            #expect(html.contains(Self.escapedForCheck(finding["message"] as! String)), "\(finding)")
        }
        for severity in ["error", "warning", "note"] {
            let n = findings.filter { $0["severity"] as? String == severity }.count
            #expect(html.contains("<span class=\"sev \(severity)\">\(severity)</span> \(n) \(severity)") == (n > 0), "\(severity): \(n)")
        }
        // The stats table has every b-tree with its pages.
        let stats = try Self.json(try litectl("stats", "--format", "json", db).stdout)
        let objects = try #require(stats["objects"] as? [[String: Any]])
        let rows = Self.tableRows("objects-table", in: html)
        #expect(rows.count == objects.count)
        for (row, object) in zip(rows, objects) {
            #expect(row[0] == object["name"] as? String)
            #expect(row[4] == String(object["pages"] as! Int))
            #expect(row[3] == String(object["entries"] as! Int))
        }
        // sqlite_stat1 as the sqlite3 CLI reads it.
        let stat1 = try sqlite3(["-batch", "-readonly", db, "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'"])
        if stat1.hasPrefix("1") {
            let expected = try sqlite3(["-batch", "-readonly", "-separator", "\t", db, "SELECT tbl, idx, stat FROM sqlite_stat1 ORDER BY tbl, idx"])
                .split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
            let shown = Self.tableRows("stat1-table", in: html).map { Array($0.prefix(3)) }
            #expect(shown == expected.map { $0.map { $0.isEmpty ? "NULL" : $0 } })
        }
        try Self.checkTreemap(html, against: db)

        guard HeadlessBrowser.shouldRun else { return }
        let name = DurableFolder.baseName(of: database).split(separator: ".").first.map(String.init) ?? "db"
        // The fragment sorts the stats table by pages, smallest first, once the page is loaded.
        let render = try Self.render(page, as: "single-\(name)", in: folder, fragment: "#sort=objects-table:4")
        try Self.checkTreemap(render.dom, against: db)
        let sorted = Self.tableRows("objects-table", in: render.dom).compactMap { Int($0[4]) }
        #expect(sorted.count == objects.count)
        #expect(sorted == sorted.sorted(), "the script sorted the table by pages")
        #expect(render.dom.contains("aria-sort=\"ascending\""))
    }

    // MARK: Two databases

    /// Deletes two rows and changes one in every ordinary rowid table of `db`,
    /// and adds a table (statements a table's triggers refuse are skipped).
    static func mutate(_ db: String) throws {
        let tables = try sqlite3Scalar(db, """
            SELECT group_concat(name, char(10)) FROM pragma_table_list
            WHERE schema = 'main' AND type = 'table' AND wr = 0 AND name NOT LIKE 'sqlite_%'
            """).split(separator: "\n").map(String.init)
        var statements: [String] = []
        for table in tables {
            let q = quoteIdentifier(table)
            let last = try sqlite3Scalar(db, "SELECT name FROM pragma_table_info(\(Value.text(Array(table.utf8)).sqlLiteral)) WHERE pk = 0 ORDER BY cid DESC LIMIT 1")
            statements.append("DELETE FROM \(q) WHERE rowid IN (SELECT rowid FROM \(q) ORDER BY rowid LIMIT 2)")
            if !last.isEmpty {
                statements.append("UPDATE \(q) SET \(quoteIdentifier(last)) = 'changed <b>&amp;' WHERE rowid = (SELECT max(rowid) FROM \(q))")
            }
        }
        statements.append("CREATE TABLE report_added(id INTEGER PRIMARY KEY, note TEXT); INSERT INTO report_added VALUES (1, 'new')")
        for statement in statements {
            _ = try runProcess(sqlite3Binary, ["-batch", db], input: Array((statement + ";").utf8))
        }
    }

    /// Per table, the rows inserted, updated and deleted, from `litectl diff --format jsonl`.
    static func diffCounts(_ a: String, _ b: String) throws -> [String: [Int]] {
        let diff = try litectl("diff", "--format", "jsonl", a, b)
        var counts: [String: [Int]] = [:]
        for line in diff.stdout.split(separator: "\n") {
            let object = try json(String(line))
            guard object["type"] as? String == "row", let table = object["table"] as? String else { continue }
            let slot = ["insert": 0, "update": 1, "delete": 2][object["operation"] as! String]!
            counts[table, default: [0, 0, 0]][slot] += 1
        }
        return counts
    }

    @Test(.enabled(if: !realDatabases.isEmpty), arguments: realDatabases)
    func comparisonOfARealDatabase(_ database: String) throws {
        let folder = try TemporaryFolder("report-real-pair")
        let a = try folder.copy(database, as: "a.db")
        let b = try folder.copy(database, as: "b.db")
        let same = try litectl("report", a, b, "-o", folder.file("same.html"))
        #expect(same.status == 0, "\(same.stderr)")
        #expect(try String(contentsOfFile: folder.file("same.html"), encoding: .utf8).contains("Identical"))

        try Self.mutate(b)
        let page = folder.file("pair.html")
        let result = try litectl("report", a, b, "-o", page)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stdout.isEmpty && result.stderr.isEmpty)
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("table</td><td class=\"name\">report_added</td>"), "the added table is a schema difference")
        // Per table, the counts `diff` finds (the bars' numbers).
        let expected = try Self.diffCounts(a, b)
        let rows = Self.tableRows("tables-table", in: html)
        #expect(!rows.isEmpty)
        var shown: [String: [Int]] = [:]
        for row in rows { shown[row[0]] = [Int(row[1]) ?? -1, Int(row[2]) ?? -1, Int(row[3]) ?? -1] }
        #expect(shown == expected)

        guard HeadlessBrowser.shouldRun else { return }
        let name = DurableFolder.baseName(of: database).split(separator: ".").first.map(String.init) ?? "db"
        let render = try Self.render(page, as: "compare-\(name)", in: folder)
        #expect(render.dom.contains("id=\"rows\""))
    }

    @Test func changedCellsAreMarkedWithDiffsValues() throws {
        let folder = try TemporaryFolder("report-cells")
        let schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, r REAL, s TEXT, b BLOB, n);"
        try makeDatabase(folder.file("a.db"), schema + """
            INSERT INTO t VALUES (1, 0.1, 'it''s', x'00FF', 1), (2, 1e300, 'same', NULL, 'x'), (3, 2.5, 'gone', NULL, NULL);
            """)
        try makeDatabase(folder.file("b.db"), schema + """
            INSERT INTO t VALUES (1, 0.30000000000000004, 'it''s', x'00FE', 1.0), (2, 1e300, 'same', NULL, 'x'),
                                 (4, -2.5e-7, 'two' || char(10) || 'lines', randomblob(600), 9223372036854775807);
            """)
        let page = folder.file("cells.html")
        #expect(try litectl("report", "a.db", "b.db", "-o", page, in: folder.path).status == 1)
        let html = try String(contentsOfFile: page, encoding: .utf8)
        // The changed cells, A's over B's.
        let cell = try Regex("<td class=\"v( key)?( changed)?\">(.*?)</td>").dotMatchesNewlines()
        let tag = try Regex("<[^>]*>")
        func cells(_ rowClass: String) -> [[(changed: Bool, text: String)]] {
            html.components(separatedBy: "<tr class=\"\(rowClass)").dropFirst().map { row in
                row.components(separatedBy: "</tr>")[0].matches(of: cell).map {
                    ($0.output[2].substring != nil, Self.unescape(Substring(String($0.output[3].substring ?? "").replacing(tag, with: ""))))
                }
            }
        }
        let old = cells("old"), new = cells("new")
        #expect(old.count == 1 && new.count == 1)
        let changedOld = old[0].filter(\.changed).map(\.text), changedNew = new[0].filter(\.changed).map(\.text)
        // What `litectl diff` prints for the same update: `  ~ id=1: r: 0.1 → 0.30000000000000004, ...`.
        let diff = try litectl("diff", "a.db", "b.db", in: folder.path).stdout
        let line = try #require(diff.split(separator: "\n").first { $0.hasPrefix("  ~ id=1: ") })
        let pairs = line.dropFirst("  ~ id=1: ".count).components(separatedBy: ", ").map {
            $0.split(separator: ": ", maxSplits: 1)[1].components(separatedBy: " → ")
        }
        #expect(changedOld == pairs.map { $0[0] })
        #expect(changedNew == pairs.map { $0[1] })
        #expect(changedOld == ["0.1", "x'00FF'", "1"])
        #expect(changedNew == ["0.30000000000000004", "x'00FE'", "1.0"])
        // The inserted row: a small REAL, TEXT with a line break, a long BLOB cut with its length, a large integer.
        let inserted = html.components(separatedBy: "<tr class=\"insert").dropFirst().first ?? ""
        #expect(inserted.contains("<td class=\"v\">-2.5e-07</td>"))
        #expect(inserted.contains("<td class=\"v\">&#39;two\\nlines&#39;</td>"))
        #expect(inserted.contains("<span class=\"more\">… (600 bytes in all)</span>"))
        #expect(inserted.contains("<td class=\"v\">9223372036854775807</td>"))
        let deleted = html.components(separatedBy: "<tr class=\"delete").dropFirst().first ?? ""
        #expect(deleted.contains("<td class=\"v\">&#39;gone&#39;</td>"))
        #expect(!html.contains("&#39;same&#39;"), "an unchanged row is not shown")
    }

    // MARK: Hostile names and values

    static let hostileScript = """
        CREATE TABLE "<script>console.error('pwned-table')</script>" (
          id INTEGER PRIMARY KEY,
          \"\"\"><img src=x onerror=console.error('pwned-column')>\" TEXT,
          "a&amp;b 'q' ""dq"" \u{1}\u{1B}[31m\u{202E}lmth.exe" TEXT);
        CREATE INDEX "</title></rect><script>console.error('pwned-index')</script>"
          ON "<script>console.error('pwned-table')</script>"(\"\"\"><img src=x onerror=console.error('pwned-column')>\");
        CREATE TABLE "<style>*{display:none}</style>"(x, y REFERENCES "<script>console.error('pwned-table')</script>"(id));
        INSERT INTO "<script>console.error('pwned-table')</script>" VALUES
          (1, '</td></tr></tbody></table><script>console.error(''pwned-value'')</script>', 'ctl ' || char(1) || char(27) || '[2J' || char(8238) || ' end'),
          (2, '<img src="https://example.com/x.png">', '&lt;not an entity&gt;');
        INSERT INTO "<style>*{display:none}</style>" VALUES ('<svg onload=console.error(1)>', 1);
        CREATE TABLE "ctl \u{1}\u{1B}[31m\u{202E}gnp.exe"(a);
        CREATE TABLE "line one
        line two"(a);
        ANALYZE;
        UPDATE sqlite_stat1 SET stat = '<b>bold</b> 5 1' WHERE idx IS NOT NULL;
        """

    @Test func hostileNamesAndValuesRenderAsText() throws {
        let folder = try TemporaryFolder("report-hostile")
        try makeDatabase(folder.file("a.db"), Self.hostileScript)
        try makeDatabase(folder.file("b.db"), Self.hostileScript + """
            UPDATE "<script>console.error('pwned-table')</script>" SET \"\"\"><img src=x onerror=console.error('pwned-column')>\" = '<iframe src="https://example.com/"></iframe>' WHERE id = 2;
            INSERT INTO "<style>*{display:none}</style>" VALUES ('<script>console.error("pwned-insert")</script>', 2);
            """)
        let single = folder.file("single.html"), pair = folder.file("pair.html")
        let one = try litectl("report", "a.db", "-o", single, in: folder.path)
        #expect(one.status == 0, "warnings only: \(one.stderr)")
        #expect(try litectl("report", "a.db", "b.db", "-o", pair, in: folder.path).status == 1)
        for page in [single, pair] {
            let html = try String(contentsOfFile: page, encoding: .utf8)
            #expect(html.components(separatedBy: "<script").count == 2, "only the report's own script")
            for markup in ["<img", "<iframe", "<svg onload", "<style>*", "<b>bold", "</title></rect><script"] {
                #expect(!html.contains(markup), "\(markup) in \(page)")
            }
            #expect(!html.contains("\u{1}") && !html.contains("\u{1B}") && !html.contains("\u{202E}"))
        }
        let html = try String(contentsOfFile: single, encoding: .utf8)
        #expect(html.contains("&lt;script&gt;console.error(&#39;pwned-table&#39;)&lt;/script&gt;"))
        #expect(html.contains("ctl <span class=\"esc\">\\x01</span><span class=\"esc\">\\x1B</span>[31m<span class=\"esc\">\\u202E</span>gnp.exe"))
        #expect(html.contains("data-name=\"ctl \\x01\\x1B[31m\\u202Egnp.exe\""), "plain in attributes")
        #expect(html.contains("&lt;b&gt;bold&lt;/b&gt; 5 1"), "sqlite_stat1 values as text")
        let pairHTML = try String(contentsOfFile: pair, encoding: .utf8)
        #expect(pairHTML.contains("a&amp;amp;b &#39;q&#39; &quot;dq&quot; <span class=\"esc\">\\x01</span><span class=\"esc\">\\x1B</span>[31m<span class=\"esc\">\\u202E</span>lmth.exe"),
                "a column name")
        #expect(pairHTML.contains("&#39;&lt;iframe src=&quot;https://example.com/&quot;&gt;&lt;/iframe&gt;&#39;"), "a changed value")
        try Self.checkTreemap(html, against: folder.file("a.db"), exactNames: false)

        guard HeadlessBrowser.shouldRun else { return }
        for (page, name) in [(single, "hostile-single"), (pair, "hostile-compare")] {
            let render = try Self.render(page, as: name, in: folder)
            let dom = render.dom
            #expect(dom.components(separatedBy: "<script").count == 2, "\(name): only the report's own script in the DOM")
            #expect(!dom.contains("<img") && !dom.contains("<iframe") && !dom.contains("<b>bold"), "\(name)")
            #expect(dom.contains("&lt;script&gt;console.error('pwned-table')&lt;/script&gt;"), "\(name): the name as text")
        }
    }

    // MARK: Size

    @Test func fiveThousandTablesStayUsable() throws {
        let folder = try TemporaryFolder("report-5000")
        var script = "BEGIN;\n"
        for i in 0..<5_000 {
            script += "CREATE TABLE \"table number \(i) with a longish name\"(id INTEGER PRIMARY KEY, v TEXT);"
            // Few indexes: check's lints compare every table with every index.
            if i % 50 == 0 { script += "CREATE INDEX \"index \(i) of the table\" ON \"table number \(i) with a longish name\"(v);" }
            script += "INSERT INTO \"table number \(i) with a longish name\" VALUES (1, 'x'), (2, 'y');\n"
        }
        script += "CREATE TABLE big(id INTEGER PRIMARY KEY, body TEXT);\n"
        script += "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) INSERT INTO big SELECT i, printf('%.*c', 200, 'b') FROM n;\n"
        script += "COMMIT;\n"
        try makeDatabase(folder.file("a.db"), script)
        try makeDatabase(folder.file("b.db"), script + "UPDATE big SET body = 'changed' WHERE id % 3 = 0;"
                         + (0..<5_000).map { "UPDATE \"table number \($0) with a longish name\" SET v = 'z' WHERE id = 1;" }.joined())
        let page = folder.file("many.html")
        let result = try litectl("report", "a.db", "-o", page, in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.utf8.count < 5_000_000, "\(html.utf8.count) bytes")
        let rects = Self.elements("rect", in: html).filter { $0["data-kind"] != nil }
        #expect(rects.count <= 1_001)
        #expect(rects.contains { $0["data-kind"] == "others" })
        try Self.checkTreemap(html, against: folder.file("a.db"), exactNames: false)
        // Every b-tree is listed in the stats table, the small ones too.
        #expect(Self.tableRows("objects-table", in: html).count == 5_000 + 100 + 2)

        let pairPage = folder.file("many-pair.html")
        let pair = try litectl("report", "a.db", "b.db", "-o", pairPage, in: folder.path)
        #expect(pair.status == 1, "\(pair.stderr)")
        let pairHTML = try String(contentsOfFile: pairPage, encoding: .utf8)
        #expect(pairHTML.utf8.count < 5_000_000, "\(pairHTML.utf8.count) bytes")
        #expect(Self.tableRows("tables-table", in: pairHTML).filter { $0.count > 1 }.count == 5_001)

        guard HeadlessBrowser.shouldRun else { return }
        _ = try Self.render(page, as: "single-5000-tables", in: folder)
    }

    // MARK: Growth

    @Test func growthAgainstAnEarlierStatsReport() throws {
        let folder = try TemporaryFolder("report-growth")
        let db = folder.file("g.db")
        try makeDatabase(db, """
            CREATE TABLE grows(id INTEGER PRIMARY KEY, body TEXT); CREATE INDEX grows_body ON grows(body);
            CREATE TABLE stays(id INTEGER PRIMARY KEY, v);
            INSERT INTO stays VALUES (1, 2);
            """)
        try litectl("stats", "--format", "json", db).stdout.write(toFile: folder.file("old.json"), atomically: false, encoding: .utf8)
        try sqlite3(["-batch", db], input: """
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO grows(body) SELECT printf('%.*c', 100, 'g') FROM n;
            """)
        let page = folder.file("growth.html")
        let result = try litectl("report", db, "--compare", "old.json", "-o", page, in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        let expected = try litectl("stats", "--compare", "old.json", "--tables", "--format", "jsonl", db, in: folder.path).stdout
            .split(separator: "\n").map { try Self.json(String($0)) }
        let rows = Self.tableRows("growth-table", in: html)
        #expect(rows.count == expected.count)
        let grows = try #require(rows.first)
        let oracle = try #require(expected.first { $0["name"] as? String == "grows" })
        #expect(grows[0] == "grows")
        #expect(grows[1] == String(oracle["old_pages"] as! Int))
        #expect(grows[2] == String(oracle["new_pages"] as! Int))
        #expect(grows[3] == "+\(oracle["page_change"] as! Int)")
        // Rows are the table's rows (count(*) then and now), not the entries of its b-trees with its index's.
        #expect(grows[5] == "0 → \(try sqlite3Scalar(db, "SELECT count(*) FROM grows"))", "\(grows)")
        #expect(oracle["new_entries"] as? Int == 6000, "the entries the comparison sums: the table's and its index's")

        let bad = try litectl("report", db, "--compare", "nope.json", "-o", folder.file("x.html"), in: folder.path)
        #expect(bad.status == 2)
        #expect(bad.stderr == "litectl: nope.json: cannot read the file\n")
        #expect(!FileManager.default.fileExists(atPath: folder.file("x.html")))
    }

    /// Chinook's Track has three indexes: the Growth section's rows are its
    /// 3,503 rows (as sqlite3 counts them), not the 14,012 entries of its four b-trees.
    @Test(.enabled(if: realDatabases.contains { $0.hasSuffix("Chinook_Sqlite.sqlite") }))
    func growthCountsRowsNotEntries() throws {
        let chinook = try #require(realDatabases.first { $0.hasSuffix("Chinook_Sqlite.sqlite") })
        let folder = try TemporaryFolder("report-growth-chinook")
        let db = try folder.copy(chinook, as: "c.db")
        try litectl("stats", "--format", "json", db).stdout.write(toFile: folder.file("old.json"), atomically: false, encoding: .utf8)
        try sqlite3(["-batch", db], input: "INSERT INTO Track(Name, MediaTypeId, Milliseconds, UnitPrice) VALUES ('new', 1, 1, 0.99);")
        let page = folder.file("growth.html")
        let result = try litectl("report", db, "--compare", "old.json", "-o", page, in: folder.path)
        #expect(result.status == 0 || result.status == 1, "\(result.stderr)")
        let html = try String(contentsOfFile: page, encoding: .utf8)
        let rows = Self.tableRows("growth-table", in: html)
        let track = try #require(rows.first { $0.first == "Track" })
        let now = try sqlite3Scalar(db, "SELECT count(*) FROM Track")
        #expect(now == "3504")
        #expect(track[5] == "3503 → \(now)", "\(track)")
        for table in ["Album", "Artist", "Invoice", "InvoiceLine"] {
            let row = try #require(rows.first { $0.first == table })
            let count = try sqlite3Scalar(db, "SELECT count(*) FROM \(table)")
            #expect(row[5] == "\(count) → \(count)", "\(table): \(row)")
        }
    }

    // MARK: The output file and exit status

    @Test func outputFileIsWrittenOnlyWhole() throws {
        let folder = try TemporaryFolder("report-output")
        let db = folder.file("d.db")
        try makeDatabase(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'x');")
        let before = try FileFingerprint(db)
        #expect(try litectl("report", "d.db", "-o", "r.html", in: folder.path).status == 0)
        #expect(try folder.listing() == ["d.db", "r.html"], "no -wal or temporary file left")
        let again = try litectl("report", "d.db", "-o", "r.html", in: folder.path)
        #expect(again.status == 2)
        #expect(again.stderr == "litectl: r.html: already exists; not overwritten (--force replaces it)\n")
        #expect(try litectl("report", "d.db", "-o", "r.html", "--force", in: folder.path).status == 0)

        // Never over a database it reads, even with --force, nor through a link.
        let onto = try litectl("report", "d.db", "-o", "d.db", "--force", in: folder.path)
        #expect(onto.status == 2)
        #expect(onto.stderr == "litectl: d.db: is a database the report reads itself (the same file); write to another file\n")
        try FileManager.default.linkItem(atPath: db, toPath: folder.file("link.db"))
        #expect(try litectl("report", "d.db", "-o", "link.db", "--force", in: folder.path).status == 2)
        try FileManager.default.copyItem(atPath: db, toPath: folder.file("x.db"))
        let second = try litectl("report", "d.db", "x.db", "-o", "x.db", "--force", in: folder.path)
        #expect(second.status == 2)
        #expect(second.stderr == "litectl: x.db: is a database the report reads itself (the same file); write to another file\n")
        // Nor over the earlier stats of --compare.
        let stats = try litectl("stats", "d.db", "--json", in: folder.path)
        #expect(stats.status == 0)
        try Data(stats.stdout.utf8).write(to: URL(fileURLWithPath: folder.file("old.json")))
        let overStats = try litectl("report", "d.db", "--compare", "old.json", "-o", "old.json", "--force", in: folder.path)
        #expect(overStats.status == 2)
        #expect(overStats.stderr == "litectl: old.json: is the earlier stats the report compares with itself (the same file); write to another file\n")
        try FileManager.default.removeItem(atPath: folder.file("old.json"))
        try FileManager.default.removeItem(atPath: folder.file("x.db"))
        #expect(try FileFingerprint(db) == before)
        try FileManager.default.removeItem(atPath: folder.file("link.db"))
        // Nor over its -wal, whose transactions would be lost.
        let shell = try ShellSession(db)
        shell.run("PRAGMA wal_autocheckpoint = 0; INSERT INTO t VALUES (2, 'in the wal');")
        #expect(FileManager.default.fileExists(atPath: db + "-wal"))
        let wal = try litectl("report", "d.db", "-o", "d.db-wal", "--force", in: folder.path)
        #expect(wal.status == 2)
        #expect(wal.stderr == "litectl: d.db-wal: is the -wal file of a database the report reads (SQLite reads it with the database); write to another file\n")
        shell.close()
        #expect(try sqlite3Scalar(db, "SELECT v FROM t WHERE id = 2") == "in the wal")

        let missing = try litectl("report", "nope.db", "-o", "n.html", in: folder.path)
        #expect(missing.status == 2)
        #expect(missing.stderr == "litectl: nope.db: no such file\n")
        let folderMissing = try litectl("report", "d.db", "-o", "no/such/r.html", in: folder.path)
        #expect(folderMissing.status == 2)
        #expect(folderMissing.stderr.hasPrefix("litectl: no/such/r.html: no such folder"))
        try "not a database, just text".write(toFile: folder.file("text.db"), atomically: false, encoding: .utf8)
        let text = try litectl("report", "text.db", "-o", "t.html", in: folder.path)
        #expect(text.status == 2)
        #expect(text.stderr.hasPrefix("litectl: text.db: "))
        #expect(try folder.listing() == ["d.db", "r.html", "text.db"], "nothing written on an error")

        #expect(try litectl("report", "a", "b", "c", "-o", "x.html", in: folder.path).status == 64)
        #expect(try litectl("report", "d.db", "d.db", "--compare", "x.json", "-o", "x.html", in: folder.path).status == 64)
        #expect(try litectl("report", "d.db", in: folder.path).status == 64)
    }

    @Test func aFailedCheckIsTheExitStatusAndTheVerdict() throws {
        let folder = try TemporaryFolder("report-verdict")
        try makeDatabase(folder.file("fk.db"), """
            CREATE TABLE parent(id INTEGER PRIMARY KEY);
            CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id));
            CREATE INDEX child_parent ON child(parent_id);
            INSERT INTO child VALUES (1, 42);
            """)
        let result = try litectl("report", "fk.db", "-o", "fk.html", in: folder.path)
        #expect(result.status == 1)
        let html = try String(contentsOfFile: folder.file("fk.html"), encoding: .utf8)
        #expect(html.contains("<span class=\"verdict error\">Fails: 1 error"))
        #expect(html.contains("<code>foreign-key</code>"))

        // A damaged file: the report shows the check's errors instead of failing.
        let damaged = folder.file("damaged.db")
        try makeDatabase(damaged, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT); CREATE INDEX t_body ON t(body);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO t SELECT i, printf('%.*c', 50 + i % 40, 'x') FROM n;
            """)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: damaged))
        let size = try handle.seekToEnd()
        for page in stride(from: UInt64(3), to: size / 4096, by: 5) {
            try handle.seek(toOffset: page * 4096 + 8)
            try handle.write(contentsOf: Data(repeating: 0xA5, count: 64))
        }
        try handle.close()
        let broken = try litectl("report", "damaged.db", "-o", "damaged.html", in: folder.path)
        #expect(broken.status == 1, "\(broken.stderr)")
        let page = try String(contentsOfFile: folder.file("damaged.html"), encoding: .utf8)
        #expect(page.contains("<span class=\"verdict error\">Fails:"))
        #expect(page.contains("<code>integrity</code>"))
    }
}
