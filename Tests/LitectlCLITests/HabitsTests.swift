// The habits Litestream and restic users bring (issue 38, item 4), through the
// built binary: one duration syntax for every option, --at in every form of
// the moment reference (`--at -10m` included), restore --if-db-not-exists and
// --if-replica-exists, restore of the newest good backup of a folder, and
// replicate --exec. Judged by the sqlite3 CLI and `litectl hash` of the source.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct HabitsTests {
    func makeApp(_ path: String, rows: Int) throws {
        try makeDatabase(path, """
            PRAGMA journal_mode=wal;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<\(rows))
            INSERT INTO t SELECT i, 'row-' || i FROM r;
            """)
    }

    func hash(_ db: String) throws -> String {
        let r = try litectl("hash", db)
        #expect(r.status == 0, "\(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    func count(_ db: String) throws -> String { try sqlite3Scalar(db, "SELECT count(*) FROM t") }

    // MARK: durations

    @Test func everyDurationOptionTakesOneSyntax() throws {
        let folder = try TemporaryFolder("habits-durations")
        let db = folder.file("app.db")
        try makeApp(db, rows: 10)
        // The lock wait of every command: units and fractions.
        for value in ["90", "2.5", "1m", "1h30m", "250ms", "0"] {
            let r = try litectl("info", "--timeout", value, db)
            #expect(r.status == 0, "--timeout \(value): \(r.stderr)")
        }
        // Refused as usage errors naming the option and the accepted forms.
        for (arguments, option) in [(["info", "--timeout", "5x", db], "--timeout"), (["info", "--timeout", "-1", db], "--timeout"),
                                    (["replicate", db, "--repo", folder.file("r"), "--interval", "1hour"], "--interval"),
                                    (["replicate", db, "--repo", folder.file("r"), "--fold-interval", "1d-1h"], "--fold-interval"),
                                    (["replicate", db, "--repo", folder.file("r"), "--stop-timeout", "soon"], "--stop-timeout"),
                                    (["replicate", db, "--repo", folder.file("r"), "--poll-interval", "1e3"], "--poll-interval"),
                                    (["forget", "--repo", folder.file("r"), "--keep-within", "7"], "--keep-within")] {
            let r = try runLitectl(arguments)
            #expect(r.status == 64, "\(arguments): \(r.stderr)")
            #expect(r.stderr.contains(option) && r.stderr.contains("1h30m"), "\(arguments): \(r.stderr)")
        }
        // Units read as units: a poll interval of 2 minutes is more than an
        // interval of 1 minute (the check of the two values, not of their text).
        let r = try runLitectl(["replicate", db, "--repo", folder.file("r"), "--interval", "1m", "--poll-interval", "2m", "--fold-interval", "1h30m",
                                "--stop-timeout", "90s"])
        #expect(r.status == 64 && r.stderr.contains("the poll interval at most the interval"), "\(r.stderr)")
        // The default the help states is a duration too.
        let help = try litectl("replicate", "--help")
        #expect(help.stdout.contains("--fold-interval <duration>") && help.stdout.contains("(default: 1h)"), "\(help.stdout)")
    }

    // MARK: --at

    @Test(arguments: RepoPlace.allCases)
    func atTakesEveryFormOfTheMomentReference(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("habits-at")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let db = folder.file("app.db")
        try makeApp(db, rows: 50)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let backup = try repo.run(["backup", db])
        #expect(backup.status == 0, "\(backup.stderr)")
        let listed = try repo.run(["snapshots", "--json"])
        let first = try #require(listed.stdout.split(separator: "\n").first)
        let snapshot = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        // As listed, to the millisecond (parsed: up to the end of that millisecond).
        let time = try MomentTime.parse(try #require(snapshot["time"] as? String)) - 0.000999
        let source = try hash(db)

        /// `time + offset` written at UTC+01:00, to the second (the end of that second).
        func plusOne(_ offset: Double) -> String {
            let t = time + offset + 3600
            let iso = Timestamp.iso8601(t)  // 2026-12-07T09:00:00.123Z
            return String(iso.prefix(19)) + "+01:00"
        }
        var n = 0
        func restore(_ at: [String]) throws -> ProcessResult {
            n += 1
            let target = folder.file("at-\(n).db")
            let r = try repo.run(["restore", "latest", "--db", "app.db"] + at + [target])
            if r.status == 0 { #expect(try hash(target) == source, "\(at)") }
            return r
        }
        // Found: an offset, epoch seconds (with a fraction), a relative time of 0 s ago, both spellings.
        for at in [["--at", plusOne(0)], ["--at", String(Int(time.rounded(.down)))], ["--at", String(format: "%.3f", time + 0.001)],
                   ["--at", "-0s"], ["--at=-0s"], ["--at", Timestamp.iso8601(time + 0.001)]] {
            let r = try restore(at)
            #expect(r.status == 0, "\(at): \(r.stderr)")
        }
        // Before the snapshot: no snapshot at or before (an error, not a usage error).
        for at in [["--at", "-1h"], ["--at=-1h30m"], ["--at", "-2d"], ["--at", plusOne(-1)], ["--at", String(Int(time.rounded(.down)) - 1)]] {
            let r = try restore(at)
            #expect(r.status == 2 && r.stderr.contains("no snapshot of app.db at or before"), "\(at): \(r.status) \(r.stderr)")
        }
        // Not a time: a usage error naming the option and the forms.
        for bad in ["yesterday", "+10m", "2026-02-30", "2026-12-07T09:00:00+25:00"] {
            let r = try restore(["--at", bad])
            #expect(r.status == 64 && r.stderr.contains("--at") && r.stderr.contains("-1h30m"), "\(bad): \(r.stderr)")
        }
    }

    // MARK: restore at boot

    @Test(arguments: RepoPlace.allCases)
    func restoreAtBootSkipsWhatItMust(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("habits-boot")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let db = folder.file("app.db")
        try makeApp(db, rows: 30)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        // No replica of the database yet: nothing restored, exit 0; without the flag, exit 2.
        let target = folder.file("restored.db")
        var r = try repo.run(["restore", "latest", "--db", "app.db", "--if-replica-exists", "-v", target])
        #expect(r.status == 0 && r.stdout.contains("--if-replica-exists"), "\(r.stdout) \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target))
        r = try repo.run(["restore", "latest", "--db", "app.db", target])
        #expect(r.status == 2, "\(r.stderr)")
        r = try repo.run(["restore", "latest", "--db", "app.db", "--if-replica-exists", "-q", target])
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stdout) \(r.stderr)")
        // With one: restored.
        #expect(try repo.run(["backup", db]).status == 0)
        r = try repo.run(["restore", "latest", "--db", "app.db", "--if-db-not-exists", "--if-replica-exists", target])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(target) == hash(db))
        // The target exists now: left alone, exit 0, -v says so; without the flag, refused.
        try makeDatabase(target, "INSERT INTO t VALUES (1000, 'the application''s own')")
        let before = try FileFingerprint(target)
        r = try repo.run(["restore", "latest", "--db", "app.db", "--if-db-not-exists", "-v", target])
        #expect(r.status == 0 && r.stdout.contains("exists") && r.stdout.contains("--if-db-not-exists"), "\(r.stdout) \(r.stderr)")
        #expect(try FileFingerprint(target) == before)
        r = try repo.run(["restore", "latest", "--db", "app.db", target])
        #expect(r.status == 2 && r.stderr.contains("already exists"), "\(r.stderr)")
        // --force contradicts it.
        r = try repo.run(["restore", "latest", "--db", "app.db", "--if-db-not-exists", "--force", target])
        #expect(r.status == 64, "\(r.stderr)")
        // A repository that cannot be opened stays an error.
        r = try runLitectl(["restore", "--repo", folder.file("no-such-repo"), "latest", "--db", "app.db", "--if-replica-exists", folder.file("x.db")])
        #expect(r.status == 2, "\(r.stderr)")
    }

    @Test func restoreAtBootFromBackupFiles() throws {
        let folder = try TemporaryFolder("habits-boot-files")
        let db = folder.file("app.db"), backups = folder.file("backups")
        try makeApp(db, rows: 30)
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: true)
        let target = folder.file("restored.db")
        // No backup file, an empty folder: nothing restored, exit 0.
        for arguments in [[folder.file("missing.db")], ["--db", "app.db", backups], [backups]] {
            let r = try runLitectl(["restore", "--if-replica-exists", "-v"] + arguments + [target])
            #expect(r.status == 0 && r.stdout.contains("--if-replica-exists"), "\(arguments): \(r.stdout) \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: target))
        }
        let r = try litectl("restore", "--db", "app.db", backups, target)
        #expect(r.status == 2 && r.stderr.contains("no backup of app.db"), "\(r.stderr)")
    }

    // MARK: a folder of backups

    @Test func restoreTakesTheNewestGoodBackupOfAFolder() throws {
        let folder = try TemporaryFolder("habits-folder")
        let db = folder.file("app.db"), other = folder.file("other.db"), backups = folder.file("backups") + "/"
        try makeApp(db, rows: 100)
        try makeApp(other, rows: 5)
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: true)
        var hashes: [String] = []
        for round in 0..<3 {
            try makeDatabase(db, "INSERT INTO t(v) VALUES ('round \(round)')")
            hashes.append(try hash(db))
            #expect(try litectl("backup", db, backups).status == 0)
            #expect(try litectl("backup", other, backups).status == 0)
            Thread.sleep(forTimeInterval: 1.1)  // backups are named to the second
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: backups).filter { $0.hasPrefix("app-") && $0.hasSuffix(".db") }.sorted()
        #expect(names.count == 3, "\(names)")
        // The newest backup of app.db.
        var r = try litectl("restore", "-v", "--db", "app.db", backups, folder.file("a.db"))
        #expect(r.status == 0 && r.stdout.contains(names[2]), "\(r.stdout) \(r.stderr)")
        #expect(try hash(folder.file("a.db")) == hashes[2])
        // By path too; and --at picks the newest started at or before it.
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: backups + names[1] + ".json"))) as? [String: Any])
        let started = try #require(manifest["started_at_unix"] as? Double)
        r = try litectl("restore", "--db", db, "--at", String(format: "%.3f", started + 0.5), backups, folder.file("b.db"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try hash(folder.file("b.db")) == hashes[1])
        // A newest backup that fails verification is passed over, named.
        let newest = backups + names[2]
        let handle = try #require(FileHandle(forUpdatingAtPath: newest))
        try handle.seek(toOffset: 4096 + 100)
        handle.write(Data([0xFF, 0x00, 0xFF]))
        try handle.close()
        r = try litectl("restore", "--db", "app.db", backups, folder.file("c.db"))
        #expect(r.status == 0 && r.stderr.contains("passed over \(names[2])"), "\(r.stderr)")
        #expect(try hash(folder.file("c.db")) == hashes[1])
        #expect(try sqlite3Scalar(folder.file("c.db"), "PRAGMA integrity_check") == "ok")
        // Two databases in the folder: --db is needed.
        r = try litectl("restore", backups, folder.file("d.db"))
        #expect(r.status == 2 && r.stderr.contains("several databases"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("d.db")))
        // --db and --at without a folder or --repo stay usage errors.
        r = try litectl("restore", "--db", "app.db", newest, folder.file("e.db"))
        #expect(r.status == 64, "\(r.stderr)")
    }

    // MARK: replicate --exec

    @Test func replicateExecShipsOnTheChildsExitWithItsStatus() throws {
        let folder = try TemporaryFolder("habits-exec")
        guard let repo = try TestRepo.make(.folder, in: folder) else { return }
        let db = folder.file("app.db")
        try makeApp(db, rows: 10)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        // The application writes, then exits 7: its rows are shipped, and 7 is replicate's status.
        let script = "sqlite3 '\(db)' \"INSERT INTO t(v) VALUES ('from the child')\" && exit 7"
        let r = try repo.run(["replicate", db, "--interval", "30s", "--exec", script])
        #expect(r.status == 7, "\(r.stderr)")
        let target = folder.file("restored.db")
        let restore = try repo.run(["restore", "latest", "--db", "app.db", target])
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try sqlite3Scalar(target, "SELECT count(*) FROM t WHERE v = 'from the child'") == "1")
        // A start that fails never runs the child: a database not in WAL mode.
        let journal = folder.file("journal.db"), marker = folder.file("ran")
        try makeDatabase(journal, "CREATE TABLE t(x)")
        let failed = try repo.run(["replicate", journal, "--exec", "touch '\(marker)'"])
        #expect(failed.status == 2, "\(failed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: marker))
    }

    @Test func replicateExecForwardsSIGTERMToTheChild() throws {
        let folder = try TemporaryFolder("habits-exec-signal")
        guard let repo = try TestRepo.make(.folder, in: folder) else { return }
        let db = folder.file("app.db"), started = folder.file("started"), got = folder.file("got")
        try makeApp(db, rows: 10)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        // The application records the signal it gets, then writes once more and exits 0.
        let script = "trap \"echo TERM > '\(got)'; sqlite3 '\(db)' \\\"INSERT INTO t(v) VALUES ('last words')\\\"; exit 0\" TERM; "
            + "touch '\(started)'; while :; do sleep 0.05; done"
        let child = try Child(litectlBinary, ["replicate", db, "--repo", repo.url, "--exec", script, "-v"], output: folder.file("out.log"))
        var waited = 0.0
        while !FileManager.default.fileExists(atPath: started) && waited < 30 { Thread.sleep(forTimeInterval: 0.05); waited += 0.05 }
        #expect(FileManager.default.fileExists(atPath: started), "the child started")
        child.signal(SIGTERM)
        let status = child.wait()
        let log = (try? String(contentsOfFile: folder.file("out.log"), encoding: .utf8)) ?? ""
        #expect(status == 0, "\(log)")
        #expect((try? String(contentsOfFile: got, encoding: .utf8)) == "TERM\n", "SIGTERM reached the child: \(log)")
        // What it wrote on its way out was shipped.
        let target = folder.file("restored.db")
        #expect(try repo.run(["restore", "latest", "--db", "app.db", target]).status == 0)
        #expect(try sqlite3Scalar(target, "SELECT count(*) FROM t WHERE v = 'last words'") == "1")
        // A child ended by a signal: 128 + the signal, as a shell reports it.
        let killed = try repo.run(["replicate", db, "--exec", "kill -KILL $$"])
        #expect(killed.status == 137, "\(killed.stderr)")
    }
}
