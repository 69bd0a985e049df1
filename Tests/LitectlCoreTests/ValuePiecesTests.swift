// Values written in pieces (ValuePieces), with pieces made tiny so that every
// kind of table and value goes through them quickly: the script is loaded by
// the sqlite3 shell and by Loader, and the copies must be the original again
// (litectl hash, sqldiff, integrity_check, FTS5 integrity). A row that no SQL
// statement can insert stops the dump before any of it is written.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct ValuePiecesTests {
    /// Pieces of 16 bytes; an INSERT's values past 200 bytes go in pieces too.
    static var tiny: DumpOptions {
        var options = DumpOptions()
        options.pieces = PieceLimits(pieceBytes: 16, statementBytes: 200, smallest: 8)
        return options
    }

    /// Dumps `original` with `options`, loads the script with the sqlite3
    /// shell and with Loader, and checks both copies.
    func roundTrip(_ original: String, _ options: DumpOptions, in folder: TemporaryFolder, label: String) throws -> String {
        let script = try dumpScript(original, options)
        let path = folder.file("\(label).sql")
        try Data(script).write(to: URL(fileURLWithPath: path))
        let byShell = folder.file("\(label)-shell.db")
        let shell = try runProcess(sqlite3Binary, ["-batch", "-bail", byShell], input: script)
        #expect(shell.status == 0, "\(label): \(shell.stderr)")
        try expectRebuilt(byShell, from: original)
        let byLoad = folder.file("\(label)-load.db")
        let summary = try Loader.load(into: byLoad, from: .script(path))
        try expectRebuilt(byLoad, from: original)
        // The pieces are neither statements nor rows of the database: a load
        // counts what it counts for the dump without pieces.
        let whole = folder.file("\(label)-whole.sql")
        try Data(try dumpScript(original)).write(to: URL(fileURLWithPath: whole))
        let reference = try Loader.load(into: folder.file("\(label)-whole.db"), from: .script(whole))
        #expect(summary.rowsChanged == reference.rowsChanged && summary.statements == reference.statements + 2,
                "\(label): \(summary.rowsChanged) rows in \(summary.statements) statements, \(reference.rowsChanged) in \(reference.statements) whole")
        return String(decoding: script, as: UTF8.self)
    }

    func makeEveryKind(_ path: String, encoding: String = "UTF-8") throws {
        try makeDatabase(path, """
            PRAGMA encoding='\(encoding)';
            CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB, s TEXT, n);
            INSERT INTO t VALUES(1, randomblob(100), 'héllo' || char(13,10,0) || 'wörld ' || char(119070) || printf('%.60c', 'z'), 1.5);
            INSERT INTO t VALUES(2, x'', '', NULL);
            INSERT INTO t VALUES(3, zeroblob(17), printf('%.17c', 'q'), -7);
            INSERT INTO t VALUES(7, randomblob(16), printf('%.16c', 'e'), x'00');
            CREATE TABLE k(a, b);
            INSERT INTO k(rowid, a, b) VALUES(5, randomblob(40), printf('%.40c', 'k')), (9, 'short', randomblob(3));
            CREATE TABLE w(key TEXT PRIMARY KEY, v) WITHOUT ROWID;
            INSERT INTO w VALUES(printf('%.50c', 'w') || 'é', randomblob(33)), ('a', 1);
            CREATE TABLE g(a, b TEXT, c AS (length(b)) STORED, d AS (substr(b, 1, 3)));
            INSERT INTO g(a, b) VALUES(1, printf('%.70c', 'g'));
            CREATE TABLE chk(v TEXT CHECK (length(v) > 50));
            INSERT INTO chk VALUES(printf('%.60c', 'c'));
            CREATE TABLE u(v TEXT UNIQUE);
            INSERT INTO u VALUES(printf('%.30c', 'u')), (printf('%.30c', 'u') || 'v');
            CREATE VIRTUAL TABLE docs USING fts5(body);
            INSERT INTO docs(rowid, body) VALUES(3, printf('%.200c', 'd') || ' word word'), (4, 'another word');
            CREATE TABLE log(what);
            CREATE TRIGGER t_log AFTER INSERT ON t BEGIN INSERT INTO log VALUES(new.id); END;
            """)
    }

    @Test func everyKindOfTableAndValueComesBackFromPieces() throws {
        let folder = try TemporaryFolder("pieces-every")
        let db = folder.file("e.db")
        try makeEveryKind(db)
        try makeDatabase(db, "INSERT INTO t VALUES(8, randomblob(50), CAST(x'FF00C3' || randomblob(40) AS TEXT), 0); DELETE FROM log;")
        let script = try roundTrip(db, Self.tiny, in: folder, label: "every")
        #expect(script.contains("CREATE TEMP TABLE litectl_dump_piece"))
        #expect(script.contains("(SELECT CAST(group_concat(v,'') AS BLOB) FROM (SELECT v FROM temp.litectl_dump_piece WHERE k=1 ORDER BY n))"))
        #expect(script.contains("(SELECT CAST(group_concat(v,'') AS TEXT) FROM (SELECT v FROM temp.litectl_dump_piece WHERE k=2 ORDER BY n))"))
        #expect(script.contains("DROP TABLE temp.litectl_dump_piece;\n"))
        // Every statement stays short: pieces of 16 bytes are 32 of hex, in 56 bytes of SQL.
        for line in script.split(separator: "\n") where line.hasPrefix("INSERT INTO temp.") {
            #expect(line.utf8.count <= 56 + 32, "\(line)")
        }
        // The value of 16 bytes is a literal still; the one of 17 is pieces.
        #expect(script.contains("INSERT INTO \"t\" VALUES(7,x'"))
        #expect(!script.contains("INSERT INTO \"t\" VALUES(3,x'"))
    }

    @Test func withDataOnlyEachRowFiresItsTriggersOnce() throws {
        let folder = try TemporaryFolder("pieces-data-only")
        let db = folder.file("d.db")
        try makeEveryKind(db)
        try makeDatabase(db, "DELETE FROM log;")
        var options = Self.tiny
        options.includeSchema = false
        options.tables = ["t"]
        let path = folder.file("rows.sql")
        try Data(try dumpScript(db, options)).write(to: URL(fileURLWithPath: path))
        for loader in ["shell", "load"] {
            let target = folder.file("\(loader).db")
            try makeDatabase(target, """
                CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB, s TEXT, n);
                CREATE TABLE log(what, size);
                CREATE TRIGGER t_log AFTER INSERT ON t BEGIN INSERT INTO log VALUES(new.id, length(new.b)); END;
                CREATE TRIGGER t_changed AFTER UPDATE ON t BEGIN INSERT INTO log VALUES('update', NULL); END;
                """)
            if loader == "shell" {
                try sqlite3(["-batch", "-bail", target], input: try String(contentsOfFile: path, encoding: .utf8))
            } else {
                _ = try Loader.load(into: target, from: .script(path))
            }
            #expect(try sqlite3Scalar(target, "SELECT group_concat(what || ':' || size, ' ') FROM log") == "1:100 2:0 3:17 7:16", "\(loader)")
            let same = try sqlite3(["-batch", target], input: """
                ATTACH '\(db)' AS src;
                SELECT count(*) FROM t JOIN src.t AS o USING (id) WHERE t.b IS o.b AND t.s IS o.s AND t.n IS o.n
                  AND typeof(t.s) = typeof(o.s) AND typeof(t.b) = typeof(o.b);
                """)
            #expect(same.trimmingCharacters(in: .whitespacesAndNewlines) == "4", "\(loader)")
        }
    }

    @Test(arguments: ["UTF-16le", "UTF-16be"])
    func utf16TextComesBackFromPiecesAndABlobStaysWhole(encoding: String) throws {
        let folder = try TemporaryFolder("pieces-utf16")
        let db = folder.file("u.db")
        try makeEveryKind(db, encoding: encoding)
        // U+FFFE cannot go through group_concat in UTF-16: that TEXT stays one literal.
        try makeDatabase(db, "INSERT INTO t VALUES(9, randomblob(33), printf('%.20c', 'f') || char(65534) || char(66000) || char(0), 2);")
        let script = try roundTrip(db, Self.tiny, in: folder, label: encoding)
        #expect(script.contains("AS TEXT) FROM (SELECT v FROM temp.litectl_dump_piece WHERE k=2"))
        #expect(!script.contains("AS BLOB) FROM (SELECT v FROM temp.litectl_dump_piece"), "a BLOB is never split in UTF-16")

        // One too long for a statement, and not splittable, stops the dump naming the limit.
        var options = Self.tiny
        options.pieces.sqlBytes = 200
        let sink = MemorySink()
        var stopped: DumpStopped?
        do { _ = try SQLDump.write(path: db, options: options, to: sink) } catch let error as DumpStopped { stopped = error }
        let message = stopped.map { "\($0)" } ?? ""
        #expect(message.contains("table \"t\": row 1 (rowid 1): column \"b\" holds a BLOB of 100 bytes"), "\(message)")
        #expect(message.contains("SQLITE_MAX_SQL_LENGTH, 200 bytes"), "\(message)")
        #expect(sink.text.hasSuffix("ROLLBACK;\n"))
    }

    @Test func aRowNoStatementCanInsertStopsTheDumpBeforeIt() throws {
        let folder = try TemporaryFolder("pieces-too-big")
        let db = folder.file("b.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, a BLOB, b BLOB);
            INSERT INTO t VALUES(1, randomblob(300), randomblob(300)), (7, randomblob(600), randomblob(600)), (8, 1, 2);
            """)
        var options = Self.tiny
        options.pieces.recordBytes = 1000
        let sink = MemorySink()
        var stopped: DumpStopped?
        do { _ = try SQLDump.write(path: db, options: options, to: sink) } catch let error as DumpStopped { stopped = error }
        let message = stopped.map { "\($0)" } ?? ""
        #expect(message == "\(db): table \"t\": row 2 (rowid 7): its record would be 1,206 bytes, more than SQLite's limit on a string, BLOB or row (SQLITE_MAX_LENGTH, 1,000 bytes): no SQL statement can insert it, so no dump can rebuild it; the dump stopped before it")
        // Row 1 is written whole, nothing of row 2, and the script rolls back.
        let script = sink.text
        #expect(script.contains("INSERT INTO \"t\" VALUES(1,"))
        #expect(!script.contains("VALUES(7,") && !script.contains(",7,") && script.components(separatedBy: "INSERT INTO temp.").count - 1 == 38)
        #expect(script.hasSuffix("ROLLBACK;\n"))
        #expect(throws: DumpStopped.self) {
            _ = try SQLDump.write(path: db, options: options, toFile: folder.file("out.sql"), replace: false)
        }
        #expect(try folder.listing() == ["b.db"])
    }
}

extension ValuePiecesTests {
    /// A row's INSERT names its table without a schema, and SQLite looks in
    /// `temp` first: a table named like the piece table must not lose its rows to it.
    @Test func aTableNamedLikeThePieceTableKeepsItsRows() throws {
        let folder = try TemporaryFolder("pieces-name")
        let db = folder.file("n.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB);
            INSERT INTO t VALUES(1, randomblob(40));
            CREATE TABLE "Litectl_Dump_Piece"(k, n, v);
            INSERT INTO "Litectl_Dump_Piece" VALUES(1, 2, randomblob(40)), (3, 4, 'five');
            CREATE TABLE litectl_dump_piece_1(x);
            INSERT INTO litectl_dump_piece_1 VALUES(printf('%.30c', 'x'));
            """)
        let script = try dumpScript(db, Self.tiny)
        let text = String(decoding: script, as: UTF8.self)
        #expect(text.contains("CREATE TEMP TABLE litectl_dump_piece_2(k INTEGER, n INTEGER PRIMARY KEY, v);"))
        let byShell = folder.file("shell.db")
        let shell = try runProcess(sqlite3Binary, ["-batch", "-bail", byShell], input: script)
        #expect(shell.status == 0, "\(shell.stderr)")
        try expectRebuilt(byShell, from: db)
        let path = folder.file("n.sql")
        try Data(script).write(to: URL(fileURLWithPath: path))
        let byLoad = folder.file("load.db")
        _ = try Loader.load(into: byLoad, from: .script(path))
        try expectRebuilt(byLoad, from: db)
    }
}
