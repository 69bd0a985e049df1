// The diff with rows decoded from the pages against the diff with statements
// only: on random pairs (a random database and a changed copy, some VACUUMed
// into other pages or another page size, some in WAL mode), every output
// format must be byte for byte the same, with one reading thread per side or
// several (key-ordered parts read at once).
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct DiffPagesTests {
    /// Changes a copy of a random database: updates, deletes and inserts on
    /// every table (statements SQLite refuses are skipped).
    static func change(_ path: String, tables: [String], seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let db = try Connection(path: path, mode: .readWrite)
        defer { try? db.close() }
        let literals = ["NULL", "1", "1.0", "'changed'", "x'00'", "-0.0", "'é'", "9223372036854775807", "zeroblob(5000)"]
        for table in tables {
            let columns = try db.rows("SELECT name FROM pragma_table_info(?1)", [.text(table)]).compactMap { row -> String? in
                if case .text(let bytes) = row[0] { return String(decoding: bytes, as: UTF8.self) }
                return nil
            }
            let withoutRowid = try db.scalar("SELECT wr FROM pragma_table_list WHERE name = ?1", [.text(table)]) == .integer(1)
            let every = Int.random(in: 2...9, using: &rng)
            let pick = withoutRowid ? "length(CAST(c0 AS BLOB)) % \(every) = 1" : "rowid % \(every) = 1"
            var statements: [String] = []
            for column in columns where Bool.random(using: &rng) {
                statements.append("UPDATE \(table) SET \(column) = \(literals.randomElement(using: &rng)!) WHERE \(pick)")
            }
            statements.append("DELETE FROM \(table) WHERE " + (withoutRowid ? "length(CAST(c0 AS BLOB)) % 11 = 3" : "rowid % 13 = 5"))
            statements.append("INSERT OR IGNORE INTO \(table) SELECT * FROM \(table) WHERE \(pick)")
            for sql in statements { try? db.execute(sql) }
        }
    }

    /// The diff of `a` and `b` in `style` (or as SQL), read as `options` say.
    static func output(_ a: String, _ b: String, sql: Bool, style: DiffReportStyle = .jsonl, readPages: Bool,
                       threads: Int = 0, fullScan: Bool = false, records: Bool = true,
                       dataOnly: Bool = false) throws -> (text: String, summary: DiffSummary) {
        let sink = MemorySink()
        let consumer: DiffConsumer = sql ? SQLPatchWriter(sink: sink) : DiffReportWriter(sink: sink, style: style)
        var options = DiffOptions()
        options.readPages = readPages
        options.compareRecords = records
        options.dataOnly = dataOnly
        options.skipSharedPages = !fullScan
        options.threadsPerSide = threads
        let summary = try DiffEngine.run(pathA: a, pathB: b, options: options, consumer: consumer)
        return (String(decoding: sink.bytes, as: UTF8.self), summary)
    }

    @Test(arguments: 0..<6)
    func pagesAndStatementsDiffAlike(batch: Int) throws {
        let folder = try TemporaryFolder("diff-pages")
        for k in 0..<12 {
            let seed = UInt64(70_000 + batch * 100 + k)
            var settings = RandomDatabase.Settings()
            var rng = SplitMix64(seed: seed)
            settings = RandomDatabase.Settings.random(&rng)
            let a = try RandomDatabase.make(at: folder.file("a\(seed).db"), seed: seed, tableCount: 1 + k % 5, settings: settings)
            try a.writer?.close()
            let b = folder.file("b\(seed).db")
            switch k % 3 {
            case 0: try FileManager.default.copyItem(atPath: a.path, toPath: b)
            case 1: try sqlite3([a.path, "VACUUM INTO '\(b)'"])
            default: try sqlite3([a.path, "PRAGMA page_size = 1024", "VACUUM INTO '\(b)'"])
            }
            try Self.change(b, tables: a.tables, seed: seed)
            for sql in [false, true] {
                // UTF-16 text keys: the statement path refuses (their order is not
                // the merge's); the page path must refuse alike.
                let statements: (text: String, summary: DiffSummary)
                do {
                    statements = try Self.output(a.path, b, sql: sql, readPages: false)
                } catch {
                    #expect(throws: (any Error).self) { try Self.output(a.path, b, sql: sql, readPages: true, threads: 2) }
                    continue
                }
                // Raw records compared (the default), and every row decoded.
                for (threads, records) in [(1, true), (3, true), (1, false)] {
                    let pages = try Self.output(a.path, b, sql: sql, readPages: true, threads: threads, records: records)
                    let same = pages.text == statements.text
                    #expect(same, "\(a.summary)\n\(sql ? "sql" : "jsonl"), \(threads) threads, records \(records):\n\(pages.text.prefix(600))\n--- statements:\n\(statements.text.prefix(600))")
                    #expect(pages.summary.tables.map(\.counts) == statements.summary.tables.map(\.counts))
                }
            }
        }
    }

    /// Tables keyed by rowid, INTEGER PRIMARY KEY or a WITHOUT ROWID key, and
    /// tables without a primary key (in rowid order), are read from pages;
    /// the others, and only they, are named in the notes.
    @Test func whichTablesArePagesAndWhichStatements() throws {
        let folder = try TemporaryFolder("diff-pages-notes")
        let schema = """
            CREATE TABLE r(id INTEGER PRIMARY KEY, v); CREATE TABLE w(a, b, v, PRIMARY KEY(a, b)) WITHOUT ROWID;
            CREATE TABLE k(x, y); CREATE TABLE t(name TEXT PRIMARY KEY, v); CREATE TABLE d(a, v, PRIMARY KEY(a DESC)) WITHOUT ROWID;
            CREATE VIRTUAL TABLE f USING fts5(body);
            """
        try makeDatabase(folder.file("a.db"), schema + """
            INSERT INTO r VALUES (1, 'a'), (2, 'b'); INSERT INTO w VALUES (1, 1, 'x'); INSERT INTO k VALUES (1, 2);
            INSERT INTO t VALUES ('n', 1); INSERT INTO d VALUES (1, 1); INSERT INTO f VALUES ('one');
            """)
        try makeDatabase(folder.file("b.db"), schema + """
            INSERT INTO r VALUES (1, 'a'), (2, 'c'); INSERT INTO w VALUES (1, 1, 'y'); INSERT INTO k VALUES (1, 3);
            INSERT INTO t VALUES ('n', 2); INSERT INTO d VALUES (1, 2); INSERT INTO f VALUES ('two');
            """)
        let (text, summary) = try Self.output(folder.file("a.db"), folder.file("b.db"), sql: false, style: .summary, readPages: true,
                                              fullScan: true)
        #expect(text.contains("r: +0 -0 ~1") && text.contains("w: +0 -0 ~1"))
        let read = Set(summary.notes.compactMap { $0.split(separator: " ").dropFirst().first.map(String.init) })
        // k has no primary key: read from its pages in rowid order (see KeylessResidue).
        #expect(read == ["t", "d", "f"], "\(summary.notes)")
        #expect(text.contains("k: +1 -1 ~0"))
        // With the shared-pages shortcut: r's row 1 is a cell both files share, but no whole page is,
        // so r is still read in full from its pages (bigTablesInManyParts shows a copy that shares pages).
        let shared = try Self.output(folder.file("a.db"), folder.file("b.db"), sql: false, style: .summary, readPages: true)
        #expect(shared.text == text)
        #expect(shared.summary.notes == summary.notes)
    }
}

