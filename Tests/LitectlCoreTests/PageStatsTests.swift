// `FileStats` against the independent oracle, sqlite3_analyzer: for every
// table, index and table-with-indexes, and for the file, the figures litectl
// reads from dbstat must equal the ones in the analyzer's report, on databases
// that exercise page sizes 512 and 65536, overflow chains, auto_vacuum pointer
// maps, a freelist and WITHOUT ROWID tables.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// sqlite3_analyzer's report, parsed into sections of `label → value`.
struct AnalyzerReport {
    var sections: [String: [String: String]] = [:]
    var header: [String: String] = [:]

    init(path: String) throws {
        let result = try runProcess("/usr/bin/sqlite3_analyzer", [path])
        guard result.status == 0 else {
            throw DatabaseError(code: .error, message: "sqlite3_analyzer failed: \(result.stderr)", path: path)
        }
        var current: String?
        for line in result.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("*** ") {
                // "*** Table FOO w/o any indices *****"
                var title = line.dropFirst(4)
                while title.hasSuffix("*") { title = title.dropLast() }
                current = String(title).trimmingCharacters(in: .whitespaces)
                continue
            }
            if line.hasPrefix("/**") { current = nil; continue }
            guard let dots = line.range(of: "..") else { continue }
            let label = String(line[..<dots.lowerBound])
            let rest = line[dots.lowerBound...].drop { $0 == "." }.trimmingCharacters(in: .whitespaces)
            let value = String(rest.split(separator: " ").first ?? "")
            if let current { sections[current, default: [:]][label] = value } else { header[label] = value }
        }
    }
}

