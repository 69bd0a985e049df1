// The repository commands through the built binary, against a folder
// repository and a real S3 API server on loopback (moto), judged by
// independent tools: `litectl hash` against the source database, the sqlite3
// CLI's integrity_check and an invariant a concurrent writer keeps, the AWS CLI
// reading what litectl wrote; and SIGKILL at random moments of backup and prune.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// Where a test's repository lives.
enum RepoPlace: String, CaseIterable, CustomStringConvertible, Sendable {
    case folder, s3
    var description: String { rawValue }
}

/// One test's repository: its URL and the options every command needs.
struct TestRepo {
    let url: String
    let options: [String]

    /// A new, empty repository location (a fresh bucket on S3); nil when S3 is not available here.
    static func make(_ place: RepoPlace, in folder: TemporaryFolder, name: String = "repo") throws -> TestRepo? {
        switch place {
        case .folder:
            return TestRepo(url: folder.file(name), options: [])
        case .s3:
            guard let server = MotoServer.shared else { return nil }
            let bucket = try server.makeBucket()
            return TestRepo(url: "s3://\(bucket)/\(name)", options: ["--endpoint", server.endpoint])
        }
    }

    func run(_ arguments: [String], env: [String: String] = [:]) throws -> ProcessResult {
        try runLitectl(arguments + ["--repo", url] + options, env: env)
    }
}

/// The same credentials for a shell line (moto accepts any).
let shellS3Env = "export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"

/// Runs litectl with S3 test credentials (moto accepts any) in its environment.
func runLitectl(_ arguments: [String], env: [String: String] = [:]) throws -> ProcessResult {
    var all = ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"]
    all.merge(env) { $1 }
    return try runProcess("/usr/bin/env", all.map { "\($0)=\($1)" } + [litectlBinary] + arguments)
}

@Suite(.serialized) struct RepoCommandTests {
    func makeApp(_ path: String, rows: Int = 20_000) throws {
        try makeDatabase(path, """
            PRAGMA journal_mode=wal;
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL, data BLOB);
            CREATE INDEX item_name ON item(name);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<\(rows))
            INSERT INTO item SELECT i, 'item-' || i, i * 0.25, randomblob(i % 300) FROM r;
            """)
    }

