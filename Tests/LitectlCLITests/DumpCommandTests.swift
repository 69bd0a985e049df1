// `litectl dump` and `litectl load` through the built binary: `dump | load`
// and `dump | sqlite3` rebuild the database (litectl hash), a damaged table
// is exit 2 with one line naming table and row and no usable output, files
// and folders appear whole, and killed runs leave nothing a later run keeps.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DumpCommandTests {
    func hash(_ path: String) throws -> String {
        let r = try litectl("hash", path)
        #expect(r.status == 0, "\(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    @Test func dumpPipedIntoLoadAndIntoTheShell() throws {
        let folder = try TemporaryFolder("cli-dump")
        var fixture = EveryTypeDatabase()
        fixture.seed = 21
        fixture.rows = 120
        let db = folder.file("r.db")
        try fixture.make(at: db)
        let before = try FileFingerprint(db)
        let dump = try litectl("dump", db)
        #expect(dump.status == 0, "\(dump.stderr)")
        // The one thing a dump cannot keep is said on stderr.
        #expect(dump.stderr == "litectl: \(db): note: the rowids of hidden are not kept (its columns rowid, _rowid_ and oid hide them)\n")
        #expect(try FileFingerprint(db) == before, "dump only reads")
        #expect(dump.stdout.hasSuffix("COMMIT;\n"))

        let load = try litectl("load", folder.file("by-load.db"), "-", input: dump.stdoutBytes)
        #expect(load.status == 0 && load.stdout.isEmpty && load.stderr.isEmpty, "\(load.stderr)")
        #expect(try hash(folder.file("by-load.db")) == hash(db))
        let shell = try runProcess(sqlite3Binary, ["-batch", "-bail", folder.file("by-shell.db")], input: dump.stdoutBytes)
        #expect(shell.status == 0, "\(shell.stderr)")
        #expect(try hash(folder.file("by-shell.db")) == hash(db))

        for path in realDatabaseFiles {
            let out = folder.file((path as NSString).lastPathComponent + ".sql")
            let r = try litectl("dump", path, "-o", out)
            #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stderr)")
            let copy = out + ".db"
            #expect(try litectl("load", copy, out).status == 0)
            #expect(try hash(copy) == hash(path), "\(path)")
        }
    }

    @Test func aDamagedDatabaseIsExitTwoNamingTableAndRow() throws {
        let folder = try TemporaryFolder("cli-dump-damaged")
        let db = folder.file("d.db")
        try makeDatabase(db, """
            CREATE TABLE orders(id INTEGER PRIMARY KEY, note TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4286)
            INSERT INTO orders SELECT i, printf('order %d %.*c', i, 150, 'z') FROM n;
            """)
        let page = Int(try sqlite3Scalar(db, "SELECT pageno FROM dbstat WHERE name = 'orders' AND pagetype = 'leaf' ORDER BY pageno LIMIT 1 OFFSET 10"))!
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: db))
        try handle.seek(toOffset: UInt64((page - 1) * 4096))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
        try handle.close()

        // The sqlite3 shell's own .dump notes the damage in a comment and exits 0.
        let r = try litectl("dump", db)
        #expect(r.status == 2)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(r.stderr.hasPrefix("litectl: \(db): table \"orders\": row "))
        #expect(r.stderr.contains("could not be read (the row after rowid "))
        #expect(r.stderr.contains("litectl recover"))
        #expect(r.stdout.hasSuffix("ROLLBACK;\n"))
        let load = try litectl("load", folder.file("copy.db"), "-", input: r.stdoutBytes)
        #expect(load.status == 2 && load.stderr.contains("the script rolls back"))
        #expect(!FileManager.default.fileExists(atPath: folder.file("copy.db")))

        let file = try litectl("dump", db, "-o", folder.file("d.sql"))
        #expect(file.status == 2)
        let folderDump = try litectl("dump", db, "--format", "csv", "-o", folder.file("csv"))
        #expect(folderDump.status == 2)
        #expect(try folder.listing() == ["d.db"], "no file, no folder, no leftover")
    }

    /// A hostile file can store more than one statement in sqlite_schema
    /// (SQLite parses the first when it opens the file and ignores the rest):
    /// the sqlite3 shell's .dump writes the rest verbatim (the oracle below),
    /// so loading it would ATTACH (create) another file. litectl dump refuses
    /// such a file, naming the object, and litectl load refuses ATTACH.
    @Test func aStoredStatementWithATailIsRefusedAndLoadNeverAttaches() throws {
        let folder = try TemporaryFolder("cli-dump-hostile")
        let db = folder.file("h.db")
        let elsewhere = folder.file("elsewhere.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1); CREATE INDEX ix ON t(x);")
        try sqlite3(["-batch", db], input: """
            PRAGMA writable_schema=ON;
            UPDATE sqlite_schema SET sql = 'CREATE TABLE t(x);ATTACH ''\(elsewhere)'' AS e' WHERE name = 't';
            """)
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM t") == "1", "SQLite opens the file")
        let shellDump = try runProcess(sqlite3Binary, ["-batch", db, ".dump"])
        #expect(shellDump.stdout.contains("CREATE TABLE t(x);ATTACH '\(elsewhere)' AS e;"))

        for arguments in [["dump", db], ["dump", db, "--schema-only", "-o", folder.file("h.sql")],
                          ["dump", db, "--format", "csv", "-o", folder.file("csv")]] {
            let r = try runProcess(litectlBinary, arguments)
            #expect(r.status == 2, "\(arguments)")
            #expect(r.stderr == "litectl: \(db): the stored SQL of table \"t\" is not one statement (it holds more than one statement): not run; the file may be hostile\n",
                    "\(r.stderr)")
            #expect(!r.stdout.contains("ATTACH"))
        }
        // Into a new database and into an existing one: refused, nothing kept, no other file.
        for target in [folder.file("new.db"), folder.file("old.db")] {
            if target.hasSuffix("old.db") { try makeDatabase(target, "CREATE TABLE keep(k); INSERT INTO keep VALUES (7);") }
            let load = try litectl("load", target, "-", input: shellDump.stdoutBytes)
            #expect(load.status == 2)
            #expect(load.stderr.contains("ATTACH and DETACH are not allowed"), "\(load.stderr)")
            #expect(!FileManager.default.fileExists(atPath: elsewhere))
        }
        #expect(!FileManager.default.fileExists(atPath: folder.file("new.db")))
        #expect(try sqlite3Scalar(folder.file("old.db"), "SELECT group_concat(name) FROM sqlite_schema") == "keep")

        // A tail that is only a comment or blanks is one statement; an open
        // comment would swallow the rest of the script.
        #expect(SchemaStatement.problem("CREATE TABLE a(x) -- note") == nil)
        #expect(SchemaStatement.problem("CREATE TABLE a(x);  ") == nil)
        #expect(SchemaStatement.problem("CREATE TRIGGER r AFTER INSERT ON a BEGIN SELECT 1; SELECT 2; END") == nil)
        #expect(SchemaStatement.problem("CREATE TRIGGER r AFTER INSERT ON a BEGIN SELECT 1; END; DETACH x") != nil)
        #expect(SchemaStatement.problem("CREATE TABLE a(x) /* open") != nil)
        #expect(SchemaStatement.problem("CREATE TABLE a(';' ) ; VACUUM") != nil)
    }

    /// A load into an existing database runs with foreign keys off; a row it
    /// orphans fails it, even when it also fixes an old orphan (the count of
    /// foreign_key_check rows stays the same; the rows do not).
    @Test func aLoadThatOrphansARowFailsEvenWhenItFixesAnother() throws {
        let folder = try TemporaryFolder("cli-load-fk")
        let db = folder.file("fk.db")
        try makeDatabase(db, """
            CREATE TABLE parent(id INTEGER PRIMARY KEY);
            CREATE TABLE child(id INTEGER PRIMARY KEY, p REFERENCES parent(id));
            INSERT INTO parent VALUES (1);
            INSERT INTO child VALUES (1, 99), (2, 1);
            """)
        let before = try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check;")
        #expect(before == "child|1|parent|0\n")
        let fingerprint = try FileFingerprint(db)
        let swap = try litectl("load", db, "-", input: Array("INSERT INTO parent VALUES (99);\nINSERT INTO child VALUES (3, 77);\n".utf8))
        #expect(swap.status == 2)
        #expect(swap.stderr == "litectl: \(db): the load would leave 1 row without a parent (foreign_key_check: \"child\" rowid 3 -> \"parent\"); nothing was loaded\n",
                "\(swap.stderr)")
        #expect(try FileFingerprint(db) == fingerprint)
        #expect(try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check;") == before)

        // Rows that orphan nothing new load, with the old orphan left as it was.
        let fine = try litectl("load", db, "-", input: Array("INSERT INTO child VALUES (4, 1);\n".utf8))
        #expect(fine.status == 0, "\(fine.stderr)")
        #expect(try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check;") == before)
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM child") == "3")
    }

    /// --force swaps out a dump's folder and removes the old one file by file:
    /// a folder holding anything else (a subfolder, another file) is refused,
    /// so nothing is lost and no hidden folder stays beside it.
    @Test func forceReplacesOnlyADumpsFolder() throws {
        let folder = try TemporaryFolder("cli-dump-force-folder")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1);")
        let out = folder.file("out")
        #expect(try litectl("dump", db, "--format", "csv", "-o", out).status == 0)
        #expect(try litectl("dump", db, "--format", "jsonl", "-o", out, "--force").status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).sorted() == ["schema.sql", "t.jsonl"])
        #expect(try folder.listing() == ["a.db", "out"], "the old folder is gone")

        try FileManager.default.createDirectory(atPath: out + "/keep", withIntermediateDirectories: false)
        try "mine".write(toFile: out + "/keep/notes", atomically: false, encoding: .utf8)
        let refused = try litectl("dump", db, "--format", "csv", "-o", out, "--force")
        #expect(refused.status == 2)
        #expect(refused.stderr == "litectl: \(out): holds keep (not a plain file), which a dump does not write; not replaced (--force replaces only a dump's folder)\n",
                "\(refused.stderr)")
        #expect(try String(contentsOfFile: out + "/keep/notes", encoding: .utf8) == "mine")
        try FileManager.default.removeItem(atPath: out + "/keep")
        try "mine".write(toFile: out + "/notes.txt", atomically: false, encoding: .utf8)
        let other = try litectl("dump", db, "--format", "csv", "-o", out, "--force")
        #expect(other.status == 2 && other.stderr.contains("holds notes.txt, which a dump does not write"), "\(other.stderr)")
        #expect(try folder.listing() == ["a.db", "out"], "no hidden folder left")
    }

    /// A table name may hold a newline: the dump's comment about its rowids
    /// and the note on stderr keep it on one line (else the rest of the name
    /// would be SQL in the script).
    @Test func aNameWithANewlineStaysInItsComment() throws {
        let folder = try TemporaryFolder("cli-dump-newline")
        let db = folder.file("n.db")
        try makeDatabase(db, "CREATE TABLE \"x\nDROP TABLE keep;--\"(rowid, _rowid_, oid); INSERT INTO \"x\nDROP TABLE keep;--\" VALUES (1, 2, 3); CREATE TABLE keep(k); INSERT INTO keep VALUES (1);")
        let dump = try litectl("dump", db)
        #expect(dump.status == 0)
        #expect(dump.stderr.split(separator: "\n").count == 1, "\(dump.stderr)")
        let comments = dump.stdout.split(separator: "\n").filter { $0.hasPrefix("-- The rowids of ") }
        #expect(comments == ["-- The rowids of \"x DROP TABLE keep;--\" are not kept: its columns rowid, _rowid_ and oid hide them."])
        // The oracle: the shell runs the script, and keep is still there with its row.
        let shell = try runProcess(sqlite3Binary, ["-batch", "-bail", folder.file("copy.db")], input: dump.stdoutBytes)
        #expect(shell.status == 0, "\(shell.stderr)")
        #expect(try sqlite3Scalar(folder.file("copy.db"), "SELECT count(*) FROM keep") == "1")
    }

    /// A failed write on standard output names it (there is no path).
    @Test func aFailedWriteOnStandardOutputNamesIt() throws {
        let folder = try TemporaryFolder("cli-dump-full")
        let db = folder.file("f.db")
        try makeDatabase(db, "CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO t SELECT randomblob(100) FROM n;")
        let r = try runProcess("/bin/sh", ["-c", "exec \"$0\" dump \"$1\" > /dev/full", litectlBinary, db])
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("litectl: standard output: cannot write the dump: "), "\(r.stderr)")
    }

    @Test func outputFilesAndFoldersNeverReplaceWithoutForce() throws {
        let folder = try TemporaryFolder("cli-dump-output")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1.5), ('x'), (x'00');")
        try "old".write(toFile: folder.file("a.sql"), atomically: false, encoding: .utf8)
        let refused = try litectl("dump", db, "-o", folder.file("a.sql"))
        #expect(refused.status == 2)
        #expect(refused.stderr == "litectl: \(folder.file("a.sql")): already exists; not overwritten (--force replaces it)\n")
        #expect(try String(contentsOfFile: folder.file("a.sql"), encoding: .utf8) == "old")
        #expect(try litectl("dump", db, "-o", folder.file("a.sql"), "--force").status == 0)
        #expect(try String(contentsOfFile: folder.file("a.sql"), encoding: .utf8).contains("INSERT INTO \"t\"(rowid,\"a\") VALUES(3,x'00');"))

        let json = try litectl("dump", db, "--format", "jsonl", "-o", folder.file("rows"), "--json")
        #expect(json.status == 0, "\(json.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(report["rows"] as? Int == 3)
        #expect(try String(contentsOfFile: folder.file("rows/t.jsonl"), encoding: .utf8)
                == "{\"rowid\":1,\"a\":1.5}\n{\"rowid\":2,\"a\":\"x\"}\n{\"rowid\":3,\"a\":{\"blob\":\"00\"}}\n")
        let back = try litectl("load", folder.file("b.db"), folder.file("rows"), "-v")
        #expect(back.status == 0)
        #expect(back.stdout.hasPrefix("\(folder.file("b.db")) (new): "))
        #expect(try hash(folder.file("b.db")) == hash(db))

        let single = try litectl("load", folder.file("b.db"), folder.file("rows/t.jsonl"), "--table", "t", "--json")
        #expect(single.status == 2, "the rowids are taken")
        #expect(single.stderr.contains("t.jsonl:1: UNIQUE constraint failed"))

        #expect(try litectl("dump", db, "--format", "csv").status == 64)
        #expect(try litectl("dump", db, "--schema-only", "--data-only").status == 64)
        #expect(try litectl("dump", folder.file("nope.db")).stderr == "litectl: \(folder.file("nope.db")): no such file\n")
    }

    @Test func aKilledDumpLeavesOnlyWhatTheNextRemoves() throws {
        let work = try TemporaryFolder("cli-dump-kill-src")
        let db = work.file("big.db")
        try makeDatabase(db, """
            CREATE TABLE t(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<40000) INSERT INTO t SELECT randomblob(1000) FROM r;
            """)
        for (index, format) in ["sql", "csv"].enumerated() {
            let folder = try TemporaryFolder("cli-dump-kill-\(index)")
            let arguments = ["dump", db, "--format", format, "-o", folder.file("big")]
            var leftovers: [String] = []
            for _ in 0..<5 where leftovers.isEmpty {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: litectlBinary)
                process.arguments = arguments
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                while process.isRunning, try folder.listing().filter({ $0.contains(".tmp-") }).isEmpty { usleep(2_000) }
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                leftovers = try folder.listing().filter { $0.contains(".tmp-") }
            }
            #expect(!leftovers.isEmpty, "a killed dump left its hidden file or folder (the case to close)")
            #expect(try folder.listing().allSatisfy { $0.hasPrefix(".") }, "nothing under a final name")
            let r = try runProcess(litectlBinary, arguments)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try folder.listing().filter { $0.contains(".tmp-") }.isEmpty)
        }
    }
}
