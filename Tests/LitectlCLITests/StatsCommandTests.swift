// `litectl stats` and `litectl analyze` through the built binary: formats,
// --top, --compare on two reports, and analyze writing what the sqlite3 CLI's
// ANALYZE writes — or, with --dry-run, nothing at all.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct StatsCommandTests {
    static let script = """
        CREATE TABLE big(id INTEGER PRIMARY KEY, body TEXT);
        CREATE INDEX big_body ON big(body);
        CREATE TABLE small(id INTEGER PRIMARY KEY, v);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
        INSERT INTO big SELECT i, printf('%.*c', 100 + i % 50, 'b') FROM n;
        INSERT INTO small VALUES (1, 2);
        """

    @Test func rowsLargestFirstAndTop() throws {
        let folder = try TemporaryFolder("cli-stats")
        try makeDatabase(folder.file("s.db"), Self.script)
        let before = try FileFingerprint(folder.file("s.db"))
        let result = try litectl("stats", "--format", "csv", "s.db", in: folder.path)
        #expect(result.status == 0)
        let rows = result.stdout.split(separator: "\r\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        #expect(rows[0].joined(separator: ",") == FileStats.columns.joined(separator: ","))
        let names = rows.dropFirst().map { String($0[0]) }
        #expect(Set(names) == ["big", "big_body", "small", "sqlite_schema"])
        let pages = rows.dropFirst().map { Int($0[3])! }
        #expect(pages == pages.sorted(by: >))
        // The pages add up to what the sqlite3 CLI counts in dbstat.
        #expect(pages.reduce(0, +) == Int(try sqlite3Scalar(folder.file("s.db"), "SELECT count(*) FROM dbstat")))
        #expect(try FileFingerprint(folder.file("s.db")) == before)

        let top = try litectl("stats", "--format", "jsonl", "--top", "1", "--tables", "s.db", in: folder.path)
        let line = try #require(try JSONSerialization.jsonObject(with: Data(top.stdout.utf8)) as? [String: Any])
        #expect(line["name"] as? String == "big")
        #expect(line["kind"] as? String == "table+indexes")
        #expect(line["entries"] as? Int == 4000, "2000 rows and 2000 index keys")
    }

    @Test func compareTwoReports() throws {
        let folder = try TemporaryFolder("cli-stats-compare")
        try makeDatabase(folder.file("s.db"), Self.script)
        let old = try litectl("stats", "--format", "json", "s.db", in: folder.path)
        #expect(old.status == 0)
        try old.stdout.write(toFile: folder.file("old.json"), atomically: false, encoding: .utf8)
        try sqlite3(["-batch", folder.file("s.db")], input: """
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
            INSERT INTO small(v) SELECT randomblob(100) FROM n;
            """)
        let result = try litectl("stats", "--compare", "old.json", "--format", "jsonl", "s.db", in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try result.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(rows.first?["name"] as? String == "small", "largest growth first")
        #expect(rows.first?["old_entries"] as? Int == 1)
        #expect(rows.first?["new_entries"] as? Int == 5001)
        let oldDoc = try #require(try JSONSerialization.jsonObject(with: Data(old.stdout.utf8)) as? [String: Any])
        let oldSmall = try #require((oldDoc["objects"] as? [[String: Any]])?.first { $0["name"] as? String == "small" })
        let newPages = Int(try sqlite3Scalar(folder.file("s.db"), "SELECT count(*) FROM dbstat WHERE name = 'small'"))!
        #expect(rows.first?["old_pages"] as? Int == oldSmall["pages"] as? Int)
        #expect(rows.first?["new_pages"] as? Int == newPages)
        #expect(rows.first?["page_change"] as? Int == newPages - (oldSmall["pages"] as! Int))

        try "{}".write(toFile: folder.file("bad.json"), atomically: false, encoding: .utf8)
        let bad = try litectl("stats", "--compare", "bad.json", "s.db", in: folder.path)
        #expect(bad.status == 2)
        #expect(bad.stderr.hasPrefix("litectl: bad.json: not a litectl stats JSON report"))
    }

    @Test func missingFile() throws {
        let folder = try TemporaryFolder("cli-stats-missing")
        let result = try litectl("stats", "nope.db", in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr == "litectl: nope.db: no such file\n")
        #expect(try folder.listing().isEmpty)
    }

    // MARK: analyze

    func stat1(_ path: String) throws -> String {
        try sqlite3(["-batch", path, "SELECT tbl, idx, stat FROM sqlite_stat1 ORDER BY tbl, idx"])
    }

    @Test func analyzeWritesWhatSQLiteWrites() throws {
        let folder = try TemporaryFolder("cli-analyze")
        try makeDatabase(folder.file("a.db"), Self.script)
        _ = try folder.copy(folder.file("a.db"), as: "oracle.db")
        try sqlite3(["-batch", folder.file("oracle.db"), "ANALYZE"])
        let result = try litectl("analyze", "--format", "jsonl", "a.db", in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try stat1(folder.file("a.db")) == (try stat1(folder.file("oracle.db"))))
        let rows = try result.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let index = try #require(rows.first { $0["index"] as? String == "big_body" })
        #expect(index["before_rows"] is NSNull)
        #expect(index["after_rows"] as? Int == 2000)
        #expect(index["after"] as? String == "2000 rows; 40 per key prefix")
        #expect(index["changed"] as? Int == 1)
    }

    @Test func dryRunLeavesTheFileUnchanged() throws {
        let folder = try TemporaryFolder("cli-analyze-dry")
        try makeDatabase(folder.file("a.db"), Self.script)
        let before = try FileFingerprint(folder.file("a.db"))
        let result = try litectl("analyze", "--dry-run", "--format", "jsonl", "a.db", in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try FileFingerprint(folder.file("a.db")).bytes == before.bytes)
        #expect(try folder.listing() == ["a.db"], "no journal left")
        #expect(result.stdout.contains(#""index":"big_body","before_rows":null,"before":null,"after_rows":2000"#))

        // With statistics already there, a dry run after more rows shows the change and keeps the old ones.
        try sqlite3(["-batch", folder.file("a.db"), "ANALYZE; INSERT INTO small(v) VALUES (3), (4);"])
        let stored = try stat1(folder.file("a.db"))
        let snapshot = try FileFingerprint(folder.file("a.db"))
        let again = try litectl("analyze", "--dry-run", "--format", "jsonl", "a.db", "small", in: folder.path)
        #expect(again.status == 0)
        #expect(again.stdout.contains(#""table":"small","index":null,"before_rows":1,"before":"1 row","after_rows":3"#), "\(again.stdout)")
        #expect(try FileFingerprint(folder.file("a.db")).bytes == snapshot.bytes)
        #expect(try stat1(folder.file("a.db")) == stored)
    }

    @Test func optimize() throws {
        let folder = try TemporaryFolder("cli-analyze-optimize")
        try makeDatabase(folder.file("a.db"), Self.script + "\nANALYZE;")
        let stored = try stat1(folder.file("a.db"))
        let result = try litectl("analyze", "--optimize", "--format", "csv", "a.db", in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("table,index,before_rows,before,after_rows,after,changed\r\n"))
        // Statistics that are current stay as they are.
        #expect(try stat1(folder.file("a.db")) == stored)
        #expect(try sqlite3Scalar(folder.file("a.db"), "PRAGMA integrity_check") == "ok")
        #expect(try litectl("analyze", "--optimize", "a.db", "big", in: folder.path).status == 64)
    }

    @Test func analyzeUnknownTargetChangesNothing() throws {
        let folder = try TemporaryFolder("cli-analyze-unknown")
        try makeDatabase(folder.file("a.db"), Self.script)
        let before = try FileFingerprint(folder.file("a.db"))
        let result = try litectl("analyze", "a.db", "nosuch", in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr == "litectl: a.db: no table or index named nosuch\n")
        #expect(try FileFingerprint(folder.file("a.db")) == before)
    }
}