    func hash(_ db: String) throws -> String {
        let r = try litectl("hash", db)
        #expect(r.status == 0, "\(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    func snapshotsJSON(_ repo: TestRepo, _ extra: [String] = []) throws -> [[String: Any]] {
        let r = try repo.run(["snapshots", "--json"] + extra)
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    @Test(arguments: RepoPlace.allCases)
    func backupListRestoreVerifyForgetPrune(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let app = folder.file("app.db"), jobs = folder.file("jobs.sqlite")
        try makeApp(app)
        try makeDatabase(jobs, "CREATE TABLE job(id INTEGER PRIMARY KEY, state TEXT); INSERT INTO job(state) VALUES ('new'), ('done'), (NULL);")

        var r = try runLitectl(["repo", "init", repo.url] + repo.options)
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stderr)")
        r = try runLitectl(["repo", "init", repo.url] + repo.options)
        #expect(r.status == 2 && r.stderr.contains("already a repository"))

        // Silent on success (stdout is not a terminal here), one snapshot per database.
        r = try repo.run(["backup", app, jobs, "--tag", "first"])
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stdout) \(r.stderr)")
        let appHash1 = try hash(app)
        _ = try sqlite3([app, "UPDATE item SET price = price + 1 WHERE id % 500 = 0; DELETE FROM item WHERE id % 777 = 0;"])
        let appHash2 = try hash(app)
        r = try repo.run(["backup", app, "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let pagesRead = report["pages_read"] as? Int ?? 0, pagesNew = report["pages_new"] as? Int ?? -1
        #expect(pagesNew > 0 && pagesNew < pagesRead / 4, "an incremental backup stores only changed pages: \(pagesNew) of \(pagesRead)")

        let all = try snapshotsJSON(repo)
        #expect(all.count == 3)
        #expect(try snapshotsJSON(repo, ["app.db"]).count == 2)
        #expect(try snapshotsJSON(repo, ["--tag", "first"]).count == 2)
        let text = try repo.run(["snapshots"])
        #expect(text.stdout.hasPrefix("ID") && text.stdout.contains("jobs.sqlite") && text.stdout.contains("first"))

        // Restore: latest of a database, by id prefix, and --at; each equals the source as it was.
        r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("latest.db")])
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stderr)")
        #expect(try hash(folder.file("latest.db")) == appHash2)
        #expect(try sqlite3Scalar(folder.file("latest.db"), "PRAGMA integrity_check") == "ok")
        let firstApp = try #require(all.first { $0["database"] as? String == "app.db" })
        let firstID = try #require(firstApp["id"] as? String)
        r = try repo.run(["restore", String(firstID.prefix(10)), folder.file("first.db")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(folder.file("first.db")) == appHash1)
        #expect(try hash(folder.file("first.db")) == firstApp["logical_hash"] as? String)
        r = try repo.run(["restore", "latest", "--db", "app.db", "--at", firstApp["time"] as! String, folder.file("at.db")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(folder.file("at.db")) == appHash1)
        // latest is ambiguous across databases; an existing target needs --force and keeps the old content.
        r = try repo.run(["restore", "latest", folder.file("x.db")])
        #expect(r.status == 2 && r.stderr.contains("--db"))
        r = try repo.run(["restore", "latest", "--db", "jobs.sqlite", folder.file("latest.db")])
        #expect(r.status == 2 && r.stderr.contains("already exists"))
        r = try repo.run(["restore", "latest", "--db", "jobs.sqlite", "--force", "-v", folder.file("latest.db")])
        #expect(r.status == 0 && r.stdout.contains("kept the old content"), "\(r.stderr)")
        #expect(try sqlite3Scalar(folder.file("latest.db"), "SELECT count(*) FROM job") == "3")
        #expect(try folder.listing().contains { $0.hasPrefix("latest.db.before-restore-") })

        r = try repo.run(["verify", "--read-data"])
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stdout) \(r.stderr)")

        // Retention: keep the newest snapshot of each database, then prune.
        r = try repo.run(["forget", "--keep-last", "1", "--dry-run"])
        #expect(r.status == 0 && r.stdout.contains("would remove snapshot \(firstID.prefix(8))"))
        #expect(try snapshotsJSON(repo).count == 3)
        r = try repo.run(["forget", "--keep-last", "1", "--prune", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try snapshotsJSON(repo).count == 2)
        r = try repo.run(["verify", "--read-data", "--json"])
        #expect(r.status == 0 && r.stdout.contains("\"ok\":true"), "\(r.stdout) \(r.stderr)")
        r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("after-prune.db")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(folder.file("after-prune.db")) == appHash2)
    }

    @Test(arguments: RepoPlace.allCases)
    func aCorruptPackIsNamedWithTheSnapshotsItDamages(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let app = folder.file("app.db")
        try makeApp(app, rows: 5000)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        #expect(try repo.run(["backup", app]).status == 0)
        let snapshot = try #require(try snapshotsJSON(repo).first?["id"] as? String)
        // Flip bytes in the middle of a pack, in place (same size).
        let pack = try #require(try RepoObjects(repo).keys(prefix: "packs/").first)
        var bytes = try RepoObjects(repo).get(pack)
        for i in stride(from: bytes.count / 3, to: bytes.count / 3 + 64, by: 1) { bytes[i] ^= 0x5a }
        try RepoObjects(repo).put(pack, bytes)
        var r = try repo.run(["verify"])
        #expect(r.status == 0, "without --read-data only presence and sizes are checked: \(r.stdout)")
        r = try repo.run(["verify", "--read-data"])
        #expect(r.status == 1, "\(r.stdout) \(r.stderr)")
        #expect(r.stdout.contains(String(pack.split(separator: "/").last!)) && r.stdout.contains(String(snapshot.prefix(8))), "\(r.stdout)")
        r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("out.db")])
        #expect(r.status == 2 && r.stderr.contains("damaged"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("out.db")))
        #expect(try folder.listing().allSatisfy { !$0.contains(".tmp-") }, "no temporary file left")
    }

    @Test func encryptedRepositoryNeedsItsKey() throws {
        let folder = try TemporaryFolder("repo-cli")
        let repo = try #require(try TestRepo.make(.folder, in: folder))
        let app = folder.file("app.db")
        try makeApp(app, rows: 2000)
        let key = folder.file("repo.key")
        var r = try runLitectl(["repo", "init", repo.url, "--key-file", key])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int == 0o600)
        r = try repo.run(["backup", app, "--key-file", key])
        #expect(r.status == 0, "\(r.stderr)")
        r = try repo.run(["snapshots"])
        #expect(r.status == 2 && r.stderr.contains("encrypted") && r.stderr.split(separator: "\n").count == 1)
        try Data((0..<32).map { UInt8($0) }).write(to: URL(fileURLWithPath: folder.file("wrong.key")))
        r = try repo.run(["snapshots", "--key-file", folder.file("wrong.key")])
        #expect(r.status == 2 && r.stderr.contains("wrong key"))
        r = try repo.run(["restore", "latest", "--key-file", key, folder.file("out.db")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(folder.file("out.db")) == (try hash(app)))
        // Passphrase repositories: LITECTL_PASSPHRASE.
        let repo2 = TestRepo(url: folder.file("repo2"), options: [])
        r = try runLitectl(["repo", "init", repo2.url], env: ["LITECTL_PASSPHRASE": "correct horse"])
        #expect(r.status == 0, "\(r.stderr)")
        r = try repo2.run(["backup", app], env: ["LITECTL_PASSPHRASE": "correct horse"])
        #expect(r.status == 0, "\(r.stderr)")
        r = try repo2.run(["snapshots"], env: ["LITECTL_PASSPHRASE": "wrong horse"])
        #expect(r.status == 2 && r.stderr.contains("wrong key"))
    }

    /// Restore of a snapshot taken while a writer commits every few ms: the
    /// accounts still total 1,000,000 and integrity_check passes.
    @Test(arguments: RepoPlace.allCases)
    func snapshotUnderAWriterIsConsistent(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let bank = folder.file("bank.db")
        try makeDatabase(bank, """
            PRAGMA journal_mode=wal;
            CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<1000) INSERT INTO acct SELECT i, 1000 FROM r;
            CREATE TABLE log(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<20000) INSERT INTO log SELECT randomblob(300) FROM r;
            """)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let script = folder.file("writer.py"), stop = folder.file("stop")
        try """
            import sqlite3, sys, random, os, time
            c = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
            rnd = random.Random(7)
            while not os.path.exists(sys.argv[2]):
                a, b, amt = rnd.randrange(1, 1001), rnd.randrange(1, 1001), rnd.randrange(1, 100)
                c.execute("BEGIN IMMEDIATE")
                c.execute("UPDATE acct SET bal = bal - ? WHERE id = ?", (amt, a))
                c.execute("UPDATE acct SET bal = bal + ? WHERE id = ?", (amt, b))
                c.execute("INSERT INTO log(x) VALUES (randomblob(200))")
                c.execute("COMMIT")
                time.sleep(0.003)
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        writer.arguments = [script, bank, stop]
        try writer.run()
        defer { FileManager.default.createFile(atPath: stop, contents: nil); writer.waitUntilExit() }
        Thread.sleep(forTimeInterval: 0.3)
        for _ in 0..<3 {
            let r = try repo.run(["backup", bank])
            #expect(r.status == 0, "\(r.stderr)")
        }
        FileManager.default.createFile(atPath: stop, contents: nil)
        writer.waitUntilExit()
        for (n, snapshot) in try snapshotsJSON(repo).enumerated() {
            let out = folder.file("bank-\(n).db")
            let r = try repo.run(["restore", snapshot["id"] as! String, out])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try sqlite3Scalar(out, "SELECT sum(bal) FROM acct") == "1000000")
            #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
            #expect(try hash(out) == snapshot["logical_hash"] as? String)
        }
    }

    /// SIGKILL at random moments of backup and prune (small packs, so a run
    /// writes many objects): afterwards verify --read-data passes and every
    /// listed snapshot restores to its recorded logical hash.
    @Test(arguments: RepoPlace.allCases)
    func killedBackupsAndPrunesLeaveAWholeRepository(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let app = folder.file("app.db")
        try makeApp(app, rows: 30_000)
        let env = ["LITECTL_PACK_SIZE": "32768"]
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        // Kill within the time a run takes here (measured), so most kills land mid-run.
        var started = Date()
        #expect(try repo.run(["backup", app], env: env).status == 0)
        let backupTime = Date().timeIntervalSince(started)
        _ = try sqlite3([app, "UPDATE item SET data = randomblob(7) WHERE id % 3 = 0;"])
        #expect(try repo.run(["backup", app], env: env).status == 0)
        _ = try repo.run(["forget", "--keep-last", "1"])
        started = Date()
        #expect(try repo.run(["prune"], env: env).status == 0)
        let pruneTime = Date().timeIntervalSince(started)
        var rng = SplitMix64(seed: UInt64(place == .s3 ? 11 : 5))
        var kills = 0
        for round in 0..<36 {
            _ = try sqlite3([app, "UPDATE item SET data = randomblob(\(round % 250)) WHERE id % \(7 + round) = 0;"])
            let prune = round % 3 == 2
            if prune { _ = try repo.run(["forget", "--keep-last", "2"]) }
            // The kill must be able to land before the run ends: a run shorter than the
            // shortest delay is not counted as killed (the shell only echoes on a kill).
            let delay = Double.random(in: 0.01...max(0.02, (prune ? pruneTime : backupTime) * 0.5), using: &rng)
            let script = shellS3Env + " LITECTL_PACK_SIZE=32768; "
                + "\(litectlBinary) \(prune ? "prune" : "backup '\(app)'") --repo '\(repo.url)' \(repo.options.joined(separator: " ")) & "
                + "pid=$!; sleep \(delay); kill -9 $pid 2>/dev/null && echo killed; wait $pid; true"
            let r = try runProcess("/bin/bash", ["-c", script])
            if r.stdout.contains("killed") { kills += 1 }
        }
        #expect(kills >= 20, "at least 20 runs were killed mid-way (\(kills))")
        var r = try repo.run(["unlock"])
        #expect(r.status == 0, "\(r.stderr)")
        r = try repo.run(["verify", "--read-data"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        #expect(try repo.run(["prune"]).status == 0)
        r = try repo.run(["verify", "--read-data", "--json"])
        #expect(r.status == 0 && r.stdout.contains("\"unreferenced_packs\":0"), "prune removes what killed runs left: \(r.stdout)")
        // A backup after all that works and adds its snapshot.
        _ = try sqlite3([app, "UPDATE item SET name = name || '!' WHERE id % 11 = 0;"])
        #expect(try repo.run(["backup", app]).status == 0)
        let snapshots = try snapshotsJSON(repo)
        #expect(snapshots.count >= 2)
        for (n, snapshot) in snapshots.enumerated() {
            let out = folder.file("restored-\(n).db")
            r = try repo.run(["restore", snapshot["id"] as! String, out])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try hash(out) == snapshot["logical_hash"] as? String)
        }
        if place == .folder {
            // No temporary file is left that no later run cleans: the next backup removes them.
            #expect(try repo.run(["backup", app]).status == 0)
            let leftovers = try FileManager.default.subpathsOfDirectory(atPath: repo.url).filter { $0.contains(".tmp-") }
            #expect(leftovers.isEmpty, "\(leftovers)")
        }
    }

    /// Two processes back up different databases into one repository at
    /// once, several times: every snapshot verifies and restores.
    @Test(arguments: RepoPlace.allCases)
    func concurrentBackupsOfDifferentDatabases(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeApp(a, rows: 8000)
        try makeApp(b, rows: 9000)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let script = shellS3Env + " LITECTL_PACK_SIZE=65536; "
            + "for i in 1 2 3; do \(litectlBinary) backup \"$1\" --repo '\(repo.url)' \(repo.options.joined(separator: " ")) || exit 1; done"
        let one = Process(), two = Process()
        for (p, db) in [(one, a), (two, b)] {
            p.executableURL = URL(fileURLWithPath: "/bin/bash")
            p.arguments = ["-c", script, "bash", db]
            try p.run()
        }
        one.waitUntilExit(); two.waitUntilExit()
        #expect(one.terminationStatus == 0 && two.terminationStatus == 0)
        #expect(try snapshotsJSON(repo).count == 6)
        let r = try repo.run(["verify", "--read-data"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        for (db, name) in [(a, "a.db"), (b, "b.db")] {
            let out = folder.file("restored-" + name)
            #expect(try repo.run(["restore", "latest", "--db", name, out]).status == 0)
            #expect(try hash(out) == (try hash(db)))
        }
    }

    /// What litectl wrote to the bucket, as an independent client (the AWS CLI) sees it.
    @Test func theAWSCLIReadsTheBucket() throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(.s3, in: folder, name: "host/web-1") else { return }
        let app = folder.file("app.db")
        try makeApp(app, rows: 3000)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        #expect(try repo.run(["backup", app]).status == 0)
        let objects = RepoObjects(repo)
        let keys = try objects.keys(prefix: "")
        #expect(keys.contains("config"))
        for prefix in ["packs/", "index/", "lists/", "snapshots/"] {
            #expect(keys.contains { $0.hasPrefix(prefix) }, "\(prefix) in \(keys)")
        }
        #expect(!keys.contains { $0.hasPrefix("locks/") }, "no lock is left after a run")
        let config = try JSONSerialization.jsonObject(with: Data(try objects.get("config"))) as? [String: Any]
        #expect(config?["format"] as? String == "litectl-repository" && config?["version"] as? Int == 4 && config?["compression"] as? String == "zstd")
        let snapshotKey = try #require(keys.first { $0.hasPrefix("snapshots/") })
        let snapshot = try JSONSerialization.jsonObject(with: Data(try objects.get(snapshotKey))) as? [String: Any]
        #expect(snapshot?["logical_hash"] as? String == (try hash(app)))
        // Pack names are the SHA-256 of their content, which the AWS CLI's bytes confirm.
        let pack = try #require(keys.first { $0.hasPrefix("packs/") })
        let digest = try runProcess("/bin/bash", ["-c", "sha256sum"], input: try objects.get(pack)).stdout.prefix(64)
        #expect(pack.hasSuffix(String(digest)))
    }

    /// `backup --repo` with --keep-* and --metrics-file: retention of this run's
    /// databases after their backups, and a textfile per database.
    @Test func backupRetentionAndMetrics() throws {
        let folder = try TemporaryFolder("repo-cli")
        let repo = try #require(try TestRepo.make(.folder, in: folder))
        let app = folder.file("app.db"), other = folder.file("other.db")
        try makeApp(app, rows: 500)
        try makeApp(other, rows: 500)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        #expect(try repo.run(["backup", other]).status == 0)
        let metrics = folder.file("litectl.prom")
        for _ in 0..<3 {
            let r = try repo.run(["backup", app, "--keep-last", "2", "--metrics-file", metrics])
            #expect(r.status == 0, "\(r.stderr)")
        }
        let all = try snapshotsJSON(repo)
        #expect(all.filter { $0["database"] as? String == "app.db" }.count == 2)
        #expect(all.filter { $0["database"] as? String == "other.db" }.count == 1, "other databases keep their snapshots")
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("litectl_backup_success{source=\"\(BackupJob.resolvedPath(app))\"} 1"), "\(text)")
        // A failing database: one stderr line, exit 2, the others still backed up.
        let r = try repo.run(["backup", folder.file("missing.db"), other])
        #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("missing.db"), "\(r.stderr)")
        #expect(try snapshotsJSON(repo, ["other.db"]).count == 2)
    }

    /// One crontab line for a whole host: `backup --config FILE` with globs,
    /// an exclusion, a database that fails and a glob that matches nothing
    /// (exit 1, one line each, the others backed up), retention and metrics.
    @Test(arguments: RepoPlace.allCases)
    func backupAHostFromItsConfigFile(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        try FileManager.default.createDirectory(atPath: folder.file("srv"), withIntermediateDirectories: true)
        for name in ["app.db", "jobs.db", "cache-scratch.db"] { try makeApp(folder.file("srv/" + name), rows: 300) }
        FileManager.default.createFile(atPath: folder.file("srv/broken.db"), contents: Data("not a database at all, really not".utf8))
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let endpoint = repo.options.count == 2 ? "endpoint = \"\(repo.options[1])\"\n" : ""
        let config = folder.file("host.toml")
        try """
            repository = "\(repo.url)"
            \(endpoint)databases = ["srv/*.db", "other/*.sqlite"]
            exclude = ["*-scratch.db"]
            tags = ["web-1"]
            jobs = 2
            metrics_file = "litectl.prom"
            [keep]
            last = 2
            """.write(toFile: config, atomically: true, encoding: .utf8)
        for round in 0..<3 {
            let r = try runLitectl(["backup", "--config", config])
            #expect(r.status == 1, "\(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 2 && lines.contains { $0.contains("broken.db") } && lines.contains { $0.contains("other/*.sqlite") },
                    "round \(round): \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        let all = try snapshotsJSON(repo)
        #expect(Set(all.map { $0["database"] as! String }) == ["app.db", "jobs.db"])
        #expect(all.count == 4, "keep.last = 2 per database")
        #expect(all.allSatisfy { ($0["tags"] as? [String]) == ["web-1"] })
        let metrics = try String(contentsOfFile: folder.file("litectl.prom"), encoding: .utf8)
        #expect(metrics.contains("litectl_backup_success{source=\"\(BackupJob.resolvedPath(folder.file("srv/app.db")))\"} 1"))
        #expect(metrics.contains("litectl_backup_success{source=\"\(BackupJob.resolvedPath(folder.file("srv/broken.db")))\"} 0"))
        let r = try repo.run(["restore", "latest", "--db", "jobs.db", folder.file("jobs-restored.db")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(folder.file("jobs-restored.db")) == (try hash(folder.file("srv/jobs.db"))))
    }

    /// Backups through a proxy that injects 503s, drops connections mid-body
    /// or fails every request: they retry and succeed, or fail with one line
    /// and leave nothing referenced that is missing.
    @Test(arguments: [["--fail-every", "3"], ["--drop-every", "3"], ["--fail-every", "1", "--status", "500"]])
    func backupsThroughFaults(_ faults: [String]) throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("repo-cli")
        let direct = try #require(try TestRepo.make(.s3, in: folder))
        let proxy = try FaultProxy(upstream: server, arguments: faults)
        let faulty = TestRepo(url: direct.url, options: ["--endpoint", proxy.endpoint])
        let app = folder.file("app.db")
        try makeApp(app, rows: 6000)
        #expect(try runLitectl(["repo", "init", direct.url] + direct.options).status == 0)
        let persistent = faults.contains("1")
        for round in 0..<3 {
            _ = try sqlite3([app, "UPDATE item SET price = price + 1 WHERE id % \(5 + round) = 0;"])
            let r = try faulty.run(["backup", app], env: ["LITECTL_PACK_SIZE": "32768"])
            if persistent {
                #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("HTTP 500"), "\(r.stderr)")
            } else {
                #expect(r.status == 0, "\(r.stderr)")
            }
        }
        let v = try direct.run(["verify", "--read-data"])
        #expect(v.status == 0, "\(v.stdout) \(v.stderr)")
        let snapshots = try snapshotsJSON(direct)
        #expect(snapshots.count == (persistent ? 0 : 3))
        if let last = snapshots.last {
            let r = try faulty.run(["restore", last["id"] as! String, folder.file("out.db")])
            #expect(r.status == 0, "restore retries too: \(r.stderr)")
            #expect(try hash(folder.file("out.db")) == (try hash(app)))
        }
    }

    /// A restore proves the file is the backed-up copy; it runs quick_check
    /// itself only when the backup skipped its check, integrity_check when asked.
    @Test func restoreChecksWhatTheBackupDidNot() throws {
        let folder = try TemporaryFolder("repo-cli")
        guard let repo = try TestRepo.make(.folder, in: folder) else { return }
        let app = folder.file("app.db")
        try makeApp(app, rows: 2000)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        #expect(try repo.run(["backup", app, "--tag", "checked"]).status == 0)
        #expect(try repo.run(["backup", app, "--verify", "none", "--tag", "unchecked"]).status == 0)
        let snapshots = try snapshotsJSON(repo)
        let checked = snapshots[0]["id"] as! String, unchecked = snapshots[1]["id"] as! String
        #expect(snapshots[0]["verification"] as? String == "quick_check ok")
        #expect(snapshots[1]["verification"] as? String == "skipped")
        var r = try repo.run(["restore", "-v", checked, folder.file("a.db")])
        #expect(r.status == 0 && r.stdout.contains("the copy passed quick_check at backup time"), "\(r.stdout) \(r.stderr)")
        r = try repo.run(["restore", "-v", unchecked, folder.file("b.db")])
        #expect(r.status == 0 && r.stdout.contains("quick_check ok"), "\(r.stdout) \(r.stderr)")
        r = try repo.run(["restore", "-v", "--verify", "full", checked, folder.file("c.db")])
        #expect(r.status == 0 && r.stdout.contains("integrity_check ok"), "\(r.stdout) \(r.stderr)")
        for name in ["a.db", "b.db", "c.db"] { #expect(try hash(folder.file(name)) == (try hash(app))) }
        r = try repo.run(["restore", "--quick", "--verify", "full", checked, folder.file("d.db")])
        #expect(r.status == 64, "\(r.stderr)")
    }

    @Test func locksStaleAndLive() throws {
        let folder = try TemporaryFolder("repo-cli")
        let repo = try #require(try TestRepo.make(.folder, in: folder))
        let app = folder.file("app.db")
        try makeApp(app, rows: 1000)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let store = FolderStore(path: repo.url)
        // A live exclusive lock (this test process) makes a backup wait, then fail clearly.
        let live = #"{"hostname":"\#(RepoLock.hostname)","pid":\#(getpid()),"time_unix":\#(Date().timeIntervalSince1970),"exclusive":true,"command":"prune"} x"#
        // Named as litectl names locks (64 hex digits): nothing else under locks/ is a lock.
        let liveKey = "locks/" + String(repeating: "a", count: 64), staleKey = "locks/" + String(repeating: "b", count: 64)
        try store.put(liveKey, Array(live.utf8))
        var r = try repo.run(["backup", app, "--timeout", "1"])
        #expect(r.status == 2 && r.stderr.contains("locked") && r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        r = try repo.run(["unlock"])
        #expect(try store.list(prefix: "locks/").count == 1, "unlock keeps a live lock")
        try store.delete(liveKey)
        // A stale one (a process that is gone) is ignored with a warning, and unlock removes it.
        let stale = #"{"hostname":"\#(RepoLock.hostname)","pid":999999,"time_unix":\#(Date().timeIntervalSince1970),"exclusive":true,"command":"prune"} x"#
        try store.put(staleKey, Array(stale.utf8))
        // A file under locks/ that litectl did not name is no lock: never read as one, never removed.
        try store.put("locks/notes", Array("not a lock".utf8))
        r = try repo.run(["prune"])
        #expect(r.status == 0 && r.stderr.contains("stale"), "\(r.stderr)")
        r = try repo.run(["unlock", "-v"])
        #expect(r.status == 0 && r.stdout.contains("removed \(staleKey)") && !r.stdout.contains("notes"), "\(r.stdout)")
        #expect(try store.list(prefix: "locks/").map(\.key) == ["locks/notes"])
    }

    /// A corrupt source makes no snapshot: exit 2, one line, the repository
    /// still verifies (a WAL source is checked on a second connection, while
    /// the copy is made).
    @Test(arguments: ["delete", "wal"])
    func aCorruptSourceMakesNoSnapshot(_ journal: String) throws {
        let folder = try TemporaryFolder("repo-cli")
        let repo = try #require(try TestRepo.make(.folder, in: folder))
        let db = folder.file("bad.db")
        try makeDatabase(db, "PRAGMA journal_mode=\(journal); CREATE TABLE t(x); WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<3000) INSERT INTO t SELECT randomblob(200) FROM r;")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: db))
        try handle.seek(toOffset: 4096 * 5 + 8)
        handle.write(Data(repeating: 0xff, count: 8))
        try handle.close()
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let r = try repo.run(["backup", db])
        #expect(r.status == 2 && r.stderr.contains("quick_check") && r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        #expect(try snapshotsJSON(repo).isEmpty)
        #expect(try repo.run(["verify", "--read-data"]).status == 0)
    }

    @Test func usageAndLocationErrors() throws {
        let folder = try TemporaryFolder("repo-cli")
        var r = try runLitectl(["snapshots", "--repo", folder.file("nothing")])
        #expect(r.status == 2 && r.stderr.hasPrefix("litectl: ") && r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        r = try runLitectl(["snapshots", "--repo", "ftp://x/y"])
        #expect(r.status == 2 && r.stderr.contains("unsupported"))
        r = try runLitectl(["verify", "--repo", folder.path, "--read-data", "--read-data-subset", "10"])
        #expect(r.status == 64)
        r = try runLitectl(["backup", "--repo", folder.path])
        #expect(r.status == 64)
        try FileManager.default.createDirectory(atPath: folder.file("notrepo"), withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: folder.file("notrepo/file"), contents: Data("x".utf8))
        r = try runLitectl(["repo", "init", folder.file("notrepo")])
        #expect(r.status == 2 && r.stderr.contains("not empty"))
    }

    /// The usage line of `repo init` lists --repo: it names the repository as
    /// URL does; both naming different ones is a usage error that names both
    /// (neither is made), the same one twice is fine, none at all is a usage error.
    @Test func repoInitTakesTheRepositoryAsRepoToo() throws {
        let folder = try TemporaryFolder("repo-cli-init")
        let a = folder.file("a"), b = folder.file("b"), c = folder.file("c")
        let noEnvironment = ["LITECTL_REPO": ""]
        var r = try runLitectl(["repo", "init", "--repo", a], env: noEnvironment)
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        #expect(try runLitectl(["snapshots", "--repo", a, "--json"], env: noEnvironment).status == 0, "a repository was made at --repo")

        r = try runLitectl(["repo", "init", b, "--repo", c], env: noEnvironment)
        #expect(r.status == 64 && r.stderr.contains(b) && r.stderr.contains(c), "\(r.status) \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b) && !FileManager.default.fileExists(atPath: c), "nothing made")

        r = try runLitectl(["repo", "init", b, "--repo", b], env: noEnvironment)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try runLitectl(["snapshots", "--repo", b, "--json"], env: noEnvironment).status == 0)

        r = try runLitectl(["repo", "init"], env: noEnvironment)
        #expect(r.status == 64 && r.stderr.contains("--repo"), "\(r.stderr)")
        r = try runLitectl(["repo", "init"], env: ["LITECTL_REPO": c])
        #expect(r.status == 0, "$LITECTL_REPO, as the option's help says: \(r.stderr)")
        #expect(try runLitectl(["snapshots", "--repo", c, "--json"], env: noEnvironment).status == 0)

        r = try runLitectl(["repo", "upgrade", "--repo", a, "--json"], env: noEnvironment)
        #expect(r.status == 0 && r.stdout.contains("\"upgraded\":false"), "\(r.stdout) \(r.stderr)")
        r = try runLitectl(["repo", "upgrade", a, "--repo", b], env: noEnvironment)
        #expect(r.status == 64 && r.stderr.contains(a) && r.stderr.contains(b), "\(r.stderr)")
    }
}

/// Raw access to a test repository's objects (the folder itself, or the AWS CLI for S3).
struct RepoObjects {
    let repo: TestRepo
    init(_ repo: TestRepo) { self.repo = repo }

    func keys(prefix: String) throws -> [String] {
        if !repo.url.hasPrefix("s3://") {
            return try FolderStore(path: repo.url).list(prefix: prefix).map(\.key)
        }
        let r = try awsCLI(["s3", "ls", "--recursive", repo.url + "/" + prefix])
        let root = String(repo.url.dropFirst(5).split(separator: "/", maxSplits: 1).last ?? "") + "/"
        return r.split(separator: "\n").compactMap { line in
            line.split(separator: " ", omittingEmptySubsequences: true).last.map { String($0.dropFirst(root.count)) }
        }.sorted()
    }

    func get(_ key: String) throws -> [UInt8] {
        if !repo.url.hasPrefix("s3://") { return try FolderStore(path: repo.url).get(key) }
        let r = try runProcess("/usr/bin/env", awsEnv + ["aws", "--endpoint-url", endpoint, "s3", "cp", repo.url + "/" + key, "-"])
        return r.stdoutBytes
    }

    func put(_ key: String, _ bytes: [UInt8]) throws {
        if !repo.url.hasPrefix("s3://") { return try FolderStore(path: repo.url).put(key, bytes) }
        let temp = try TemporaryFolder("obj")
        let file = temp.file("obj")
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        _ = try awsCLI(["s3", "cp", file, repo.url + "/" + key])
    }

    var endpoint: String { repo.options[repo.options.firstIndex(of: "--endpoint")! + 1] }
    var awsEnv: [String] { ["AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION=us-east-1"] }

    func awsCLI(_ arguments: [String]) throws -> String {
        let r = try runProcess("/usr/bin/env", awsEnv + ["aws", "--endpoint-url", endpoint] + arguments)
        guard r.status == 0 else { throw StoreError(.other, location: "aws", message: r.stderr) }
        return r.stdout
    }
}
