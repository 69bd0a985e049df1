// `litectl replicate --dir` as a fleet rather than many followers: the first
// copies of many new databases written in shared rounds (one pack and one
// index object for several databases), each database's moments across
// those rounds and the commits after them equal to the source (`litectl
// hash` of `repo:NAME@WHEN`, and the sqlite3 CLI's .dump of `restore
// --at`); one shared repository lock for every database's units; a
// database whose slices cannot ship while its -wal grows raises
// litectl_replicate_stalled; and a folder of the tree swapped for a
// symbolic link to another folder is never followed.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct ReplicateFleetRoundTests {
    let fleet = ReplicateFleetTests()
    let replicate = ReplicateCommandTests()

    /// Files under `repo/sub`.
    func files(_ repo: String, _ sub: String) -> [String] {
        var out: [String] = []
        let e = FileManager.default.enumerator(atPath: repo + "/" + sub)
        while let name = e?.nextObject() as? String {
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: repo + "/" + sub + "/" + name, isDirectory: &isDir), !isDir.boolValue { out.append(name) }
        }
        return out
    }

    func hash(_ arguments: [String]) throws -> String {
        let r = try runLitectl(["hash"] + arguments)
        #expect(r.status == 0, "hash \(arguments): \(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    static func iso(_ time: Double) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: time))
    }

    @Test func firstCopiesShareRoundsAndEveryMomentRestoresExactly() throws {
        let folder = try TemporaryFolder("fleet-rounds")
        let dir = folder.file("dbs"), repo = folder.file("repo")
        let count = 12
        try fleet.python(folder, ["make", dir, String(count)])
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let log = folder.file("events.log")
        // Every database's first copy at once: 8 workers, shared rounds.
        let process = try FollowerProcess(["--dir", dir, "--repo", repo], events: log)
        func started() -> Int { fleet.events(log).filter { $0["event"] as? String == "started" }.count }
        #expect(waitUntil(120) { started() >= count }, "every database started: \(started()) of \(count)")
        let bases = files(repo, "index").count
        #expect(bases >= 1 && bases <= count / 2, "\(count) first copies in \(bases) index objects (shared rounds), not one each")

        // Three rounds of commits: after each, every database's state saved
        // (sqlite3 .backup) with the time, once shipped.
        let databases = (0..<count).map { dir + ($0 % 6 == 5 ? "/sub" : "") + String(format: "/t%04d.db", $0) }
        var moments: [(time: Double, copies: [String])] = []
        // The time before any commit: the first copies.
        var copies: [String] = []
        for (i, db) in databases.enumerated() {
            let copy = folder.file("m0-\(i).db")
            #expect(try runProcess("/usr/bin/sqlite3", [db, ".backup '\(copy)'"]).status == 0)
            copies.append(copy)
        }
        moments.append((Date().timeIntervalSince1970, copies))
        var maxLocks = 0
        for round in 1...3 {
            let shippedBefore = databases.map { fleet.shippedStates(log, $0) }
            for db in databases { try fleet.python(folder, ["commit", db, "round \(round) of \(db)", String(repeating: "x", count: 900 * round)]) }
            var all = false
            let end = Date().addingTimeInterval(30)
            while Date() < end && !all {
                // (One shared lock for every database's units: never several at once.)
                maxLocks = max(maxLocks, files(repo, "locks").count)
                all = zip(databases, shippedBefore).allSatisfy { fleet.shippedStates(log, $0) > $1 }
                Thread.sleep(forTimeInterval: 0.02)
            }
            #expect(all, "round \(round) shipped for every database")
            Thread.sleep(forTimeInterval: 0.2)
            copies = []
            for (i, db) in databases.enumerated() {
                let copy = folder.file("m\(round)-\(i).db")
                #expect(try runProcess("/usr/bin/sqlite3", [db, ".backup '\(copy)'"]).status == 0)
                copies.append(copy)
            }
            moments.append((Date().timeIntervalSince1970, copies))
            Thread.sleep(forTimeInterval: 0.3)
        }
        #expect(maxLocks <= 1, "\(maxLocks) repository locks at once (the fleet holds one for all)")
        #expect(process.stop() == 0)

        for (k, moment) in moments.enumerated() {
            for (i, db) in databases.enumerated() {
                let name = (db as NSString).lastPathComponent
                let when = Self.iso(moment.time)
                #expect(try hash(["repo:\(name)@\(when)", "--repo", repo]) == hash([moment.copies[i]]), "\(name) at moment \(k)")
                let target = folder.file("r\(k)-\(i).db")
                let r = try runLitectl(["restore", "--repo", repo, "latest", "--db", name, "--at", when, target])
                #expect(r.status == 0, "\(r.stderr)")
                let want = try runProcess("/usr/bin/sqlite3", [moment.copies[i], ".dump"]).stdout
                let got = try runProcess("/usr/bin/sqlite3", [target, ".dump"]).stdout
                #expect(!want.isEmpty && got == want, "\(name) restored at moment \(k)")
            }
        }
        let verify = try runLitectl(["verify", "--repo", repo])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
    }

    @Test func aFolderSwappedForASymbolicLinkIsNotFollowed() throws {
        let folder = try TemporaryFolder("fleet-swap")
        let dir = folder.file("dbs"), repo = folder.file("repo"), outside = folder.file("outside")
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let db = dir + "/sub/app.db", secret = outside + "/app.db"
        try fleet.python(folder, ["new", db])
        try fleet.python(folder, ["new", secret])
        try fleet.python(folder, ["commit", secret, "SECRET outside the tree"])
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let log = folder.file("events.log")
        let process = try FollowerProcess(["--dir", dir, "--repo", repo], events: log)
        #expect(waitUntil(60) { fleet.events(log).contains { $0["event"] as? String == "started" && $0["database"] as? String == db } })
        try fleet.python(folder, ["commit", db, "mine"])
        #expect(waitUntil(10) { fleet.shippedStates(log, db) >= 1 }, "its commit shipped")
        Thread.sleep(forTimeInterval: 1)
        // The folder swapped for a link to another folder holding a database of the same name.
        #expect(rename(dir + "/sub", folder.file("sub-away")) == 0)
        #expect(symlink(outside, dir + "/sub") == 0)
        for i in 0..<6 {
            try fleet.python(folder, ["commit", secret, "SECRET \(i)"])
            Thread.sleep(forTimeInterval: 1)
        }
        // (Its exit status says whether everything shipped: the refused database did not.)
        _ = process.stop()
        let problems = fleet.events(log).filter { $0["event"] as? String == "problem" && $0["database"] as? String == db }
            .compactMap { $0["message"] as? String }
        #expect(problems.contains { $0.contains("not followed") }, "said: \(problems)")
        // Nothing of the other folder's database is in the repository: the latest state is the tree's own.
        let target = folder.file("restored.db")
        let r = try runLitectl(["restore", "--repo", repo, "latest", "--db", "app.db", target])
        #expect(r.status == 0, "\(r.stderr)")
        let dump = try runProcess("/usr/bin/sqlite3", [target, ".dump"]).stdout
        #expect(dump.contains("mine") && !dump.contains("SECRET"), "\(dump)")
        #expect(dump == (try runProcess("/usr/bin/sqlite3", [folder.file("sub-away/app.db"), ".dump"]).stdout))
        let listed = try runLitectl(["snapshots", "--repo", repo, "--json"])
        #expect(!listed.stdout.contains(outside), "no snapshot of the outside file")
        let chains = try Repository.chainBases(Repository.open(FolderStore(path: repo), secret: nil).snapshots().snapshots)
        #expect(chains.count == 1, "one chain: \(chains.count)")
    }

    @Test func aDatabaseThatCannotShipWhileItsWALGrowsIsStalled() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("fleet-stalled")
        let dir = folder.file("dbs")
        try fleet.python(folder, ["make", dir, "3"])
        let db = dir + "/t0001.db"
        let url = "s3://\(try server.makeBucket())/repo"
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint]).status == 0)
        var proxy = try FaultProxy(upstream: server, arguments: [])
        let port = proxy.port
        let metrics = folder.file("replicate.prom"), log = folder.file("events.log")
        let process = try FollowerProcess(["--dir", dir, "--repo", url, "--endpoint", proxy.endpoint, "--metrics-file", metrics], events: log)
        let series = "litectl_replicate_stalled{database=\"\(BackupJob.resolvedPath(db))\"}"
        func text() -> String { (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "" }
        #expect(waitUntil(60) { fleet.events(log).filter { $0["event"] as? String == "started" }.count >= 3 }, "following")
        #expect(waitUntil(15) { text().contains(series + " 0") }, "\(text())")
        let writer = try Child("/usr/bin/python3", ["-c", """
            import sqlite3, time
            c = sqlite3.connect('\(db)', isolation_level=None)
            end = time.time() + 150
            while time.time() < end:
                c.execute("INSERT INTO t(v) VALUES ('more')")
                time.sleep(0.05)
            """], output: folder.file("writer.log"))
        Thread.sleep(forTimeInterval: 1)
        // The repository refuses everything: nothing ships while the -wal grows.
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "1"], port: port)
        #expect(waitUntil(30) { text().contains(series + " 1") }, "stalled within 3 intervals and a metrics write: \(text())")
        let said = fleet.events(log).filter { $0["event"] as? String == "problem" && $0["database"] as? String == db }.compactMap { $0["message"] as? String }
        #expect(said.contains { $0.contains("stalled: no progress") }, "said: \(said.suffix(5))")
        // Back: it ships, and is no longer stalled.
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: [], port: port)
        #expect(waitUntil(100) { text().contains(series + " 0") }, "progress again: \(text())")
        #expect(fleet.events(log).contains { ($0["message"] as? String ?? "").contains("making progress again") })
        writer.signal(SIGTERM)
        _ = writer.wait()
        #expect(process.stop() == 0)
        _ = proxy
    }
}
