// `litectl replicate` beside what else may run against the same database and
// repository: a second follower of one database, started a few seconds after
// the first (a unit restarted while the old process lingers), by another name
// of the database and another path to the repository, is refused naming the
// first; a follower killed with SIGKILL, or one on another host whose lease
// ran out, is taken over; a chain damaged beyond reading leaves snapshots,
// forget, prune and restore of the other databases alone; and the
// application's -wal stays as small as without a follower, on the defaults,
// under a writer that relies on SQLite's automatic checkpoint.
import Foundation
import Testing
import LitectlCore
import TestSupport

extension ReplicateCommandTests {
    /// Whether the events file holds a `started` event (the follower holds its lease and follows).
    func started(_ events: String, count: Int = 1) -> Bool {
        ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").components(separatedBy: "\"event\":\"started\"").count > count
    }

    /// litectl as a child that a litectl without the refusal would never end:
    /// its exit status within `seconds` (nil: it was still running, and was
    /// killed), and what it printed (stdout and stderr).
    func runBounded(_ arguments: [String], seconds: Double, output: String) throws -> (status: Int32?, output: String) {
        let child = try Child(litectlBinary, arguments, env: ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"],
                              output: output)
        let ended = waitUntil(seconds) { !child.isRunning }
        if !ended { child.signal(SIGKILL) }
        let status = child.wait()
        return (ended ? status : nil, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    /// A lease object as another follower would have written it (plain repository, folder).
    func writeLease(_ repo: String, path: String, pid: Int32, bootID: String, time: Double, since: Double) throws {
        let json = "{\"hostname\":\"\(RepoLock.hostname)\",\"path\":\"\(path)\",\"pid\":\(pid),\"boot_id\":\"\(bootID)\",\"pid_namespace\":\"pid:[1]\",\"process_start\":1,\"since_unix\":\(since),\"time_unix\":\(time),\"lease_seconds\":30,\"command\":\"replicate\"}"
        try FileManager.default.createDirectory(atPath: repo + "/followers", withIntermediateDirectories: true)
        let name = (0..<64).map { _ in String("0123456789abcdef".randomElement()!) }.joined()
        try json.write(toFile: repo + "/followers/" + name, atomically: true, encoding: .utf8)
    }

    @Test(arguments: RepoPlace.allCases)
    func aSecondFollowerOfADatabaseIsRefusedNamingTheFirst(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("replicate-second")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let events = folder.file("events.log")
        let first = try FollowerProcess([db, "--repo", repo.url] + repo.options, events: events)
        #expect(waitUntil(60) { started(events) }, "the first follower started")
        let writer = try startWriter(db, log: logPath, ["--seconds", "6"])
        Thread.sleep(forTimeInterval: 2)
        // The same database by another name; a folder repository by another path.
        let otherRepo = place == .folder ? folder.path + "/./repo" : repo.url
        let second = try runBounded(["replicate", folder.path + "/./app.db", "--repo", otherRepo] + repo.options + ["--timeout", "2"],
                                    seconds: 30, output: folder.file("second.log"))
        #expect(second.status == 2, "the second follower is refused: \(second.output)")
        let lines = second.output.split(separator: "\n").filter { $0.hasPrefix("litectl: ") && $0.contains("already followed") }
        #expect(lines.count == 1, "\(second.output)")
        #expect(second.output.contains("\(BackupJob.resolvedPath(db)) is already followed into this repository by replicate (pid \(first.child.pid) on \(RepoLock.hostname), since 20"),
                "it names the running one: \(second.output)")
        #expect(writer.wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(first.stop() == 0)
        // The first follower's chain is whole, every moment restorable.
        let verify = try repo.run(["verify", "--read-data"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        let ranges = try repo.run(["snapshots", "--ranges", "--json"])
        #expect(ranges.status == 0 && ranges.stdout.split(separator: "\n").count == 1, "one range: \(ranges.stdout) \(ranges.stderr)")
        try checkMoments(repo, log: try WriterLog(logPath), count: 3, folder: folder, seed: 11)
        // Its lease went with it: a follower starts at once.
        let third = try FollowerProcess([db, "--repo", repo.url] + repo.options + ["--timeout", "0"], events: folder.file("third.log"))
        #expect(waitUntil(60) { started(folder.file("third.log")) }, "\((try? String(contentsOfFile: folder.file("third.log"), encoding: .utf8)) ?? "")")
        #expect(third.stop() == 0)
    }

    @Test func aStaleLeaseIsTakenOver() throws {
        let folder = try TemporaryFolder("replicate-stale")
        let repo = folder.file("repo")
        let (db, logPath) = try makeApp(folder)
        let path = BackupJob.resolvedPath(db)
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        // A follower killed with SIGKILL leaves its lease; the next one, on this host, finds its process gone.
        let killed = try FollowerProcess([db, "--repo", repo], events: folder.file("killed.log"))
        #expect(waitUntil(60) { started(folder.file("killed.log")) })
        let writer = try startWriter(db, log: logPath, ["--seconds", "4"])
        Thread.sleep(forTimeInterval: 1.5)
        let pid = killed.child.pid
        killed.kill9()
        #expect(try FileManager.default.contentsOfDirectory(atPath: repo + "/followers").count == 1, "the killed follower's lease is left")
        let events = folder.file("events.log")
        let next = try FollowerProcess([db, "--repo", repo, "--timeout", "0"], events: events)
        #expect(waitUntil(60) { started(events) }, "\((try? String(contentsOfFile: events, encoding: .utf8)) ?? "")")
        #expect(writer.wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(next.stop() == 0)
        let seen = try self.events(events)
        #expect(seen.contains { ($0["message"] as? String ?? "").contains("took over the lease of replicate (pid \(pid) on \(RepoLock.hostname)") && ($0["message"] as? String ?? "").contains("is gone") },
                "\(seen.filter { $0["event"] as? String == "problem" })")
        #expect(seen.contains { $0["event"] as? String == "started" && $0["how"] as? String == "resumed" }, "it continued the killed one's chain")
        #expect(try FileManager.default.contentsOfDirectory(atPath: repo + "/followers").isEmpty, "a stop removes its lease")
        try checkMoments(TestRepo(url: repo, options: []), log: try WriterLog(logPath), count: 3, folder: folder, seed: 12)

        // Leases of a follower elsewhere (same host name, another boot: another
        // machine, or this one before a reboot): its age alone decides.
        try writeLease(repo, path: path, pid: 4242, bootID: "another-boot", time: Date().timeIntervalSince1970, since: Date().timeIntervalSince1970 - 60)
        var r = try runBounded(["replicate", db, "--repo", repo, "--timeout", "1"], seconds: 30, output: folder.file("fresh.log"))
        #expect(r.status == 2 && r.output.contains("is already followed into this repository by replicate (pid 4242 on \(RepoLock.hostname), since "),
                "a fresh lease holds: \(r.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: repo + "/followers").count == 1, "the refused follower leaves no lease")
        // Renewed 40 s ago, 30 s long: taken over; and `unlock` would have removed it.
        for name in try FileManager.default.contentsOfDirectory(atPath: repo + "/followers") { try FileManager.default.removeItem(atPath: repo + "/followers/" + name) }
        try writeLease(repo, path: path, pid: 4242, bootID: "another-boot", time: Date().timeIntervalSince1970 - 40, since: Date().timeIntervalSince1970 - 100)
        // (And one written by a clock a day ahead, or a hostile hand: it would otherwise hold for ever.
        // The SIGKILLed follower's stale shared lock, if any, is removed too: only leases are counted.)
        try writeLease(repo, path: path, pid: 4243, bootID: "another-boot", time: Date().timeIntervalSince1970 + 86400, since: Date().timeIntervalSince1970)
        let unlock = try runLitectl(["unlock", "--repo", repo, "--json"])
        #expect(unlock.status == 0 && unlock.stdout.split(separator: "\n").filter { $0.contains("\"followers/") && $0.contains("\"removed\":true") }.count == 2
                && unlock.stdout.contains("not renewed for") && unlock.stdout.contains("ahead of this host's clock"), "\(unlock.stdout) \(unlock.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: repo + "/followers").isEmpty)
        try writeLease(repo, path: path, pid: 4242, bootID: "another-boot", time: Date().timeIntervalSince1970 - 40, since: Date().timeIntervalSince1970 - 100)
        let last = folder.file("last.log")
        let taking = try FollowerProcess([db, "--repo", repo, "--timeout", "0"], events: last)
        #expect(waitUntil(60) { started(last) }, "\((try? String(contentsOfFile: last, encoding: .utf8)) ?? "")")
        #expect(taking.stop() == 0)
        #expect(try String(contentsOfFile: last, encoding: .utf8).contains("took over the lease of replicate (pid 4242 on \(RepoLock.hostname)"))
        // A lease of another database, or of the same path on another host, is no conflict.
        try writeLease(repo, path: path + "-other", pid: 4242, bootID: "another-boot", time: Date().timeIntervalSince1970, since: Date().timeIntervalSince1970)
        r = try runBounded(["replicate", db, "--repo", repo, "--timeout", "0"], seconds: 4, output: folder.file("other.log"))
        #expect(r.status == nil, "it follows: \(r.output)")
    }

    @Test func aDamagedChainOfOneDatabaseLeavesTheOthersAlone() throws {
        let folder = try TemporaryFolder("replicate-damaged-one")
        let repo = TestRepo(url: folder.file("repo"), options: [])
        let (db, logPath) = try makeApp(folder)
        let other = folder.file("other.db"), otherLog = folder.file("other.log")
        #expect(try startWriter(other, log: otherLog, ["--commits", "1", "--initial-rows", "200"]).wait() == 0)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        // Both followed; each written to.
        let follower = try FollowerProcess([db, other, "--repo", repo.url], events: folder.file("events.log"))
        #expect(try startWriter(db, log: logPath, ["--commits", "120"]).wait() == 0)
        #expect(try startWriter(other, log: otherLog, ["--commits", "60"]).wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(follower.stop() == 0)
        // app.db's chain damaged beyond reading: a byte of one of its segments flipped.
        let repository = try Repository.open(FolderStore(path: repo.url), secret: nil)
        let bases = Repository.chainBases(try repository.snapshots().snapshots)
        let damaged = try #require(bases.first { $0.database == "app.db" && FileManager.default.fileExists(atPath: repo.url + "/segments/" + $0.id) },
                                   "app.db's chain has segments: \(bases.map { "\($0.database) \($0.id)" })")
        let segments = try FileManager.default.contentsOfDirectory(atPath: repo.url + "/segments/" + damaged.id).filter { !$0.hasPrefix(".") }.sorted()
        let victim = repo.url + "/segments/" + damaged.id + "/" + segments[0]
        var bytes = try Data(contentsOf: URL(fileURLWithPath: victim))
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: victim))
        // Followed again, app.db starts a new chain (the damaged one is older now).
        let again = try FollowerProcess([db, "--repo", repo.url], events: folder.file("again.log"))
        #expect(waitUntil(60) { started(folder.file("again.log")) })
        #expect(try startWriter(db, log: logPath, ["--commits", "30"]).wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(again.stop() == 0)
        let short = String(damaged.id.prefix(8))
        func oneLine(_ stderr: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let lines = stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("chain \(short) of app.db (\(BackupJob.resolvedPath(db)) on ") && lines[0].contains("damaged segment"),
                    "one line names the database and the cause: \(stderr)", sourceLocation: sourceLocation)
        }
        // snapshots: the other database's range and app.db's new chain are listed.
        var r = try repo.run(["snapshots"])
        #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
        oneLine(r.stderr)
        #expect(r.stdout.contains("other.db") && r.stdout.contains("RESTORABLE"), "\(r.stdout)")
        r = try repo.run(["snapshots", "--json"])
        #expect(r.status == 1)
        let objects = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == bases.count + 1, "every snapshot listed: \(objects.count)")
        #expect(objects.first { $0["id"] as? String == damaged.id }?["chain_damaged"] as? String != nil)
        #expect(objects.filter { $0["chain_damaged"] != nil }.count == 1)
        r = try repo.run(["snapshots", "--ranges", "--json"])
        #expect(r.status == 1 && r.stdout.contains("\"database\":\"other.db\"") && r.stdout.contains("\"database\":\"app.db\""), "\(r.stdout)")
        // forget: the damaged chain is kept (its last moment is unknown), the rest decided.
        r = try repo.run(["forget", "--keep-within", "1d", "--json"])
        #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
        oneLine(r.stderr)
        #expect(r.stdout.contains("\"damaged_chains\":[{\"chain\":\"\(damaged.id)\""), "\(r.stdout)")
        r = try repo.run(["forget", "--keep-within", "1s"])
        #expect(r.status == 1 && r.stderr.contains("; kept"), "\(r.stderr)")
        // prune: done, the damaged chain reported.
        r = try repo.run(["prune", "--json"])
        #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
        oneLine(r.stderr)
        #expect(r.stdout.contains("\"damaged_chains\":[{\"chain\":\"\(damaged.id)\""), "\(r.stdout)")
        // restore of the other database (and of app.db's new chain) succeeds, exactly.
        r = try repo.run(["restore", "latest", "--db", "other.db", folder.file("other-restored.db")])
        #expect(r.status == 0, "\(r.stderr)")
        let otherWriter = try WriterLog(otherLog)
        #expect(try digest(folder.file("other-restored.db")) == (otherWriter.last, otherWriter.commits[otherWriter.last]!.digest))
        r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("app-restored.db")])
        #expect(r.status == 0, "\(r.stderr)")
        let appWriter = try WriterLog(logPath)
        #expect(try digest(folder.file("app-restored.db")) == (appWriter.last, appWriter.commits[appWriter.last]!.digest))
        r = try repo.run(["verify"])
        #expect(r.status == 1 && r.stdout.contains(short), "verify still names it: \(r.stdout)")
    }

    /// Issue 37: a writer committing 2 KB rows every 2 ms that relies on
    /// SQLite's automatic checkpoint: with `replicate` on its defaults its
    /// -wal stays within twice its size without a follower (it grew without
    /// bound: 51 MB in 15 s), and every commit is still restorable.
    @Test func keepsTheApplicationsWALBoundedOnItsDefaults() throws {
        let folder = try TemporaryFolder("replicate-bounded")
        let repo = TestRepo(url: folder.file("repo"), options: [])
        let load = ["--seconds", "8", "--every-ms", "2", "--payload-bytes", "2048"]
        // Without a follower.
        let alone = folder.file("alone.db"), aloneLog = folder.file("alone.log")
        #expect(try startWriter(alone, log: aloneLog, ["--commits", "1", "--initial-rows", "300"]).wait() == 0)
        #expect(try startWriter(alone, log: aloneLog, load).wait() == 0)
        let without = try #require(try WriterLog(aloneLog).walPeak)
        // With one, on its defaults.
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", repo.url], events: events)
        #expect(waitUntil(60) { started(events) })
        #expect(try startWriter(db, log: logPath, load).wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(follower.stop() == 0)
        let log = try WriterLog(logPath)
        let with = try #require(log.walPeak)
        #expect(without > 0 && with <= 2 * without && with <= 64_000_000, "the -wal peaked at \(with) bytes with the follower, \(without) without")
        #expect(log.errors.isEmpty, "\(log.errors)")
        let seen = try self.events(events)
        #expect(!seen.contains { $0["event"] as? String == "resync" }, "the -wal restarted at the follower's states, never past them")
        let (states, _) = try checkChains(repo)
        #expect(states > 0)
        try checkMoments(repo, log: log, count: 4, folder: folder, seed: 13)
    }

    /// A follower that cannot keep up (here: the store refuses everything for
    /// 10 s, the queue's bound made 1 MB) lets its read mark go, so that the
    /// application's -wal restarts as it would without it, and resyncs once
    /// the store takes what waited: every commit is still restorable.
    @Test func aFollowerThatCannotKeepUpLetsItsMarkGo() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("replicate-stall")
        let bucket = try server.makeBucket()
        let url = "s3://\(bucket)/repo"
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint]).status == 0)
        var proxy = try FaultProxy(upstream: server, arguments: [])
        let port = proxy.port
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", url, "--endpoint", proxy.endpoint], events: events,
                                           env: ["LITECTL_REPLICATE_QUEUE_BYTES": "1000000"])
        #expect(waitUntil(60) { started(events) })
        let writer = try startWriter(db, log: logPath, ["--seconds", "14", "--every-ms", "2", "--payload-bytes", "2048"])
        Thread.sleep(forTimeInterval: 2)
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "1"], port: port)
        Thread.sleep(forTimeInterval: 10)
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: [], port: port)
        #expect(writer.wait() == 0)
        Thread.sleep(forTimeInterval: 3)
        #expect(follower.stop() == 0, "everything shipped once the store came back")
        let log = try WriterLog(logPath)
        #expect(log.errors.isEmpty, "\(log.errors)")
        let seen = try self.events(events)
        #expect(seen.contains { ($0["message"] as? String ?? "").contains("the read mark is let go") },
                "\(seen.filter { $0["event"] as? String == "problem" }.prefix(3))")
        #expect(seen.contains { $0["event"] as? String == "resync" }, "the -wal restarted while no mark was held: a resync")
        // The outage held nothing of the application's: its -wal stayed about as it is without a follower (4.2 MB).
        #expect(try #require(log.walPeak) <= 12_000_000, "the -wal peaked at \(log.walPeak ?? 0) bytes")
        let repo = TestRepo(url: url, options: ["--endpoint", server.endpoint])
        try checkMoments(repo, log: log, count: 6, folder: folder, seed: 14)
        #expect(try repo.run(["verify", "--read-data"]).status == 0)
        _ = proxy
    }
}
