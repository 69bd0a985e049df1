// `transform` option by option on a library database with indexes (partial and
// expression ones), triggers, views, foreign keys in both directions,
// AUTOINCREMENT, WITHOUT ROWID and STRICT tables. After each: the columns the
// change did not touch hash the same (rowids included), every other table
// hashes the same (sqlite_sequence and sqlite_stat1 too), the sqlite3 CLI finds
// integrity_check ok and foreign_key_check empty, and the schema reader sees the
// definition that was asked for. Refusals leave the file's bytes as they were.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

/// The rows of `columns` of `table` (with `key`, the rowid by default),
/// copied into untyped columns of a fresh database by the sqlite3 CLI and
/// hashed by litectl's content hash: equal exactly when every value and its
/// storage class, and every key, are equal.
func projectionHash(_ db: String, _ table: String, _ columns: [String], key: String = "rowid",
                    in folder: TemporaryFolder) throws -> String {
    let scratch = folder.file("projection-\(UUID().uuidString).db")
    defer { unlink(scratch) }
    let names = (0...columns.count).map { "c\($0)" }.joined(separator: ", ")
    let selected = ([key] + columns.map(quoteIdentifier)).joined(separator: ", ")
    try sqlite3(["-batch", scratch], input: """
        ATTACH '\(db)' AS src;
        CREATE TABLE p (\(names));
        INSERT INTO p SELECT \(selected) FROM src.\(quoteIdentifier(table));
        """)
    var options = ContentHashOptions()
    options.includeSchema = false
    return try ContentHasher.hash(path: scratch, options: options).digest
}

/// Per-table data hashes of every table but `except`.
func otherTableHashes(_ db: String, except: String) throws -> [String: String] {
    var options = ContentHashOptions()
    options.includeSchema = false
    let result = try ContentHasher.hash(path: db, options: options)
    var out: [String: String] = [:]
    for table in result.tables where !sameSQLName(table.name, except) { out[table.name] = "\(table.digest) \(table.rows)" }
    return out
}

/// integrity_check and foreign_key_check by the sqlite3 CLI.
func expectSound(_ db: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok", sourceLocation: sourceLocation)
    #expect(try sqlite3Scalar(db, "PRAGMA foreign_key_check") == "", sourceLocation: sourceLocation)
}

@Suite struct TableTransformTests {
    let folder: TemporaryFolder
    let db: String

    init() throws {
        folder = try TemporaryFolder("transform")
        db = folder.file("library.db")
        try makeLibrary(db)
    }

    func transform(_ table: String, _ changes: [TransformChange], allowConversion: Bool = false,
                   mode: TransformMode = .execute, compareAll: Bool = true) throws -> TransformReport {
        var request = TransformRequest(table: table, changes: changes)
        request.allowConversion = allowConversion
        request.compareAll = compareAll
        return try TableTransformer.run(path: db, request: request, mode: mode)
    }

    func table(_ name: String) throws -> Table {
        try #require(try Connection(path: db).readSchema().table(named: name))
    }

    func schemaNames() throws -> [String] {
        // Automatic indexes come and go with keys; every other object must stay.
        try sqlite3(["-batch", db, "SELECT type || ' ' || name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_autoindex%' ORDER BY 1"])
            .split(separator: "\n").map(String.init)
    }

    /// Runs `body` (the transform) and checks what must not change.
    func expectUntouched(_ name: String, columns: [String], renamed: [String: String] = [:], key: String = "rowid",
                         _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try projectionHash(db, name, columns, key: key, in: folder)
        let others = try otherTableHashes(db, except: name)
        let objects = try schemaNames()
        try body()
        let after = try projectionHash(db, name, columns.map { renamed[$0] ?? $0 }, key: renamed[key] ?? key, in: folder)
        #expect(after == before, "the untouched columns of \(name) changed", sourceLocation: sourceLocation)
        #expect(try otherTableHashes(db, except: name) == others, "another table changed", sourceLocation: sourceLocation)
        #expect(try schemaNames() == objects, "an index, trigger or view was lost or added", sourceLocation: sourceLocation)
        try expectSound(db, sourceLocation: sourceLocation)
    }

