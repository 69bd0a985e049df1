// The cases `diff --format sql` and `patch` once got wrong (issue 5's known
// gaps), each judged like the other round trips: the patch applied with the
// plain sqlite3 CLI and with `litectl patch`, then litectl hash, sqldiff,
// litectl diff and PRAGMA integrity_check must agree that A became B.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DiffPatchGapTests {
    // MARK: Names fold like SQLite's: ASCII letters only

    /// 'É' and 'é' are two names to SQLite (it folds ASCII letters only), so
    /// two tables, two indexes and two views that differ in them are compared
    /// each with its own counterpart.
    @Test func nonASCIINamesDifferingInCaseAreDifferentObjects() throws {
        let schema = """
            CREATE TABLE "É"(id INTEGER PRIMARY KEY, v TEXT);
            CREATE TABLE "é"(id INTEGER PRIMARY KEY, v TEXT);
            CREATE INDEX "iÉ" ON "É"(v);
            CREATE VIEW "vé" AS SELECT v FROM "é";
            """
        let folder = try TemporaryFolder("gap-names")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, schema + """
            CREATE INDEX "ié" ON "é"(v);
            INSERT INTO "É" VALUES (1, 'upper'), (2, 'both');
            INSERT INTO "é" VALUES (1, 'lower'), (2, 'both');
            """)
        try makeDatabase(b, schema + """
            CREATE INDEX "ié" ON "é"(v, id);
            CREATE VIEW "vÉ" AS SELECT v FROM "É";
            INSERT INTO "É" VALUES (1, 'upper'), (2, 'changed in É');
            INSERT INTO "é" VALUES (1, 'lower'), (3, 'new in é');
            """)
        let summary = try litectl("diff", "--summary", a, b)
        #expect(summary.status == 1)
        #expect(summary.stdout == """
            + view vÉ added
            ~ index ié changed
            É: +0 -0 ~1
            é: +1 -1 ~0

            """, "\(summary.stdout)\(summary.stderr)")
        try roundTrip(a, b, in: folder)

        // --table names one of them, not both.
        let one = try litectl("diff", "--format", "jsonl", "--table", "é", a, b)
        #expect(one.status == 1)
        #expect(!one.stdout.contains("changed in É"), "\(one.stdout)")
        #expect(one.stdout.contains("new in é"))
        let hashes = try litectl("hash", "--per-table", "--table", "É", a)
        #expect(hashes.status == 0)
        #expect(hashes.stdout.hasSuffix("  2  É\n"), "\(hashes.stdout)")
        #expect(!hashes.stdout.contains("é\n"), "\(hashes.stdout)")
    }

    // MARK: TEXT literals in A's text encoding

    /// Tables holding TEXT with NUL, CR, U+FFFE/U+FFFF and a BOM, as values
    /// and as keys, made in `encoding`. char() makes U+FFFD of U+FFFF in a
    /// UTF-16 database, so there those two come from CAST.
    static func textDatabase(_ path: String, encoding: String, target: Bool) throws {
        let nonCharacters = switch encoding {
        case "UTF-16le": "CAST(x'FFFFFEFF' AS TEXT)"
        case "UTF-16be": "CAST(x'FFFFFFFE' AS TEXT)"
        default: "char(65535, 65534)"
        }
        var script = """
            PRAGMA encoding='\(encoding)';
            CREATE TABLE t(id INTEGER PRIMARY KEY, v);
            CREATE TABLE k(name TEXT PRIMARY KEY, v) WITHOUT ROWID;
            INSERT INTO t VALUES (1, 'same');
            INSERT INTO k VALUES ('n' || char(0), 1);

            """
        if target {
            script += """
                INSERT INTO t VALUES (2, 'a' || char(0) || 'b'), (3, 'x' || char(13, 10) || 'y' || char(13)),
                  (4, 'z' || \(nonCharacters)), (5, char(65279) || 'bom'), (6, 'é e' || char(769) || ' ☕ ' || char(128512)),
                  (7, char(0)), (8, ''), (10, char(13) || \(nonCharacters) || char(0));
                INSERT INTO k VALUES ('k' || char(13), 2), ('new' || char(13, 0), 3), (\(nonCharacters), 4);
                """
        } else {
            script += """
                INSERT INTO t VALUES (2, 'old'), (9, 'gone' || char(13)), (10, 'plain');
                INSERT INTO k VALUES ('k' || char(13), 1), ('del' || char(0), 1), ('old' || char(13), 1);
                """
        }
        try makeDatabase(path, script)
        #expect(try sqlite3Scalar(path, "PRAGMA encoding") == encoding)
    }

    /// A in one encoding, B in another (or the same): the patch writes TEXT for
    /// A's. Besides the usual oracles (hash and diff across encodings; sqldiff
    /// cannot attach across them), sqldiff compares the patched A with B made
    /// again in A's encoding.
    @Test(arguments: [("UTF-16le", "UTF-8"), ("UTF-8", "UTF-16le"), ("UTF-16be", "UTF-16le"), ("UTF-16be", "UTF-8"),
                      ("UTF-16le", "UTF-16le")])
    func textIsWrittenForTheFirstDatabasesEncoding(encodings: (String, String)) throws {
        let folder = try TemporaryFolder("gap-encoding")
        let a = folder.file("a.db"), b = folder.file("b.db"), reference = folder.file("b-as-a.db")
        try Self.textDatabase(a, encoding: encodings.0, target: false)
        try Self.textDatabase(b, encoding: encodings.1, target: true)
        try Self.textDatabase(reference, encoding: encodings.0, target: true)
        let hashes = try litectl("hash", b, reference).stdout.split(separator: "\n").map { $0.prefix(64) }
        #expect(hashes.count == 2 && hashes[0] == hashes[1], "B and B made in A's encoding hold the same content")

        try roundTrip(a, b, in: folder, useSqldiff: false)
        let diff = try litectl("diff", "--format", "sql", a, b)
        let patched = try folder.copy(a, as: "patched.db")
        let applied = try runProcess(sqlite3Binary, ["-batch", patched], input: diff.stdoutBytes)
        #expect(applied.status == 0, "\(applied.stderr)")
        let sqldiff = try runProcess(sqldiffBinary, ["--primarykey", patched, reference])
        #expect(sqldiff.status == 0 && sqldiff.stdout.isEmpty, "sqldiff finds: \(sqldiff.stdout) \(sqldiff.stderr)")
    }

    /// A UTF-16 database can hold a lone surrogate, which SQLite reads out as
    /// the invalid UTF-8 `ED A0 80` at the end of the text: written back as
    /// that code unit, it reads the same.
    @Test func aLoneSurrogateGoesBackIntoUTF16() throws {
        let folder = try TemporaryFolder("gap-surrogate")
        let a = folder.file("a.db"), b = folder.file("b.db")
        let schema = "PRAGMA encoding='UTF-16le'; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
        try makeDatabase(a, schema + "INSERT INTO t VALUES (1, 'x');")
        try makeDatabase(b, schema + "INSERT INTO t VALUES (1, CAST(x'410000D8' AS TEXT)), (2, CAST(x'00DC' AS TEXT));")
        try roundTrip(a, b, in: folder)
    }

    /// TEXT that is not UTF-8 (from a UTF-8 B) has no exact form in a UTF-16 A:
    /// the diff fails naming the table, the row and the column, and what it
    /// printed before the error (no COMMIT) changes nothing when run. Into a
    /// UTF-8 A the same B patches exactly.
    @Test func textThatIsNotUTF8CannotGoIntoUTF16() throws {
        let folder = try TemporaryFolder("gap-invalid-utf8")
        let a16 = folder.file("a16.db"), a8 = folder.file("a8.db"), b = folder.file("b.db")
        let rows = "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'one'), (2, 'two');"
        try makeDatabase(a16, "PRAGMA encoding='UTF-16le';" + rows)
        try makeDatabase(a8, rows)
        try makeDatabase(b, rows + "DELETE FROM t WHERE id = 1; INSERT INTO t VALUES (7, CAST(x'41FF' AS TEXT));")
        let diff = try litectl("diff", "--format", "sql", a16, b)
        #expect(diff.status == 2)
        #expect(diff.stderr == "litectl: table t, the row id=7: column v holds TEXT that is not UTF-8 (x'41FF'); it cannot be "
                + "written exactly into the first database, whose text is UTF-16le\n")
        #expect(!diff.stdout.contains("COMMIT"))
        let before = try FileFingerprint(a16)
        let applied = try runProcess(sqlite3Binary, ["-batch", a16], input: diff.stdoutBytes)
        #expect(applied.stderr.isEmpty)
        #expect(try FileFingerprint(a16).bytes == before.bytes, "the unfinished patch changed A")
        try roundTrip(a8, b, in: folder)
    }
}
