// `load` is all or nothing: a failing statement anywhere, a ROLLBACK, a shell
// command or a bad row leaves an existing database byte for byte as it was
// and makes no new one; the script's own transaction control gives way.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct LoaderTests {
    func write(_ text: String, _ folder: TemporaryFolder, _ name: String = "s.sql") throws -> String {
        let path = folder.file(name)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    @Test func aFailureAnywhereLeavesAnExistingDatabaseAsItWas() throws {
        let folder = try TemporaryFolder("load-atomic")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'one');")
        let before = try FileFingerprint(db)
        let scripts = [
            "BEGIN;\nINSERT INTO t VALUES (2, 'two');\nCREATE TABLE u(x);\nINSERT INTO nowhere VALUES (1);\nCOMMIT;\n",
            "INSERT INTO t VALUES (3, 'three');\nROLLBACK;\n",
            "INSERT INTO t VALUES (4, 'four');\n.read other.sql\n",
            "INSERT INTO t VALUES (5, 'five');\nINSERT INTO t VALUES (1, 'clash');\n",
            "INSERT INTO t VALUES (6, 'six');\nINSERT INTO t VALUES (7, 'never ends'\n",
            "-- a comment\n/* and\n another */\nINSERT INTO t VALUES (8, 'eight'); -- fine\n\n  -- here:\n  INSERT INTO gone VALUES (1);\n",
        ]
        let expected = ["s.sql:4: no such table: nowhere", "s.sql:2: the script rolls back", "s.sql:2: .read other.sql is a sqlite3 shell command",
                        "s.sql:2: UNIQUE constraint failed: t.id", "s.sql:2: incomplete SQL", "s.sql:7: no such table: gone"]
        for (script, message) in zip(scripts, expected) {
            let path = try write(script, folder)
            #expect {
                _ = try Loader.load(into: db, from: .script(path))
            } throws: { error in
                "\(error)".hasPrefix(folder.path + "/" + message)
            }
            #expect(try FileFingerprint(db) == before)
        }
        #expect(try folder.listing() == ["a.db", "s.sql"])
    }

    @Test func aNewDatabaseAppearsOnlyWhenEverythingLoaded() throws {
        let folder = try TemporaryFolder("load-new")
        let bad = try write("CREATE TABLE t(a);\nINSERT INTO t VALUES (1);\nSELECT nonsense(;\n", folder)
        #expect(throws: LoadError.self) { _ = try Loader.load(into: folder.file("new.db"), from: .script(bad)) }
        #expect(try folder.listing() == ["s.sql"])

        let good = try write(".bail on\nPRAGMA page_size=8192;\nBEGIN TRANSACTION;\nCREATE TABLE t(a);\nINSERT INTO t VALUES (1);\nCOMMIT;\nPRAGMA journal_mode=WAL;\n", folder, "g.sql")
        let summary = try Loader.load(into: folder.file("new.db"), from: .script(good))
        #expect(summary.createdDatabase && summary.statements == 3 && summary.rowsChanged == 1)
        #expect(try sqlite3Scalar(folder.file("new.db"), "PRAGMA page_size") == "8192")
        #expect(try sqlite3Scalar(folder.file("new.db"), "PRAGMA journal_mode") == "wal")
        #expect(try folder.listing().filter { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") } == ["g.sql", "new.db", "s.sql"])
        #expect(try (FileManager.default.attributesOfItem(atPath: folder.file("new.db"))[.posixPermissions] as? Int) == 0o666 & ~Int(currentUmask()))
    }

    @Test func shadowTablesAreTheOnlyExceptionToDefensiveMode() throws {
        let folder = try TemporaryFolder("load-defensive")
        // What a sqlite3 .dump writes for a virtual table: refused, with the way out.
        try makeDatabase(folder.file("v.db"), "CREATE VIRTUAL TABLE f USING fts5(a); INSERT INTO f VALUES ('x y');")
        let shellDump = try sqlite3(["-batch", folder.file("v.db"), ".dump"])
        let path = try write(shellDump, folder)
        #expect {
            _ = try Loader.load(into: folder.file("n.db"), from: .script(path))
        } throws: { error in
            "\(error)".contains("writable_schema")
        }
        // A write to an ordinary table's schema row is never allowed either.
        let hack = try write("CREATE TABLE t(a);\nPRAGMA writable_schema=ON;\nUPDATE sqlite_schema SET sql = 'x';\n", folder, "h.sql")
        #expect(throws: LoadError.self) { _ = try Loader.load(into: folder.file("n.db"), from: .script(hack)) }
        #expect(!FileManager.default.fileExists(atPath: folder.file("n.db")))
    }

    @Test func rowsIntoSqliteSequenceReplaceTheRowOfTheirTable() throws {
        let folder = try TemporaryFolder("load-sequence")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE c(id INTEGER PRIMARY KEY AUTOINCREMENT, v); INSERT INTO c(v) VALUES (1), (2);")
        let csv = folder.file("sqlite_sequence.csv")
        try "\"name\",\"seq\"\r\n\"c\",100\r\n".write(toFile: csv, atomically: false, encoding: .utf8)
        _ = try Loader.load(into: db, from: .rows(path: csv, format: .csv, table: "sqlite_sequence"))
        #expect(try sqlite3Scalar(db, "SELECT group_concat(name || '=' || seq) FROM sqlite_sequence") == "c=100")
    }

    @Test func rowFilesFailWholeWithTheLine() throws {
        let folder = try TemporaryFolder("load-rows")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(a INTEGER, b TEXT);")
        let csv = folder.file("t.csv")
        try "\"a\",\"b\"\r\n1,\"x\"\r\n2\r\n".write(toFile: csv, atomically: false, encoding: .utf8)
        #expect {
            _ = try Loader.load(into: db, from: .rows(path: csv, format: .csv, table: "t"))
        } throws: { error in
            "\(error)" == "\(csv):3: 1 fields where the header has 2; nothing was loaded"
        }
        let jsonl = folder.file("t.jsonl")
        try "{\"a\": 1, \"b\": \"x\"}\n{\"a\": 2, \"nope\": 1}\n".write(toFile: jsonl, atomically: false, encoding: .utf8)
        #expect {
            _ = try Loader.load(into: db, from: .rows(path: jsonl, format: .jsonl, table: "t"))
        } throws: { error in
            "\(error)".hasPrefix("\(jsonl):2: table main.t has no column named nope")
        }
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM t") == "0")
    }

    @Test func leadingKeywordsSkipCommentsAndQuotes() {
        #expect(SQLKeywords.leading("  -- note\n/* x */ pragma main.journal_mode = wal", count: 5) == ["PRAGMA", "MAIN", ".", "JOURNAL_MODE", "="])
        let pragma = SQLKeywords.pragma(SQLKeywords.leading("PRAGMA \"main\".page_size(4096)", count: 5))
        #expect(pragma.name == "PAGE_SIZE" && pragma.assigns)
        #expect(SQLKeywords.leading("ROLLBACK TRANSACTION TO sp", count: 5) == ["ROLLBACK", "TRANSACTION", "TO", "SP"])
    }
}

/// The process's umask.
func currentUmask() -> mode_t {
    let mask = umask(0)
    umask(mask)
    return mask
}
