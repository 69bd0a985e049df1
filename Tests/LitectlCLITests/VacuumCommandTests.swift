// `litectl vacuum` through the built binary: the report for people and for
// machines, -q, the dry run, --into with --force, and a killed --into that
// leaves only what the next run removes.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct VacuumCommandTests {
    let script = """
        CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
        INSERT INTO t SELECT i, printf('%.*c', 200, 'w') FROM n;
        DELETE FROM t WHERE id % 2 = 0;
        """

    @Test func reportsBeforeAndAfter() throws {
        let folder = try TemporaryFolder("cli-vacuum")
        let db = folder.file("v.db")
        try makeDatabase(db, script)
        let pages = Int(try sqlite3Scalar(db, "PRAGMA page_count"))!
        let free = Int(try sqlite3Scalar(db, "PRAGMA freelist_count"))!
        // On a pipe, as cron has it, a vacuum that worked says nothing (docs/output.md); -v says it.
        let r = try litectl("vacuum", "-v", db)
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines[0].hasPrefix("\(db): VACUUM in "))
        #expect(lines.contains { $0.hasPrefix("free pages") && $0.contains("\(free)") && $0.hasSuffix(" 0") })
        #expect(lines.contains { $0.hasPrefix("pages") && $0.contains("\(pages)") && $0.hasSuffix(" \(try! sqlite3Scalar(db, "PRAGMA page_count"))") })
        #expect(lines.last?.hasPrefix("gave back ") == true)

        try sqlite3(["-batch", db], input: "DELETE FROM t WHERE id % 3 = 0;")
        let json = try litectl("vacuum", db, "--json")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let before = try #require(report["before"] as? [String: Any]), after = try #require(report["after"] as? [String: Any])
        #expect(report["mode"] as? String == "vacuum")
        #expect((before["file_size"] as! Int) - (after["file_size"] as! Int) == report["reclaimed_bytes"] as? Int)
        #expect(after["freelist_pages"] as? Int == 0)

        let quiet = try litectl("vacuum", "-q", db)
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty)
    }

    /// Off a terminal a vacuum that worked prints nothing (so cron mails nothing),
    /// as every command that acts; its dry run still reports.
    @Test func silentOnAPipe() throws {
        let folder = try TemporaryFolder("cli-vacuum-pipe")
        let db = folder.file("v.db")
        try makeDatabase(db, script)
        let free = Int(try sqlite3Scalar(db, "PRAGMA freelist_count"))!
        #expect(free > 0)
        let r = try litectl("vacuum", db)
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stdout)\(r.stderr)")
        #expect(try sqlite3Scalar(db, "PRAGMA freelist_count") == "0", "the vacuum ran")
        let into = try litectl("vacuum", db, "--into", folder.file("c.db"))
        #expect(into.status == 0 && into.stdout.isEmpty, "\(into.stdout)")
        let dry = try litectl("vacuum", "--dry-run", db)
        #expect(dry.stdout.contains("dry run, nothing written"))
    }

    @Test func dryRunAndInto() throws {
        let folder = try TemporaryFolder("cli-vacuum-into")
        let db = folder.file("v.db")
        try makeDatabase(db, script)
        let before = try FileFingerprint(db)
        let dry = try litectl("vacuum", "--dry-run", "--json", db)
        #expect(dry.status == 0)
        let estimate = try #require(try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as? [String: Any])
        #expect(estimate["freelist_bytes"] as? Int == Int(try sqlite3Scalar(db, "PRAGMA freelist_count"))! * 4096)
        #expect((estimate["space"] as? [[String: Any]])?.allSatisfy { $0["enough"] as? Bool == true } == true)
        let text = try litectl("vacuum", "--dry-run", db)
        #expect(text.stdout.contains("dry run, nothing written") && text.stdout.contains("would give back"))
        #expect(try FileFingerprint(db) == before)

        let into = try litectl("vacuum", db, "--into", folder.file("c.db"), "--page-size", "1024")
        #expect(into.status == 0, "\(into.stderr)")
        #expect(try FileFingerprint(db) == before)
        #expect(try sqlite3Scalar(folder.file("c.db"), "PRAGMA page_size") == "1024")
        #expect(try litectl("hash", folder.file("c.db")).stdout.prefix(64) == litectl("hash", db).stdout.prefix(64))
        let again = try litectl("vacuum", db, "--into", folder.file("c.db"))
        #expect(again.status == 2 && again.stderr.contains("already exists; not overwritten (--force replaces it)"))
        #expect(try litectl("vacuum", db, "--into", folder.file("c.db"), "--force").status == 0)
        #expect(try sqlite3Scalar(folder.file("c.db"), "PRAGMA page_size") == "4096")

        #expect(try litectl("vacuum", db, "--page-size", "1000").status == 64)
        #expect(try litectl("vacuum", db, "--incremental", "5", "--into", "x.db").status == 64)
        let incremental = try litectl("vacuum", db, "--incremental", "5")
        #expect(incremental.status == 2 && incremental.stderr.contains("--incremental frees pages only with auto_vacuum=incremental"))
    }

    @Test func aKilledIntoLeavesOnlyWhatTheNextRemoves() throws {
        let folder = try TemporaryFolder("cli-vacuum-kill")
        let work = try TemporaryFolder("cli-vacuum-kill-src")
        let db = work.file("big.db")
        try makeDatabase(db, """
            CREATE TABLE t(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<60000) INSERT INTO t SELECT randomblob(1000) FROM r;
            """)
        let arguments = ["vacuum", db, "--into", folder.file("small.db")]
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
        #expect(!leftovers.isEmpty, "a killed run left its hidden file (the case to close)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("small.db")))
        let r = try runProcess(litectlBinary, arguments + ["-q"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try folder.listing() == ["small.db"])
        #expect(try sqlite3Scalar(folder.file("small.db"), "PRAGMA integrity_check") == "ok")
    }

    /// --into --force over the database itself (by name, a hard link or a
    /// symbolic link) would rename the copy over the live file; over a file
    /// with a -wal or -journal beside it, SQLite would replay those onto the
    /// copy. Both are refused with the file named, and nothing changes.
    @Test func intoRefusesTheDatabaseItselfAndALeftoverJournal() throws {
        let folder = try TemporaryFolder("cli-vacuum-into-self")
        let db = folder.file("v.db")
        try makeDatabase(db, script)
        try FileManager.default.linkItem(atPath: db, toPath: folder.file("hard.db"))
        try FileManager.default.createSymbolicLink(atPath: folder.file("soft.db"), withDestinationPath: db)
        let before = try FileFingerprint(db)
        for target in [db, folder.file("hard.db"), folder.file("soft.db")] {
            let r = try litectl("vacuum", db, "--into", target, "--force")
            #expect(r.status == 2 && r.stderr == "litectl: \(target): is the database being vacuumed itself (the same file); write to another file\n",
                    "\(r.stderr)")
        }
        #expect(try FileFingerprint(db) == before)
        #expect(try folder.listing().filter { $0.contains(".tmp-") }.isEmpty)

        // An old database in WAL mode whose WAL was left behind (a copy taken mid-write).
        let old = folder.file("old.db")
        try makeDatabase(old, "PRAGMA journal_mode=WAL; CREATE TABLE gone(x); INSERT INTO gone VALUES (1);")
        try Data("not really a WAL".utf8).write(to: URL(fileURLWithPath: old + "-wal"))
        for suffix in ["-wal", "-journal"] {
            if suffix == "-journal" {
                try FileManager.default.moveItem(atPath: old + "-wal", toPath: old + "-journal")
            }
            let oldBytes = try FileFingerprint(old)
            let r = try litectl("vacuum", db, "--into", old, "--force")
            #expect(r.status == 2 && r.stderr.contains("\(old): old.db\(suffix) exists beside it"), "\(r.stderr)")
            #expect(try FileFingerprint(old) == oldBytes)
        }
    }
}
