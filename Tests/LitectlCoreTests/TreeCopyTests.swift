// recover's fast path (Recover/TreeCopy.swift): tables whose b-trees are
// sound are copied by SQLite b-tree by b-tree, the others salvaged row by
// row. Every kind of table must come out with its rows, rowids and the
// source's logical hash whichever path it took, take the path its kind
// allows, and OUT must pass integrity_check; an index that disagrees with
// its table (a changed entry, entries out of order, duplicates under UNIQUE)
// or a row the schema refuses sends its table down the row-by-row path. The
// orderings and the numeric-text test used to prove a copy are checked
// against SQLite's own.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct TreeCopyTests {
    /// Tables of every kind, with the path each must take (true: copied b-tree by b-tree).
    static let kinds: [(table: String, copied: Bool)] = [
        ("a", true),    // INTEGER PRIMARY KEY, UNIQUE NOCASE, an index with DESC
        ("b", false),   // no rowid alias, no index, rowids with gaps: SQLite would number them afresh
        ("c", true),    // no rowid alias, no index, rowids 1, 2, 3, ...
        ("d", true),    // WITHOUT ROWID, RTRIM key, an index of a BLOB column
        ("e", false),   // a CHECK constraint
        ("f", false),   // a generated column
        ("g", false),   // an expression index
        ("h", false),   // a partial index
        ("j", true),    // AUTOINCREMENT
        ("k", true),    // no rowid alias, with an index (twice, under two names), rowids with gaps
        ("l", true),    // WITHOUT ROWID with a redundant UNIQUE index on its key: the table must not be copied from it
    ]

    static let schema = """
        PRAGMA page_size = 1024;
        CREATE TABLE a(id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE UNIQUE, score REAL, at DATETIME);
        CREATE INDEX a_score ON a(score DESC, at);
        CREATE TABLE b(x, y);
        CREATE TABLE c(x, y);
        CREATE TABLE d(k TEXT COLLATE RTRIM PRIMARY KEY, v BLOB) WITHOUT ROWID;
        CREATE INDEX d_v ON d(v);
        CREATE TABLE e(x INTEGER CHECK (x > 0));
        CREATE TABLE f(x, y AS (x * 2));
        CREATE TABLE g(id INTEGER PRIMARY KEY, x);
        CREATE INDEX g_expr ON g(x + 1);
        CREATE TABLE h(id INTEGER PRIMARY KEY, x);
        CREATE INDEX h_part ON h(x) WHERE x > 5;
        CREATE TABLE j(id INTEGER PRIMARY KEY AUTOINCREMENT, x);
        CREATE TABLE k(x TEXT, y);
        CREATE INDEX k_x ON k(x);
        CREATE INDEX k_x_again ON k(x);
        CREATE TABLE l(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
        CREATE UNIQUE INDEX l_k ON l(k);
        INSERT INTO a(name, score, at) SELECT (CASE value % 2 WHEN 0 THEN 'Name-' ELSE 'name-' END) || value,
            CASE value % 7 WHEN 0 THEN NULL WHEN 1 THEN value ELSE value / 3.0 END, '2024-01-' || (value % 28 + 1)
            FROM generate_series(1, 1500);
        INSERT INTO b SELECT value, randomblob(20) FROM generate_series(1, 800);
        DELETE FROM b WHERE x % 5 = 0;
        INSERT INTO c SELECT value, 'row ' || value FROM generate_series(1, 800);
        INSERT INTO d SELECT 'key ' || value || CASE WHEN value % 3 = 0 THEN '  ' ELSE '' END,
            CASE value % 4 WHEN 0 THEN NULL WHEN 1 THEN randomblob(30) ELSE zeroblob(value % 50) END FROM generate_series(1, 900);
        INSERT INTO e SELECT value FROM generate_series(1, 300);
        INSERT INTO f(x) SELECT value FROM generate_series(1, 300);
        INSERT INTO g(x) SELECT value FROM generate_series(1, 300);
        INSERT INTO h(x) SELECT value FROM generate_series(1, 300);
        INSERT INTO j(x) SELECT value FROM generate_series(1, 300);
        DELETE FROM j WHERE id > 290;
        INSERT INTO k SELECT 'v' || (value % 37), value FROM generate_series(1, 700);
        DELETE FROM k WHERE y % 3 = 0;
        INSERT INTO l SELECT 'key ' || value, 'value ' || value FROM generate_series(1, 600);
        """

    @Test func eachKindOfTableTakesItsPathAndKeepsEveryRow() throws {
        let folder = try TemporaryFolder("treecopy")
        let source = folder.file("source.db")
        try makeDatabase(source, TreeCopyTests.schema)
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let text = report.lines.joined(separator: "\n")
        #expect(report.sound, "\(text)")
        for (name, copied) in TreeCopyTests.kinds {
            let result = try #require(report.tables.first { $0.name == name }, "\(name) in the report")
            #expect(result.treeCopied == copied, "table \(name)")
        }
        try expectSameDatabase(source, out)
    }

    /// The same tables, but the file has a -wal: SQLite (reading the main
    /// file only) and the page reader would see different pages, so nothing is copied b-tree by b-tree.
    @Test func aSourceWithAWALIsSalvagedRowByRow() throws {
        let folder = try TemporaryFolder("treecopy")
        let source = folder.file("source.db")
        try makeDatabase(source, TreeCopyTests.schema + "PRAGMA journal_mode = WAL;")
        let writer = try Connection(path: source, mode: .readWrite)
        try writer.execute("PRAGMA wal_autocheckpoint = 0; UPDATE c SET y = 'changed' WHERE x % 2 = 0;")
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        #expect(report.walPages > 0)
        #expect(!report.tables.contains { $0.treeCopied })
        try expectSameDatabase(source, out)
        try writer.close()
    }

    @Test func anIndexEntryThatDisagreesWithItsTableSendsTheTableRowByRow() throws {
        let (folder, source) = try indexedTable()
        let map = try PageMap.read(source)
        let leaf = try #require(map.trees["t_name"]?.leaves.first)
        // One letter of one entry's text: the index no longer holds what the rows make.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let page = Int(leaf - 1) * map.pageSize
        let at = try #require((page..<(page + map.pageSize - 6)).first { bytes[$0..<($0 + 5)].elementsEqual(Array("name-".utf8)) })
        bytes[at] = UInt8(ascii: "N")
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        #expect(try sqlite3Scalar(source, "PRAGMA integrity_check") != "ok")
        try expectRowByRow(source, in: folder)
    }

    @Test func indexEntriesOutOfOrderSendTheTableRowByRow() throws {
        let (folder, source) = try indexedTable()
        let map = try PageMap.read(source)
        let leaf = try #require(map.trees["t_name"]?.leaves.dropFirst().first)
        // Two cell pointers swapped: the same entries, out of order.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let pointers = Int(leaf - 1) * map.pageSize + 8
        bytes.swapAt(pointers + 2, pointers + 6)
        bytes.swapAt(pointers + 3, pointers + 7)
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        #expect(try sqlite3Scalar(source, "PRAGMA integrity_check") != "ok")
        try expectRowByRow(source, in: folder)
    }

    /// Duplicates under an index the schema calls UNIQUE (made by editing the
    /// schema): the copy would keep them; salvage puts the later ones in lost_and_found.
    @Test func duplicatesUnderAUniqueIndexSendTheTableRowByRow() throws {
        let u = try rowByRow("u", """
            CREATE TABLE u(id INTEGER PRIMARY KEY, code TEXT);
            INSERT INTO u(code) SELECT 'code ' || (value % 400) FROM generate_series(1, 402);
            CREATE INDEX u_code ON u(code);
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = 'CREATE UNIQUE INDEX u_code ON u(code)' WHERE name = 'u_code';
            """)
        #expect(u.rows == 400 && u.lostAndFoundRows == 2)
    }

    /// NULLs in a column the schema now calls NOT NULL: salvage refuses those
    /// rows (lost_and_found); the copy would have kept them.
    @Test func rowsTheSchemaRefusesSendTheTableRowByRow() throws {
        let n = try rowByRow("n", """
            CREATE TABLE n(id INTEGER PRIMARY KEY, v TEXT);
            INSERT INTO n(v) SELECT CASE WHEN value % 100 = 0 THEN NULL ELSE 'v' || value END FROM generate_series(1, 500);
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = 'CREATE TABLE n(id INTEGER PRIMARY KEY, v TEXT NOT NULL)' WHERE name = 'n';
            """)
        #expect(n.rows == 495 && n.lostAndFoundRows == 5)
    }

    /// Text that reads as a number in a column now declared NUMERIC (the
    /// schema edited after the rows were written): salvage's INSERT converts
    /// it, which a copy would not, so the table is salvaged row by row and
    /// comes out the same whichever path it could have taken.
    @Test func valuesAffinityWouldConvertSendTheTableRowByRow() throws {
        let i = try rowByRow("i", """
            CREATE TABLE i(id INTEGER PRIMARY KEY, n BLOB);
            INSERT INTO i(n) SELECT CASE WHEN value % 10 = 0 THEN ' ' || value || ' ' ELSE value END FROM generate_series(1, 300);
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = 'CREATE TABLE i(id INTEGER PRIMARY KEY, n NUMERIC)' WHERE name = 'i';
            """)
        #expect(i.rows == 300)
    }

    /// A table whose interior pages each point many times at the same child
    /// (120 × 120 × 120 paths to one leaf): SQLite's cursor does not notice
    /// a page reached twice and would copy the leaf's rows 1.7 million times;
    /// the proof refuses the tree at once and stops the copy. The leaf's rows
    /// are salvaged once.
    @Test func aCopyThroughATreeThatRevisitsPagesIsStopped() throws {
        let folder = try TemporaryFolder("treecopy")
        let source = folder.file("source.db")
        try makeDatabase(source, """
            PRAGMA page_size = 1024;
            CREATE TABLE x(a, b);
            INSERT INTO x SELECT value, 'row ' || value FROM generate_series(1, 30);
            """)
        #expect(try sqlite3Scalar(source, "SELECT rootpage FROM sqlite_schema WHERE name = 'x'") == "2")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let pageSize = 1024
        #expect(bytes.count == 2 * pageSize)
        let leaf = Array(bytes[pageSize..<(2 * pageSize)])
        /// An interior table page whose 120 cells and right child all point at `child`.
        func interior(pointingAt child: UInt32) -> [UInt8] {
            var page = [UInt8](repeating: 0, count: pageSize)
            let cells = 120
            let start = pageSize - 5 * cells
            page[0] = 0x05
            page[3] = UInt8(cells >> 8); page[4] = UInt8(cells & 0xFF)
            page[5] = UInt8(start >> 8); page[6] = UInt8(start & 0xFF)
            let childBytes = [UInt8(child >> 24), UInt8(child >> 16 & 0xFF), UInt8(child >> 8 & 0xFF), UInt8(child & 0xFF)]
            page.replaceSubrange(8..<12, with: childBytes)
            for i in 0..<cells {
                let at = start + 5 * i
                page[12 + 2 * i] = UInt8(at >> 8); page[13 + 2 * i] = UInt8(at & 0xFF)
                page.replaceSubrange(at..<(at + 4), with: childBytes)
                page[at + 4] = UInt8(i + 1)
            }
            return page
        }
        bytes.replaceSubrange(pageSize..<(2 * pageSize), with: interior(pointingAt: 3))
        bytes += interior(pointingAt: 4) + interior(pointingAt: 5) + leaf
        bytes[28] = 0; bytes[29] = 0; bytes[30] = 0; bytes[31] = 5
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let x = try #require(report.tables.first { $0.name == "x" })
        #expect(!x.treeCopied)
        #expect(report.copiesRefused == 1, "the copy was stopped (or never begun), not left to run")
        #expect(x.rows == 30, "\(report.lines.joined(separator: "\n"))")
        #expect(try sqlite3Scalar(out, "SELECT count(*) FROM x") == "30")
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
    }

    // MARK: The orderings against SQLite's

    /// Random values of every storage class, sorted by SQLite under each
    /// collation: EntryOrder.compare must find each pair in the same order
    /// (and equal where SQLite's GROUP BY puts them together).
    @Test(arguments: ["BINARY", "NOCASE", "RTRIM"])
    func orderingsMatchSQLite(collation: String) throws {
        let db = try Connection(inMemory: Connection.defaultBusyTimeout)
        try db.execute("CREATE TABLE v(x)")
        var rng = SplitMix64(state: 0x7EE)
        let insert = try db.prepare("INSERT INTO v(x) VALUES (?1)")
        let letters = Array("aAbBzZ _-é\u{0}".unicodeScalars)
        for _ in 0..<600 {
            let value: Value
            switch rng.next() % 6 {
            case 0: value = .null
            case 1: value = .integer(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 63))
            case 2: value = .real(Double(Int64(bitPattern: rng.next()) >> 40) / 8)
            case 3: value = .integer(Int64(rng.next() % 20) - 10)
            case 4:
                let text = String(String.UnicodeScalarView((0..<(rng.next() % 6)).map { _ in letters[Int(rng.next() % UInt64(letters.count))] }))
                value = .text(Array(text.utf8))
            default: value = .blob((0..<(rng.next() % 4)).map { _ in UInt8(truncatingIfNeeded: rng.next() % 3 + 0x60) })
            }
            try insert.bind([value])
            _ = try insert.step()
            insert.reset()
        }
        let sorted = try db.rows("SELECT x FROM v ORDER BY x COLLATE \(collation)").map { $0[0] }
        let order = try #require(KeyCollation(name: collation))
        for (x, y) in zip(sorted, sorted.dropFirst()) {
            let c = x.withCell { a in y.withCell { b in EntryOrder.compare(a, b, order) } }
            let same = try db.scalar("SELECT ?1 = ?2 COLLATE \(collation)", [x, y]) == .integer(1)
            #expect(c <= 0, "\(x) before \(y) under \(collation)")
            if x != .null && y != .null { #expect((c == 0) == same, "\(x) and \(y) under \(collation)") }
        }
    }

    /// Text SQLite's numeric affinity converts must be text `mayReadAsNumber`
    /// flags (it may flag more).
    @Test func numericLookingTextIsFlagged() throws {
        let db = try Connection(inMemory: Connection.defaultBusyTimeout)
        try db.execute("CREATE TABLE t(n NUMERIC)")
        let insert = try db.prepare("INSERT INTO t(n) VALUES (?1)")
        var samples = [" 12 ", "1e5", "-3.5", "+7", "0x10", "12abc", "1.", ".5", "1e", "--1", "1_000", "", " ", "\t4\n", "١٢", "1e400", "9223372036854775808"]
        var rng = SplitMix64(state: 99)
        let alphabet = Array(" +-.eE0123456789x\t")
        for _ in 0..<3000 { samples.append(String((0..<(1 + rng.next() % 6)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })) }
        for text in samples {
            try db.execute("DELETE FROM t")
            try insert.bind([.text(Array(text.utf8))])
            _ = try insert.step()
            insert.reset()
            let converted = try db.scalar("SELECT typeof(n) FROM t") != .text(Array("text".utf8))
            let flagged = Array(text.utf8).withUnsafeBytes { RecoveryRun.mayReadAsNumber($0) }
            if converted { #expect(flagged, "\(text.debugDescription) is converted by NUMERIC affinity") }
        }
    }

    // MARK: Helpers

    /// Recovers a database made by `script`: table `name` must have been
    /// salvaged row by row, and OUT must pass integrity_check.
    func rowByRow(_ name: String, _ script: String) throws -> RecoveryReport.TableResult {
        let folder = try TemporaryFolder("treecopy")
        let source = folder.file("source.db")
        try makeDatabase(source, script)
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let table = try #require(report.tables.first { $0.name == name })
        #expect(!table.treeCopied, "\(report.lines.joined(separator: "\n"))")
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
        return table
    }

    /// A table of 2,000 rows with an index of several leaves.
    func indexedTable() throws -> (TemporaryFolder, String) {
        let folder = try TemporaryFolder("treecopy")
        let source = folder.file("source.db")
        try makeDatabase(source, """
            PRAGMA page_size = 1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT);
            INSERT INTO t(name) SELECT 'name-' || printf('%05d', value) FROM generate_series(1, 2000);
            CREATE INDEX t_name ON t(name);
            """)
        return (folder, source)
    }

    /// Recovers `source` whose index t_name is damaged: t is salvaged row by
    /// row, with every row, and OUT is sound.
    func expectRowByRow(_ source: String, in folder: TemporaryFolder) throws {
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let t = try #require(report.tables.first { $0.name == "t" })
        #expect(!t.treeCopied, "\(report.lines.joined(separator: "\n"))")
        #expect(t.rows == 2000)
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
        #expect(try ContentHasher.hash(path: out).digest == (try ContentHasher.hash(path: source).digest))
    }

    /// OUT has the source's logical hash, every table's rows with their rowids, and passes integrity_check.
    func expectSameDatabase(_ source: String, _ out: String) throws {
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
        #expect(try ContentHasher.hash(path: out).digest == (try ContentHasher.hash(path: source).digest))
        let a = try Connection(path: source), b = try Connection(path: out)
        for (name, _) in TreeCopyTests.kinds {
            let rowid = try a.scalar("SELECT wr FROM pragma_table_list WHERE name = ?1", [.text(Array(name.utf8))]) == .integer(1) ? "" : "rowid, "
            let query = "SELECT \(rowid)* FROM \(name) ORDER BY 1, 2"
            #expect(try b.rows(query) == (try a.rows(query)), "rows of \(name)")
        }
        #expect(try b.rows("SELECT * FROM sqlite_sequence") == (try a.rows("SELECT * FROM sqlite_sequence")))
    }
}
