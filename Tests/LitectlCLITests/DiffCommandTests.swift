// `litectl diff`, `patch` and `hash` through the built binary, judged by
// independent oracles: the patch is applied with the plain sqlite3 CLI, then
// sqldiff (by primary key) must find nothing, `litectl hash` must agree with
// B, `litectl diff` must say identical, and PRAGMA integrity_check must pass.
import Foundation
import Testing
import LitectlCore
import TestSupport

let sqldiffBinary = "/usr/bin/sqldiff"

/// Makes A and B from scripts, diffs them, applies the SQL patch to a copy of A
/// with sqlite3 and with `litectl patch`, and checks every oracle.
func roundTrip(_ scriptA: String, _ scriptB: String, expectDifferent: Bool = true, extraArguments: [String] = [], useSqldiff: Bool = true,
               sourceLocation: SourceLocation = #_sourceLocation) throws {
    let folder = try TemporaryFolder("diff-rt")
    let a = folder.file("a.db"), b = folder.file("b.db")
    try makeDatabase(a, scriptA)
    try makeDatabase(b, scriptB)
    try roundTrip(a, b, in: folder, expectDifferent: expectDifferent, extraArguments: extraArguments, useSqldiff: useSqldiff,
                  sourceLocation: sourceLocation)
}

func roundTrip(_ a: String, _ b: String, in folder: TemporaryFolder, expectDifferent: Bool = true, extraArguments: [String] = [],
               useSqldiff: Bool = true,
               sourceLocation: SourceLocation = #_sourceLocation) throws {
    let beforeA = try FileFingerprint(a), beforeB = try FileFingerprint(b)
    let diff = try runProcess(litectlBinary, ["diff", "--format", "sql"] + extraArguments + [a, b])
    #expect(diff.status == (expectDifferent ? 1 : 0), "diff exit status: \(diff.stderr)", sourceLocation: sourceLocation)
    #expect(diff.stderr.isEmpty, "\(diff.stderr)", sourceLocation: sourceLocation)
    #expect(try FileFingerprint(a) == beforeA, "A untouched", sourceLocation: sourceLocation)
    #expect(try FileFingerprint(b) == beforeB, "B untouched", sourceLocation: sourceLocation)
    if !expectDifferent { #expect(diff.stdout.isEmpty, sourceLocation: sourceLocation) }

    // Oracle 1: the plain sqlite3 CLI applies the patch.
    let patched = try folder.copy(a, as: "patched-\(UUID().uuidString).db")
    // Exactly as users run it: no -bail (the script turns it on itself).
    let applied = try runProcess(sqlite3Binary, ["-batch", patched], input: diff.stdoutBytes)
    #expect(applied.status == 0 && applied.stderr.isEmpty, "sqlite3 applying the patch: \(applied.stderr)\n\(diff.stdout.prefix(3000))",
            sourceLocation: sourceLocation)
    try expectEqual(patched, b, useSqldiff: useSqldiff, sourceLocation: sourceLocation)

    // Oracle 2: litectl patch applies it too.
    let patchFile = folder.file("patch-\(UUID().uuidString).sql")
    try Data(diff.stdoutBytes).write(to: URL(fileURLWithPath: patchFile))
    let patched2 = try folder.copy(a, as: "patched2-\(UUID().uuidString).db")
    let result = try runProcess(litectlBinary, ["patch", patched2, patchFile])
    #expect(result.status == 0 && result.stderr.isEmpty, "litectl patch: \(result.stderr)", sourceLocation: sourceLocation)
    try expectEqual(patched2, b, useSqldiff: useSqldiff, sourceLocation: sourceLocation)
}

