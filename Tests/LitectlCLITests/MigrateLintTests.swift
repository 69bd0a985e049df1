// `litectl migrate lint` through the built binary: one test per rule, each
// running a migration that makes the rule's case on a database built by the
// sqlite3 CLI and checking the finding (rule, severity, file, statement,
// line, object) and its count against the same count made by the sqlite3
// CLI on the database before the migration; then the database untouched,
// no file left in $TMPDIR, JUnit and SARIF valid against their schemas.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct MigrateLintTests {
    struct Lint {
        var status: Int32
        var report: [String: Any]
        var stdout: String
        var stderr: String
        var db: String
        /// Kept while the oracle reads the database.
        var folder: TemporaryFolder
        var findings: [[String: Any]] { report["findings"] as? [[String: Any]] ?? [] }

        /// The findings of `rule`.
        func of(_ rule: String) -> [[String: Any]] { findings.filter { $0["rule"] as? String == rule } }
    }

    /// A database made by `setup`, the migration files `files` (name → SQL),
    /// and `migrate lint --json` run on them with $TMPDIR in a folder of its own.
    func lint(_ setup: String, _ files: [(String, String)], _ extra: [String] = [],
              sourceLocation: SourceLocation = #_sourceLocation) throws -> Lint {
        let folder = try TemporaryFolder("cli-lint")
        let db = folder.file("app.db")
        try makeDatabase(db, setup)
        let dir = folder.file("migrations")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        for (name, sql) in files { try sql.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8) }
        let tmp = folder.file("tmp")
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: false)
        let before = try FileFingerprint(db)
        let result = try runProcess("/usr/bin/env", ["TMPDIR=" + tmp, litectlBinary, "migrate", "lint", "--json"] + extra + [db, dir])
        #expect(try FileFingerprint(db) == before, "the database is only read", sourceLocation: sourceLocation)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty, "no file left in TMPDIR", sourceLocation: sourceLocation)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["app.db", "migrations", "tmp"],
                "nothing beside the database", sourceLocation: sourceLocation)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                                  "\(result.stdout)\(result.stderr)", sourceLocation: sourceLocation)
        return Lint(status: result.status, report: report, stdout: result.stdout, stderr: result.stderr, db: db, folder: folder)
    }

    /// Expects exactly one finding of `rule` with these details; returns it.
    @discardableResult
    func expectOne(_ lint: Lint, _ rule: String, _ severity: String, file: String = "0001_change.sql", statement: Int?,
                   line: Int? = nil, object: String? = nil, count: Int? = nil, message: String? = nil,
                   sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any] {
        let found = lint.of(rule)
        #expect(found.count == 1, "one \(rule) finding in \(lint.findings)", sourceLocation: sourceLocation)
        guard let finding = found.first else { return [:] }
        #expect(finding["severity"] as? String == severity, "\(finding)", sourceLocation: sourceLocation)
        #expect(finding["file"] as? String == file, "\(finding)", sourceLocation: sourceLocation)
        #expect(finding["statement"] as? Int == statement, "\(finding)", sourceLocation: sourceLocation)
        if let line { #expect(finding["line"] as? Int == line, "\(finding)", sourceLocation: sourceLocation) }
        if let object { #expect(finding["object"] as? String == object, "\(finding)", sourceLocation: sourceLocation) }
        if let count { #expect(finding["count"] as? Int == count, "\(finding)", sourceLocation: sourceLocation) }
        if let message {
            #expect((finding["message"] as? String ?? "").contains(message), "\(finding)", sourceLocation: sourceLocation)
        }
        return finding
    }

    /// The oracle: one number from the sqlite3 CLI.
    func oracle(_ db: String, _ sql: String) throws -> Int {
        try #require(Int(try sqlite3Scalar(db, sql)))
    }

    /// SQLite's 12-step rebuild of `table` as `definition` (the columns), copying `select`.
    func rebuild(_ table: String, _ definition: String, select: String) -> String {
        """
        CREATE TABLE \(table)_new (\(definition));
        INSERT INTO \(table)_new SELECT \(select) FROM \(table);
        DROP TABLE \(table);
        ALTER TABLE \(table)_new RENAME TO \(table);
        """
    }

    static let users = """
        CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, code TEXT);
        INSERT INTO users VALUES (1, 'ann', 'ann@x', '12'), (2, 'bob', NULL, 'x'), (3, 'cy', 'cy@x', '3.5'),
                                 (4, 'di', NULL, NULL), (5, 'ed', 'ann@x', '007');
        """

    // MARK: DS: destructive changes

    @Test func ds101ADroppedTableCountsItsRows() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "-- gone\nDROP TABLE users;\n")])
        #expect(lint.status == 1)
        expectOne(lint, "DS101", "error", statement: 1, line: 2, object: "users",
                  count: try oracle(lint.db, "SELECT count(*) FROM users"), message: "table users is dropped, holding 5 rows")
        // An empty table dropped is a warning only.
        let empty = try self.lint("CREATE TABLE t(a);", [("0001_change.sql", "DROP TABLE t;")])
        #expect(empty.status == 0)
        expectOne(empty, "DS101", "warning", statement: 1, count: 0)
    }

    @Test func ds102ADroppedColumnCountsItsNonNullValues() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "SELECT 1;\nALTER TABLE users DROP COLUMN email;\n")])
        #expect(lint.status == 1)
        expectOne(lint, "DS102", "error", statement: 2, line: 2, object: "users.email",
                  count: try oracle(lint.db, "SELECT count(email) FROM users"), message: "holding 3 non-NULL values")
        // The same column dropped by a rebuild.
        let rebuilt = try self.lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, code TEXT",
                                                                              select: "id, name, code"))])
        expectOne(rebuilt, "DS102", "error", statement: 3, line: 3, object: "users.email", count: 3, message: "in the rebuild of users")
    }

    @Test func ds103ADroppedView() throws {
        let lint = try lint(Self.users + "CREATE VIEW named AS SELECT name FROM users;", [("0001_change.sql", "DROP VIEW named;")])
        #expect(lint.status == 0)
        expectOne(lint, "DS103", "warning", statement: 1, object: "named")
    }

    @Test func ds104ATriggerLostInARebuild() throws {
        let setup = Self.users + "CREATE TABLE log (v); CREATE TRIGGER users_log AFTER INSERT ON users BEGIN INSERT INTO log VALUES (new.id); END;"
        let lint = try lint(setup, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, code TEXT, age INTEGER",
                                                               select: "*, NULL"))])
        expectOne(lint, "DS104", "warning", statement: 3, object: "users_log", message: "dropped with its table in the rebuild of users")
    }

    @Test func ds105ADroppedUniqueIndex() throws {
        let lint = try lint(Self.users + "CREATE UNIQUE INDEX users_name ON users(name); CREATE INDEX users_code ON users(code);",
                            [("0001_change.sql", "DROP INDEX users_code;\nDROP INDEX users_name;")])
        expectOne(lint, "DS105", "warning", statement: 2, line: 2, object: "users_name")
    }

    @Test func ds106ADeleteWithoutWhere() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "DELETE FROM users WHERE id = 1;\nDELETE FROM users;")])
        expectOne(lint, "DS106", "warning", statement: 2, line: 2, object: "users",
                  count: try oracle(lint.db, "SELECT count(*) - 1 FROM users"))
    }

    @Test func ds107AnUpdateWithoutWhere() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "UPDATE users SET code = NULL WHERE id = 2;\nUPDATE users SET code = upper(code);")])
        expectOne(lint, "DS107", "warning", statement: 2, object: "users", count: try oracle(lint.db, "SELECT count(*) FROM users"))
    }

    // MARK: MF: changes that depend on the data

    @Test func mf101NotNullAddedWhereRowsHoldNull() throws {
        let files = [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, code TEXT", select: "*")),
                     ("0002_more.sql", "CREATE TABLE more (a);")]
        let lint = try lint(Self.users, files)
        #expect(lint.status == 1)
        expectOne(lint, "MF101", "error", statement: 2, line: 2, object: "users_new.email",
                  count: try oracle(lint.db, "SELECT count(*) FROM users WHERE email IS NULL"))
        #expect(lint.report["not_linted"] as? [String] == ["0002_more.sql"])
        // ADD COLUMN ... NOT NULL without a DEFAULT: every row.
        let added = try self.lint(Self.users, [("0001_change.sql", "ALTER TABLE users ADD COLUMN age INTEGER NOT NULL;")])
        expectOne(added, "MF101", "error", statement: 1, object: "users", count: 5)
    }

    @Test func mf102UniqueAddedWhereRowsRepeat() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "CREATE UNIQUE INDEX users_email ON users(email);")])
        #expect(lint.status == 1)
        expectOne(lint, "MF102", "error", statement: 1, object: "users.email",
                  count: try oracle(lint.db, "SELECT count(email) - count(DISTINCT email) FROM users"))
        let rebuilt = try self.lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT UNIQUE, code TEXT", select: "*"))])
        expectOne(rebuilt, "MF102", "error", statement: 2, object: "users_new.email", count: 1)
    }

    @Test func mf103CheckAddedThatRowsViolate() throws {
        let lint = try lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL CHECK (length(name) > 2), email TEXT, code TEXT", select: "*"))])
        #expect(lint.status == 1)
        expectOne(lint, "MF103", "error", statement: 2, object: "users_new",
                  count: try oracle(lint.db, "SELECT count(*) FROM users WHERE NOT (length(name) > 2)"))
    }

    @Test func mf104ForeignKeyAddedWhereRowsHaveNoParent() throws {
        let setup = Self.users + "CREATE TABLE orders (id INTEGER PRIMARY KEY, user INTEGER); INSERT INTO orders VALUES (1, 1), (2, 9), (3, 8), (4, NULL);"
        let lint = try lint(setup, [("0001_change.sql", rebuild("orders", "id INTEGER PRIMARY KEY, user INTEGER REFERENCES users(id)", select: "*"))])
        #expect(lint.status == 1)
        expectOne(lint, "MF104", "error", statement: nil, object: "orders → users",
                  count: try oracle(lint.db, "SELECT count(*) FROM orders WHERE user NOT IN (SELECT id FROM users)"))
    }

    @Test func mf105ATypeChangeThatAltersStoredValues() throws {
        let lint = try lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, code INTEGER", select: "*"))])
        #expect(lint.status == 1)
        // The oracle: the sqlite3 CLI stores the values in an INTEGER column and compares them by rowid.
        let altered = try oracle(lint.db, """
            CREATE TEMP TABLE p (v INTEGER); INSERT INTO p (rowid, v) SELECT rowid, code FROM users;
            SELECT count(*) FROM users JOIN p ON p.rowid = users.rowid WHERE typeof(code) <> typeof(v) OR code <> v;
            """)
        #expect(altered == 3)
        expectOne(lint, "MF105", "error", statement: 3, object: "users.code", count: altered, message: "from TEXT to INTEGER")
    }

    @Test func mf106AnAffinityChangeThatAltersNothingYet() throws {
        let lint = try lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email INTEGER, code TEXT", select: "*"))])
        #expect(lint.status == 0)
        expectOne(lint, "MF106", "warning", statement: 3, object: "users.email", count: 0)
        #expect(lint.of("MF105").isEmpty)
    }

    @Test func mf107AStatementThatFailsOnTheData() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "CREATE TABLE t (a);\nINSERT INTO t SELECT abs(-9223372036854775807 - 1);")])
        #expect(lint.status == 1)
        expectOne(lint, "MF107", "error", statement: 2, line: 2, message: "integer overflow")
        // Refused by the confinement as `migrate` refuses it.
        let attach = try self.lint(Self.users, [("0001_change.sql", "ATTACH 'other.db' AS other;")])
        expectOne(attach, "MF107", "error", statement: 1, message: "not allowed in a migration: ATTACH")
    }

    // MARK: BC: backward incompatible changes

    @Test func bc101ARenamedTable() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "ALTER TABLE users RENAME TO people;")])
        #expect(lint.status == 0)
        expectOne(lint, "BC101", "warning", statement: 1, object: "users", message: "renamed to people")
        #expect(lint.of("DS101").isEmpty)
    }

    @Test func bc102ARenamedColumn() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "ALTER TABLE users RENAME COLUMN email TO mail;")])
        expectOne(lint, "BC102", "warning", statement: 1, object: "users.email", message: "renamed to mail")
        #expect(lint.of("DS102").isEmpty)
    }

    @Test func bc103AViewThatNamesARenamedTable() throws {
        let lint = try lint(Self.users + "CREATE VIEW named AS SELECT name FROM users;",
                            [("0001_change.sql", "PRAGMA legacy_alter_table = ON;\nALTER TABLE users RENAME TO people;")])
        #expect(lint.status == 1)
        expectOne(lint, "BC103", "error", statement: 2, line: 2, object: "named", message: "no such table: main.users")
        // Checked against the sqlite3 CLI: the view does not compile there either.
        let probe = try runProcess(sqlite3Binary, ["-batch", lint.db, "PRAGMA legacy_alter_table = ON; ALTER TABLE users RENAME TO people; SELECT * FROM named;"])
        #expect(probe.stderr.contains("no such table: main.users"))
    }

    @Test func bc104ATriggerThatNamesADroppedTable() throws {
        let setup = Self.users + "CREATE TABLE log (v); CREATE TRIGGER users_log AFTER INSERT ON users BEGIN INSERT INTO log VALUES (new.id); END;"
        let lint = try lint(setup, [("0001_change.sql", "DROP TABLE log;")])
        #expect(lint.status == 1)
        expectOne(lint, "BC104", "error", statement: 1, object: "users_log", message: "no such table: main.log")
    }

    @Test func bc105AForeignKeyThatNamesADroppedParent() throws {
        let setup = "CREATE TABLE parent (id INTEGER PRIMARY KEY); CREATE TABLE child (id INTEGER PRIMARY KEY, p INTEGER REFERENCES parent(id));"
        let lint = try lint(setup, [("0001_change.sql", "DROP TABLE parent;")])
        #expect(lint.status == 1)
        expectOne(lint, "BC105", "error", statement: 1, object: "child(p) → parent", message: "parent table parent does not exist")
    }

    @Test func bc106ARequiredColumnWithoutDefault() throws {
        let lint = try lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, code TEXT, plan TEXT NOT NULL",
                                                                    select: "*, 'free'"))])
        #expect(lint.status == 0)
        expectOne(lint, "BC106", "warning", statement: 3, object: "users.plan")
    }

    // MARK: RB and CN: rebuilds and loosened constraints

    @Test func rb101ARebuildThatChangesNothing() throws {
        let setup = Self.users + "CREATE INDEX users_code ON users(code);"
        let same = rebuild("users", "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT, code TEXT", select: "*")
            + "\nCREATE INDEX users_code ON users(code);"
        let lint = try lint(setup, [("0001_change.sql", same)])
        #expect(lint.status == 0)
        expectOne(lint, "RB101", "warning", statement: 3, object: "users")
        // A rebuild that does change something is not one.
        let changed = try self.lint(setup, [("0001_change.sql", same.replacingOccurrences(of: "email TEXT", with: "email TEXT COLLATE NOCASE"))])
        #expect(changed.of("RB101").isEmpty, "\(changed.findings)")
    }

    @Test func rb102AutoincrementRemoved() throws {
        let setup = "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, a); INSERT INTO t (a) VALUES (1), (2);"
        let lint = try lint(setup, [("0001_change.sql", rebuild("t", "id INTEGER PRIMARY KEY, a", select: "*"))])
        expectOne(lint, "RB102", "warning", statement: 3, object: "t")
    }

    @Test func cn101NotNullRemoved() throws {
        let lint = try lint(Self.users, [("0001_change.sql", rebuild("users", "id INTEGER PRIMARY KEY, name TEXT, email TEXT, code TEXT", select: "*"))])
        #expect(lint.status == 0)
        expectOne(lint, "CN101", "note", statement: 3, object: "users.name")
    }

    @Test func cn102ForeignKeyRemoved() throws {
        let setup = Self.users + "CREATE TABLE orders (id INTEGER PRIMARY KEY, user INTEGER REFERENCES users(id)); INSERT INTO orders VALUES (1, 1);"
        let lint = try lint(setup, [("0001_change.sql", rebuild("orders", "id INTEGER PRIMARY KEY, user INTEGER", select: "*"))])
        expectOne(lint, "CN102", "warning", statement: 3, object: "orders(user)")
    }

    @Test func pr101PragmaForeignKeysInAFile() throws {
        let lint = try lint(Self.users, [("0001_change.sql", "PRAGMA foreign_keys = OFF;\nCREATE TABLE t (a);\nPRAGMA foreign_keys = ON;")])
        #expect(lint.status == 0)
        #expect(lint.of("PR101").count == 2)
        #expect(lint.of("PR101").map { $0["line"] as? Int } == [1, 3])
    }

    // MARK: The command

    @Test func aSafeChainIsSilentAndTheLintCoversOnlyPendingFiles() throws {
        let folder = try TemporaryFolder("cli-lint-safe")
        let db = folder.file("app.db")
        try makeDatabase(db, Self.users)
        let dir = folder.file("m")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        try "DROP TABLE users;".write(toFile: dir + "/0001_drop.sql", atomically: true, encoding: .utf8)
        try "CREATE TABLE b (x);".write(toFile: dir + "/0002_b.sql", atomically: true, encoding: .utf8)
        try makeDatabase(db, "PRAGMA user_version = 1;")   // 0001 counts as applied
        let result = try litectl("migrate", "lint", db, dir)
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stdout)\(result.stderr)")
        let verbose = try litectl("migrate", "lint", "-v", db, dir)
        #expect(verbose.stdout == "\(db): 1 migration linted; 0 errors, 0 warnings, 0 notes\n")
        // Text: one line per failing finding.
        try makeDatabase(db, "PRAGMA user_version = 0;")
        let text = try litectl("migrate", "lint", db, dir)
        #expect(text.status == 1)
        #expect(text.stdout == "error DS101 0001_drop.sql:1 (statement 1): table users is dropped, holding 5 rows\n")
        // A misnamed file is an error before anything runs.
        try "x".write(toFile: dir + "/oops.sql", atomically: true, encoding: .utf8)
        let bad = try litectl("migrate", "lint", db, dir)
        #expect(bad.status == 2 && bad.stderr.contains("not a migration file name"))
    }

    @Test func junitAndSarifValidateAgainstTheirSchemas() throws {
        let folder = try TemporaryFolder("cli-lint-ci")
        let db = folder.file("app.db")
        try makeDatabase(db, Self.users + "CREATE VIEW named AS SELECT name FROM users;")
        let dir = folder.file("m")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        try "ALTER TABLE users DROP COLUMN code;\nDROP VIEW named;".write(toFile: dir + "/0001_a.sql", atomically: true, encoding: .utf8)
        try "CREATE UNIQUE INDEX e ON users(email);".write(toFile: dir + "/0002_<b&c>.sql", atomically: true, encoding: .utf8)
        try "CREATE TABLE later (x);".write(toFile: dir + "/0003_later.sql", atomically: true, encoding: .utf8)
        for kind in ["junit", "sarif"] {
            let result = try litectl("migrate", "lint", "--format", kind, db, dir)
            #expect(result.status == 1, "\(result.stderr)")
            let file = folder.file("document.\(kind)")
            try Data(result.stdout.utf8).write(to: URL(fileURLWithPath: file))
            let valid = try runProcess("/usr/bin/env", ["python3", packageRoot + "/Tests/Fixtures/schemas/validate.py", kind, file])
            #expect(valid.status == 0 && valid.stdout == "valid\n", "\(kind) not valid: \(valid.stdout)\(valid.stderr)")
        }
        let junit = try litectl("migrate", "lint", "--format", "junit", db, dir).stdout
        #expect(junit.contains("<testsuite name=\"0002_&lt;b&amp;c&gt;.sql\""))
        #expect(junit.contains("<testcase name=\"DS102 column-dropped\" classname=\"0001_a.sql\" time=\"0.000\"><failure"))
        #expect(junit.contains("<skipped message=\"not linted: an earlier migration fails on the data\"/>"))
        let sarif = try #require(try JSONSerialization.jsonObject(with: Data(try litectl("migrate", "lint", "--format", "sarif", db, dir).stdout.utf8)) as? [String: Any])
        let run = try #require((sarif["runs"] as? [[String: Any]])?.first)
        let results = try #require(run["results"] as? [[String: Any]])
        #expect(results.map { $0["ruleId"] as? String } == ["DS102", "DS103", "MF102"])
        let location = try #require(((results[1]["locations"] as? [[String: Any]])?.first?["physicalLocation"]) as? [String: Any])
        #expect((location["region"] as? [String: Any])?["startLine"] as? Int == 2)
        let rules = try #require(((run["tool"] as? [String: Any])?["driver"] as? [String: Any])?["rules"] as? [[String: Any]])
        #expect(rules.count == MigrationLintRule.allCases.count && rules.count >= 20)
    }
}