extension DiffPagesTests {
    /// Tables of thousands of rows, split into many key-ordered parts read by
    /// four threads per side: against a copy with other pages (VACUUM INTO,
    /// 512-byte pages) changed here and there, the page path reports what the
    /// statement path does, and reads every keyed table from its pages.
    @Test(arguments: ["UTF-8", "UTF-16le"])
    func bigTablesInManyParts(encoding: String) throws {
        let folder = try TemporaryFolder("diff-pages-parts")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, """
            PRAGMA page_size = 1024; PRAGMA encoding = '\(encoding)';
            CREATE TABLE r(id INTEGER PRIMARY KEY, v, w REAL);
            CREATE TABLE w(a TEXT, b INT, v, PRIMARY KEY(a, b)) WITHOUT ROWID;
            CREATE TABLE n(k TEXT PRIMARY KEY, v);
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 20000)
            INSERT INTO r SELECT i * 3, CASE WHEN i % 997 = 0 THEN zeroblob(3000) || i WHEN i % 5 = 0 THEN NULL
                ELSE 'é' || hex(randomblob(i % 40)) END, i % 7 FROM c;
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 15000)
            INSERT INTO w SELECT printf('k%06d', i / 3), i % 3, CASE WHEN i % 1201 = 0 THEN randomblob(5000) ELSE i * 1.5 END FROM c;
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 3000)
            INSERT INTO n SELECT CASE WHEN i % 10 = 0 THEN NULL ELSE 'n' || i END, i % 4 FROM c;
            """)
        try sqlite3([a, "PRAGMA page_size = 512", "VACUUM INTO '\(b)'"])
        try sqlite3([b, """
            UPDATE r SET v = 'changed' WHERE id % 1001 = 0; DELETE FROM r WHERE id % 2003 = 1;
            INSERT INTO r(id, v) VALUES (1, 'first'), (100000, 'last');
            UPDATE w SET v = NULL WHERE b = 1 AND a LIKE '%7'; DELETE FROM w WHERE a LIKE 'k0001%';
            UPDATE n SET v = 9 WHERE k IS NULL AND rowid % 20 = 0; DELETE FROM n WHERE k = 'n5';
            """])
        // The trees are big enough to split into many parts.
        let connection = try Connection(path: b, mode: .readOnly)
        try connection.readTransaction {
            let reader = try SnapshotReader(connection, walIndex: nil)
            for name in ["r", "w"] {
                let table = try #require(try connection.readSchema().table(named: name))
                let layout = try reader.layout(table, columns: table.columns.map(\.name))
                let parts = try BTreeWalker(pages: reader.pages, claimed: ClaimedPages(pageCount: reader.pages.pageCount))
                    .split(layout.root, index: layout.withoutRowid, wanted: 16)
                #expect(parts.count >= 16, "\(name): \(parts.count) parts")
            }
        }
        // A copy of A with one row changed shares most pages: what lies between them is read with
        // statements (the shortcut serves UTF-8 files only).
        let c = folder.file("c.db")
        try FileManager.default.copyItem(atPath: a, toPath: c)
        try sqlite3([c, "UPDATE r SET v = 'one' WHERE id = 30000"])
        let copy = try Self.output(a, c, sql: true, readPages: true)
        #expect(copy.text == (try Self.output(a, c, sql: true, readPages: false)).text)
        #expect(copy.summary.tables.map(\.counts.total) == [0, 1, 0])
        #expect(copy.summary.notes.contains("table r of A read with statements: rows outside the pages both files share")
                == (encoding == "UTF-8"), "\(copy.summary.notes)")
        for sql in [false, true] {
            let statements = try Self.output(a, b, sql: sql, readPages: false)
            for threads in [1, 4] {
                let pages = try Self.output(a, b, sql: sql, readPages: true, threads: threads)
                #expect(pages.text == statements.text, "\(encoding), \(threads) threads")
                #expect(pages.summary.tables.map(\.counts) == statements.summary.tables.map(\.counts))
                #expect(pages.summary.tables.allSatisfy { $0.counts.total > 0 })
                // r always from its pages; w too where its text key sorts as the merge does (UTF-8).
                let fromStatements = Set(pages.summary.notes.compactMap { $0.split(separator: " ").dropFirst().first.map(String.init) })
                #expect(fromStatements == (encoding == "UTF-8" ? ["n"] : ["n", "w"]), "\(pages.summary.notes)")
            }
        }
    }
}

