// `litectl transform` through the built binary: exit status 0 / 1 (refused) /
// 2 (error) / 64 (usage), one line on stderr, silence on a pipe, the report
// with -v and --json; judged by `litectl hash` (every other table, and the
// untouched columns copied out by the sqlite3 CLI), integrity_check and
// foreign_key_check, and by running `--sql`'s statements in the sqlite3 shell.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct TransformCommandTests {
    /// `litectl hash --per-table --data-only` lines of every table but `except`.
    func otherTables(_ db: String, except: String) throws -> [String] {
        let result = try litectl("hash", "--per-table", "--data-only", db)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").dropFirst().map(String.init).filter { !$0.hasSuffix("  \(except)") }
    }

    /// The rows of `columns` (and the rowid) of `table`, copied by the sqlite3
    /// CLI into untyped columns of a new file, then hashed by `litectl hash`.
    func untouched(_ db: String, _ table: String, _ columns: [String], folder: TemporaryFolder) throws -> String {
        let scratch = folder.file("untouched-\(UUID().uuidString).db")
        defer { unlink(scratch) }
        let names = (0...columns.count).map { "c\($0)" }.joined(separator: ", ")
        try sqlite3(["-batch", scratch], input: """
            ATTACH '\(db)' AS src;
            CREATE TABLE p (\(names));
            INSERT INTO p SELECT rowid, \(columns.map(quoteIdentifier).joined(separator: ", ")) FROM src.\(quoteIdentifier(table));
            """)
        let result = try litectl("hash", "--data-only", scratch)
        #expect(result.status == 0, "\(result.stderr)")
        return String(result.stdout.prefix(64))
    }

    @Test func aTypeChangeIsRefusedOnePlainLineThenDoneWithProof() throws {
        let folder = try TemporaryFolder("cli-transform")
        let db = folder.file("library.db")
        try makeLibrary(db)
        let before = try FileFingerprint(db)
        let refused = try litectl("transform", db, "books", "--type", "year=INTEGER")
        #expect(refused.status == 1)
        #expect(refused.stdout.isEmpty, "silent on a pipe")
        let lines = refused.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("litectl: \(db): stored values would change in year ("), "\(refused.stderr)")
        #expect(refused.stderr.contains("--allow-conversion"))
        #expect(try FileFingerprint(db) == before)

        let others = try otherTables(db, except: "books")
        let kept = try untouched(db, "books", ["author_id", "title", "price", "isbn"], folder: folder)
        let done = try litectl("transform", db, "books", "--type", "year=INTEGER", "--allow-conversion", "-v")
        #expect(done.status == 0, "\(done.stderr)")
        #expect(done.stderr.isEmpty)
        #expect(done.stdout.hasPrefix("\(db): books: transformed; "), "\(done.stdout)")
        #expect(done.stdout.contains("  year (type TEXT → INTEGER): "))
        #expect(done.stdout.contains("TEXT→INTEGER"))
        #expect(done.stdout.contains("  title: not compared"), "same affinity: copied as stored")
        #expect(done.stdout.contains("--compare-all"))
        #expect(done.stdout.contains("  quick_check: ok"))
        #expect(try otherTables(db, except: "books") == others)
        #expect(try untouched(db, "books", ["author_id", "title", "price", "isbn"], folder: folder) == kept)
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")
        #expect(try sqlite3Scalar(db, "PRAGMA foreign_key_check") == "")
        #expect(try sqlite3Scalar(db, "SELECT type FROM pragma_table_info('books') WHERE name = 'year'") == "INTEGER")
    }

    @Test func theSQLOptionPrintsWhatTheShellCanRunToTheSameResult() throws {
        let folder = try TemporaryFolder("cli-transform-sql")
        let db = folder.file("library.db")
        try makeLibrary(db)
        let copy = try folder.copy(db, as: "copy.db")
        let before = try FileFingerprint(db)
        let arguments = ["transform", db, "authors", "--rename", "born=birth_year", "--type", "birth_year=INTEGER",
                         "--drop", "score", "--default", "note='none'", "--column-order", "name,id"]
        let sql = try runProcess(litectlBinary, arguments + ["--sql"])
        #expect(sql.status == 0, "\(sql.stderr)")
        #expect(try FileFingerprint(db) == before, "--sql changes nothing")
        #expect(sql.stdout.hasPrefix("PRAGMA foreign_keys=OFF;\nBEGIN IMMEDIATE;\nALTER TABLE \"authors\" RENAME COLUMN \"born\" TO \"birth_year\";\n"))
        #expect(sql.stdout.contains("UPDATE sqlite_sequence SET seq = "))
        #expect(sql.stdout.hasSuffix("COMMIT;\n"))
        // The same change by litectl on the original: the same file content.
        let done = try runProcess(litectlBinary, arguments + ["--allow-conversion"])
        #expect(done.status == 0, "\(done.stderr)")
        try sqlite3(["-batch", copy], input: sql.stdout)
        let hashes = try litectl("hash", db, copy)
        let digests = hashes.stdout.split(separator: "\n").map { $0.prefix(64) }
        #expect(digests.count == 2 && digests[0] == digests[1], "\(hashes.stdout)")
        #expect(try sqlite3Scalar(db, "SELECT group_concat(name) FROM pragma_table_info('authors')") == "name,id,birth_year,note")
        #expect(try sqlite3Scalar(db, "SELECT sql FROM sqlite_schema WHERE name = 'author_births'").contains("birth_year"))
    }

    @Test func jsonReportAndRefusals() throws {
        let folder = try TemporaryFolder("cli-transform-json")
        let db = folder.file("library.db")
        try makeLibrary(db)
        let result = try litectl("transform", "--json", db, "tags", "--type", "weight=REAL", "--allow-conversion")
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["committed"] as? Bool == true)
        #expect(object["rows"] as? Int == 3)
        let columns = try #require(object["columns"] as? [[String: Any]])
        let weight = try #require(columns.first { $0["name"] as? String == "weight" })
        #expect(weight["changed_values"] as? Int == 3)
        #expect((weight["transitions"] as? [[String: Any]])?.first?["to"] as? String == "REAL")

        // A foreign key the rows break: refused, the JSON says why, nothing changed.
        try sqlite3(["-batch", db, "CREATE TABLE loans (book_id INTEGER); INSERT INTO loans VALUES (999999);"])
        let before = try FileFingerprint(db)
        let orphan = try litectl("transform", "--json", db, "loans", "--add-fk", "book_id=books.id")
        #expect(orphan.status == 1)
        let refusal = try #require(try JSONSerialization.jsonObject(with: Data(orphan.stdout.utf8)) as? [String: Any])
        #expect(refusal["committed"] as? Bool == false)
        #expect((refusal["refused"] as? String)?.contains("orphan") == true)
        #expect(try FileFingerprint(db) == before)
    }

    @Test func errorsAndUsage() throws {
        let folder = try TemporaryFolder("cli-transform-errors")
        let db = folder.file("library.db")
        try makeLibrary(db)
        let before = try FileFingerprint(db)
        let noColumn = try litectl("transform", db, "books", "--drop", "nope")
        #expect(noColumn.status == 2)
        #expect(noColumn.stderr == "litectl: \(db): no such column: books.nope\n")
        let brokenIndex = try litectl("transform", db, "books", "--drop", "title")
        #expect(brokenIndex.status == 2)
        #expect(brokenIndex.stderr.split(separator: "\n").count == 1)
        #expect(brokenIndex.stderr.contains("books_title") || brokenIndex.stderr.contains("books_added"), "\(brokenIndex.stderr)")
        #expect(try litectl("transform", db, "books").status == 64)
        #expect(try litectl("transform", db, "books", "--type", "year").status == 64)
        #expect(try litectl("transform", db, "books", "--sql", "--json", "--drop", "price").status == 64)
        #expect(try litectl("transform", folder.file("missing.db"), "t", "--drop", "x").status == 2)
        #expect(try FileFingerprint(db) == before)
        #expect(try folder.listing() == ["library.db"], "no file left beside the database")
    }

    /// A hostile file can keep more than one statement in a stored text
    /// (SQLite parses only the first when it opens the file): transform,
    /// which re-runs stored text on its schema replica and on the file, refuses
    /// it naming the object, changes nothing and attaches (creates) no file.
    @Test func storedTextWithMoreThanOneStatementIsRefused() throws {
        let folder = try TemporaryFolder("cli-transform-hostile")
        let db = folder.file("h.db")
        let elsewhere = folder.file("elsewhere.db")
        try makeDatabase(db, "CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 2); CREATE INDEX t_a ON t(a);")
        try sqlite3(["-batch", db], input: """
            PRAGMA writable_schema=ON;
            UPDATE sqlite_schema SET sql = 'CREATE INDEX t_a ON t(a);ATTACH ''\(elsewhere)'' AS e' WHERE name = 't_a';
            """)
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok", "SQLite opens the file")
        let before = try FileFingerprint(db)
        for extra in [[], ["--sql"]] {
            let r = try runProcess(litectlBinary, ["transform", db, "t", "--drop", "b"] + extra)
            #expect(r.status == 2)
            #expect(r.stderr == "litectl: \(db): the stored SQL of index \"t_a\" is not one statement (it holds more than one statement): not run; the file may be hostile\n",
                    "\(r.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: elsewhere))
        #expect(try FileFingerprint(db) == before)
    }
}