extension MigrateLintTests {
    @Test func aSignalLeavesNoCopyBehind() throws {
        let folder = try TemporaryFolder("cli-lint-signal")
        let db = folder.file("big.db")
        try makeDatabase(db, """
            CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 400000) INSERT INTO t SELECT i, printf('%050d', i) FROM r;
            """)
        let dir = folder.file("m")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        try """
            CREATE TABLE t_new (id INTEGER PRIMARY KEY, a INTEGER);
            INSERT INTO t_new SELECT * FROM t;
            DROP TABLE t;
            ALTER TABLE t_new RENAME TO t;
            """.write(toFile: dir + "/0001_x.sql", atomically: true, encoding: .utf8)
        let tmp = folder.file("tmp")
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: false)
        let before = try FileFingerprint(db)
        for signal in [SIGTERM, SIGINT] {
            // Started through python3, which unblocks every signal first (test
            // threads block SIGINT and SIGTERM, and children inherit the mask).
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
                                 "/usr/bin/env", "TMPDIR=" + tmp, litectlBinary, "migrate", "lint", db, dir]
            let err = Pipe()
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            // Once the copy exists, the signal.
            var sawCopy = false
            for _ in 0..<2000 where process.isRunning {
                if let names = try? FileManager.default.contentsOfDirectory(atPath: tmp), !names.isEmpty { sawCopy = true; break }
                usleep(5000)
            }
            #expect(sawCopy, "the copy is made in TMPDIR")
            kill(process.processIdentifier, signal)
            process.waitUntilExit()
            let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationStatus == 2, "\(stderr)")
            #expect(stderr.contains("interrupted by SIG"), "\(stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty, "no copy left after \(signal)")
        }
        #expect(try FileFingerprint(db) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["big.db", "m", "tmp"])
    }
}
