// The parts of the HTML reports that can be judged without a browser: the
// escaping every name and value goes through, the treemap's geometry (areas in
// proportion, rectangles that tile the picture without overlapping), and
// values shown exactly as `diff` shows them.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct ReportTests {
    // MARK: Escaping

    func escaped(_ text: String, limit: Int = HTMLText.nameLimit, lineBreaks: Bool = false) -> String {
        var html = HTMLText()
        html.text(text, limit: limit, lineBreaks: lineBreaks)
        return String(decoding: html.bytes, as: UTF8.self)
    }

    @Test func markupCharactersAreEscaped() {
        #expect(escaped("<script>alert('x')</script>") == "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;")
        #expect(escaped("a & b \"q\"") == "a &amp; b &quot;q&quot;")
        #expect(escaped("plain name_1") == "plain name_1")
        #expect(escaped("Zoë 王芳") == "Zoë 王芳")
        var html = HTMLText()
        html.attribute("data-name", "\"><img src=x onerror=alert(1)>")
        #expect(String(decoding: html.bytes, as: UTF8.self) == " data-name=\"&quot;&gt;&lt;img src=x onerror=alert(1)&gt;\"")
    }

    @Test func invisibleCharactersAreShown() {
        #expect(escaped("a\u{1}b") == "a<span class=\"esc\">\\x01</span>b")
        #expect(escaped("\u{1B}[31m") == "<span class=\"esc\">\\x1B</span>[31m")
        #expect(escaped("x\ny\r\tz") == "x<span class=\"esc\">\\n</span>y<span class=\"esc\">\\r</span><span class=\"esc\">\\t</span>z")
        #expect(escaped("x\ny\tz", lineBreaks: true) == "x\ny\tz")
        #expect(escaped("abc\u{202E}fed") == "abc<span class=\"esc\">\\u202E</span>fed")
        #expect(escaped("\u{0}\u{7F}\u{85}") == "<span class=\"esc\">\\x00</span><span class=\"esc\">\\x7F</span><span class=\"esc\">\\u0085</span>")
        var html = HTMLText()
        html.attribute("title", "a\u{1}<")
        #expect(String(decoding: html.bytes, as: UTF8.self) == " title=\"a\\x01&lt;\"")
    }

    @Test func longTextIsCutWithItsLength() {
        let long = String(repeating: "é", count: 300)
        let text = escaped(long)
        #expect(text.hasPrefix(String(repeating: "é", count: 200) + "<span class=\"more\">… (300 characters in all)</span>"))
        var html = HTMLText()
        html.attribute("data-name", long)
        #expect(String(decoding: html.bytes, as: UTF8.self) == " data-name=\"" + String(repeating: "é", count: 200) + "… (300 characters)\"")
    }

    // MARK: Treemap geometry

    @Test func squarifiedRectanglesTileTheBoundsInProportion() {
        var random = SplitMix64(seed: 30)
        for trial in 0..<200 {
            let n = 1 + Int(random.next() % 60)
            var weights = (0..<n).map { _ -> Double in
                // Mostly small, some very large: the shape of real databases.
                Double(1 + random.next() % (random.next() % 4 == 0 ? 100_000 : 50))
            }
            weights.sort(by: >)
            let bounds = TreemapRect(x: 10, y: 20, width: 1000, height: 560)
            let rects = Treemap.squarify(weights, in: bounds)
            #expect(rects.count == n)
            let total = weights.reduce(0, +)
            var area = 0.0
            for (weight, rect) in zip(weights, rects) {
                #expect(rect.width >= 0 && rect.height >= 0)
                #expect(rect.x >= bounds.x - 1e-6 && rect.y >= bounds.y - 1e-6)
                #expect(rect.x + rect.width <= bounds.x + bounds.width + 1e-6, "trial \(trial)")
                #expect(rect.y + rect.height <= bounds.y + bounds.height + 1e-6, "trial \(trial)")
                let expected = bounds.area * weight / total
                #expect(abs(rect.area - expected) <= 1e-6 * bounds.area + 1e-9 * expected, "trial \(trial): \(rect.area) vs \(expected)")
                area += rect.area
            }
            #expect(abs(area - bounds.area) < 1e-6 * bounds.area)
            if n <= 30 {
                for i in 0..<n {
                    for j in (i + 1)..<n {
                        let a = rects[i], b = rects[j]
                        let overlapX = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
                        let overlapY = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
                        #expect(overlapX <= 1e-6 || overlapY <= 1e-6, "trial \(trial): \(i) and \(j) overlap")
                    }
                }
            }
        }
    }

    @Test func squarifiedRectanglesAreNotSlivers() {
        // Equal weights in a square come out as squares, not as strips.
        let rects = Treemap.squarify(Array(repeating: 1, count: 16), in: TreemapRect(x: 0, y: 0, width: 400, height: 400))
        for rect in rects { #expect(max(rect.width / rect.height, rect.height / rect.width) < 1.5) }
    }

    /// Two tables whose names Swift's String equality would call equal (é
    /// precomposed, and e with a combining acute accent) are two tables to
    /// SQLite, and two groups of the treemap.
    @Test func namesAreComparedAsBytes() throws {
        let folder = try TemporaryFolder("report-names")
        let db = folder.file("n.db")
        try makeDatabase(db, """
            CREATE TABLE "\u{E9}"(a INTEGER PRIMARY KEY, b); CREATE INDEX i1 ON "\u{E9}"(b);
            CREATE TABLE "e\u{301}"(a INTEGER PRIMARY KEY, b); CREATE INDEX i2 ON "e\u{301}"(b);
            INSERT INTO "\u{E9}" VALUES (1, 'x'); INSERT INTO "e\u{301}" VALUES (1, 'y');
            """)
        let names = TreemapLayout(try FileStats.read(path: db)).tables.map(\.name).filter { $0 != "sqlite_schema" }
        #expect(names.count == 2, "\(names)")
        #expect(Set(names.map { Array($0.utf8) }) == [Array("\u{E9}".utf8), Array("e\u{301}".utf8)])
    }

    @Test func smallTablesGoIntoOthersAndEveryPageIsDrawn() throws {
        let folder = try TemporaryFolder("report-treemap")
        let db = folder.file("many.db")
        var script = "PRAGMA page_size = 1024; BEGIN;\n"
        script += "CREATE TABLE big(id INTEGER PRIMARY KEY, body TEXT);\n"
        script += "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO big SELECT i, printf('%.*c', 400, 'x') FROM n;\n"
        for i in 0..<400 { script += "CREATE TABLE t\(i)(a INTEGER PRIMARY KEY, b); CREATE INDEX t\(i)_b ON t\(i)(b);\n" }
        script += "COMMIT;\n"
        try makeDatabase(db, script)
        let stats = try FileStats.read(path: db)
        let layout = TreemapLayout(stats)
        let others = try #require(layout.blocks.first { $0.kind == .others })
        let drawnTables = Set(layout.blocks.filter { $0.kind == .table || $0.kind == .index }.map(\.table))
        #expect(drawnTables.count <= TreemapLayout.maxTables)
        // Every b-tree is drawn once or counted in the others, every page once.
        let drawn = layout.blocks.filter { $0.kind == .table || $0.kind == .index }
        #expect(drawn.count + others.count == stats.objects.count)
        #expect(layout.blocks.reduce(0) { $0 + $1.pages } == stats.pageCount)
        let area = layout.blocks.reduce(0.0) { $0 + $1.rect.area }
        #expect(abs(area - TreemapLayout.width * TreemapLayout.height) < 1e-3)
        for block in layout.blocks {
            let expected = TreemapLayout.width * TreemapLayout.height * Double(block.pages) / Double(stats.pageCount)
            #expect(abs(block.rect.area - expected) < 1e-3)
        }
    }

    // MARK: Values

    @Test func valuesAreShownAsDiffShowsThem() throws {
        let values: [Value] = [.null, .integer(-9_223_372_036_854_775_808), .real(0.1 + 0.2), .real(1), .real(-0.0),
                               .real(.infinity), .text(Array("it's".utf8)), .text([0x61, 0x0D, 0x0A]), .text([0xFF, 0x61]),
                               .blob([0, 1, 0xFE]), .text(Array("line\nbreak".utf8))]
        let writer = DiffReportWriter(sink: MemorySink(), style: .text)
        for value in values {
            let shown = value.withCell { ReportValues.diffForm($0) }
            #expect(shown.text == writer.display(value), "\(value)")
            #expect(shown.fullBytes == nil)
        }
        let long = Value.text(Array(repeating: 0x61, count: 255) + Array("é".utf8) + Array(repeating: 0x7A, count: 300))
        let cut = long.withCell { ReportValues.diffForm($0) }
        #expect(cut.fullBytes == 557)
        // The 2-byte é straddles byte 256: the cut comes before it, never inside it.
        #expect(cut.text == "'" + String(repeating: "a", count: 255) + "'")
        let blob = Value.blob(Array(repeating: 0xAB, count: 1000)).withCell { ReportValues.diffForm($0) }
        #expect(blob.text == "x'" + String(repeating: "AB", count: 256) + "'")
        #expect(blob.fullBytes == 1000)
    }

    // MARK: Pages

    @Test func comparisonKeepsAFewRowsPerTableAndExactCounts() throws {
        let folder = try TemporaryFolder("report-sample")
        let schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, v); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO t SELECT i, i FROM n;"
        try makeDatabase(folder.file("a.db"), schema)
        try makeDatabase(folder.file("b.db"), schema + "UPDATE t SET v = -v WHERE id % 5 = 0; DELETE FROM t WHERE id % 7 = 0;")
        var options = ReportOptions()
        options.rowsPerTable = 3
        let outcome = try ComparisonReport.make(pathA: folder.file("a.db"), pathB: folder.file("b.db"), options: options)
        #expect(outcome.findings)
        let html = String(decoding: outcome.html, as: UTF8.self)
        let updated = Int(try sqlite3Scalar(folder.file("a.db"), "SELECT count(*) FROM t WHERE id % 5 = 0 AND id % 7 != 0"))!
        let deleted = Int(try sqlite3Scalar(folder.file("a.db"), "SELECT count(*) FROM t WHERE id % 7 = 0"))!
        #expect(html.contains("<td class=\"n\">\(updated)</td><td class=\"n\">\(deleted)</td>"))
        #expect(html.components(separatedBy: "<td class=\"op\"").count - 1 == 3)
        #expect(html.contains("… \(updated + deleted - 3) more changed rows"))

        let same = try ComparisonReport.make(pathA: folder.file("a.db"), pathB: folder.file("a.db"))
        #expect(!same.findings)
        #expect(String(decoding: same.html, as: UTF8.self).contains("Identical"))
    }

    @Test func anEmptyDatabaseHasAReportToo() throws {
        let folder = try TemporaryFolder("report-empty")
        #expect(FileManager.default.createFile(atPath: folder.file("empty.db"), contents: Data()))
        let outcome = try DatabaseReport.make(path: folder.file("empty.db"))
        #expect(outcome.findings, "the check fails an empty database")
        let html = String(decoding: outcome.html, as: UTF8.self)
        // A 0-byte file has a report, with the check's error that it holds no table.
        #expect(html.contains("the file is empty (0 bytes)"))
        #expect(html.contains("The database has no pages.") || html.contains("<svg"))
        #expect(try folder.listing() == ["empty.db"])
    }

    @Test func aWideTableShowsItsKeyItsFirstAndItsChangedColumns() throws {
        let folder = try TemporaryFolder("report-wide")
        let columns = (1...60).map { "c\($0)" }
        let schema = "CREATE TABLE w(id INTEGER PRIMARY KEY, \(columns.joined(separator: ", "))); INSERT INTO w(id, c1, c55) VALUES (1, 'a', 'old');"
        try makeDatabase(folder.file("a.db"), schema)
        try makeDatabase(folder.file("b.db"), schema + "UPDATE w SET c55 = 'new' WHERE id = 1;")
        let html = String(decoding: try ComparisonReport.make(pathA: folder.file("a.db"), pathB: folder.file("b.db")).html, as: UTF8.self)
        #expect(html.contains("<th class=\"key\">id</th><th>c1</th>"))
        #expect(html.contains("<th>c29</th><th>c55</th></tr>"), "the first 29 others, then the changed one")
        #expect(html.contains("30 of its 61 columns not shown"))
        #expect(html.contains("<td class=\"v changed\">&#39;old&#39;</td>"))
        #expect(html.contains("<td class=\"v changed\">&#39;new&#39;</td>"))
    }
}