    @Test func theLibraryIsSoundToBeginWith() throws {
        try expectSound(db)
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM books") != "0")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM reviews") != "0")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM log") != "0")
    }

    @Test func typeChangeIsRefusedThenAllowedWithItsConversionsCounted() throws {
        let before = try FileFingerprint(db)
        #expect {
            try transform("books", [.type(column: "year", type: "INTEGER")])
        } throws: { error in
            guard let refusal = error as? TransformRefusal else { return false }
            let year = refusal.report.columns.first { $0.name == "year" }
            return refusal.message.contains("year") && (year?.changedValues ?? 0) > 0
                && year?.transitions.first?.from == "TEXT" && year?.transitions.first?.to == "INTEGER"
        }
        #expect(try FileFingerprint(db).bytes == before.bytes, "a refusal changes nothing")

        let textYears = Int(try sqlite3Scalar(db, "SELECT count(*) FROM books WHERE year GLOB '[0-9]*' AND year NOT GLOB '*[^0-9]*'"))!
        var report: TransformReport!
        try expectUntouched("books", columns: ["author_id", "title", "price", "isbn"]) {
            report = try transform("books", [.type(column: "year", type: "INTEGER")], allowConversion: true)
        }
        #expect(report.committed)
        let year = try #require(report.columns.first { $0.name == "year" })
        #expect(year.changedValues == Int64(textYears))
        #expect(report.columns.filter { $0.name != "year" }.allSatisfy { $0.changedValues == 0 })
        #expect(try table("books").columns.first { $0.name == "year" }?.declaredType == "INTEGER")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM books WHERE typeof(year) = 'integer'") == String(textYears))
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM books WHERE year = 'c. 1813'") == "1", "text that is not a number stays text")
        #expect(try sqlite3Scalar(db, "SELECT sql FROM sqlite_schema WHERE name = 'books_year'").contains("WHERE year IS NOT NULL"))
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM book_list") == sqlite3Scalar(db, "SELECT count(*) FROM books"))
    }

    @Test func onlyColumnsWhoseAffinityChangesAreComparedByDefault() throws {
        let report = try transform("books", [.type(column: "year", type: "INTEGER"), .type(column: "title", type: "VARCHAR(300)"),
                                             .collate(column: "isbn", collation: "NOCASE")],
                                   allowConversion: true, compareAll: false)
        // year: TEXT → INTEGER affinity; title: TEXT → TEXT (VARCHAR); isbn: a collation only.
        #expect(report.columns.filter { $0.changedValues != nil }.map(\.name) == ["year"])
        #expect((report.columns.first { $0.name == "year" }?.changedValues ?? 0) > 0)
        #expect(report.pairedRows == 900)
        // The same change with every column compared: the others are unchanged, as predicted.
        let again = try transform("books", [.type(column: "price", type: "DOUBLE")], compareAll: true)
        #expect(again.columns.allSatisfy { $0.changedValues == 0 })
        // A STRICT table's ANY column has no affinity; without STRICT it is NUMERIC: '12' becomes 12.
        try sqlite3(["-batch", db, "CREATE TABLE anys (v ANY) STRICT; INSERT INTO anys VALUES ('12'), ('x'), (1.5);"])
        let loose = try transform("anys", [.strict(false)], allowConversion: true, compareAll: false)
        #expect(loose.columns.first?.changedValues == 1)
        #expect(loose.columns.first?.transitions.first?.from == "TEXT" && loose.columns.first?.transitions.first?.to == "INTEGER")
        #expect(TransformPlanner.affinity(of: "VARCHAR(10)", strict: false) == "TEXT")
        #expect(TransformPlanner.affinity(of: "FLOATING POINT", strict: false) == "INTEGER", "INT wins, as in SQLite's rules")
        #expect(TransformPlanner.affinity(of: "", strict: false) == "BLOB")
        #expect(TransformPlanner.affinity(of: "DECIMAL(10,2)", strict: false) == "NUMERIC")
    }

    @Test func renameRewritesIndexesTriggersAndViews() throws {
        try expectUntouched("books", columns: ["author_id", "title", "year", "price", "isbn"], renamed: ["title": "name"]) {
            let report = try transform("books", [.rename(column: "title", to: "name"), .type(column: "name", type: "VARCHAR(200)")])
            #expect(report.columns.first { $0.name == "name" }?.previousName == "title")
        }
        #expect(try table("books").columns.map(\.name) == ["id", "author_id", "name", "year", "price", "isbn"])
        #expect(try sqlite3Scalar(db, "SELECT sql FROM sqlite_schema WHERE name = 'books_lower_title'").contains(#"lower("name")"#))
        #expect(try sqlite3Scalar(db, "SELECT sql FROM sqlite_schema WHERE name = 'book_list'").contains(#"b."name""#))
        #expect(try sqlite3Scalar(db, "SELECT sql FROM sqlite_schema WHERE name = 'books_added'").contains(#"NEW."name""#))
        // The trigger still works on the new table.
        try sqlite3(["-batch", db, "INSERT INTO books (id, author_id, name) VALUES (100000, 1, 'fresh')"])
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM log WHERE msg = 'fresh'") == "1")
    }

    @Test func autoincrementKeepsItsCounterAndRowids() throws {
        let seq = try sqlite3Scalar(db, "SELECT seq FROM sqlite_sequence WHERE name = 'authors'")
        #expect(Int(seq)! > Int(try sqlite3Scalar(db, "SELECT max(id) FROM authors"))!, "the fixture deleted the newest authors")
        try expectUntouched("authors", columns: ["id", "name", "born", "score"]) {
            _ = try transform("authors", [.setDefault(column: "note", sql: "'none'"), .collate(column: "name", collation: "BINARY"),
                                          .nullable(column: "name")])
        }
        let authors = try table("authors")
        #expect(authors.autoincrement)
        #expect(authors.columns.first { $0.name == "note" }?.defaultSQL == "'none'")
        #expect(authors.columns.first { $0.name == "name" }?.collation == "BINARY")
        #expect(authors.columns.first { $0.name == "name" }?.notNull == false)
        #expect(try sqlite3Scalar(db, "SELECT seq FROM sqlite_sequence WHERE name = 'authors'") == seq)
        try sqlite3(["-batch", db, "INSERT INTO authors (name) VALUES ('new')"])
        #expect(try sqlite3Scalar(db, "SELECT max(id) FROM authors") == String(Int(seq)! + 1))
    }

    @Test func notNullIsRefusedWhileRowsHoldNull() throws {
        let before = try FileFingerprint(db)
        #expect(throws: TransformRefusal.self) { try transform("authors", [.notNull(column: "born")]) }
        #expect(try FileFingerprint(db).bytes == before.bytes)
        try sqlite3(["-batch", db, "UPDATE authors SET born = '?' WHERE born IS NULL"])
        try expectUntouched("authors", columns: ["id", "name", "born", "score", "note"]) {
            _ = try transform("authors", [.notNull(column: "born")])
        }
        #expect(try table("authors").columns.first { $0.name == "born" }?.notNull == true)
    }

    @Test func dropAColumnButNotOneAnIndexOrViewNeeds() throws {
        let before = try FileFingerprint(db)
        #expect {
            try transform("books", [.drop(column: "title")])
        } throws: { error in
            "\(error)".contains("books_title") || "\(error)".contains("books_added")
        }
        #expect {
            try transform("authors", [.drop(column: "born")])
        } throws: { error in
            "\(error)".contains("author_births")
        }
        #expect(try FileFingerprint(db).bytes == before.bytes, "errors before anything changes")
        try expectUntouched("books", columns: ["author_id", "title", "year", "isbn"]) {
            let report = try transform("books", [.drop(column: "price")])
            #expect(report.droppedColumns == ["price"])
        }
        #expect(try !table("books").columns.contains { $0.name == "price" })
    }

    @Test func primaryKeyWithoutRowidAndColumnOrder() throws {
        try expectUntouched("settings", columns: ["key", "value"]) {
            _ = try transform("settings", [.notNull(column: "key"), .primaryKey(columns: ["key"]),
                                           .columnOrder(["value", "key"])])
        }
        #expect(try table("settings").primaryKey.map(\.name) == ["key"])
        #expect(try table("settings").columns.map(\.name) == ["value", "key"])
        let keys = try projectionHash(db, "settings", ["value"], key: "key", in: folder)
        _ = try transform("settings", [.withoutRowid])
        #expect(try table("settings").withoutRowid)
        #expect(try projectionHash(db, "settings", ["value"], key: "key", in: folder) == keys)
        try expectSound(db)
    }

    @Test func withoutRowidTableKeepsItsRowsByKey() throws {
        try expectUntouched("reviews", columns: ["stars"], renamed: ["book_id || '/' || reviewer": "book_id || '/' || who"],
                            key: "book_id || '/' || reviewer") {
            _ = try transform("reviews", [.rename(column: "reviewer", to: "who"), .setDefault(column: "stars", sql: "3")])
        }
        let reviews = try table("reviews")
        #expect(reviews.withoutRowid)
        #expect(reviews.primaryKey.map(\.name) == ["book_id", "who"])
    }

    @Test func strictOnAndOffWithConversionsCounted() throws {
        // INTEGER → REAL in a STRICT table stores every weight as a REAL.
        #expect(throws: TransformRefusal.self) { try transform("tags", [.type(column: "weight", type: "REAL")]) }
        let report = try transform("tags", [.type(column: "weight", type: "REAL")], allowConversion: true)
        #expect(report.columns.first { $0.name == "weight" }?.changedValues == 3)
        #expect(try sqlite3Scalar(db, "SELECT group_concat(typeof(weight)) FROM tags") == "real,real,real")
        try expectUntouched("tags", columns: ["name", "weight"]) {
            _ = try transform("tags", [.strict(false)])
        }
        #expect(try !table("tags").strict)
        try expectUntouched("log", columns: ["at", "msg"]) {
            _ = try transform("log", [.strict(true)])
        }
        #expect(try table("log").strict)
        // An untyped column cannot be STRICT: SQLite's own error, before anything changes.
        let before = try FileFingerprint(db)
        #expect(throws: DatabaseError.self) { try transform("authors", [.strict(true)]) }
        #expect(try FileFingerprint(db).bytes == before.bytes)
    }

    @Test func foreignKeysAddedAndDroppedAndOrphansRefused() throws {
        // books.author_id loses its foreign key, then gets it back by --add-fk.
        try expectUntouched("books", columns: ["author_id", "title", "year", "price", "isbn"]) {
            _ = try transform("books", [.dropForeignKey(column: "author_id")])
        }
        #expect(try table("books").foreignKeys.isEmpty)
        try expectUntouched("books", columns: ["author_id", "title", "year", "price", "isbn"]) {
            _ = try transform("books", [.addForeignKey(column: "author_id", table: "authors", parentColumn: "id")])
        }
        #expect(try table("books").foreignKeys.map(\.parentTable) == ["authors"])

        // A foreign key the rows do not satisfy: refused, nothing changed.
        try sqlite3(["-batch", db, "CREATE TABLE loans (book_id INTEGER, who TEXT); INSERT INTO loans VALUES (3, 'a'), (999999, 'b');"])
        let before = try FileFingerprint(db)
        #expect {
            try transform("loans", [.addForeignKey(column: "book_id", table: "books", parentColumn: "id")])
        } throws: { error in
            (error as? TransformRefusal)?.message.contains("orphan") == true
        }
        #expect(try FileFingerprint(db).bytes == before.bytes)

        // A parent whose key the children name stops being unique: refused
        // (foreign key mismatch) before anything changes.
        #expect(throws: (any Error).self) { try transform("authors", [.primaryKey(columns: ["name"])]) }
        #expect(try FileFingerprint(db).bytes == before.bytes)
    }

    /// Orphans are compared row by row: moving a foreign key from a column
    /// whose row 1 is an orphan to one whose row 2 is keeps the count (1) but
    /// orphans a new row, and is refused.
    @Test func aTransformThatSwapsOneOrphanForAnotherIsRefused() throws {
        try sqlite3(["-batch", db], input: """
            CREATE TABLE parent_p (id INTEGER PRIMARY KEY);
            INSERT INTO parent_p VALUES (1);
            CREATE TABLE child_c (id INTEGER PRIMARY KEY, a INTEGER REFERENCES parent_p(id), b INTEGER);
            INSERT INTO child_c VALUES (1, 99, 1), (2, 1, 77);
            """)
        #expect(try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check(child_c);") == "child_c|1|parent_p|0\n")
        let before = try FileFingerprint(db)
        #expect {
            try transform("child_c", [.dropForeignKey(column: "a"), .addForeignKey(column: "b", table: "parent_p", parentColumn: "id")])
        } throws: { error in
            (error as? TransformRefusal)?.message.contains("the change would orphan 1 row (foreign_key_check: \"child_c\" rowid 2 -> \"parent_p\")") == true
        }
        #expect(try FileFingerprint(db).bytes == before.bytes)
        // Moved where no row is orphaned, it goes through.
        try sqlite3(["-batch", db], input: "UPDATE child_c SET b = 1 WHERE id = 2;")
        _ = try transform("child_c", [.dropForeignKey(column: "a"), .addForeignKey(column: "b", table: "parent_p", parentColumn: "id")])
        #expect(try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check(child_c);").isEmpty)
    }

    /// A new INTEGER PRIMARY KEY becomes the rowid: when its values are not
    /// the rows' rowids, the rows would get new ones, which is refused unless
    /// --allow-conversion; when they are, nothing is lost and it goes through.
    @Test func aNewIntegerPrimaryKeyThatRenumbersRowsIsRefused() throws {
        try sqlite3(["-batch", db], input: """
            CREATE TABLE codes (n INTEGER, label TEXT);
            INSERT INTO codes (rowid, n, label) VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 3, 'c');
            CREATE TABLE same (n INTEGER, label TEXT);
            INSERT INTO same (rowid, n, label) VALUES (1, 1, 'a'), (5, 5, 'b');
            """)
        let before = try FileFingerprint(db)
        #expect {
            try transform("codes", [.primaryKey(columns: ["n"])])
        } throws: { error in
            (error as? TransformRefusal)?.message.contains("the new INTEGER PRIMARY KEY n would replace the rowids: 2 rows would get new rowids") == true
        }
        #expect(try FileFingerprint(db).bytes == before.bytes)
        _ = try transform("codes", [.primaryKey(columns: ["n"])], allowConversion: true)
        #expect(try sqlite3(["-batch", db], input: "SELECT rowid, n, label FROM codes ORDER BY rowid;") == "3|3|c\n10|10|a\n20|20|b\n")
        _ = try transform("same", [.primaryKey(columns: ["n"])])
        #expect(try sqlite3(["-batch", db], input: "SELECT rowid, label FROM same ORDER BY rowid;") == "1|a\n5|b\n")
    }

    /// Rows paired by key are compared bit for bit too: -0.0 stored into a
    /// REAL column comes back as 0.0 (SQLite keeps an integral REAL as an
    /// integer there), which SQL's IS calls the same value.
    @Test func rowsPairedByKeyAreComparedBitForBit() throws {
        try sqlite3(["-batch", db], input: """
            CREATE TABLE signs (k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            INSERT INTO signs VALUES ('neg', -0.0), ('pos', 0.5);
            """)
        // The oracle: Python's sqlite3 sees the sign before the change.
        let sign = try runProcess("/usr/bin/python3", ["-c", "import sqlite3, math, sys; print(math.copysign(1, sqlite3.connect(sys.argv[1]).execute(\"SELECT v FROM signs WHERE k = 'neg'\").fetchone()[0]))", db])
        #expect(sign.stdout == "-1.0\n", "\(sign.stderr)")
        let before = try FileFingerprint(db)
        #expect {
            try transform("signs", [.type(column: "v", type: "REAL")])
        } throws: { error in
            guard let refusal = error as? TransformRefusal else { return false }
            return refusal.message.contains("stored values would change in v (1)")
                && refusal.report.pairedRows == 2 && refusal.report.convertedColumns.first?.changedValues == 1
        }
        #expect(try FileFingerprint(db).bytes == before.bytes)
    }

    @Test func statementsForTheShellMatchWhatTransformDoes() throws {
        let copy = try folder.copy(db, as: "copy.db")
        let changes: [TransformChange] = [.rename(column: "title", to: "name"), .type(column: "year", type: "INTEGER"),
                                          .drop(column: "price")]
        let sql = try transform("books", changes, mode: .sqlOnly)
        #expect(sql.statements.first == "PRAGMA foreign_keys=OFF;")
        #expect(sql.statements.last == "COMMIT;")
        _ = try transform("books", changes, allowConversion: true)
        try sqlite3(["-batch", copy], input: sql.statements.joined(separator: "\n"))
        #expect(try ContentHasher.hash(path: copy).digest == ContentHasher.hash(path: db).digest)
    }

    @Test func statisticsOfTheTableAreKept() throws {
        let stats = try sqlite3Scalar(db, "SELECT group_concat(idx || '=' || stat, ';') FROM (SELECT * FROM sqlite_stat1 WHERE tbl = 'books' ORDER BY idx)")
        #expect(stats.contains("books_title="))
        _ = try transform("books", [.setDefault(column: "price", sql: "0.0")])
        let after = try sqlite3Scalar(db, "SELECT group_concat(idx || '=' || stat, ';') FROM (SELECT * FROM sqlite_stat1 WHERE tbl = 'books' ORDER BY idx)")
        #expect(after == stats)
        // A UNIQUE constraint that changes columns drops its automatic index's row (left to ANALYZE).
        _ = try transform("books", [.rename(column: "isbn", to: "code")])
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'books'") == "4")
        _ = try transform("books", [.collate(column: "code", collation: "NOCASE")])
        #expect(try sqlite3Scalar(db, "SELECT group_concat(idx) FROM sqlite_stat1 WHERE tbl = 'books' AND idx LIKE 'sqlite_autoindex%'") == "")
    }

    @Test func dryRunChecksEverythingAndChangesNothing() throws {
        let before = try FileFingerprint(db)
        let report = try transform("books", [.type(column: "year", type: "INTEGER")], allowConversion: true, mode: .dryRun)
        #expect(!report.committed)
        #expect(report.quickCheck == "ok")
        #expect(try FileFingerprint(db).bytes == before.bytes)
    }

    /// Every ordinary table of the real databases rebuilt (a DEFAULT changed,
    /// which touches no stored value): every table's rows hash as before, and
    /// the sqlite3 CLI finds integrity_check ok and as many foreign key
    /// problems as before (the murder mystery ships with some).
    @Test func everyRealTableSurvivesARebuild() throws {
        var rebuilt = 0
        for path in realDatabases {
            let copy = try folder.copy(path, as: "real-" + (path as NSString).lastPathComponent)
            let problems = try sqlite3Scalar(copy, "SELECT count(*) FROM pragma_foreign_key_check")
            let tables = try Connection(path: copy).readSchema().tables.filter { $0.kind == .ordinary && $0.problem == nil }
            let before = try otherTableHashes(copy, except: "")
            for table in tables {
                guard let column = table.columns.last(where: { $0.hidden == .normal && $0.primaryKeyPosition == 0 }) else { continue }
                let request = TransformRequest(table: table.name, changes: [.setDefault(column: column.name, sql: "NULL")])
                let report = try TableTransformer.run(path: copy, request: request, mode: .execute)
                #expect(report.columns.allSatisfy { $0.changedValues == 0 || $0.changedValues == nil }, "\(path): \(table.name)")
                rebuilt += 1
            }
            #expect(try otherTableHashes(copy, except: "") == before, "\(path)")
            #expect(try sqlite3Scalar(copy, "PRAGMA integrity_check") == "ok", "\(path)")
            #expect(try sqlite3Scalar(copy, "SELECT count(*) FROM pragma_foreign_key_check") == problems, "\(path)")
        }
        #expect(realDatabases.isEmpty || rebuilt > 20)
    }

    @Test func unknownTablesColumnsAndUnsafeTextAreErrors() throws {
        #expect(throws: DatabaseError.self) { try transform("nope", [.drop(column: "x")]) }
        #expect(throws: DatabaseError.self) { try transform("books", [.drop(column: "nope")]) }
        #expect(throws: DatabaseError.self) { try transform("books", [.type(column: "year", type: "INT, evil TEXT")]) }
        #expect(throws: DatabaseError.self) { try transform("books", [.setDefault(column: "year", sql: "1) --")]) }
        #expect(throws: DatabaseError.self) { try transform("book_list", [.drop(column: "year")]) }
    }
}