/// `patched` equals `b` by litectl hash, sqldiff --primarykey, litectl diff, and is intact.
/// sqldiff cannot match rows whose key holds NULL (it reports them even for a
/// file against itself), so its verdict is compared with its output for B
/// against B. It is left out for FTS (it compares shadow tables, whose layout
/// depends on history) and for tables wider than it handles.
func expectEqual(_ patched: String, _ b: String, useSqldiff: Bool = true, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let hashes = try runProcess(litectlBinary, ["hash", patched, b])
    #expect(hashes.status == 0, "\(hashes.stderr)", sourceLocation: sourceLocation)
    let digests = hashes.stdout.split(separator: "\n").map { $0.prefix(64) }
    #expect(digests.count == 2 && digests[0] == digests[1], "hashes differ:\n\(hashes.stdout)", sourceLocation: sourceLocation)
    if useSqldiff {
        let sqldiff = try runProcess(sqldiffBinary, ["--primarykey", patched, b])
        let baseline = try runProcess(sqldiffBinary, ["--primarykey", b, b])
        #expect(sqldiff.status == 0 && sqldiff.stdout == baseline.stdout,
                "sqldiff finds: \(sqldiff.stdout.prefix(2000)) \(sqldiff.stderr)", sourceLocation: sourceLocation)
    }
    let again = try runProcess(litectlBinary, ["diff", patched, b])
    #expect(again.status == 0 && again.stdout.isEmpty, "litectl diff after patch: \(again.stdout.prefix(2000))", sourceLocation: sourceLocation)
    #expect(try sqlite3Scalar(patched, "PRAGMA integrity_check") == "ok", sourceLocation: sourceLocation)
    // The patch runs with foreign keys off: what it leaves unresolved must be exactly B's own.
    #expect(try sqlite3Scalar(patched, "PRAGMA foreign_key_check") == (try sqlite3Scalar(b, "PRAGMA foreign_key_check")),
            sourceLocation: sourceLocation)
}

@Suite struct DiffCommandTests {
    // MARK: Exit status and errors

    @Test func exitStatusForEachOutcome() throws {
        let folder = try TemporaryFolder("diff-exit")
        let a = folder.file("a.db"), b = folder.file("b.db"), c = folder.file("c.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, x); INSERT INTO t VALUES(1, 'one');")
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, x); INSERT INTO t VALUES(1, 'one');")
        try makeDatabase(c, "CREATE TABLE t(id INTEGER PRIMARY KEY, x); INSERT INTO t VALUES(1, 'One');")
        let same = try litectl("diff", a, b)
        #expect(same.status == 0 && same.stdout.isEmpty && same.stderr.isEmpty)
        let different = try litectl("diff", a, c)
        #expect(different.status == 1)
        #expect(different.stdout.contains("t: +0 -0 ~1"))
        #expect(different.stdout.contains("x: 'one' → 'One'"))
        let summary = try litectl("diff", "--summary", a, c)
        #expect(summary.status == 1 && summary.stdout == "t: +0 -0 ~1\n")
        let itself = try litectl("diff", a, a)
        #expect(itself.status == 0 && itself.stdout.isEmpty)

