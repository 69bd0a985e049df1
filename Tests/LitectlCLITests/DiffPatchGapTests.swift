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
}
