// `litectl prune` while `replicate --dir` follows databases that commit
// without pause: the prune gets in (it waits with its exclusive lock in
// place and the fleet lets its shared lock go for it), the fleet goes on
// shipping after it, and every database's latest moment equals the source
// (litectl hash of `repo:NAME@latest`) in a repository that verifies.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct ReplicatePruneUnderLoadTests {
    let fleet = ReplicateFleetTests()

    @Test func aPruneGetsInUnderAFleetThatNeverPausesAndTheFleetGoesOn() throws {
        let folder = try TemporaryFolder("fleet-prune")
        let dir = folder.file("dbs"), repo = folder.file("repo")
        let count = 6
        try fleet.python(folder, ["make", dir, String(count)])
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let log = folder.file("events.log")
        let process = try FollowerProcess(["--dir", dir, "--repo", repo, "--interval", "0.2"], events: log)
        #expect(waitUntil(60) { fleet.events(log).filter { $0["event"] as? String == "started" }.count >= count }, "following")
        let databases = (0..<count).map { dir + ($0 % 6 == 5 ? "/sub" : "") + String(format: "/t%04d.db", $0) }
        // Every database commits every 20 ms for 30 s: units of several databases overlap.
        let writer = try Child("/usr/bin/python3", ["-c", """
            import sqlite3, sys, time
            cs = [sqlite3.connect(p, isolation_level=None) for p in sys.argv[1:]]
            end = time.time() + 30
            n = 0
            while time.time() < end:
                for c in cs:
                    c.execute("INSERT INTO t(v) VALUES (?)", ("load %d" % n,))
                n += 1
                time.sleep(0.02)
            """] + databases, output: folder.file("writer.log"))
        Thread.sleep(forTimeInterval: 8)
        let prune = try runLitectl(["prune", "--timeout", "20", "--json", "--repo", repo])
        #expect(prune.status == 0, "prune under load: \(prune.stderr)")
        #expect(writer.isRunning, "the prune ran while the databases still committed")
        _ = writer.wait()
        // Each database's last commit ships after the prune.
        for db in databases {
            let source = try runLitectl(["hash", db])
            #expect(source.status == 0, "\(source.stderr)")
            let name = (db as NSString).lastPathComponent
            #expect(waitUntil(30) {
                let r = (try? runLitectl(["hash", "repo:\(name)@latest", "--repo", repo])) ?? ProcessResult(status: 2, stdout: "", stderr: "", stdoutBytes: [])
                return r.status == 0 && r.stdout.split(separator: " ").first == source.stdout.split(separator: " ").first
            }, "\(name): the latest moment equals the source after the prune")
        }
        #expect(process.stop() == 0)
        let verify = try runLitectl(["verify", "--repo", repo, "--read-data"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
    }
}
