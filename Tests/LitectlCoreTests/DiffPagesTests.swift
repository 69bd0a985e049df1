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
                       threads: Int = 0, fullScan: Bool = false) throws -> (text: String, summary: DiffSummary) {
        let sink = MemorySink()
        let consumer: DiffConsumer = sql ? SQLPatchWriter(sink: sink) : DiffReportWriter(sink: sink, style: style)
        var options = DiffOptions()
        options.readPages = readPages
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
                for threads in [1, 3] {
                    let pages = try Self.output(a.path, b, sql: sql, readPages: true, threads: threads)
                    let same = pages.text == statements.text
                    #expect(same, "\(a.summary)\n\(sql ? "sql" : "jsonl"), \(threads) threads:\n\(pages.text.prefix(600))\n--- statements:\n\(statements.text.prefix(600))")
                    #expect(pages.summary.tables.map(\.counts) == statements.summary.tables.map(\.counts))
                }
            }
        }
    }

    /// Tables keyed by rowid, INTEGER PRIMARY KEY or a WITHOUT ROWID key are
    /// read from pages; the others, and only they, are named in the notes.
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
        #expect(read == ["k", "t", "d", "f"], "\(summary.notes)")
        #expect(summary.notes.contains("table k of A read with statements: no primary key (SQLite sorts its rows)"))
        // With the shared-pages shortcut, what lies between shared pages is read with statements.
        let shared = try Self.output(folder.file("a.db"), folder.file("b.db"), sql: false, style: .summary, readPages: true)
        #expect(shared.text == text)
        #expect(shared.summary.notes.contains("table r of A read with statements: rows outside the pages both files share"))
    }
}
