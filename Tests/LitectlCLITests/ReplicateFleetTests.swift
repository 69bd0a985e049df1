// `litectl replicate --dir`: a folder of a few hundred WAL databases followed
// by one process with a bounded number of threads; a database created after
// the start picked up within 10 s, one deleted dropped (and said), idle ones
// costing the repository nothing, commits across a dormant spell and a
// -wal restart restored exactly (checked with the sqlite3 CLI's .dump); a
// single-database follower refused under the fleet's lease; and a hostile
// tree (FIFOs, symbolic link loops, a link out of the folder, junk files,
// names with newlines and escape bytes) neither hangs nor crashes it.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct ReplicateFleetTests {
    /// The databases' application: `make DIR N` (N WAL databases, some in
    /// sub/), `new DB`, `commit DB TEXT...` (one commit per text), `restart
    /// DB A B` (A committed, a TRUNCATE checkpoint, B committed, one connection).
    static let script = """
        import os, sqlite3, sys
        def open_wal(path):
            c = sqlite3.connect(path, isolation_level=None)
            c.execute("PRAGMA journal_mode=wal")
            return c
        def new(path, rows):
            c = open_wal(path)
            c.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT)")
            for i in range(rows):
                c.execute("INSERT INTO t(v) VALUES (?)", ("row %d of %s" % (i, os.path.basename(path)),))
            c.close()
        cmd = sys.argv[1]
        if cmd == "make":
            d, n = sys.argv[2], int(sys.argv[3])
            os.makedirs(os.path.join(d, "sub"), exist_ok=True)
            for i in range(n):
                new(os.path.join(d, "sub" if i % 6 == 5 else "", "t%04d.db" % i), 3)
        elif cmd == "new":
            new(sys.argv[2], 5)
        elif cmd == "commit":
            c = open_wal(sys.argv[2])
            for text in sys.argv[3:]:
                c.execute("INSERT INTO t(v) VALUES (?)", (text,))
            c.close()
        elif cmd == "restart":
            c = open_wal(sys.argv[2])
            c.execute("INSERT INTO t(v) VALUES (?)", (sys.argv[3],))
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            c.execute("INSERT INTO t(v) VALUES (?)", (sys.argv[4],))
            c.close()
        """

    func python(_ folder: TemporaryFolder, _ arguments: [String]) throws {
        let script = folder.file("app.py")
        if !FileManager.default.fileExists(atPath: script) { try Self.script.write(toFile: script, atomically: true, encoding: .utf8) }
        let r = try runProcess("/usr/bin/python3", [script] + arguments)
        #expect(r.status == 0, "\(arguments): \(r.stderr)")
    }

    func events(_ path: String) -> [[String: Any]] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func threadCount(_ pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Threads:") {
            return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// The repository's files but the leases (rewritten in place) and locks.
    func objects(_ repo: String) -> Set<String> {
        var out = Set<String>()
        let e = FileManager.default.enumerator(atPath: repo)
        while let name = e?.nextObject() as? String {
            if name.hasPrefix("followers") || name.hasPrefix("locks") { continue }
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: repo + "/" + name, isDirectory: &isDir), !isDir.boolValue { out.insert(name) }
        }
        return out
    }

    /// The newest state of database `name` restored, and its .dump compared with the source's (the sqlite3 CLI's).
    func restoresExactly(_ repo: String, name: String, source: String, into target: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try runLitectl(["restore", "--repo", repo, "latest", "--db", name, target])
        #expect(r.status == 0, "\(r.stderr)", sourceLocation: sourceLocation)
        let want = try runProcess("/usr/bin/sqlite3", [source, ".dump"]).stdout
        let got = try runProcess("/usr/bin/sqlite3", [target, ".dump"]).stdout
        #expect(!want.isEmpty && got == want, "\(name) restored as it is", sourceLocation: sourceLocation)
        #expect(try sqlite3Scalar(target, "PRAGMA integrity_check") == "ok", sourceLocation: sourceLocation)
    }

    func shippedStates(_ log: String, _ db: String) -> Int {
        events(log).filter { $0["event"] as? String == "shipped" && $0["database"] as? String == db }
            .reduce(0) { $0 + (($1["states"] as? [Any])?.count ?? 0) }
    }

    @Test func followsAFolderOfDatabasesWithBoundedThreads() throws {
        let folder = try TemporaryFolder("fleet")
        let dir = folder.file("dbs"), repo = folder.file("repo")
        let count = 300
        try python(folder, ["make", dir, String(count)])
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let log = folder.file("events.log")
        let fleet = try FollowerProcess(["--dir", dir, "--watch", "--repo", repo], events: log)
        func started() -> Int { events(log).filter { $0["event"] as? String == "started" }.count }
        #expect(waitUntil(240) { started() >= count }, "every database started: \(started()) of \(count)")
        // A bounded number of threads, far below one per database.
        let threads = try #require(threadCount(fleet.child.pid))
        #expect(threads <= 40, "\(threads) threads for \(count) databases")

        // Idle: not one object written in 8 s (the folder's lease aside, rewritten in place).
        Thread.sleep(forTimeInterval: 2)
        let before = objects(repo)
        Thread.sleep(forTimeInterval: 8)
        #expect(objects(repo) == before, "idle databases write nothing: \(objects(repo).subtracting(before).sorted().prefix(5))")

        // A database followed already is refused to a single follower (the folder's lease covers it).
        let single = try runLitectl(["replicate", dir + "/t0001.db", "--repo", repo, "--timeout", "1"])
        #expect(single.status == 2 && single.stderr.contains("already followed into this repository by replicate --dir"), "\(single.stderr)")

        // A database created after the start: followed within 10 s, and its commits restore.
        let created = Date()
        let newDB = dir + "/sub/new.db"
        try python(folder, ["new", newDB])
        #expect(waitUntil(15) { events(log).contains { $0["event"] as? String == "started" && $0["database"] as? String == newDB } },
                "the new database is followed")
        #expect(Date().timeIntervalSince(created) <= 12, "within 10 s (and a look)")
        try python(folder, ["commit", newDB, "one", "two", "three"])
        #expect(waitUntil(10) { shippedStates(log, newDB) >= 1 }, "its commit shipped")
        Thread.sleep(forTimeInterval: 1)
        try restoresExactly(repo, name: "new.db", source: newDB, into: folder.file("new-restored.db"))

        // A database that went dormant (marks let go) and woke across a -wal restart: exact.
        let sleeper = dir + "/t0007.db"
        try python(folder, ["commit", sleeper, "before"])
        #expect(waitUntil(10) { shippedStates(log, sleeper) >= 1 })
        Thread.sleep(forTimeInterval: 3)
        try python(folder, ["restart", sleeper, "after restart A", "after restart B"])
        let shipped = shippedStates(log, sleeper)
        #expect(waitUntil(10) { shippedStates(log, sleeper) > shipped }, "the commits after the restart shipped")
        Thread.sleep(forTimeInterval: 1)
        try restoresExactly(repo, name: "t0007.db", source: sleeper, into: folder.file("t0007-restored.db"))

        // A database deleted: dropped, and said.
        let doomed = dir + "/t0100.db"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: doomed + suffix) }
        #expect(waitUntil(15) { events(log).contains { $0["event"] as? String == "note" && $0["database"] as? String == doomed
            && ($0["message"] as? String ?? "").contains("no longer there") } }, "the deleted database is dropped")

        #expect(fleet.stop() == 0)
        let verify = try runLitectl(["verify", "--repo", repo])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
    }

    @Test func aHostileTreeNeitherHangsNorCrashesIt() throws {
        let folder = try TemporaryFolder("fleet-hostile")
        let dir = folder.file("dbs"), repo = folder.file("repo")
        try FileManager.default.createDirectory(atPath: dir + "/deep", withIntermediateDirectories: true)
        try python(folder, ["new", dir + "/good.db"])
        let evil = dir + "/evil\n\u{1b}[31m.db"
        try python(folder, ["new", evil])
        try python(folder, ["new", folder.file("outside.db")])
        #expect(mkfifo(dir + "/fifo.db", 0o644) == 0)
        #expect(symlink(".", dir + "/deep/loop") == 0)
        #expect(symlink(dir + "/b", dir + "/a.db") == 0 && symlink(dir + "/a.db", dir + "/b") == 0)
        #expect(symlink(folder.file("outside.db"), dir + "/outside.db") == 0)
        #expect(symlink(folder.path, dir + "/deep/up") == 0)
        for i in 0..<2000 { FileManager.default.createFile(atPath: dir + "/junk-\(i).db", contents: Data((0..<64).map { UInt8(($0 * 7 + i) & 0xFF) })) }
        FileManager.default.createFile(atPath: dir + "/empty.db", contents: Data())
        _ = try sqlite3Scalar(dir + "/journal.db", "CREATE TABLE t(x); SELECT 1")
        #expect(try runLitectl(["repo", "init", repo]).status == 0)

        let output = folder.file("out.log")
        let child = try Child(litectlBinary, ["replicate", "--dir", dir, "--watch", "--repo", repo, "-v"], output: output)
        Thread.sleep(forTimeInterval: 8)
        #expect(child.isRunning, "still running")
        child.signal(SIGTERM)
        let ended = waitUntil(60) { !child.isRunning }
        if !ended { child.signal(SIGKILL) }
        #expect(ended && child.wait() == 0)
        let text = try String(contentsOfFile: output, encoding: .utf8)
        #expect(!text.contains("\u{1b}"), "no raw escape byte reaches the terminal")
        #expect(text.contains("following 2 databases"), "good.db and the oddly named one: \(text.prefix(2000))")
        #expect(text.contains("evil\\n\\x1b[31m.db"), "the odd name escaped: \(text.prefix(2000))")
        #expect(!text.contains("outside.db: new chain") && !text.contains("fifo.db: new chain"))
        // The repository holds exactly those two databases.
        let listed = try runLitectl(["snapshots", "--repo", repo, "--json"])
        #expect(listed.status == 0)
        #expect(listed.stdout.contains("good.db") && !listed.stdout.contains("outside.db") && !listed.stdout.contains("journal.db"))
    }
}