extension DiffPagesTests {
    /// Records compared as bytes: rows whose records differ in bytes but not
    /// in values (1.0 stored as REAL in a column that SQLite would store as
    /// the integer 1, a short ADD COLUMN record against the full one) are
    /// no change; records equal byte for byte that read as other values (a
    /// column with REAL affinity on one side only, another ADD COLUMN
    /// default, UTF-8 'ab' against UTF-16le U+6261) are a change. Every path
    /// must report what the statement path reports.
    @Test func recordBytesAgainstValues() throws {
        let folder = try TemporaryFolder("diff-records")
        func pair(_ name: String, _ scriptA: String, _ scriptB: String, dataOnly: Bool = false) throws -> [String] {
            let a = folder.file(name + "-a.db"), b = folder.file(name + "-b.db")
            try makeDatabase(a, scriptA)
            try makeDatabase(b, scriptB)
            var texts: [String] = []
            for sql in [false, true] where !(sql && dataOnly) {
                let statements = try Self.output(a, b, sql: sql, readPages: false, dataOnly: dataOnly)
                for records in [true, false] {
                    let pages = try Self.output(a, b, sql: sql, readPages: true, records: records, dataOnly: dataOnly)
                    #expect(pages.text == statements.text, "\(name), sql \(sql), records \(records):\n\(pages.text)\n--- statements:\n\(statements.text)")
                }
                texts.append(statements.text)
            }
            return texts
        }
        let rows = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 300)"
        // The same values in other bytes: no change.
        let sameValues = try pair("same", """
            CREATE TABLE t(id INTEGER PRIMARY KEY, r, s);
            \(rows) INSERT INTO t SELECT i, i * 1.0, 'v' || i FROM c;
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = 'CREATE TABLE t(id INTEGER PRIMARY KEY, r REAL, s)' WHERE name = 't';
            PRAGMA writable_schema = OFF;
            CREATE TABLE u(id INTEGER PRIMARY KEY, v);
            \(rows) INSERT INTO u SELECT i, i FROM c;
            ALTER TABLE u ADD COLUMN w DEFAULT 7;
            """, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, r REAL, s);
            \(rows) INSERT INTO t SELECT i, i * 1.0, 'v' || i FROM c;
            CREATE TABLE u(id INTEGER PRIMARY KEY, v, w DEFAULT 7);
            \(rows) INSERT INTO u SELECT i, i, 7 FROM c;
            """)
        let nothing = sameValues.allSatisfy { $0.isEmpty }
        #expect(nothing, "\(sameValues)")
        // The same bytes read as other values: every row changed.
        let affinity = try pair("affinity", """
            CREATE TABLE t(id INTEGER PRIMARY KEY, r); \(rows) INSERT INTO t SELECT i, i FROM c;
            """, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, r REAL); \(rows) INSERT INTO t SELECT i, i FROM c;
            """, dataOnly: true)
        #expect(affinity[0].components(separatedBy: "\"operation\":\"update\"").count - 1 == 300, "\(affinity[0].prefix(300))")
        let defaults = try pair("defaults", """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v); \(rows) INSERT INTO t SELECT i, i FROM c;
            ALTER TABLE t ADD COLUMN w DEFAULT 5;
            """, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v); \(rows) INSERT INTO t SELECT i, i FROM c;
            ALTER TABLE t ADD COLUMN w DEFAULT 6;
            """, dataOnly: true)
        #expect(defaults[0].components(separatedBy: "\"operation\":\"update\"").count - 1 == 300, "\(defaults[0].prefix(300))")
        let encodings = try pair("encoding", """
            PRAGMA encoding = 'UTF-8'; CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT);
            \(rows) INSERT INTO t SELECT i, 'ab' FROM c;
            """, """
            PRAGMA encoding = 'UTF-16le'; CREATE TABLE t(id INTEGER PRIMARY KEY, s TEXT);
            \(rows) INSERT INTO t SELECT i, char(0x6261) FROM c;
            """)
        #expect(encodings[0].components(separatedBy: "\"operation\":\"update\"").count - 1 == 300, "\(encodings[0].prefix(300))")
    }
}
