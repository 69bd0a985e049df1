// `litectl migrate` and `migrate status` through the built binary: a chain of
// migrations with a failing file in the middle (one stderr line naming the
// file and statement, the database at the previous version, the backup made
// before the first migration verified by `litectl verify`), `--dry-run`
// leaving the database's bytes as they were, SIGKILL at moments of a run
// (afterwards the file is at a whole version, equal by `litectl hash` to the
// same files applied by the sqlite3 CLI), and readers in other processes that
// never see a half-applied migration.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct MigrateCommandTests {
    /// Migrations 1...n: each creates table mN and fills it with N × `rows`
    /// deterministic rows, and adds a row to `steps`.
    func writeCounterChain(_ dir: String, count: Int, rows: Int) throws {
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for n in 1...count {
            var sql = n == 1 ? "CREATE TABLE steps (n INTEGER PRIMARY KEY);\n" : ""
            sql += """
                CREATE TABLE m\(n) (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
                WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < \(n * rows))
                  INSERT INTO m\(n) SELECT i, printf('%0200d', i * \(n)) FROM r;
                CREATE INDEX m\(n)_body ON m\(n)(body);
                INSERT INTO steps VALUES (\(n));
                """
            try sql.write(toFile: dir + "/" + String(format: "%04d_step%d.sql", n, n), atomically: true, encoding: .utf8)
        }
    }

    /// The user tables' hash (litectl hash --table ...) of `db`.
    func userHash(_ db: String) throws -> String {
        let names = try sqlite3(["-batch", db, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE '\\_litectl%' ESCAPE '\\' ORDER BY 1"])
            .split(separator: "\n").map(String.init)
        let result = try runProcess(litectlBinary, ["hash"] + names.flatMap { ["--table", $0] } + [db])
        #expect(result.status == 0, "\(result.stderr)")
        return String(result.stdout.prefix(64))
    }

    @Test func aFailingFileInTheMiddleStopsTheChainAtTheVersionBefore() throws {
        let folder = try TemporaryFolder("cli-migrate")
        let dir = try writeShopMigrations(folder)
        try """
            UPDATE orders SET total = total;
            INSERT INTO nowhere VALUES (1);
            """.write(toFile: dir + "/0003_total_as_real.sql", atomically: true, encoding: .utf8)
        let data = folder.file("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: false)
        let db = data + "/shop.db"
        try makeDatabase(db, "PRAGMA journal_mode=WAL;")
        let result = try litectl("migrate", db, dir)
        #expect(result.status == 2)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr == "litectl: \(db): 0003_total_as_real.sql, statement 2 (line 2): no such table: nowhere (in SQL: INSERT INTO nowhere VALUES (1);); the database stays at version 2\n")
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "2")
        #expect(try userHash(db) == userHash(try shopByHand(folder, count: 2)))
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")
        // The backup before the first migration: beside the database, at version 0, verified.
        let backups = try FileManager.default.contentsOfDirectory(atPath: data).filter { $0.hasPrefix("shop-") && $0.hasSuffix(".db") }
        #expect(backups.count == 1)
        let verify = try litectl("verify", data + "/" + backups[0])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(try sqlite3Scalar(data + "/" + backups[0], "SELECT count(*) FROM sqlite_schema") == "0")

        // Status: two applied, two pending; nothing wrong.
        let status = try litectl("migrate", "status", db, dir)
        #expect(status.status == 0)
        #expect(status.stdout.hasPrefix("\(db): version 2; newest migration 4; 2 pending\n   1 applied    0001_customers.sql  (applied 20"), "\(status.stdout)")
        #expect(status.stdout.contains("   3 pending    0003_total_as_real.sql\n"))
        let json = try litectl("migrate", "status", "--json", db, dir)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["version"] as? Int == 2 && object["pending"] as? Int == 2)

        // Fixed, the chain goes on from where it stopped (with a second backup), silently.
        try shopMigrations[2].up.write(toFile: dir + "/0003_total_as_real.sql", atomically: true, encoding: .utf8)
        let rest = try litectl("migrate", db, dir)
        #expect(rest.status == 0 && rest.stdout.isEmpty && rest.stderr.isEmpty, "\(rest.stderr)")
        #expect(try userHash(db) == userHash(try shopByHand(folder, count: 4)))
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).filter { $0.hasSuffix(".db") }.count == 3)
        let verbose = try litectl("migrate", "-v", "--to", "3", "--no-backup", db, dir)
        #expect(verbose.status == 0)
        #expect(verbose.stdout.hasPrefix("applied 0004_customer_totals.down.sql (version 4 → 3, "), "\(verbose.stdout)")
        #expect(verbose.stdout.hasSuffix("\(db): version 4 → 3\n"))
    }

    /// A file that arrives numbered below the version after later ones ran:
    /// status says skipped (exit 1), migrate refuses with one line (exit 2).
    @Test func aSkippedFileIsReportedAndRefused() throws {
        let folder = try TemporaryFolder("cli-migrate-skipped")
        let dir = try writeShopMigrations(folder)
        let late = dir + "/0003_total_as_real.sql"
        let held = try String(contentsOfFile: late, encoding: .utf8)
        unlink(late)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        #expect(try litectl("migrate", db, dir, "--no-backup").status == 0)
        try held.write(toFile: late, atomically: true, encoding: .utf8)
        let status = try litectl("migrate", "status", db, dir)
        #expect(status.status == 1)
        #expect(status.stdout.contains("skipped") && status.stdout.contains("0003_total_as_real.sql"), "\(status.stdout)")
        let run = try litectl("migrate", db, dir, "--no-backup")
        #expect(run.status == 2)
        #expect(run.stderr.split(separator: "\n").count == 1)
        #expect(run.stderr.hasPrefix("litectl: \(db): 0003_total_as_real.sql is numbered below the database's version 4 but never ran"), "\(run.stderr)")
    }

    @Test func anEditedAppliedFileIsRefusedAndReported() throws {
        let folder = try TemporaryFolder("cli-migrate-edit")
        let dir = try writeShopMigrations(folder, count: 2)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        #expect(try litectl("migrate", "--no-backup", db, dir).status == 0)
        try (shopMigrations[1].up + "\n-- edited\n").write(toFile: dir + "/0002_orders.sql", atomically: true, encoding: .utf8)
        let status = try litectl("migrate", "status", db, dir)
        #expect(status.status == 1)
        #expect(status.stdout.contains("   2 edited     0002_orders.sql"))
        let before = try FileFingerprint(db)
        let refused = try litectl("migrate", db, dir)
        #expect(refused.status == 1)
        #expect(refused.stderr.hasPrefix("litectl: \(db): applied migration edited since it ran: 0002_orders.sql"), "\(refused.stderr)")
        #expect(try FileFingerprint(db) == before)
        #expect(try litectl("migrate", "--accept-edited", "--no-backup", db, dir).status == 0)
        #expect(try litectl("migrate", "status", db, dir).status == 0)
    }

    @Test func dryRunLeavesTheBytesAndTheFolderAsTheyWere() throws {
        let folder = try TemporaryFolder("cli-migrate-dry")
        let dir = try writeShopMigrations(folder)
        let data = try TemporaryFolder("cli-migrate-dry-data")
        let db = data.file("shop.db")
        try makeDatabase(db, "PRAGMA journal_mode=WAL;")
        _ = try litectl("migrate", "--no-backup", "--to", "1", db, dir)
        let tmp = try TemporaryFolder("cli-migrate-dry-tmp")
        let before = try FileFingerprint(db)
        let result = try runProcess("/usr/bin/env", ["TMPDIR=\(tmp.path)", litectlBinary, "migrate", "--dry-run", db, dir])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.prefix(3).map { $0.components(separatedBy: ", ").first! } == [
            "would apply 0002_orders.sql (version 1 → 2", "would apply 0003_total_as_real.sql (version 2 → 3",
            "would apply 0004_customer_totals.sql (version 3 → 4"])
        #expect(lines.contains { $0.hasPrefix("+ table orders added") }, "\(result.stdout)")
        #expect(lines.contains { $0.hasPrefix("+ view customer_totals added") })
        #expect(lines.contains { $0.hasPrefix("orders: +3 -0 ~0") })
        #expect(lines.last == "\(db): not changed (dry run); it would go from version 1 to 4")
        #expect(try FileFingerprint(db) == before, "the database's bytes and modification time")
        #expect(try data.listing() == ["shop.db"], "no backup, no -wal, no temporary file beside it")
        #expect(try tmp.listing().isEmpty, "the copies are gone")
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "1")
    }

    /// SIGKILL at moments of a run: the database is always at a whole version
    /// (user_version and content agree with the files applied by the sqlite3
    /// CLI), and the next run removes what the killed one left and finishes.
    @Test func killedRunsLeaveAWholeVersion() throws {
        let folder = try TemporaryFolder("cli-migrate-kill")
        let dir = folder.file("migrations")
        try writeCounterChain(dir, count: 4, rows: 20_000)
        var references: [String] = []
        for version in 0...4 {
            let path = folder.file("reference-\(version).db")
            var script = ""
            for n in stride(from: 1, through: version, by: 1) {
                script += try String(contentsOfFile: dir + String(format: "/%04d_step%d.sql", n, n), encoding: .utf8) + "\n"
            }
            try makeDatabase(path, script + "PRAGMA user_version = \(version);")
            references.append(try userHash(path))
        }
        let data = try TemporaryFolder("cli-migrate-kill-data")
        let db = data.file("app.db")
        func version(_ connection: Connection) throws -> Int {
            if case .integer(let v)? = try connection.scalar("PRAGMA user_version") { return Int(v) }
            return -1
        }
        // The kill lands where the test holds it, not where a timer does. In
        // rollback-journal mode the test's read transaction (a SHARED lock)
        // lets the next migration write (its journal appears) but not commit:
        // killed there, the file must be at the version the test read, its
        // journal rolled back. In WAL mode the test's write transaction can
        // only begin between two migrations: killed while it is held, the
        // file must be at the version it read.
        var held: [Int] = []
        for (journal, atLeast) in [("delete", 0), ("delete", 1), ("delete", 2), ("wal", 1), ("wal", 3)] {
            unlink(db)
            try makeDatabase(db, "PRAGMA journal_mode=\(journal);")
            let holder = try Connection(path: db, mode: .readWrite, busyTimeout: 60_000)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: litectlBinary)
            process.arguments = ["migrate", db, dir, "--busy-timeout", "60000"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            var at: Int
            if journal == "delete" {
                try holder.execute("BEGIN")
                at = try version(holder)
                try process.run()
                while at < atLeast && process.isRunning {
                    // Let the waiting commit through; the next read waits for it.
                    try holder.execute("COMMIT")
                    usleep(20_000)
                    try holder.execute("BEGIN")
                    at = try version(holder)
                }
                while process.isRunning && !FileManager.default.fileExists(atPath: db + "-journal") { usleep(1_000) }
            } else {
                try process.run()
                while true {
                    if (try? holder.execute("BEGIN IMMEDIATE")) == nil { usleep(1_000); continue }
                    at = try version(holder)
                    if at >= atLeast || !process.isRunning { break }
                    try holder.execute("ROLLBACK")
                    usleep(1_000)
                }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try holder.execute("ROLLBACK")
            try holder.close()
            held.append(at)
            #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "\(at)", "\(journal): held at version \(at)")
            #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")
            #expect(try userHash(db) == references[at], "\(journal): killed at version \(at)")
            // The next run finishes the chain and leaves no temporary file.
            let next = try litectl("migrate", db, dir)
            #expect(next.status == 0, "\(next.stderr)")
            #expect(try userHash(db) == references[4])
            let left = try data.listing()
            #expect(left.filter { $0.contains(".tmp-") }.isEmpty, "\(left)")
            for name in try data.listing() where name != "app.db" { unlink(data.file(name)) }
        }
        // The first round holds the lock before migrate starts: always killed
        // inside the first migration, with nothing committed.
        #expect(held.first == 0)
    }

    /// Readers in other processes (Python's sqlite3), each read in one
    /// transaction, see user_version and the tables of that version and
    /// nothing in between, in WAL and in rollback-journal mode.
    @Test(arguments: ["wal", "delete"])
    func readersNeverSeeAHalfAppliedMigration(_ journal: String) throws {
        let folder = try TemporaryFolder("cli-migrate-readers")
        let dir = folder.file("migrations")
        try writeCounterChain(dir, count: 6, rows: 8_000)
        let db = folder.file("app.db")
        try makeDatabase(db, "PRAGMA journal_mode=\(journal);")
        let script = folder.file("reader.py")
        try """
            import sqlite3, sys, os
            db, stop = sys.argv[1], sys.argv[2]
            c = sqlite3.connect(db, timeout=60, isolation_level=None)
            reads, bad, versions = 0, 0, set()
            while True:
                done = os.path.exists(stop)
                c.execute("BEGIN")
                v = c.execute("PRAGMA user_version").fetchone()[0]
                tables = c.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name GLOB 'm[0-9]*'").fetchone()[0]
                steps = c.execute("SELECT count(*) FROM steps").fetchone()[0] if v > 0 else 0
                rows = c.execute("SELECT count(*) FROM m%d" % v).fetchone()[0] if v > 0 else 0
                c.execute("COMMIT")
                reads += 1
                versions.add(v)
                if tables != v or steps != v or rows != v * 8000:
                    bad += 1
                    print("inconsistent", v, tables, steps, rows, file=sys.stderr)
                if done:
                    break
            print(reads, bad, len(versions))
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let stop = folder.file("stop")
        var readers: [(Process, Pipe)] = []
        for _ in 0..<2 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [script, db, stop]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            readers.append((process, out))
        }
        let result = try litectl("migrate", "--no-backup", db, dir)
        _ = FileManager.default.createFile(atPath: stop, contents: Data())
        #expect(result.status == 0, "\(result.stderr)")
        for (process, out) in readers {
            let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "a reader failed")
            let numbers = printed.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            #expect(numbers.count == 3 && numbers[0] > 0 && numbers[1] == 0, "reads, inconsistent reads, versions: \(printed)")
        }
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "6")
    }
}

/// Issue 37, item 9: the files are confined to the database as a patch is,
/// unless --allow-attach names another database, which is then backed up
/// first and written in the same transaction as the database.
extension MigrateCommandTests {
    /// app.db (a table a) and other.db (t with two rows) in `folder`, and a
    /// migrations folder holding `sql` as its one file.
    func attachFixture(_ folder: TemporaryFolder, _ sql: String, otherJournal: String = "delete") throws -> (db: String, other: String, dir: String) {
        let db = folder.file("app.db"), other = folder.file("other.db"), dir = folder.file("migrations")
        try makeDatabase(db, "CREATE TABLE a(x); INSERT INTO a VALUES (1);")
        try makeDatabase(other, "PRAGMA journal_mode=\(otherJournal); CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        try sql.write(toFile: dir + "/0001_other.sql", atomically: true, encoding: .utf8)
        return (db, other, dir)
    }

    @Test func aMigrationWritesNoOtherDatabaseUnlessAllowed() throws {
        let folder = try TemporaryFolder("cli-migrate-attach")
        let (db, other, dir) = try attachFixture(folder, "ATTACH 'other.db' AS other;\nDELETE FROM other.t;\nCREATE TABLE b(y);\n")
        let refused = try litectl("migrate", "--no-backup", db, dir, in: folder.path)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("0001_other.sql, statement 1 (line 1): not allowed in a migration: ATTACH"), "\(refused.stderr)")
        #expect(try sqlite3Scalar(other, "SELECT count(*) FROM t") == "2")
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "0")

        // Allowed: attached by litectl (the file's own ATTACH of that file does
        // nothing), backed up first, changed with the database.
        let dry = try litectl("migrate", "--dry-run", db, dir, "--allow-attach", "other=\(other)", in: folder.path)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(try sqlite3Scalar(other, "SELECT count(*) FROM t") == "2", "the dry run changes a copy")
        let allowed = try litectl("migrate", "--json", db, dir, "--allow-attach", "other=\(other)", "--backup-dir", folder.path, in: folder.path)
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(try sqlite3Scalar(other, "SELECT count(*) FROM t") == "0")
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "1")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(allowed.stdout.utf8)) as? [String: Any])
        let backups = try #require(report["attached_backups"] as? [String])
        #expect(backups.count == 1)
        let backup = try #require(backups.first)
        #expect(try sqlite3Scalar(backup, "SELECT count(*) FROM t") == "2", "the backup holds other.db as it was")
        #expect(try litectl("verify", backup).status == 0)
    }

    @Test func theConfinementRefusesWhatWritesElsewhereOrChangesHowSQLiteWrites() throws {
        let cases: [(String, String)] = [
            ("VACUUM INTO 'copy.db';", "VACUUM"),
            ("PRAGMA journal_mode=OFF;", "PRAGMA journal_mode"),
            ("PRAGMA synchronous=OFF;", "PRAGMA synchronous"),
            ("PRAGMA writable_schema=ON;", "PRAGMA writable_schema"),
            ("PRAGMA schema_version=1;", "PRAGMA schema_version"),
            ("SELECT load_extension('/tmp/nothing.so');", "load_extension()"),
            ("DETACH other;", "DETACH"),
        ]
        for (sql, named) in cases {
            let folder = try TemporaryFolder("cli-migrate-confined")
            let (db, _, dir) = try attachFixture(folder, "CREATE TABLE b(y);\n" + sql + "\n")
            let result = try litectl("migrate", "--no-backup", db, dir, in: folder.path)
            #expect(result.status == 2 && result.stderr.contains("statement 2 (line 2): not allowed in a migration: \(named)"), "\(sql): \(result.stderr)")
            #expect(try sqlite3Scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'b'") == "0", "\(sql): rolled back")
            #expect(!FileManager.default.fileExists(atPath: folder.file("copy.db")))
        }
        // What a schema change needs stays allowed.
        let folder = try TemporaryFolder("cli-migrate-confined-ok")
        let (db, _, dir) = try attachFixture(folder, """
            PRAGMA legacy_alter_table=ON;
            PRAGMA defer_foreign_keys=ON;
            CREATE TABLE b(y);
            SELECT * FROM pragma_table_info('a');
            PRAGMA table_info(a);
            PRAGMA foreign_key_check;
            PRAGMA legacy_alter_table=OFF;
            """)
        let fine = try litectl("migrate", "--no-backup", db, dir, in: folder.path)
        #expect(fine.status == 0, "\(fine.stderr)")
    }

    @Test(arguments: ["delete", "wal"])
    func aFailingFileRollsTheAttachedDatabaseBackToo(_ journal: String) throws {
        let folder = try TemporaryFolder("cli-migrate-attach-fail")
        let (db, other, dir) = try attachFixture(folder, "DELETE FROM other.t;\nINSERT INTO nowhere VALUES (1);\n", otherJournal: journal)
        let result = try litectl("migrate", "--no-backup", db, dir, "--allow-attach", "other=\(other)")
        #expect(result.status == 2)
        #expect(result.stderr.contains("no such table: nowhere"), "\(result.stderr)")
        #expect(result.stderr.contains("WAL mode") == (journal == "wal"), "a WAL-mode database is named in a warning: \(result.stderr)")
        #expect(try sqlite3Scalar(other, "SELECT count(*) FROM t") == "2")
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "0")
        #expect(try litectl("migrate", db, dir, "--allow-attach", "main=\(other)").status == 2, "main is not a name to attach as")
        #expect(try litectl("migrate", db, dir, "--allow-attach", "other").status == 64)
    }
}