        let before = try folder.listing()
        let missing = try litectl("diff", a, folder.file("missing.db"))
        #expect(missing.status == 2)
        #expect(missing.stderr == "litectl: \(folder.file("missing.db")): no such file\n")
        #expect(try folder.listing() == before, "a missing B is never created")
        try "not a database, just text, long enough to look like a header maybe\n".write(
            toFile: folder.file("text.db"), atomically: false, encoding: .utf8)
        let notDB = try litectl("diff", a, folder.file("text.db"))
        #expect(notDB.status == 2 && notDB.stderr.contains("not a SQLite database"))
        #expect(notDB.stderr.split(separator: "\n").count == 1)
    }

    @Test func patchIsAllOrNothing() throws {
        let folder = try TemporaryFolder("patch")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, x UNIQUE); INSERT INTO t VALUES (1, 'a'), (2, 'b');")
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, x UNIQUE); INSERT INTO t VALUES (1, 'a'), (3, 'c');")
        let patch = try litectl("diff", "--format", "sql", a, b).stdout
        try patch.write(toFile: folder.file("p.sql"), atomically: false, encoding: .utf8)
        let before = try FileFingerprint(a)
        let dry = try litectl("patch", "--dry-run", a, folder.file("p.sql"))
        #expect(dry.status == 0 && dry.stdout == "3 statements, 2 rows changed (dry run: rolled back)\n", "\(dry.stdout) \(dry.stderr)")
        #expect(try FileFingerprint(a).bytes == before.bytes)
        // A patch that fails half way (a UNIQUE conflict after a good statement) changes nothing.
        try "DELETE FROM t WHERE id = 1; INSERT INTO t VALUES (9, 'b');".write(toFile: folder.file("bad.sql"), atomically: false, encoding: .utf8)
        let bad = try litectl("patch", a, folder.file("bad.sql"))
        #expect(bad.status == 2 && bad.stderr.contains("UNIQUE constraint failed"))
        #expect(try FileFingerprint(a).bytes == before.bytes)
        #expect(try sqlite3Scalar(a, "SELECT count(*) FROM t") == "2")
        let good = try litectl("patch", a, "-", input: Array(patch.utf8))
        #expect(good.status == 0 && good.stdout.isEmpty && good.stderr.isEmpty)
        try expectEqual(a, b)
        let missing = try litectl("patch", folder.file("nope.db"), folder.file("p.sql"))
        #expect(missing.status == 2 && missing.stderr.contains("no such file"))
        #expect(!FileManager.default.fileExists(atPath: folder.file("nope.db")))
    }

    @Test(arguments: 0..<3) func changesetsRoundTripAndInvert(seed: Int) throws {
        var rng = SplitMix64(seed: UInt64(seed) &+ 99)
        let folder = try TemporaryFolder("changeset")
        let schema = """
            CREATE TABLE p(id INTEGER PRIMARY KEY, a, b TEXT COLLATE NOCASE);
            CREATE TABLE w(k1, k2 TEXT, v, PRIMARY KEY(k1, k2)) WITHOUT ROWID;
            CREATE TABLE m(x);
            """
        var scriptA = schema, scriptB = schema
        let values = ["0.1", "1", "1.0", "'1'", "x'31'", "NULL", "'abc'", "'ABC'", "-0.0", "9e999", "4.9e-324", "'a' || char(0) || 'b'"]
        func value() -> String { values[Int(rng.next() % UInt64(values.count))] }
        for id in 1...30 {
            let row = "(\(id), \(value()), \(value()))"
            let r = rng.next() % 6
            if r != 0 { scriptA += "INSERT INTO p VALUES \(row);" }
            if r != 1 { scriptB += "INSERT INTO p VALUES \(r == 2 ? "(\(id), \(value()), \(value()))" : row);" }
            let wrow = "(\(id % 5), 'k\(id % 3)', \(value()))"
            scriptA += "INSERT OR IGNORE INTO w VALUES \(wrow);"
            scriptB += "INSERT OR IGNORE INTO w VALUES \(rng.next() % 3 == 0 ? "(\(id % 5), 'k\(id % 3)', \(value()))" : wrow);"
        }
        scriptB += "INSERT INTO m VALUES (1);"
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, scriptA)
        try makeDatabase(b, scriptB)
        let diff = try litectl("diff", "--format", "changeset", a, b)
        #expect(diff.status == 1)
        #expect(diff.stderr == "litectl: note: table m is not in the changeset: no primary key\n")
        try Data(diff.stdoutBytes).write(to: URL(fileURLWithPath: folder.file("c.bin")))
        let patched = try folder.copy(a, as: "patched.db")
        let applied = try litectl("patch", patched, folder.file("c.bin"))
        #expect(applied.status == 0 && applied.stderr.isEmpty, "\(applied.stderr)")
        for table in ["p", "w"] {
            let same = try litectl("diff", "--table", table, patched, b)
            #expect(same.status == 0, "\(table): \(same.stdout)")
            let sqldiff = try runProcess(sqldiffBinary, ["--primarykey", "--table", table, patched, b])
            #expect(sqldiff.stdout.isEmpty, "\(sqldiff.stdout)")
        }
        // Inverted, it undoes itself; applied twice, it conflicts and changes nothing.
        let before = try FileFingerprint(patched)
        let again = try litectl("patch", patched, folder.file("c.bin"))
        #expect(again.status == 2 && again.stderr.contains("conflicts"))
        #expect(try FileFingerprint(patched).bytes == before.bytes)
        let undone = try litectl("patch", "--invert", patched, folder.file("c.bin"))
        #expect(undone.status == 0)
        for table in ["p", "w"] {
            #expect(try litectl("diff", "--table", table, patched, a).status == 0)
        }
    }

    @Test func hashIsStableAcrossVacuumPageSizeAndBackup() throws {
        let folder = try TemporaryFolder("hash-stable")
        let a = folder.file("a.db")
        try makeDatabase(a, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, x, y REAL); CREATE TABLE k(a, b);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 500)
            INSERT INTO t SELECT i, 'row ' || i, i / 7.0 FROM n;
            INSERT INTO k SELECT x, y FROM t; DELETE FROM k WHERE rowid % 3 = 0; INSERT INTO k VALUES(1, 2), (1, 2);
            """)
        let copy = try folder.copy(a, as: "b.db")
        try sqlite3(["-batch", copy], input: "PRAGMA page_size=1024; VACUUM;")
        let backup = folder.file("c.db")
        try sqlite3(["-batch", a, ".backup '\(backup)'"])
        let hashes = try litectl("hash", a, copy, backup)
        #expect(hashes.status == 0)
        let digests = Set(hashes.stdout.split(separator: "\n").map { $0.prefix(64) })
        #expect(digests.count == 1, "\(hashes.stdout)")
        #expect(try sqlite3Scalar(copy, "PRAGMA page_size") == "1024")

        // One changed value, a type-only change, a removed duplicate: each changes the hash.
        for change in ["UPDATE t SET x = 'row 1 ' WHERE id = 1", "UPDATE k SET b = 1 WHERE b = 1.0",
                       "DELETE FROM k WHERE rowid = (SELECT max(rowid) FROM k)", "PRAGMA user_version = 1"] {
            let changed = try folder.copy(a, as: "changed-\(UUID().uuidString).db")
            try sqlite3(["-batch", changed, change])
            let pair = try litectl("hash", a, changed)
            let d = pair.stdout.split(separator: "\n").map { $0.prefix(64) }
            #expect(d[0] != d[1], "\(change)")
        }
        let schemaOnly = try litectl("hash", "--schema-only", a, copy)
        #expect(Set(schemaOnly.stdout.split(separator: "\n").map { $0.prefix(64) }).count == 1)
        let missing = try litectl("hash", folder.file("nope.db"))
        #expect(missing.status == 2 && missing.stderr.contains("no such file"))
    }

    /// --verbose names, on stderr, the tables read with statements rather
    /// than from their pages; the hash is the same.
    @Test func hashVerboseNamesTablesReadWithStatements() throws {
        let folder = try TemporaryFolder("hash-verbose")
        let db = folder.file("v.db")
        try makeDatabase(db, """
            CREATE VIRTUAL TABLE docs USING fts5(body); INSERT INTO docs VALUES ('one');
            CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'a');
            """)
        let quiet = try litectl("hash", db)
        let verbose = try litectl("hash", "-v", db)
        #expect(quiet.status == 0 && verbose.status == 0)
        #expect(quiet.stdout == verbose.stdout && quiet.stderr.isEmpty)
        #expect(verbose.stderr == "litectl: note: \(db): table docs read with statements: virtual table\n")
    }

    // MARK: Round trips, one case each

    @Test func valuesThatTrapOtherTools() throws {
        let schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, v, name TEXT COLLATE NOCASE);"
        try roundTrip(schema + """
            INSERT INTO t VALUES (1, 0.1, 'abc'), (2, 1e308, 'x'), (3, 1, 'same'), (4, NULL, 'n'), (5, 'text', 'q'),
              (6, 2.2250738585072014e-308, 'sub'), (7, x'00', 'blob'), (8, 1.0, 'one'), (9, 9e999, 'inf');
            """, schema + """
            INSERT INTO t VALUES (1, 0.30000000000000004, 'ABC'), (2, 4.9e-324, 'x'), (3, 1.0, 'same'), (4, 5, 'n'),
              (5, NULL, 'q'), (6, -0.0, 'sub'), (7, x'01', 'blob'), (8, '1', 'one'), (9, -9e999, 'inf'),
              (10, 'it''s "quoted"' || char(13) || char(10) || 'line' || char(0) || 'nul', 'e' || char(769) || 'x'),
              (11, 123456789.123456789, 'é'), (12, x'31', 'unicode ☕ 王');
            """)
    }

    @Test func compositeKeysNullKeysAndWithoutRowid() throws {
        try roundTrip("""
            CREATE TABLE c(a, b, v, PRIMARY KEY(a, b)) WITHOUT ROWID;
            INSERT INTO c VALUES (1, 'x', 1), (1, 2, 2), ('1', 2, 3), (x'01', 1.5, 4), (2, 'y', 5);
            CREATE TABLE n(k TEXT PRIMARY KEY, v);
            INSERT INTO n VALUES (NULL, 'null key'), ('a', NULL), ('b', 2);
            """, """
            CREATE TABLE c(a, b, v, PRIMARY KEY(a, b)) WITHOUT ROWID;
            INSERT INTO c VALUES (1, 'x', 1), (1, 2, 20), ('1', '2', 3), (x'01', 1.5, 4), (3, 'z', 6);
            CREATE TABLE n(k TEXT PRIMARY KEY, v);
            INSERT INTO n VALUES (NULL, 'null key changed'), ('a', 1), ('c', NULL);
            """)
    }

    @Test func keylessTablesAreMultisets() throws {
        let folder = try TemporaryFolder("diff-multiset")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE k(x, y); INSERT INTO k VALUES (1, 'a'), (1, 'a'), (2, 'b'), (3, 'c'), (1, 1.0);")
        // Same multiset in a different rowid order: identical.
        try makeDatabase(b, "CREATE TABLE k(x, y); INSERT INTO k VALUES (3, 'c'), (1, 1.0), (1, 'a'), (2, 'b'), (1, 'a');")
        let same = try litectl("diff", a, b)
        #expect(same.status == 0, "\(same.stdout)")
        let c = folder.file("c.db")
        try makeDatabase(c, "CREATE TABLE k(x, y); INSERT INTO k VALUES (1, 'a'), (2, 'b'), (3, 'c'), (1, 1), (4, 'd');")
        let different = try litectl("diff", "--summary", a, c)
        #expect(different.status == 1)
        #expect(different.stdout == "k: +2 -2 ~0 (no primary key: compared as a multiset of rows)\n")
        try roundTrip(a, c, in: folder)
        try roundTrip(a, c, in: folder, extraArguments: ["--key", "k=x"])
        // --rowid matches like sqldiff.
        let byRowid = try litectl("diff", "--summary", "--rowid", a, b)
        #expect(byRowid.status == 1 && byRowid.stdout.hasPrefix("k: +0 -0 ~"))
        // --key gives key columns.
        let byKey = try litectl("diff", "--format", "jsonl", "--key", "k=x,y", a, c)
        #expect(byKey.stdout.contains("\"match\":\"key\""))
    }

    @Test func triggersForeignKeysAutoincrementAndGeneratedColumns() throws {
        let schema = """
            CREATE TABLE parent(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
            CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id) ON DELETE CASCADE,
              qty INTEGER, price REAL, total REAL GENERATED ALWAYS AS (qty * price) STORED,
              label TEXT GENERATED ALWAYS AS ('#' || id) VIRTUAL);
            CREATE TABLE log(msg);
            CREATE TRIGGER parent_log AFTER INSERT ON parent BEGIN INSERT INTO log VALUES ('parent ' || new.name); END;
            CREATE TRIGGER child_log AFTER UPDATE ON child BEGIN INSERT INTO log VALUES ('child ' || new.id); END;
            """
        try roundTrip(schema + """
            PRAGMA foreign_keys=ON;
            INSERT INTO parent(name) VALUES ('a'), ('b'), ('c');
            INSERT INTO child(id, parent_id, qty, price) VALUES (1, 1, 2, 0.5), (2, 2, 3, 1.25), (3, 3, 1, 9.99);
            """, schema + """
            PRAGMA foreign_keys=ON;
            INSERT INTO parent(name) VALUES ('a'), ('b'), ('c'), ('d'), ('e');
            DELETE FROM parent WHERE id IN (2, 5);
            INSERT INTO child(id, parent_id, qty, price) VALUES (1, 1, 4, 0.5), (4, 4, 1, 0.1);
            UPDATE child SET qty = 7 WHERE id = 3;
            """)
    }

    /// A patch that fails part-way leaves A as it was, also when the plain
    /// shell runs it (which would otherwise go on and COMMIT). Here a
    /// --data-only patch across a changed definition writes a value A's CHECK
    /// refuses, after a DELETE that succeeded.
    @Test func aFailingPatchChangesNothingInTheShell() throws {
        let folder = try TemporaryFolder("diff-bail")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, v CHECK (v < 10)); INSERT INTO t VALUES (1, 1), (2, 2), (5, 5);")
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, v, w); INSERT INTO t VALUES (1, 1, 'x'), (2, 20, 'y'), (3, 3, 'z');")
        let diff = try litectl("diff", "--format", "sql", "--data-only", a, b)
        #expect(diff.status == 1)
        #expect(diff.stdout.contains(".bail on\n"))
        #expect(diff.stdout.contains("DELETE FROM \"t\" WHERE \"id\"=5;\nUPDATE \"t\" SET \"v\"=20 WHERE \"id\"=2;\n"), "\(diff.stdout)")
        let before = try FileFingerprint(a)
        let applied = try runProcess(sqlite3Binary, ["-batch", a], input: diff.stdoutBytes)
        #expect(applied.status != 0 && applied.stderr.contains("CHECK constraint failed"), "\(applied.stderr)")
        #expect(try FileFingerprint(a).bytes == before.bytes, "a failed patch changed A")
        // litectl patch reads the same script (its dot-command skipped).
        let patched = try litectl("patch", a, "-", input: diff.stdoutBytes)
        #expect(patched.status == 2 && patched.stderr.contains("CHECK constraint failed"), "\(patched.stderr)")
        #expect(try FileFingerprint(a).bytes == before.bytes)
    }

    /// INSTEAD OF triggers on views are objects of the schema too.
    @Test func triggersOnViews() throws {
        let base = "CREATE TABLE t(id INTEGER PRIMARY KEY, x); INSERT INTO t VALUES (1, 'a');"
        let trigger = "CREATE TRIGGER tv INSTEAD OF INSERT ON v BEGIN INSERT INTO t(x) VALUES (NEW.x); END;"
        // Only a view trigger added.
        try roundTrip(base + "CREATE VIEW v AS SELECT x FROM t;", base + "CREATE VIEW v AS SELECT x FROM t;" + trigger)
        // The view changes and keeps its trigger (DROP VIEW takes it along).
        try roundTrip(base + "CREATE VIEW v AS SELECT x FROM t;" + trigger,
                      base + "CREATE VIEW v AS SELECT id, x FROM t;" + trigger)
    }

    @Test func schemaChangesAndHostileIdentifiers() throws {
        try roundTrip("""
            CREATE TABLE "odd ""name"" ☕"("select" INTEGER PRIMARY KEY, "my col" TEXT, [x]);
            INSERT INTO "odd ""name"" ☕" VALUES (1, 'a', 1), (2, 'b', 2);
            CREATE TABLE gone(x); INSERT INTO gone VALUES (1);
            CREATE TABLE reshaped(id INTEGER PRIMARY KEY, a TEXT, b INTEGER); INSERT INTO reshaped VALUES (1, 'x', 1), (2, 'y', 2);
            CREATE INDEX reshaped_a ON reshaped(a);
            CREATE INDEX "idx ""q"" 2" ON "odd ""name"" ☕"("my col");
            CREATE VIEW v AS SELECT * FROM reshaped;
            CREATE TABLE st(id INTEGER PRIMARY KEY, v TEXT) STRICT; INSERT INTO st VALUES (1, 'a');
            PRAGMA application_id = 7;
            """, """
            CREATE TABLE "odd ""name"" ☕"("select" INTEGER PRIMARY KEY, "my col" TEXT, [x]);
            INSERT INTO "odd ""name"" ☕" VALUES (1, 'a', 1), (3, 'c', 3);
            CREATE TABLE reshaped(id INTEGER PRIMARY KEY, a TEXT COLLATE NOCASE NOT NULL, c REAL DEFAULT 1.5);
            INSERT INTO reshaped VALUES (1, 'x', 1.0), (3, 'z', 3.5);
            CREATE INDEX reshaped_a ON reshaped(a, c);
            CREATE VIEW v AS SELECT id, a FROM reshaped;
            CREATE TABLE fresh(k TEXT PRIMARY KEY, v) WITHOUT ROWID; INSERT INTO fresh VALUES ('k', x'00FF');
            CREATE TABLE st(id INTEGER PRIMARY KEY, v TEXT) STRICT; INSERT INTO st VALUES (1, 'b');
            PRAGMA application_id = 8; PRAGMA user_version = 12;
            """)
        let folder = try TemporaryFolder("diff-schema")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INTEGER);")
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT COLLATE NOCASE NOT NULL, c REAL DEFAULT 1.5);")
        let text = try litectl("diff", "--schema-only", a, b)
        #expect(text.status == 1)
        #expect(text.stdout.contains("column a NOT NULL no → yes"))
        #expect(text.stdout.contains("column a collation BINARY → NOCASE"))
        #expect(text.stdout.contains("column b dropped"))
        #expect(text.stdout.contains("column c added (REAL)"))
        let dataOnly = try litectl("diff", "--data-only", a, b)
        #expect(dataOnly.status == 0, "\(dataOnly.stdout)")
    }

    @Test func virtualTablesAndEmptyAgainstFull() throws {
        try roundTrip("""
            CREATE VIRTUAL TABLE docs USING fts5(title, body);
            INSERT INTO docs(rowid, title, body) VALUES (1, 'one', 'first body'), (2, 'two', 'second');
            """, """
            CREATE VIRTUAL TABLE docs USING fts5(title, body);
            INSERT INTO docs(rowid, title, body) VALUES (1, 'one', 'first body, edited'), (3, 'three', 'third');
            """, useSqldiff: false)
        // Empty against full, and full against empty.
        let full = """
            CREATE TABLE t(id INTEGER PRIMARY KEY, x); INSERT INTO t VALUES (1, 'a'), (2, zeroblob(100000));
            CREATE TABLE k(x); INSERT INTO k VALUES (1), (1);
            CREATE INDEX k_x ON k(x); CREATE VIEW v AS SELECT x FROM k;
            CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM k; END;
            """
        try roundTrip("SELECT 1;", full)
        try roundTrip(full, "SELECT 1;")
        try roundTrip(full, full, expectDifferent: false)
    }

    @Test func hugeBlobOneByteChangedAndJSON() throws {
        let folder = try TemporaryFolder("diff-blob")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, data BLOB, note TEXT); INSERT INTO t VALUES (1, randomblob(3000000), 'n');")
        _ = try folder.copy(a, as: "b.db")
        try sqlite3(["-batch", b, "UPDATE t SET data = substr(data, 1, 1500000) || x'AA' || substr(data, 1500002) WHERE id = 1"])
        try roundTrip(a, b, in: folder)
        let json = try litectl("diff", "--format", "json", "--ignore-column", "t.data", a, b)
        #expect(json.status == 0 && json.stdout == "[]\n", "\(json.stdout.prefix(200))")
        try sqlite3(["-batch", b, "UPDATE t SET note = x'6E' WHERE id = 1"])
        let jsonl = try litectl("diff", "--format", "jsonl", "--ignore-column", "t.data", a, b)
        #expect(jsonl.status == 1)
        #expect(jsonl.stdout == "{\"type\":\"row\",\"table\":\"t\",\"operation\":\"update\",\"match\":\"key\",\"key\":{\"id\":1},\"old\":{\"note\":\"n\"},\"new\":{\"note\":{\"blob\":\"6E\"}}}\n")
    }

    @Test func twoThousandColumns() throws {
        let columns = (1...1999).map { "c\($0)" }
        let create = "CREATE TABLE wide(id INTEGER PRIMARY KEY, \(columns.joined(separator: ", ")));"
        let values = (1...1999).map { String($0) }.joined(separator: ", ")
        try roundTrip(create + "INSERT INTO wide VALUES (1, \(values));",
                      create + "INSERT INTO wide VALUES (1, \(values.replacingOccurrences(of: ", 7,", with: ", 'seven',")));"
                        + "INSERT INTO wide VALUES (2, \(values));", useSqldiff: false)
    }

    /// Many generated pairs: random tables and values, random changes.
    @Test(arguments: 0..<12) func generatedPairs(seed: Int) throws {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9 &+ 17)
        let schema = """
            CREATE TABLE p(id INTEGER PRIMARY KEY, a, b TEXT COLLATE NOCASE, c REAL);
            CREATE TABLE w(k1, k2 TEXT, v, PRIMARY KEY(k1, k2)) WITHOUT ROWID;
            CREATE TABLE m(x, y);
            """
        var scriptA = schema, scriptB = schema
        func value() -> String {
            let specials = ["0.1", "1e308", "-1e308", "4.9e-324", "2.2250738585072014e-308", "-0.0", "9e999", "-9e999", "1", "1.0",
                            "'1'", "x'31'", "NULL", "'ABC'", "'abc'", "'a''b'", "'x' || char(13) || char(10) || 'y'",
                            "'nul' || char(0) || 'x'", "'e' || char(769)", "'é'", "x''", "''", "9223372036854775807"]
            switch rng.next() % 4 {
            case 0: return specials[Int(rng.next() % UInt64(specials.count))]
            case 1: return String(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 60))
            case 2: return Value.real(Double(bitPattern: rng.next())).sqlLiteral
            default: return "'t\(rng.next() % 50)'"
            }
        }
        for id in 1...40 {
            let row = "(\(id), \(value()), \(value()), \(value()))"
            let wrow = "(\(value()), 'k\(id % 7)', \(value()))"
            let mrow = "(\(value()), \(rng.next() % 3))"
            let r = rng.next() % 10
            if r != 0 { scriptA += "INSERT INTO p VALUES \(row);" }
            if r != 1 { scriptB += "INSERT INTO p VALUES \(r == 2 ? "(\(id), \(value()), \(value()), \(value()))" : row);" }
            scriptA += "INSERT OR IGNORE INTO w VALUES \(wrow);"
            scriptB += "INSERT OR IGNORE INTO w VALUES \(rng.next() % 5 == 0 ? "(\(value()), 'k\(id % 7)', \(value()))" : wrow);"
            if rng.next() % 6 != 0 { scriptA += "INSERT INTO m VALUES \(mrow);" }
            if rng.next() % 6 != 0 { scriptB += "INSERT INTO m VALUES \(mrow);" }
        }
        try roundTrip(scriptA, scriptB)
    }

    @Test(.enabled(if: !realDatabases.isEmpty)) func realDatabasesAgainstModifiedCopies() throws {
        for database in realDatabases {
            let folder = try TemporaryFolder("diff-real")
            let a = try folder.copy(database, as: "a.db")
            let b = try folder.copy(database, as: "b.db")
            let same = try litectl("diff", a, b)
            #expect(same.status == 0, "\(database): \(same.stdout.prefix(500)) \(same.stderr)")
            // Change a few rows of every ordinary table with a rowid.
            let tables = try sqlite3Scalar(b, """
                SELECT group_concat(name, char(10)) FROM pragma_table_list
                WHERE schema = 'main' AND type = 'table' AND wr = 0 AND name NOT LIKE 'sqlite_%'
                """).split(separator: "\n").map(String.init)
            var script = ""
            for table in tables {
                let q = quoteIdentifier(table)
                script += "DELETE FROM \(q) WHERE rowid IN (SELECT rowid FROM \(q) ORDER BY rowid LIMIT 2);"
                script += "INSERT INTO \(q) SELECT * FROM \(q) WHERE rowid = (SELECT max(rowid) FROM \(q)) AND 0;"
            }
            script += "PRAGMA user_version = 99;"
            for statement in script.split(separator: ";") {
                // Tables whose triggers call functions sqlite3 lacks (SpatiaLite) stay as they are.
                _ = try runProcess(sqlite3Binary, ["-batch", b], input: Array((statement + ";").utf8))
            }
            try roundTrip(a, b, in: folder)
        }
    }
}

