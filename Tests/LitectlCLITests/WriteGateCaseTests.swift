// The write gate on the cases that lost data before it (issue 37), each as a
// user would meet it: a metrics file named at a repository's config, a backup
// or a database; unlock through a repository whose locks/ is a link; a
// database, a -wal or a file inside the repository taken as the key file;
// retention led by a hostile manifest to the source itself; a backup folder's
// lock file that is a link. WriteGateTests covers every command and option.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct WriteGateCaseTests {
    func makeApp(_ path: String) throws {
        try makeDatabase(path, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t(v) VALUES ('a'), ('b');")
    }

    /// The bytes of every file under `folder` (links as their target's path), by relative path.
    func tree(_ folder: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for relative in try FileManager.default.subpathsOfDirectory(atPath: folder) {
            let path = folder + "/" + relative
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
                out[relative] = Data(("-> " + target).utf8)
            } else if let data = FileManager.default.contents(atPath: path) {
                out[relative] = data
            }
        }
        return out
    }

    @Test func aMetricsFileReplacesOnlyAMetricsFile() throws {
        let folder = try TemporaryFolder("gate-metrics")
        let app = folder.file("app.db"), key = folder.file("enc.key"), repo = folder.file("enc")
        try makeApp(app)
        #expect(try litectl("repo", "init", repo, "--key-file", key).status == 0)
        let before = try tree(repo)
        // The repository's config: its master key, every snapshot.
        var r = try litectl("backup", app, "--repo", repo, "--key-file", key, "--metrics-file", repo + "/config")
        #expect(r.status == 2 && r.stderr == "litectl: \(repo)/config: is inside the repository \(repo), which this run uses; write outside it\n",
                "\(r.stderr)")
        #expect(try tree(repo) == before, "refused before anything is backed up")
        // The same from the config file's metrics_file.
        let toml = folder.file("host.toml")
        try "repository = \"\(repo)\"\nkey_file = \"\(key)\"\ndatabases = [\"\(app)\"]\nmetrics_file = \"\(repo)/config\"\n"
            .write(toFile: toml, atomically: false, encoding: .utf8)
        r = try litectl("backup", "--config", toml)
        #expect(r.status == 2 && r.stderr.contains("\(repo)/config: is inside the repository"), "\(r.stderr)")
        #expect(try tree(repo) == before)
        // An existing backup in the destination folder, and an unrelated database.
        let backups = folder.file("backups")
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
        #expect(try litectl("backup", app, backups).status == 0)
        let backup = backups + "/" + (try #require(try FileManager.default.contentsOfDirectory(atPath: backups).first { $0.hasSuffix(".db") }))
        let backupBytes = try FileFingerprint(backup)
        r = try litectl("backup", app, backups, "--metrics-file", backup)
        #expect(r.status == 2 && r.stderr.contains("is inside the backup folder"), "\(r.stderr)")
        #expect(try FileFingerprint(backup) == backupBytes)
        #expect(try litectl("verify", backup).status == 0)
        let other = folder.file("other.db")
        try makeApp(other)
        let otherBytes = try FileFingerprint(other)
        r = try litectl("backup", app, backups, "--metrics-file", other)
        #expect(r.status == 2 && r.stderr == "litectl: \(other): already exists and is not a Prometheus textfile (as the metrics file it would be replaced); remove it or choose another file\n",
                "\(r.stderr)")
        #expect(try FileFingerprint(other) == otherBytes)
        // A metrics file is replaced, as every cron run does; an empty one too.
        let prom = folder.file("litectl.prom")
        #expect(try litectl("backup", app, backups, "--metrics-file", prom).status == 0)
        #expect(try litectl("backup", app, backups, "--metrics-file", prom).status == 0)
        #expect(try String(contentsOfFile: prom, encoding: .utf8).contains("litectl_backup_success{source="))
        try Data().write(to: URL(fileURLWithPath: prom))
        #expect(try litectl("backup", app, backups, "--metrics-file", prom).status == 0)
        #expect(PrometheusText.looksLikeTextfile(Array(try Data(contentsOf: URL(fileURLWithPath: prom)))))
    }

    @Test func theTextfileRecognizerJudgesLines() {
        func judge(_ text: String) -> Bool { PrometheusText.looksLikeTextfile(Array(text.utf8)) }
        #expect(judge("# HELP a b\n# TYPE a gauge\na 1\nb{x=\"y}z\",w=\"\\\"\"} 2.5e3 1700000000\nc NaN\nd +Inf\n\n"))
        #expect(!judge("{\n  \"format\": \"litectl-repository\"\n}\n"))
        #expect(!judge("SQLite format 3\0"))
        #expect(!judge("a b\n"))
        #expect(!judge("1a 1\n"))
        #expect(!judge("a{x=\"y\" 1\n"))
        #expect(!judge("repository = \"s3://b\"\n"))
    }

    @Test func unlockAndPruneNeverFollowALinkOutOfTheRepository() throws {
        let folder = try TemporaryFolder("gate-unlock")
        let app = folder.file("app.db"), repo = folder.file("repo")
        try makeApp(app)
        #expect(try litectl("repo", "init", repo).status == 0)
        #expect(try litectl("backup", app, "--repo", repo).status == 0)
        let elsewhere = folder.file("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere + "/sub", withIntermediateDirectories: true)
        try "precious".write(toFile: elsewhere + "/precious", atomically: false, encoding: .utf8)
        try "x".write(toFile: elsewhere + "/sub/y", atomically: false, encoding: .utf8)
        let hexName = String(repeating: "c", count: 64)
        try "{}".write(toFile: elsewhere + "/" + hexName, atomically: false, encoding: .utf8)
        let before = try tree(elsewhere)
        try? FileManager.default.removeItem(atPath: repo + "/locks")
        try FileManager.default.createSymbolicLink(atPath: repo + "/locks", withDestinationPath: elsewhere)
        for arguments in [["unlock", "-v"], ["unlock", "--all"], ["backup", app], ["prune"], ["forget", "--keep-last", "1"]] {
            let r = try runProcess(litectlBinary, arguments + ["--repo", repo])
            #expect(r.status == 2 && r.stderr.contains("\(repo)/locks: cannot open the folder: is a symbolic link"),
                    "\(arguments): \(r.stderr)")
            #expect(try tree(elsewhere) == before, "\(arguments)")
        }
        // A pack folder that is a link: prune neither reads nor deletes through it.
        try FileManager.default.removeItem(atPath: repo + "/locks")
        let packs = try FileManager.default.contentsOfDirectory(atPath: repo + "/packs")
        let prefix = try #require(packs.first)
        try FileManager.default.moveItem(atPath: repo + "/packs/" + prefix, toPath: folder.file("moved"))
        try FileManager.default.createSymbolicLink(atPath: repo + "/packs/" + prefix, withDestinationPath: elsewhere)
        let r = try litectl("prune", "--repo", repo)
        #expect(r.status == 2 && r.stderr.contains("is a symbolic link"), "\(r.stderr)")
        #expect(try tree(elsewhere) == before)
    }

    @Test func aKeyFileIsNeverADatabaseAnInputOrInsideTheRepository() throws {
        let folder = try TemporaryFolder("gate-key")
        let app = folder.file("app.db")
        try makeApp(app)
        let appBytes = try FileFingerprint(app)
        var r = try litectl("repo", "init", folder.file("frepo"), "--key-file", app)
        #expect(r.status == 2 && r.stderr == "litectl: \(app): is a SQLite database, not a key file: its bytes change with every write, and the repository's key with them\n",
                "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("frepo/config")))
        // A repository whose key is fine, given a database as its key: refused, not "wrong key".
        #expect(try litectl("repo", "init", folder.file("enc"), "--key-file", folder.file("enc.key")).status == 0)
        r = try litectl("backup", app, "--repo", folder.file("enc"), "--key-file", app)
        #expect(r.status == 2 && r.stderr.hasPrefix("litectl: \(app): is a SQLite database, not a key file"), "\(r.stderr)")
        // Its -wal, and a rollback journal.
        let wal = folder.file("w.db")
        let writer = try runProcess("/usr/bin/python3", ["-c", """
            import sqlite3, os, sys
            c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL'); c.execute('CREATE TABLE t(a)'); c.commit(); os._exit(0)
            """, wal])
        #expect(writer.status == 0)
        r = try litectl("snapshots", "--repo", folder.file("enc"), "--key-file", wal + "-wal")
        #expect(r.status == 2 && r.stderr.contains("is a SQLite -wal file, not a key file"), "\(r.stderr)")
        r = try litectl("snapshots", "--repo", folder.file("enc"), "--passphrase-file", app)
        #expect(r.status == 2 && r.stderr.contains("is a SQLite database, not a passphrase file"), "\(r.stderr)")
        // Inside the repository, this one or another.
        r = try litectl("repo", "init", folder.file("r2"), "--key-file", folder.file("r2/key"))
        #expect(r.status == 2 && r.stderr.contains("lies inside the repository"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("r2")), "nothing made")
        r = try litectl("repo", "init", folder.file("r3"), "--key-file", folder.file("enc/config"))
        #expect(r.status == 2 && r.stderr.contains("lies inside the repository"), "\(r.stderr)")
        // The config file the run reads.
        let toml = folder.file("host.toml")
        try "repository = \"\(folder.file("enc"))\"\nkey_file = \"\(toml)\"\ndatabases = [\"\(app)\"]\n"
            .write(toFile: toml, atomically: false, encoding: .utf8)
        r = try litectl("backup", "--config", toml)
        #expect(r.status == 2 && r.stderr.contains("\(toml): is the config file this run reads; a key file must be a file of its own"), "\(r.stderr)")
        // A key option without a repository is a usage error, not silently ignored.
        r = try litectl("backup", app, folder.file("out.db"), "--key-file", app)
        #expect(r.status == 64 && r.stderr.contains("--key-file applies with --repo"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("out.db")))
        #expect(try FileFingerprint(app) == appBytes)
    }

    @Test func retentionRemovesOnlyBackupsNamedAsBackups() throws {
        // Backups kept beside the database itself, and a manifest that names the database.
        let folder = try TemporaryFolder("gate-retention")
        let app = folder.file("app.db")
        try makeApp(app)
        #expect(try litectl("backup", app, folder.path).status == 0)
        let manifest = try #require(try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasSuffix(".db.json") })
        let text = try String(contentsOfFile: folder.file(manifest), encoding: .utf8)
        let backupName = String(manifest.dropLast(5))
        try text.replacingOccurrences(of: "\"\(backupName)\"", with: "\"app.db\"")
            .replacing(#/"started_at_unix": [0-9.e+]+/#, with: "\"started_at_unix\": 1000")
            .write(toFile: folder.file("app.db.json"), atomically: false, encoding: .utf8)
        let appBytes = try FileFingerprint(app)
        for _ in 0..<2 {
            let r = try litectl("backup", "--keep-last", "1", app, folder.path)
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect(try FileFingerprint(app) == appBytes, "the database survives retention")
        #expect(FileManager.default.fileExists(atPath: folder.file("app.db.json")), "a manifest that is not a backup's is not retention's")
    }

    /// A cache or scratch folder pointed inside the repository (LITECTL_CACHE_DIR,
    /// TMPDIR) never adds a file or folder to it: the cache is skipped, a scratch
    /// file refused.
    @Test func aCacheOrScratchFolderInsideTheRepositoryWritesNothingThere() throws {
        let folder = try TemporaryFolder("gate-cache")
        let app = folder.file("app.db"), repo = folder.file("repo")
        try makeApp(app)
        #expect(try litectl("repo", "init", repo).status == 0)
        #expect(try litectl("backup", app, "--repo", repo).status == 0)
        let before = Set(try FileManager.default.subpathsOfDirectory(atPath: repo).filter { !$0.hasPrefix("locks") })
        try makeDatabase(app, "INSERT INTO t(v) VALUES ('c');")
        for (name, value) in [("LITECTL_CACHE_DIR", repo + "/packs/cache"), ("TMPDIR", repo + "/index")] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: litectlBinary)
            process.arguments = ["backup", app, "--repo", repo]
            process.environment = ProcessInfo.processInfo.environment.merging([name: value]) { $1 }
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            let added = Set(try FileManager.default.subpathsOfDirectory(atPath: repo)).subtracting(before)
            #expect(!added.contains { $0.contains("cache") || $0.contains(".tmp-") || $0.contains(".litectl-") }, "\(name): \(added)")
        }
    }

    @Test func aBackupFoldersLockFileIsNeverALink() throws {
        let folder = try TemporaryFolder("gate-lock")
        let app = folder.file("app.db")
        try makeApp(app)
        let backups = folder.file("backups")
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
        // A dangling link would make open(O_CREAT) create its target elsewhere.
        let target = folder.file("created-elsewhere")
        try FileManager.default.createSymbolicLink(atPath: backups + "/.litectl-backup.lock", withDestinationPath: target)
        let r = try litectl("backup", app, backups)
        #expect(r.status == 2 && r.stderr.contains(".litectl-backup.lock"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target))
    }
}
