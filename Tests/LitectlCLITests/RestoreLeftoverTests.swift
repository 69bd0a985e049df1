// A restore killed with SIGKILL leaves its hidden temporary file beside the
// target; the next restore of that target removes it (and nothing else).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RestoreLeftoverTests {
    func killWhenTemporaryFileAppears(_ arguments: [String], folder: TemporaryFolder) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", litectlBinary] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        var seen: [String] = []
        while Date() < deadline && process.isRunning {
            seen = try folder.listing().filter { $0.contains(".tmp-") && !$0.hasPrefix(".other") }
            if !seen.isEmpty { break }
            usleep(2_000)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return try folder.listing().filter { $0.contains(".tmp-") && !$0.hasPrefix(".other") }
    }

    @Test(arguments: ["file", "repo"])
    func theNextRestoreRemovesWhatAKilledOneLeft(_ kind: String) throws {
        let folder = try TemporaryFolder("leftover")
        let work = try TemporaryFolder("leftover-src")
        let db = work.file("big.db")
        try makeDatabase(db, """
            CREATE TABLE t(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<60000) INSERT INTO t SELECT randomblob(1000) FROM r;
            """)
        let target = folder.file("app.db")
        try makeDatabase(target, "CREATE TABLE old(x); INSERT INTO old VALUES (1);")
        let bystander = folder.file(".other.db.tmp-1-1")
        FileManager.default.createFile(atPath: bystander, contents: Data("not ours".utf8))
        var source: [String]
        if kind == "file" {
            #expect(try litectl("backup", db, work.file("big-backup.db")).status == 0)
            source = ["restore", "--force", work.file("big-backup.db"), target]
        } else {
            #expect(try litectl("repo", "init", work.file("repo")).status == 0)
            #expect(try litectl("backup", db, "--repo", work.file("repo")).status == 0)
            source = ["restore", "--repo", work.file("repo"), "latest", "--force", target]
        }
        var leftovers: [String] = []
        for _ in 0..<5 where leftovers.isEmpty {
            leftovers = try killWhenTemporaryFileAppears(source, folder: folder)
        }
        #expect(!leftovers.isEmpty, "a killed restore left its temporary file (the case to close)")
        let r = try runProcess(litectlBinary, source)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try folder.listing().filter { $0.contains(".tmp-") } == [".other.db.tmp-1-1"], "only the bystander is left")
        #expect(try sqlite3Scalar(target, "SELECT count(*) FROM t") == "60000")
        #expect(try sqlite3Scalar(target, "PRAGMA integrity_check") == "ok")
    }
}
