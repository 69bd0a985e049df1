// What `litectl replicate` notices besides commits: a database replaced under
// it (another file moved over it; deleted and created again; copied over it
// in place) ends the chain
// and starts a new one within an interval, said without -v, so that a restore
// a second after the switch is the new file (compared with `litectl hash`
// and the sqlite3 CLI); and a follower whose repository refuses everything
// while the application commits is said to be stalled, and
// litectl_replicate_stalled is 1 in the metrics file until it ships again.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct ReplicateWatchTests {
    let replicate = ReplicateCommandTests()

    func sql(_ db: String, _ statements: String) throws -> String {
        let r = try runProcess("/usr/bin/sqlite3", ["-cmd", ".timeout 5000", db, statements])
        #expect(r.status == 0, "sqlite3 \(statements): \(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The logical hash litectl gives a database.
    func hash(_ db: String) throws -> String {
        let r = try runLitectl(["hash", db])
        #expect(r.status == 0, "\(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    func chainBases(_ repo: String) throws -> [Snapshot] {
        let repository = try Repository.open(FolderStore(path: repo), secret: nil)
        return Repository.chainBases(try repository.snapshots().snapshots).sorted { $0.time < $1.time }
    }

    /// A followed database (no -v: what is said is said at the default level), its
    /// first chain started and a commit shipped; `replace` switches the file
    /// and returns when; then a restore a second after must be the new file.
    func replaced(_ name: String, said saying: String = "the database file was replaced",
                  replace: (_ db: String, _ folder: TemporaryFolder) throws -> Void) throws {
        let folder = try TemporaryFolder(name)
        let db = folder.file("app.db"), repo = folder.file("repo"), log = folder.file("replicate.log")
        _ = try sql(db, "PRAGMA journal_mode=wal; CREATE TABLE old(x); INSERT INTO old VALUES ('old 1');")
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let follower = try Child(litectlBinary, ["replicate", db, "--repo", repo], output: log)
        #expect(waitUntil(60) { ((try? chainBases(repo)) ?? []).count == 1 }, "the first chain started")
        _ = try sql(db, "INSERT INTO old VALUES ('old 2');")
        Thread.sleep(forTimeInterval: 1.5)
        try replace(db, folder)
        let switched = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: 2.5)
        follower.signal(SIGTERM)
        #expect(follower.wait() == 0)
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(said.contains(saying) && said.contains("a new chain starts"), "said without -v: \(said)")
        let bases = try chainBases(repo)
        #expect(bases.count == 2 && bases.last?.replica?.follows == nil, "a new chain, not continuing the old one: \(bases.count)")
        for at in [switched + 1, switched + 2] {
            let target = folder.file("at.db")
            try? FileManager.default.removeItem(atPath: target)
            let r = try runLitectl(["restore", "--repo", repo, "latest", "--db", "app.db", "--at", String(format: "%.6f", at), target])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try hash(target) == hash(db), "a restore \(at - switched) s after the switch is the new file")
            #expect(try sql(target, "SELECT group_concat(y) FROM new") == sql(db, "SELECT group_concat(y) FROM new"))
        }
    }

    @Test func aDatabaseMovedOverTheFollowedOneStartsANewChainWithinAnInterval() throws {
        try replaced("replicate-moved") { db, folder in
            // The old file's -wal emptied (the new file must not meet its frames), then another database moved over it.
            #expect(try sql(db, "PRAGMA wal_checkpoint(TRUNCATE);") == "0|0|0")
            let other = folder.file("other.db")
            _ = try sql(other, "PRAGMA journal_mode=wal; CREATE TABLE new(y); INSERT INTO new VALUES ('new 1');")
            #expect(try runProcess("/bin/mv", ["-f", other, db]).status == 0)
            _ = try sql(db, "INSERT INTO new VALUES ('new 2');")
        }
    }

    @Test func aDatabaseCopiedOverTheFollowedOneInPlaceStartsANewChainWithinAnInterval() throws {
        // `cp` writes into the same inode: only the file's page 1 tells.
        try replaced("replicate-copied", said: "the database file was written over in place") { db, folder in
            #expect(try sql(db, "PRAGMA wal_checkpoint(TRUNCATE);") == "0|0|0")
            Thread.sleep(forTimeInterval: 1.5)  // the follower's mark at the empty -wal
            let other = folder.file("other.db")
            // As many pages as the old file (2), so that SQLite's view through the kept -shm stays sound.
            _ = try sql(other, "PRAGMA journal_mode=wal; CREATE TABLE new(y); INSERT INTO new VALUES ('new 1');")
            #expect(try sql(other, "PRAGMA page_count") == sql(db, "PRAGMA page_count"))
            #expect(try runProcess("/bin/cp", [other, db]).status == 0)
            _ = try sql(db, "INSERT INTO new VALUES ('new 2');")
        }
    }

    @Test func aDatabaseDeletedAndCreatedAgainStartsANewChainWithinAnInterval() throws {
        try replaced("replicate-recreated") { db, _ in
            for f in [db, db + "-wal", db + "-shm"] { try? FileManager.default.removeItem(atPath: f) }
            _ = try sql(db, "PRAGMA journal_mode=wal; CREATE TABLE new(y); INSERT INTO new VALUES ('new 1'); INSERT INTO new VALUES ('new 2');")
        }
    }

    @Test func aFollowerThatCannotShipWhileTheWALGrowsIsStalled() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("replicate-stalled")
        let url = "s3://\(try server.makeBucket())/repo"
        let (db, logPath) = try replicate.makeApp(folder)
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint]).status == 0)
        var proxy = try FaultProxy(upstream: server, arguments: [])
        let port = proxy.port
        let metrics = folder.file("replicate.prom"), log = folder.file("replicate.log")
        let follower = try Child(litectlBinary, ["replicate", db, "--repo", url, "--endpoint", proxy.endpoint, "--metrics-file", metrics],
                                 env: ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"], output: log)
        let series = "litectl_replicate_stalled{database=\"\(BackupJob.resolvedPath(db))\"}"
        func text() -> String { (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "" }
        #expect(waitUntil(60) { ((try? runLitectl(["snapshots", "--json", "--repo", url, "--endpoint", server.endpoint]))?.stdout ?? "").contains("\"replica\"") },
                "following: its first chain started")
        Thread.sleep(forTimeInterval: 1.5)
        #expect(text().contains(series + " 0"), "\(text())")
        let writer = try replicate.startWriter(db, log: logPath, ["--seconds", "12", "--every-ms", "50"])
        Thread.sleep(forTimeInterval: 1)
        // The repository refuses everything: nothing ships while the -wal grows.
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "1"], port: port)
        #expect(waitUntil(10) { text().contains(series + " 1") }, "stalled within 3 intervals and one look: \(text())")
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(said.contains("stalled: no progress"), "said without -v: \(said)")
        // Back: it ships, and is no longer stalled.
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: [], port: port)
        #expect(waitUntil(45) { text().contains(series + " 0") }, "progress again: \(text())")
        #expect(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("making progress again"))
        #expect(writer.wait() == 0)
        follower.signal(SIGTERM)
        #expect(follower.wait() == 0)
        _ = proxy
    }
}
