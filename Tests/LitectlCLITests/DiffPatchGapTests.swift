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

    /// Columns 'É' and 'é' of one table are two columns too. The engine
    /// (DiffEngine.plan, not this writer's) still finds key columns by
    /// lowercased() names and matches rows by 'É' when the key is 'é': the
    /// patch refuses to address rows by the wrong column (an UPDATE there
    /// changed every row sharing the 'É' value) and the changeset leaves the
    /// table out, until the engine folds names as SQLite does.
    @Test func columnsDifferingInNonASCIICaseAreNotMistakenForTheKey() throws {
        let folder = try TemporaryFolder("gap-column-names")
        let a = folder.file("a.db"), b = folder.file("b.db")
        let schema = "CREATE TABLE t(\"É\" TEXT, \"é\" TEXT PRIMARY KEY, v);"
        try makeDatabase(a, schema + "INSERT INTO t VALUES ('same', 'k1', 1), ('same', 'k2', 2);")
        try makeDatabase(b, schema + "INSERT INTO t VALUES ('same', 'k1', 1), ('same', 'k2', 3);")
        #expect(try litectl("diff", "--format", "sql", a, a).status == 0)
        let diff = try litectl("diff", "--format", "sql", a, b)
        if diff.status == 2 {
            #expect(diff.stderr == "litectl: table t: rows were matched by É, not by its primary key é (names that differ only "
                    + "in the case of non-ASCII letters); no patch is written rather than a wrong one\n")
            #expect(!diff.stdout.contains("UPDATE"))
            let changeset = try litectl("diff", "--format", "changeset", a, b)
            #expect(changeset.stdoutBytes.isEmpty)
            #expect(changeset.stderr == "litectl: note: table t is not in the changeset: rows were matched by É, not by its primary key é\n")
        }
        try roundTrip(a, b, in: folder)
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

    // MARK: UNIQUE values that move from row to row

    static let uniqueSchema = """
        CREATE TABLE t(id INTEGER PRIMARY KEY, u TEXT UNIQUE, v);
        CREATE TABLE pair(id INTEGER PRIMARY KEY, a, b, UNIQUE(a, b));
        CREATE TABLE w(k TEXT PRIMARY KEY, u INTEGER NOT NULL UNIQUE, note) WITHOUT ROWID;
        CREATE TABLE nocase(id INTEGER PRIMARY KEY, name TEXT COLLATE NOCASE UNIQUE);
        CREATE TABLE replaced(id INTEGER PRIMARY KEY, u UNIQUE ON CONFLICT REPLACE);
        CREATE TABLE expr(id INTEGER PRIMARY KEY, e TEXT); CREATE UNIQUE INDEX expr_lower ON expr(lower(e));
        CREATE TABLE part(id INTEGER PRIMARY KEY, u, active); CREATE UNIQUE INDEX part_active ON part(u) WHERE active;
        CREATE TABLE keyless(u UNIQUE, v);

        """

    /// A: the rows before; B: values swapped (t 1↔2), passed along a chain
    /// (t 4→5's value, 5→a new one), round a cycle (t 6→7→8→6), taken over
    /// from a deleted row (t 9 → new 10), and swapped under composite,
    /// NOCASE, ON CONFLICT REPLACE, expression and partial UNIQUE indexes, in
    /// a WITHOUT ROWID table and in a table without a key (patched by rowid).
    static let uniqueA = uniqueSchema + """
        INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'x', 4), (5, 'y', 5), (6, 'p', 6), (7, 'q', 7),
          (8, 'r', 8), (9, 's', 9);
        INSERT INTO pair VALUES (1, 1, 2), (2, 2, 1);
        INSERT INTO w VALUES ('a', 1, 'n'), ('b', 2, 'n');
        INSERT INTO nocase VALUES (1, 'Abc'), (2, 'abd');
        INSERT INTO replaced VALUES (1, 'a'), (2, 'b');
        INSERT INTO expr VALUES (1, 'Ab'), (2, 'cd');
        INSERT INTO part VALUES (1, 'u', 1), (2, 'u', 0);
        INSERT INTO keyless VALUES ('a', 1), ('b', 2);
        """
    static let uniqueB = uniqueSchema + """
        INSERT INTO t VALUES (1, 'b', 1), (2, 'a', 2), (3, 'c', 30), (4, 'y', 4), (5, 'z', 5), (6, 'q', 6), (7, 'r', 7),
          (8, 'p', 8), (10, 's', 10);
        INSERT INTO pair VALUES (1, 2, 1), (2, 1, 2);
        INSERT INTO w VALUES ('a', 2, 'n'), ('b', 1, 'm');
        INSERT INTO nocase VALUES (1, 'abd'), (2, 'ABC');
        INSERT INTO replaced VALUES (1, 'b'), (2, 'a');
        INSERT INTO expr VALUES (1, 'CD'), (2, 'ab');
        INSERT INTO part VALUES (1, 'u', 0), (2, 'u', 1);
        INSERT INTO keyless VALUES ('b', 1), ('a', 2);
        """

    @Test func uniqueValuesSwappedChainedAndCycled() throws {
        let folder = try TemporaryFolder("gap-unique")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, Self.uniqueA)
        try makeDatabase(b, Self.uniqueB)
        try roundTrip(a, b, in: folder)

        // Only updates that change a UNIQUE column become DELETE + INSERT.
        let patch = try litectl("diff", "--format", "sql", a, b).stdout
        #expect(patch.contains("UPDATE \"t\" SET \"v\"=30 WHERE \"id\"=3;\n"))
        #expect(patch.contains("DELETE FROM \"t\" WHERE \"id\"=1;\n"))
        #expect(patch.contains("INSERT INTO \"t\"(\"id\",\"u\",\"v\") VALUES(1,'b',1);\n"))
        #expect(!patch.contains("UPDATE \"t\" SET \"u\""))
        #expect(patch.contains("INSERT INTO \"keyless\"(rowid,\"u\",\"v\") VALUES(1,'b',1);\n"))
    }

    /// Changesets carry the same updates; sqlite3changeset_apply alone reports
    /// a swap as a CONSTRAINT conflict (each row waits for the other), and
    /// litectl patch finishes those changes, forwards and inverted. (Not for
    /// UNIQUE ON CONFLICT REPLACE: see `aChangesetCannotSwapOnConflictReplace`.)
    @Test func uniqueSwapsInAChangeset() throws {
        let folder = try TemporaryFolder("gap-unique-changeset")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, Self.uniqueA + "DROP TABLE replaced;")
        try makeDatabase(b, Self.uniqueB + "DROP TABLE replaced;")
        let diff = try litectl("diff", "--format", "changeset", a, b)
        #expect(diff.status == 1)
        #expect(diff.stderr == "litectl: note: table keyless is not in the changeset: no primary key\n")
        let changeset = folder.file("c.bin")
        try Data(diff.stdoutBytes).write(to: URL(fileURLWithPath: changeset))
        let patched = try folder.copy(a, as: "patched.db")
        let dry = try litectl("patch", "--dry-run", patched, changeset)
        #expect(dry.status == 0 && dry.stdout == "changeset: 20 rows changed (dry run: rolled back)\n", "\(dry.stdout)\(dry.stderr)")
        let applied = try litectl("patch", patched, changeset)
        #expect(applied.status == 0 && applied.stderr.isEmpty, "\(applied.stderr)")
        let tables = ["t", "pair", "w", "nocase", "expr", "part"]
        for table in tables {
            #expect(try litectl("diff", "--table", table, patched, b).status == 0, "\(table)")
            let sqldiff = try runProcess(sqldiffBinary, ["--primarykey", "--table", table, patched, b])
            #expect(sqldiff.status == 0 && sqldiff.stdout.isEmpty, "\(table): \(sqldiff.stdout)")
        }
        #expect(try sqlite3Scalar(patched, "PRAGMA integrity_check") == "ok")
        let undone = try litectl("patch", "--invert", patched, changeset)
        #expect(undone.status == 0 && undone.stderr.isEmpty, "\(undone.stderr)")
        for table in tables { #expect(try litectl("diff", "--table", table, patched, a).status == 0, "\(table)") }
    }

    /// Applying a changeset, SQLite updates the rows as they are: in a column
    /// declared UNIQUE ON CONFLICT REPLACE the first update of a swap deletes
    /// the other row, and the second finds it gone. That conflict aborts the
    /// patch, which changes nothing (the SQL patch does swap such rows).
    @Test func aChangesetCannotSwapOnConflictReplace() throws {
        let folder = try TemporaryFolder("gap-unique-replace")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE r(id INTEGER PRIMARY KEY, u UNIQUE ON CONFLICT REPLACE); INSERT INTO r VALUES (1, 'a'), (2, 'b');")
        try makeDatabase(b, "CREATE TABLE r(id INTEGER PRIMARY KEY, u UNIQUE ON CONFLICT REPLACE); INSERT INTO r VALUES (1, 'b'), (2, 'a');")
        let changeset = folder.file("c.bin")
        try Data(try litectl("diff", "--format", "changeset", a, b).stdoutBytes).write(to: URL(fileURLWithPath: changeset))
        let before = try FileFingerprint(a)
        let result = try litectl("patch", a, changeset)
        #expect(result.status == 2 && result.stderr.contains("a change conflicts with the database"), "\(result.stderr)")
        #expect(try FileFingerprint(a).bytes == before.bytes)
    }

    /// Changes that truly break a constraint still fail as a whole (abort) or
    /// are left out (omit), after the retry as DELETE + INSERT.
    @Test func aChangesetThatTrulyConflictsStillFails() throws {
        let folder = try TemporaryFolder("gap-unique-conflict")
        let a = folder.file("a.db"), b = folder.file("b.db")
        let rows = "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');"
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, u UNIQUE);" + rows)
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, u UNIQUE);" + rows + "UPDATE t SET u = 'z' WHERE id = 1; UPDATE t SET u = 'a' WHERE id = 2;")
        let diff = try litectl("diff", "--format", "changeset", a, b)
        let changeset = folder.file("c.bin")
        try Data(diff.stdoutBytes).write(to: URL(fileURLWithPath: changeset))
        // A copy of A where another row already holds 'z': the update of row 1 cannot land.
        let target = try folder.copy(a, as: "target.db")
        try sqlite3(["-batch", target, "INSERT INTO t VALUES (4, 'z')"])
        let before = try FileFingerprint(target)
        let aborted = try litectl("patch", target, changeset)
        #expect(aborted.status == 2)
        #expect(aborted.stderr.contains("a change conflicts with the database (use --on-conflict omit or replace): UNIQUE constraint failed: t.u"),
                "\(aborted.stderr)")
        #expect(try FileFingerprint(target).bytes == before.bytes)
        let omitted = try litectl("patch", "--on-conflict", "omit", target, changeset)
        #expect(omitted.status == 0, "\(omitted.stderr)")
        #expect(try sqlite3Scalar(target, "SELECT group_concat(id || u, ' ') FROM (SELECT * FROM t ORDER BY id)") == "1a 2b 3c 4z")
    }

    /// A parent whose UNIQUE code moves is deleted and inserted again: with
    /// foreign keys off (the patch turns them off before its transaction, even
    /// in a shell that turned them on) its ON DELETE CASCADE children stay,
    /// and its triggers, dropped around the data changes, do not fire.
    @Test func uniqueSwapInATableWithCascadingChildren() throws {
        let schema = """
            CREATE TABLE parent(id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE);
            CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(id) ON DELETE CASCADE ON UPDATE CASCADE,
              note TEXT);
            CREATE TABLE log(entry);
            CREATE TRIGGER parent_gone AFTER DELETE ON parent BEGIN INSERT INTO log VALUES ('deleted ' || old.id); END;
            PRAGMA foreign_keys=ON;
            INSERT INTO parent VALUES (1, 'x'), (2, 'y'), (3, 'z');
            INSERT INTO child VALUES (1, 1, 'c1'), (2, 2, 'c2'), (3, 1, 'c3'), (4, 3, 'c4');

            """
        let folder = try TemporaryFolder("gap-unique-cascade")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, schema)
        try makeDatabase(b, schema + "UPDATE parent SET code = 'tmp' WHERE id = 1; UPDATE parent SET code = 'x' WHERE id = 2;"
                            + "UPDATE parent SET code = 'y' WHERE id = 1; INSERT INTO child VALUES (5, 2, 'c5');")
        try roundTrip(a, b, in: folder)

        let diff = try litectl("diff", "--format", "sql", a, b)
        let patched = try folder.copy(a, as: "patched-fk.db")
        let applied = try runProcess(sqlite3Binary, ["-batch", "-cmd", "PRAGMA foreign_keys=ON", patched], input: diff.stdoutBytes)
        #expect(applied.status == 0 && applied.stderr.isEmpty, "\(applied.stderr)")
        #expect(try sqlite3Scalar(patched, "SELECT count(*) FROM child") == "5")
        #expect(try sqlite3Scalar(patched, "SELECT count(*) FROM log") == "0")
        try expectEqual(patched, b)

        let changeset = folder.file("c.bin")
        try Data(try litectl("diff", "--format", "changeset", a, b).stdoutBytes).write(to: URL(fileURLWithPath: changeset))
        let patched2 = try folder.copy(a, as: "patched-changeset.db")
        let result = try litectl("patch", patched2, changeset)
        #expect(result.status == 0, "\(result.stderr)")
        try expectEqual(patched2, b)
    }

    // MARK: sqlite_stat1 and sqlite_stat4

    static let statsSchema = """
        CREATE TABLE t(id INTEGER PRIMARY KEY, a, b); CREATE INDEX ta ON t(a); CREATE INDEX tb ON t(b);
        CREATE TABLE u(x); CREATE INDEX ux ON u(x);
        CREATE TABLE plain(z);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60)
        INSERT INTO t SELECT i, i % 7, i % 3 FROM n;
        INSERT INTO u SELECT a FROM t; INSERT INTO plain VALUES (1), (2);

        """

    /// The statistics differ: ANALYZE run on one side only, run again after
    /// changes, or rows edited by hand. sqldiff compares sqlite_stat1 by rowid,
    /// as the patch writes it.
    @Test func statisticsAreComparedAndPatched() throws {
        let folder = try TemporaryFolder("gap-stats")
        let bare = folder.file("bare.db"), analyzed = folder.file("analyzed.db"), changed = folder.file("changed.db")
        try makeDatabase(bare, Self.statsSchema)
        try makeDatabase(analyzed, Self.statsSchema + "ANALYZE;")
        // Changed: an index dropped and two tables rebuilt (which delete their
        // statistics rows in A during the patch; t's stay in B), rows changed
        // and added. (The
        // rebuilt table's rowids follow its rows' order, which is the order
        // the patch writes them in: see `rebuiltKeylessTablesKeepBsRowids`.)
        try makeDatabase(changed, Self.statsSchema + """
            ANALYZE; DROP INDEX tb; ALTER TABLE t ADD COLUMN c DEFAULT 5;
            CREATE TABLE u2(x, y); INSERT INTO u2 SELECT x, 1 FROM u ORDER BY x; DROP TABLE u; ALTER TABLE u2 RENAME TO u;
            CREATE INDEX ux ON u(x);
            UPDATE sqlite_stat1 SET stat = '60 9' WHERE idx = 'ta'; INSERT INTO sqlite_stat1 VALUES ('u', 'ux', '60 9');
            INSERT INTO sqlite_stat1 VALUES ('gone', NULL, '0'); DELETE FROM plain WHERE z = 2;
            """)

        let text = try litectl("diff", bare, analyzed)
        #expect(text.status == 1)
        #expect(text.stdout.hasPrefix("+ table sqlite_stat1 added\nsqlite_stat1: +4 -0 ~0 (new table)"), "\(text.stdout)")
        #expect(try litectl("diff", "--exclude", "sqlite_stat1", bare, analyzed).status == 0)
        // Dropped, and changed along with an index drop and a table rebuild.
        try roundTrip(analyzed, bare, in: folder)
        try roundTrip(analyzed, changed, in: folder)
        // Added: litectl hash and diff agree; sqldiff also compares the rowids,
        // which a table the patch creates gets only in rowid order (see
        // `rebuiltKeylessTablesKeepBsRowids`).
        try roundTrip(bare, analyzed, in: folder, useSqldiff: false)
        let patched = try folder.copy(bare, as: "added.db")
        _ = try runProcess(sqlite3Binary, ["-batch", patched], input: try litectl("diff", "--format", "sql", bare, analyzed).stdoutBytes)
        #expect(try litectl("diff", patched, analyzed).status == 0)
        let sqldiff = try runProcess(sqldiffBinary, ["--primarykey", patched, analyzed])
        #expect(sqldiff.stdout.isEmpty, "\(sqldiff.stdout)")
    }

    @Test func statisticsFollowTheFilters() throws {
        let folder = try TemporaryFolder("gap-stats-filters")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, Self.statsSchema + "ANALYZE;")
        try makeDatabase(b, Self.statsSchema + "ANALYZE; UPDATE sqlite_stat1 SET stat = '60 1' WHERE idx = 'ta'; INSERT INTO plain VALUES (3);")
        let only = try litectl("diff", "--summary", "--table", "sqlite_stat1", a, b)
        let statLine = "sqlite_stat1: +1 -1 ~0 (no primary key: compared as a multiset of rows)\n"
        #expect(only.status == 1 && only.stdout == statLine, "\(only.stdout)\(only.stderr)")
        let others = try litectl("diff", "--summary", "--exclude", "sqlite_stat1", a, b)
        #expect(others.status == 1 && others.stdout == "plain: +1 -0 ~0 (no primary key: compared as a multiset of rows)\n", "\(others.stdout)")
        #expect(try litectl("diff", "--schema-only", a, b).status == 0)
        let dataOnly = try litectl("diff", "--summary", "--data-only", a, b)
        #expect(dataOnly.stdout.contains(statLine), "\(dataOnly.stdout)")
        try roundTrip(a, b, in: folder, extraArguments: ["--data-only"])

        // litectl hash counts them, as diff does; --table picks them.
        func digests(_ arguments: String...) throws -> [Substring] {
            try runProcess(litectlBinary, ["hash"] + arguments + [a, b]).stdout.split(separator: "\n").map { $0.prefix(64) }
        }
        let whole = try digests(), stats = try digests("--table", "sqlite_stat1"), schema = try digests("--schema-only")
        #expect(whole[0] != whole[1])
        #expect(stats[0] != stats[1])
        #expect(schema[0] == schema[1])
        let bare = folder.file("bare.db")
        try makeDatabase(bare, Self.statsSchema)
        let bareSchema = try litectl("hash", "--schema-only", bare, a).stdout.split(separator: "\n").map { $0.prefix(64) }
        #expect(bareSchema[0] != bareSchema[1], "the statistics table is part of the schema")

        // A changeset carries no table without a key: named only when it differs.
        let changeset = try litectl("diff", "--format", "changeset", a, b)
        #expect(changeset.stderr == "litectl: note: table plain is not in the changeset: no primary key\n"
                + "litectl: note: table sqlite_stat1 is not in the changeset: no primary key\n", "\(changeset.stderr)")
        let quiet = try litectl("diff", "--format", "changeset", "--exclude", "plain", "--exclude", "sqlite_stat1", a, b)
        #expect(quiet.status == 0 && quiet.stderr.isEmpty)
    }

    /// sqlite_stat4 exists only where a SQLite built with SQLITE_ENABLE_STAT4
    /// ran ANALYZE; made here with writable_schema, it is compared and
    /// patched like sqlite_stat1. A patch that needs it created fails cleanly
    /// on a SQLite without STAT4 (Debian's), which cannot make it.
    @Test func statisticsOfStat4() throws {
        let folder = try TemporaryFolder("gap-stat4")
        let a = folder.file("a.db"), b = folder.file("b.db"), none = folder.file("none.db")
        let stat4 = Self.statsSchema + """
            ANALYZE;
            PRAGMA writable_schema=ON; CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample); PRAGMA writable_schema=OFF;
            INSERT INTO sqlite_stat4 VALUES ('t', 'ta', '9 1', '0 0', '0 0', x'0301'), ('t', 'ta', '8 1', '9 9', '1 9', x'0302');

            """
        try makeDatabase(a, stat4)
        try makeDatabase(b, stat4 + "UPDATE sqlite_stat4 SET neq = '7 1' WHERE rowid = 2; INSERT INTO sqlite_stat4 VALUES ('u', 'ux', '1', '0', '0', x'00');")
        try makeDatabase(none, Self.statsSchema + "ANALYZE;")
        try roundTrip(a, b, in: folder)
        try roundTrip(a, none, in: folder)

        let diff = try litectl("diff", "--format", "sql", none, a)
        #expect(diff.stdout.contains("ANALYZE sqlite_schema;\n"))
        let hasStat4 = try sqlite3Scalar(none, "SELECT count(*) FROM pragma_compile_options WHERE compile_options = 'ENABLE_STAT4'") == "1"
        if hasStat4 {
            try roundTrip(none, a, in: folder)
        } else {
            let before = try FileFingerprint(none)
            let applied = try runProcess(sqlite3Binary, ["-batch", none], input: diff.stdoutBytes)
            #expect(applied.status != 0 && applied.stderr.contains("no such table: sqlite_stat4"), "\(applied.stderr)")
            #expect(try FileFingerprint(none).bytes == before.bytes)
        }
    }

    // MARK: Tables without a key that the patch creates

    /// A table without a primary key whose definition changed is rebuilt from
    /// B's rows, and one only B has is filled with them. litectl hash and diff
    /// compare such tables as multisets and agree at once; sqldiff compares
    /// them by rowid, and will agree when the rows are written with B's rowids.
    /// That needs the engine to read such a table (on B's side only) by rowid
    /// for the sql format, as it reads a keyless table on both sides once it
    /// differs: today it reads it in multiset order, so the rows get rowids
    /// 1...n in that order (the issue note has the change).
    @Test func rebuiltKeylessTablesKeepBsRowids() throws {
        let folder = try TemporaryFolder("gap-keyless-rebuild")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE k(x, y); INSERT INTO k VALUES (3, 'c'), (1, 'a'), (2, 'b'), (1, 'a');")
        try makeDatabase(b, """
            CREATE TABLE k(x, y, z DEFAULT 0); INSERT INTO k(x, y) VALUES (3, 'c'), (1, 'a'), (2, 'b'), (1, 'a');
            DELETE FROM k WHERE rowid = 2; INSERT INTO k VALUES (0, 'e', 1);
            CREATE TABLE fresh(v); INSERT INTO fresh VALUES ('z'), ('a'), ('m');
            """)
        try roundTrip(a, b, in: folder, useSqldiff: false)
        let patched = try folder.copy(a, as: "rebuilt.db")
        let applied = try runProcess(sqlite3Binary, ["-batch", patched], input: try litectl("diff", "--format", "sql", a, b).stdoutBytes)
        #expect(applied.status == 0, "\(applied.stderr)")
        let sqldiff = try runProcess(sqldiffBinary, ["--primarykey", patched, b])
        #expect(sqldiff.status == 0 && sqldiff.stdout.isEmpty, "\(sqldiff.stdout)")
        #expect(try sqlite3Scalar(patched, "SELECT group_concat(rowid || y, ' ') FROM k") == "1c 3b 4a 5e")
        #expect(try sqlite3Scalar(patched, "SELECT group_concat(rowid || v, ' ') FROM fresh") == "1z 2a 3m")
    }
}
