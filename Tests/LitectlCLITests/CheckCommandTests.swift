// `litectl check` through the built binary: exit status 0/1/2 as documented,
// --strict, --json and --format output, -j keeping the order, silence on a
// pipe for sound databases, and corrupt copies reported without a crash.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct CheckCommandTests {
    func makeSound(_ path: String) throws {
        try makeDatabase(path, "CREATE TABLE t(id INTEGER PRIMARY KEY, a); INSERT INTO t VALUES (1, 'x');")
    }

    @Test func soundDatabaseIsSilentOnAPipe() throws {
        let folder = try TemporaryFolder("cli-check-sound")
        try makeSound(folder.file("a.db"))
        let before = try FileFingerprint(folder.file("a.db"))
        let result = try litectl("check", "a.db", in: folder.path)
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty && result.stderr.isEmpty)
        #expect(try FileFingerprint(folder.file("a.db")) == before, "read-only")
        #expect(try folder.listing() == ["a.db"])
    }

    @Test func warningsFailOnlyWithStrict() throws {
        let folder = try TemporaryFolder("cli-check-strict")
        try makeDatabase(folder.file("w.db"), "CREATE TABLE log(at, message);")
        // Off a terminal a warning that does not fail the check is said only with -v.
        let quiet = try litectl("check", "w.db", in: folder.path)
        #expect(quiet.status == 0 && quiet.stdout.isEmpty)
        let plain = try litectl("check", "-v", "w.db", in: folder.path)
        #expect(plain.status == 0)
        #expect(plain.stdout == "w.db: warning [no-primary-key] log: table log has no PRIMARY KEY\n")
        let strict = try litectl("check", "--strict", "w.db", in: folder.path)
        #expect(strict.status == 1)
        #expect(strict.stdout == plain.stdout)
    }

    @Test func jsonAndRowFormats() throws {
        let folder = try TemporaryFolder("cli-check-json")
        try makeDatabase(folder.file("f.db"), """
            CREATE TABLE p(id INTEGER PRIMARY KEY); CREATE TABLE c(id INTEGER PRIMARY KEY, pid REFERENCES p(id));
            INSERT INTO c VALUES (1, 9);
            """)
        try makeSound(folder.file("ok.db"))
        let result = try litectl("check", "--json", "f.db", "ok.db", in: folder.path)
        #expect(result.status == 1)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        let first = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(first["path"] as? String == "f.db")
        #expect(first["status"] as? String == "findings")
        let findings = try #require(first["findings"] as? [[String: Any]])
        #expect(findings.map { $0["check"] as? String } == ["foreign-key", "unindexed-foreign-key"])
        #expect(findings.map { $0["severity"] as? String } == ["error", "warning"])
        #expect(findings[1]["fix"] as? String == #"CREATE INDEX "c_pid_idx" ON "c"("pid");"#)
        #expect(lines[1] == #"{"path":"ok.db","status":"ok","error":null,"findings":[]}"#)

        let csv = try litectl("check", "--format", "csv", "f.db", "ok.db", in: folder.path)
        #expect(csv.status == 1)
        let rows = csv.stdout.split(separator: "\r\n")
        #expect(rows.first == "path,severity,check,object,message,fix,fingerprint,baseline")
        #expect(rows.count == 3)
        #expect(rows[1].hasPrefix("f.db,error,foreign-key,c,"))
    }

    @Test func couldNotCheckIsExitTwoAndTheOthersStillRun() throws {
        let folder = try TemporaryFolder("cli-check-missing")
        try makeSound(folder.file("ok.db"))
        try makeDatabase(folder.file("w.db"), "CREATE TABLE log(at);")
        try "hello".write(toFile: folder.file("text.db"), atomically: false, encoding: .utf8)
        let result = try litectl("check", "-v", "-j", "2", "missing.db", "w.db", "text.db", "ok.db", in: folder.path)
        #expect(result.status == 2)
        let errors = result.stderr.split(separator: "\n")
        #expect(errors == ["litectl: missing.db: no such file", "litectl: text.db: not a SQLite database (file is not a database)"]
                || errors.count == 2 && errors[0] == "litectl: missing.db: no such file" && errors[1].hasPrefix("litectl: text.db: not a SQLite database"))
        #expect(result.stdout == "w.db: warning [no-primary-key] log: table log has no PRIMARY KEY\nok.db: ok\n")
    }

    @Test func corruptCopiesAreFindingsNotCrashes() throws {
        let folder = try TemporaryFolder("cli-check-corrupt")
        let db = folder.file("c.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, a, b); CREATE INDEX t_a ON t(a);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
            INSERT INTO t SELECT i, i % 17, randomblob(50) FROM n;
            ANALYZE;
            """)
        var data = try Data(contentsOf: URL(fileURLWithPath: db))
        // Scribble over a page in the middle of the file (b-tree content).
        let middle = (data.count / 4096 / 2) * 4096
        for i in 0..<64 { data[middle + 8 + i * 13] ^= 0xA5 }
        try data.write(to: URL(fileURLWithPath: db))
        let result = try litectl("check", "c.db", in: folder.path)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stdout.contains("c.db: error [integrity]"))
        #expect(result.stderr.isEmpty)
    }

    @Test func aDamagedHeaderIsAFindingNotAnError() throws {
        let folder = try TemporaryFolder("cli-check-header")
        let db = folder.file("h.db")
        try makeSound(db)
        var data = try Data(contentsOf: URL(fileURLWithPath: db))
        data[16] = 0xFF; data[17] = 0xFF  // page size 65535: not a power of two
        try data.write(to: URL(fileURLWithPath: db))
        let result = try litectl("check", "h.db", in: folder.path)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stdout.contains("h.db: error [open]"))
        #expect(result.stdout.contains("header is damaged"))
        // A file without the SQLite signature is still "could not check".
        try "plain text, not a database at all; long enough to have a header.......................................\n"
            .write(toFile: folder.file("t.db"), atomically: false, encoding: .utf8)
        let text = try litectl("check", "t.db", in: folder.path)
        #expect(text.status == 2)
        #expect(text.stderr == "litectl: t.db: not a SQLite database (no \"SQLite format 3\" header)\n")
    }

    @Test func aWithoutRowidKeyCoversAForeignKey() throws {
        let folder = try TemporaryFolder("cli-check-wr")
        try makeDatabase(folder.file("w.db"), """
            CREATE TABLE p(id INTEGER PRIMARY KEY);
            CREATE TABLE c(pid INTEGER REFERENCES p(id), k, PRIMARY KEY (pid, k)) WITHOUT ROWID;
            CREATE TABLE d(k, pid INTEGER REFERENCES p(id), PRIMARY KEY (k, pid)) WITHOUT ROWID;
            """)
        let result = try litectl("check", "--format", "csv", "w.db", in: folder.path)
        #expect(!result.stdout.contains("unindexed-foreign-key,c,") && !result.stdout.contains(",c,foreign key"),
                "c's key starts with pid: \(result.stdout)")
        #expect(result.stdout.contains("CREATE INDEX") && result.stdout.contains("\"d\""), "d's key does not start with pid")
    }

    /// The report a person reads, for a database with one of each lint problem.
    static let lintScript = """
        CREATE TABLE customers(id INTEGER PRIMARY KEY, name TEXT, country TEXT);
        CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), placed TEXT);
        CREATE INDEX customers_country ON customers(country);
        CREATE INDEX customers_country_name ON customers(country, name);
        CREATE TABLE log(at, message);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
        INSERT INTO customers SELECT i, 'c' || i, 'country ' || (i % 9) FROM n;
        INSERT INTO orders VALUES (1, 1, '2024-01-01'), (2, 999, '2024-01-02');
        """

    @Test func textReportMatchesTheGoldenFile() throws {
        let folder = try TemporaryFolder("cli-check-golden")
        try makeDatabase(folder.file("shop.db"), Self.lintScript)
        let result = try litectl("check", "-v", "shop.db", in: folder.path)
        #expect(result.status == 1)
        let golden = try String(contentsOfFile: packageRoot + "/Tests/LitectlCLITests/Golden/check-shop.txt", encoding: .utf8)
        #expect(result.stdout == golden)
    }

    @Test func lockedDatabaseCannotBeChecked() throws {
        let folder = try TemporaryFolder("cli-check-locked")
        try makeSound(folder.file("a.db"))
        let writer = try Connection(path: folder.file("a.db"), mode: .readWrite)
        try writer.execute("BEGIN EXCLUSIVE; INSERT INTO t VALUES (2, 'y');")
        let result = try litectl("check", "--busy-timeout", "100", "a.db", in: folder.path)
        try writer.execute("ROLLBACK")
        #expect(result.status == 2)
        #expect(result.stderr.hasPrefix("litectl: a.db: database is locked by another process (gave up after waiting "), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test func expectations() throws {
        let folder = try TemporaryFolder("cli-check-expect")
        try makeDatabase(folder.file("e.db"), "PRAGMA user_version=3; PRAGMA application_id=0x47504B47; CREATE TABLE t(id INTEGER PRIMARY KEY);")
        #expect(try litectl("check", "--expect-user-version", "3", "--expect-application-id", "0x47504B47",
                            "--expect-journal-mode", "delete", "e.db", in: folder.path).status == 0)
        let failed = try litectl("check", "--expect-journal-mode", "wal", "e.db", in: folder.path)
        #expect(failed.status == 1)
        #expect(failed.stdout == "e.db: error [expectation] journal_mode is delete, expected wal\n")
        #expect(try litectl("check", "--expect-application-id", "zz", "e.db", in: folder.path).status == 64)
    }
}