@Suite struct PageStatsTests {
    /// The sqlite3_analyzer section for `object`, and the figures to compare.
    func expectAgreement(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stats = try FileStats.read(path: path)
        let report = try AnalyzerReport(path: path)

        #expect(report.header["Page size in bytes"] == String(stats.pageSize), sourceLocation: sourceLocation)
        #expect(report.header["Pages in the whole file (measured)"] == String(stats.pageCount), sourceLocation: sourceLocation)
        #expect(report.header["Pages on the freelist (per header)"] == String(stats.freelistPages), sourceLocation: sourceLocation)
        #expect(report.header["Pages of auto-vacuum overhead"] == String(stats.pointerMapPages), sourceLocation: sourceLocation)
        #expect(report.header["Pages that store data"] == String(stats.usedPages), sourceLocation: sourceLocation)

        let tablesWithIndexes = Set(stats.objects.filter { $0.kind == .index }.map { $0.table.uppercased() })
        var compared = 0
        for object in stats.objects {
            let title: String
            switch object.kind {
            case .index: title = "Index \(object.name.uppercased()) of table \(object.table)"
            default:
                title = tablesWithIndexes.contains(object.name.uppercased())
                    ? "Table \(object.name.uppercased()) w/o any indices" : "Table \(object.name.uppercased())"
            }
            let section = try #require(report.sections[title] ?? report.sections.first { $0.key.uppercased() == title.uppercased() }?.value,
                                       "no analyzer section \(title)", sourceLocation: sourceLocation)
            compare(object, section, pageSize: stats.pageSize, single: true, sourceLocation: sourceLocation)
            compared += 1
        }
        for group in stats.tables where tablesWithIndexes.contains(group.name.uppercased()) {
            let title = "Table \(group.name.uppercased()) and all its indices"
            let section = try #require(report.sections[title], "no analyzer section \(title)", sourceLocation: sourceLocation)
            compare(group, section, pageSize: stats.pageSize, single: false, sourceLocation: sourceLocation)
            compared += 1
        }
        #expect(compared > 1, sourceLocation: sourceLocation)
    }

    func compare(_ o: ObjectStats, _ s: [String: String], pageSize: Int64, single: Bool, sourceLocation: SourceLocation) {
        func expectValue(_ label: String, _ value: Int64, absentMeans zero: Bool = false) {
            let shown = s[label] ?? (zero ? "0" : nil)
            #expect(shown == String(value), "\(o.name) (\(o.kind.rawValue)): \(label)", sourceLocation: sourceLocation)
        }
        expectValue("Number of entries", o.entries)
        expectValue("Bytes of storage consumed", o.bytes(pageSize: pageSize))
        expectValue("Bytes of payload", o.payload)
        expectValue("Maximum payload per entry", o.maxPayload)
        expectValue("Entries that use overflow", o.overflowEntries)
        expectValue("Index pages used", o.interiorPages, absentMeans: true)
        expectValue("Primary pages used", o.leafPages)
        expectValue("Overflow pages used", o.overflowPages)
        expectValue("Total pages used", o.pages)
        expectValue("Unused bytes on index pages", o.interiorUnused, absentMeans: true)
        expectValue("Unused bytes on primary pages", o.leafUnused)
        expectValue("Unused bytes on overflow pages", o.overflowUnused)
        if single {
            expectValue("B-tree depth", o.depth)
            expectValue("Non-sequential pages", o.nonSequentialPages, absentMeans: true)
        }
        let average = s["Average payload per entry"].flatMap(Double.init)
        #expect(average.map { abs($0 - o.averagePayload) < 0.006 } ?? false, "\(o.name): average payload", sourceLocation: sourceLocation)
    }

    static let schema = """
        CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, email TEXT UNIQUE, note BLOB);
        CREATE INDEX customers_name ON customers(name);
        CREATE TABLE pairs(a INTEGER, b TEXT, v, PRIMARY KEY (a, b)) WITHOUT ROWID;
        CREATE TABLE loose(x, y);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
        INSERT INTO customers SELECT i, 'name ' || (i * 7919 % 1000), 'user' || i || '@example.com',
               CASE WHEN i % 50 = 0 THEN zeroblob(3000 + i) ELSE randomblob(i % 40) END FROM n;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
        INSERT INTO pairs SELECT i % 97, 'k' || i, printf('%.*c', i % 300, 'x') FROM n;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
        INSERT INTO loose SELECT i, i * 1.5 FROM n;
        """

    @Test(arguments: [512, 65536])
    func pageSizes(_ pageSize: Int) throws {
        let folder = try TemporaryFolder("stats-page")
        let db = folder.file("p\(pageSize).db")
        try makeDatabase(db, "PRAGMA page_size=\(pageSize);\n" + Self.schema)
        try expectAgreement(db)
        #expect(try FileStats.read(path: db).pageSize == Int64(pageSize))
    }

    @Test func overflowHeavy() throws {
        let folder = try TemporaryFolder("stats-overflow")
        let db = folder.file("o.db")
        try makeDatabase(db, """
            CREATE TABLE docs(id INTEGER PRIMARY KEY, body BLOB, title TEXT);
            CREATE INDEX docs_title ON docs(title);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
            INSERT INTO docs SELECT i, randomblob(5000 + i * 97), printf('%.*c', 1000 + i * 20, 't') FROM n;
            """)
        let stats = try FileStats.read(path: db)
        let docs = try #require(stats.objects.first { $0.name == "docs" })
        #expect(docs.overflowPages > docs.leafPages)
        #expect(docs.overflowEntries == 300)
        try expectAgreement(db)
    }

    @Test func autoVacuumAndFreelist() throws {
        let folder = try TemporaryFolder("stats-av")
        let full = folder.file("full.db")
        try makeDatabase(full, "PRAGMA auto_vacuum=FULL;\n" + Self.schema)
        let stats = try FileStats.read(path: full)
        #expect(stats.pointerMapPages > 0)
        try expectAgreement(full)

        let incremental = folder.file("incremental.db")
        try makeDatabase(incremental, "PRAGMA auto_vacuum=INCREMENTAL;\n" + Self.schema + "\nDELETE FROM customers WHERE id % 3 = 0;")
        try expectAgreement(incremental)

        let freelist = folder.file("freelist.db")
        try makeDatabase(freelist, Self.schema + "\nDELETE FROM customers WHERE id > 500; DROP TABLE loose;")
        let freed = try FileStats.read(path: freelist)
        #expect(freed.freelistPages > 0)
        #expect(freed.freelistPages == Int64(try sqlite3Scalar(freelist, "PRAGMA freelist_count")))
        try expectAgreement(freelist)
    }

    @Test(.enabled(if: !realDatabases.isEmpty))
    func realDatabasesAgree() throws {
        let folder = try TemporaryFolder("stats-real")
        for source in realDatabases {
            try expectAgreement(try folder.copy(source))
        }
    }

    @Test func compareReportsGrowth() throws {
        let folder = try TemporaryFolder("stats-compare")
        let db = folder.file("g.db")
        try makeDatabase(db, Self.schema)
        let before = try FileStats.read(path: db)
        let json = Array(before.json.pretty.utf8)
        try sqlite3(["-batch", db], input: """
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
            INSERT INTO customers(name, email, note) SELECT 'more', 'more' || i || '@x', randomblob(200) FROM n;
            CREATE TABLE fresh(x); INSERT INTO fresh VALUES (1);
            DROP TABLE loose;
            """)
        let after = try FileStats.read(path: db)
        let comparison = try StatsComparison(oldJSON: json, oldPath: "old.json", new: after, tables: false)
        let customers = try #require(comparison.changes.first { $0.name == "customers" && $0.kind == "table" })
        #expect(customers.oldPages == before.objects.first { $0.name == "customers" }?.pages)
        #expect(customers.newPages == after.objects.first { $0.name == "customers" }?.pages)
        #expect(customers.oldEntries == 3000 && customers.newEntries == 6000)
        #expect(comparison.changes.first?.name == "customers", "largest growth first")
        let fresh = try #require(comparison.changes.first { $0.name == "fresh" })
        #expect(fresh.oldPages == nil && fresh.newPages == 1)
        let loose = try #require(comparison.changes.first { $0.name == "loose" })
        #expect(loose.newPages == nil && loose.oldPages ?? 0 > 0)
        #expect(comparison.oldPageCount == before.pageCount && comparison.newPageCount == after.pageCount)

        #expect(throws: DatabaseError.self) {
            try StatsComparison(oldJSON: Array("[1, 2]".utf8), oldPath: "bad.json", new: after, tables: false)
        }
    }
}
