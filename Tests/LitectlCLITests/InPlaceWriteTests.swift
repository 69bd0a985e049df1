// How restore --force and vacuum replace a database no other process has
// open (a copy renamed over it, with its owner, group and mode) and write into
// one that is open (one transaction; the other process sees the new content),
// and how they first roll back a journal a killed writer left. The signal and
// full-disk cases of every in-place write are FaultInjectionTests'.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct InPlaceWriteTests {
    func inode(_ path: String) throws -> UInt64 {
        try (FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
    }

    func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// A rollback-journal database of `rows` rows.
    func makeTarget(_ path: String, rows: Int = 2000, salt: String = "old") throws {
        try makeDatabase(path, """
            CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT, b BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < \(rows))
              INSERT INTO t SELECT i, '\(salt)-' || i, zeroblob(500) FROM r;
            """)
    }

    @Test func restoreRenamesWhenNobodyHasTheTargetOpenAndWritesInPlaceWhenSomebodyDoes() throws {
        let folder = try TemporaryFolder("inplace-restore")
        let source = folder.file("source.db")
        try makeTarget(source, salt: "new")
        try makeDatabase(source, "CREATE TABLE extra(x); INSERT INTO extra VALUES (1);")
        #expect(try litectl("backup", source, folder.file("backup.db")).status == 0)
        let target = folder.file("target.db")
        try makeTarget(target)
        chmod(target, 0o640)
        let root = geteuid() == 0
        if root { chown(target, 65534, 65534) }

        // Nobody has it open: a copy renamed over it, owner, group and mode kept.
        let before = try inode(target)
        let renamed = try litectl("restore", "--force", "--no-keep", "--json", folder.file("backup.db"), target)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        #expect(try json(renamed.stdout)["in_place_because"] is NSNull)
        #expect(try inode(target) != before, "replaced by a rename")
        let attributes = try FileManager.default.attributesOfItem(atPath: target)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o640)
        if root {
            #expect((attributes[.ownerAccountID] as? NSNumber)?.intValue == 65534)
            #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.intValue == 65534)
        }
        #expect(try sqlite3Scalar(target, "SELECT count(*) FROM extra") == "1")
        #expect(try litectl("hash", target).stdout.prefix(64) == (try litectl("hash", source)).stdout.prefix(64))

        // Another process has it open: in place, and that process sees the new content.
        try makeDatabase(target, "DROP TABLE extra; UPDATE t SET v = 'changed';")
        let shell = try ShellSession(target)
        defer { shell.close() }
        #expect(shell.run("SELECT count(*) FROM sqlite_schema WHERE name = 'extra';").contains("0"))
        let held = try inode(target)
        let inPlace = try litectl("restore", "--force", "--no-keep", "--json", folder.file("backup.db"), target)
        #expect(inPlace.status == 0, "\(inPlace.stderr)")
        let why = try json(inPlace.stdout)["in_place_because"] as? String
        #expect(why?.contains("sqlite3") == true && why?.contains("has it open") == true, "\(inPlace.stdout)")
        #expect(try inode(target) == held, "written in place")
        #expect(shell.run("SELECT count(*) FROM extra;").contains("1"), "the other process sees the restored content")

        // --in-place even when nobody has it open.
        shell.close()
        let asked = try litectl("restore", "--force", "--no-keep", "--in-place", "-v", folder.file("backup.db"), target)
        #expect(asked.status == 0, "\(asked.stderr)")
        #expect(asked.stdout.contains("in place, in one transaction (asked to (--in-place))"), "\(asked.stdout)")
        #expect(try inode(target) == held)
        #expect(try litectl("restore", "--in-place", folder.file("backup.db"), folder.file("new.db")).status == 64, "--in-place needs --force")
    }

    @Test func vacuumRenamesWhenNobodyHasTheDatabaseOpen() throws {
        let folder = try TemporaryFolder("inplace-vacuum")
        let db = folder.file("v.db")
        try makeDatabase(db, """
            CREATE TABLE u(a, b);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 3000) INSERT INTO u SELECT i, zeroblob(300) FROM r;
            DELETE FROM u WHERE a % 3 = 0;
            """)
        chmod(db, 0o600)
        let hash = try litectl("hash", db).stdout
        let rowids = try sqlite3Scalar(db, "SELECT group_concat(rowid) FROM u")
        let before = try inode(db)
        let renamed = try litectl("vacuum", "--json", db)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        let report = try json(renamed.stdout)
        #expect(report["in_place_because"] is NSNull)
        #expect((report["rowids_may_change"] as? [Any])?.isEmpty == true)
        #expect(try inode(db) != before)
        #expect((try FileManager.default.attributesOfItem(atPath: db)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try litectl("hash", db).stdout == hash)
        #expect(try sqlite3Scalar(db, "SELECT group_concat(rowid) FROM u") == rowids, "VACUUM INTO keeps rowids")
        #expect(try sqlite3Scalar(db, "PRAGMA freelist_count") == "0")

        try makeDatabase(db, "DELETE FROM u WHERE a % 5 = 0;")
        let shell = try ShellSession(db)
        defer { shell.close() }
        _ = shell.run("SELECT count(*) FROM u;")
        let held = try inode(db)
        let inPlace = try litectl("vacuum", "--json", db)
        #expect(inPlace.status == 0, "\(inPlace.stderr)")
        let why = try json(inPlace.stdout)["in_place_because"] as? String
        #expect(why?.contains("has it open") == true, "\(inPlace.stdout)")
        #expect(try inode(db) == held)
        #expect(try sqlite3Scalar(db, "PRAGMA freelist_count") == "0")
        #expect(try litectl("vacuum", "--in-place", "--into", folder.file("x.db"), db).status == 64)

        // Extended attributes (an ACL, a security label) would not pass to a new
        // file: such a database is vacuumed in place (where the file system has them).
        shell.close()
        let labelled = try runProcess("/usr/bin/python3", ["-c", "import os, sys; os.setxattr(sys.argv[1], 'user.litectl-test', b'1')", db])
        if labelled.status == 0 {
            let kept = try litectl("vacuum", "--json", db)
            #expect(kept.status == 0, "\(kept.stderr)")
            #expect((try json(kept.stdout)["in_place_because"] as? String)?.contains("extended attributes") == true, "\(kept.stdout)")
            #expect(try inode(db) == held)
        }
    }

    /// A sqlite3 shell killed inside a write transaction whose pages spilled
    /// into the file: the journal it leaves is hot.
    func leaveHotJournal(_ db: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: sqlite3Binary)
        process.arguments = ["-batch", db]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data("PRAGMA cache_size=5;\nBEGIN;\nUPDATE t SET v = 'half-written', b = zeroblob(900);\n".utf8))
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let size = try? FileManager.default.attributesOfItem(atPath: db + "-journal")[.size] as? NSNumber, size.intValue > 100_000 { break }
            usleep(2_000)
        }
        usleep(200_000)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    @Test(arguments: ["file", "repo"])
    func aJournalAKilledWriterLeftIsRolledBackBeforeARestoreReadsTheTarget(_ kind: String) throws {
        let folder = try TemporaryFolder("inplace-hot")
        let source = folder.file("source.db")
        try makeTarget(source, salt: "new")
        let target = folder.file("target.db")
        try makeTarget(target)
        let committed = try litectl("hash", target).stdout.prefix(64)
        try leaveHotJournal(target)
        let header = try #require(FileManager.default.contents(atPath: target + "-journal"))
        #expect(header.prefix(8).contains { $0 != 0 }, "the journal is hot")
        var arguments: [String]
        if kind == "file" {
            #expect(try litectl("backup", source, folder.file("backup.db")).status == 0)
            arguments = ["restore", "--force", folder.file("backup.db"), target]
        } else {
            #expect(try litectl("repo", "init", folder.file("repo")).status == 0)
            #expect(try litectl("backup", source, "--repo", folder.file("repo")).status == 0)
            arguments = ["restore", "--repo", folder.file("repo"), "latest", "--force", target]
        }
        let restored = try runProcess(litectlBinary, arguments)
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try litectl("hash", target).stdout.prefix(64) == (try litectl("hash", source)).stdout.prefix(64))
        // The old content kept is the last committed one, not the half-written pages.
        let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0.hasPrefix("target.db.before-restore-") && $0.hasSuffix(".json") == false }
        #expect(kept.count == 1)
        #expect(try litectl("hash", folder.file(try #require(kept.first))).stdout.prefix(64) == committed)
        #expect(!FileManager.default.fileExists(atPath: target + "-journal"))
        #expect(try litectl("check", target).status == 0)
    }
}
