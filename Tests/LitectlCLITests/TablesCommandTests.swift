// `litectl tables` through the built binary, checked against the sqlite3 CLI's
// `pragma_table_list`, `pragma_table_info` and `count(*)` on the same files.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct TablesCommandTests {
    /// The oracle: (schema, name, type, wr, strict, count, columns) for every
    /// table and view of `path`, from the sqlite3 CLI.
    func oracle(_ path: String) throws -> [[String]] {
        let sql = """
            SELECT name, CASE WHEN type = 'table' AND name LIKE 'sqlite!_%' ESCAPE '!' THEN 'internal' ELSE type END, wr, strict
            FROM pragma_table_list WHERE schema = 'main' AND name <> 'sqlite_schema' ORDER BY name
            """
        return try parseCSV(Array(sqlite3(["-batch", "-csv", "-readonly", path, sql]).utf8)).map { $0.map(text) }
    }

    @Test func listsTablesWithCountsAndColumnsLikeSqlite3() throws {
        let folder = try TemporaryFolder("tables")
        let a = folder.file("a.db"), b = folder.file("b b.db")
        try makeDatabase(a, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL, amount REAL);
            INSERT INTO t(name, amount) VALUES ('x', 1.5), ('y', 2.5), ('z', NULL);
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            CREATE TABLE s(a INTEGER, b ANY) STRICT;
            INSERT INTO s VALUES (1, 'b');
            CREATE VIEW tv AS SELECT name FROM t;
            CREATE TABLE seq(id INTEGER PRIMARY KEY AUTOINCREMENT, x);
            """)
        try makeDatabase(b, "CREATE TABLE other(q); INSERT INTO other VALUES (1), (2), (3), (4);")
        let before = try FileFingerprint(a)
        let result = try litectl("tables", a, "--attach", "bb=\(b)", "--counts", "--columns", "--format", "csv")
        #expect(result.status == 0, "\(result.stderr)")
        let rows = parseCSV(result.stdoutBytes).map { $0.map(text) }
        #expect(rows.first == ["db", "schema", "name", "type", "without_rowid", "strict", "rows", "columns"])
        let listed = Array(rows.dropFirst())
        let mainRows = listed.filter { $0[1] == "main" }
        let expected = try oracle(a)
        #expect(mainRows.map { [$0[2], $0[3], $0[4], $0[5]] } == expected.map { [$0[0], $0[1] == "view" ? "view" : $0[1], $0[1] == "view" ? "0" : $0[2], $0[3]] })
        for row in mainRows where row[3] != "view" {
            #expect(row[6] == (try sqlite3Scalar(a, "SELECT count(*) FROM \(quoteIdentifier(row[2]))")), "\(row[2])")
            let columns = try sqlite3(["-batch", "-readonly", a,
                                       "SELECT group_concat(trim(name || ' ' || type), ', ') FROM pragma_table_info(\(Value.text(row[2]).sqlLiteral))"])
            #expect(row[7] == columns.trimmingCharacters(in: .newlines), "\(row[2])")
            #expect(row[0] == a)
        }
        #expect(listed.filter { $0[1] == "bb" }.map { [$0[0], $0[2], $0[6]] } == [[b, "other", "4"]])
        #expect(try FileFingerprint(a) == before)
    }

    @Test(.enabled(if: !realDatabases.isEmpty))
    func realDatabasesEachOnItsOwn() throws {
        let folder = try TemporaryFolder("tables-real")
        let copies = try realDatabases.map { try folder.copy($0) }
        let result = try runProcess(litectlBinary, ["tables"] + copies + ["--format", "jsonl"])
        #expect(result.status == 0, "\(result.stderr)")
        let objects = try result.stdout.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        for copy in copies {
            let names = objects.filter { $0["db"] as? String == copy }.compactMap { $0["name"] as? String }
            let expected = try oracle(copy).map { $0[0] }
            #expect(names == expected, "\(copy)")
        }
    }

    @Test func aMissingFileIsReportedAndTheOthersListed() throws {
        let folder = try TemporaryFolder("tables-missing")
        let a = folder.file("a.db")
        try makeDatabase(a, "CREATE TABLE t(x);")
        let result = try litectl("tables", "nope.db", "a.db", "--format", "csv", "--no-headers", in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr == "litectl: nope.db: no such file\n")
        #expect(result.stdout == "a.db,main,t,table,0,0\r\n")
        #expect(try folder.listing() == ["a.db"])
    }
}
