// The hostile-input suite: litectl tried as a careless or hostile user would,
// through the built binary. A writer never writes over its own input (by
// name, symbolic or hard link, or into the input's -wal); a source wiped to
// nothing is not a backup, and retention never leaves only empty copies; a
// patch changes its target and nothing else; names and values from files
// reach the terminal escaped; a truncated or foreign file gets the same words
// and exit status from every command; a lock wait states the wait it made.
// Repository tampering is in RepoTamperTests.swift.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct HostileInputTests {
    func makeShop(_ path: String) throws {
        try makeDatabase(path, """
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<500) INSERT INTO item SELECT i, 'item ' || i FROM r;
            """)
    }

    /// A database of about 130 pages, so that losing them all is a shrink of
    /// more than 90 %.
    func makeBig(_ path: String) throws {
        try makeDatabase(path, """
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<5000) INSERT INTO item SELECT i, printf('item %d %.*c', i, 90, 'x') FROM r;
            """)
    }

    /// No temporary file of a run is left in `folder`.
    func noLeftovers(_ folder: TemporaryFolder) throws -> Bool {
        try folder.listing().allSatisfy { !$0.contains(".tmp-") }
    }

    // MARK: The same-file rule, one test per writer

    /// The names that reach `db`'s own file or its -wal: itself, a symbolic
    /// link, a hard link, and its -wal path (a WAL-mode database, with a -wal
    /// held open so that it exists).
    func selfNames(_ db: String, in folder: TemporaryFolder) throws -> [String] {
        let soft = folder.file("soft-link.db"), hard = folder.file("hard-link.db")
        try? FileManager.default.removeItem(atPath: soft)
        try? FileManager.default.removeItem(atPath: hard)
        try FileManager.default.createSymbolicLink(atPath: soft, withDestinationPath: db)
        try FileManager.default.linkItem(atPath: db, toPath: hard)
        return [db, soft, hard, db + "-wal", db + "-journal"]
    }

    func expectRefused(_ r: ProcessResult, _ output: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 2, "\(output): \(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stderr.hasPrefix("litectl: \(output): is ") && r.stderr.contains(what) && r.stderr.hasSuffix("; write to another file\n"),
                "\(r.stderr)", sourceLocation: sourceLocation)
        #expect(r.stderr.split(separator: "\n").count == 1, sourceLocation: sourceLocation)
    }

    @Test func dumpNeverWritesOverItsDatabase() throws {
        let folder = try TemporaryFolder("hostile-dump")
        let db = folder.file("a.db")
        try makeShop(db)
        let before = try FileFingerprint(db)
        for target in try selfNames(db, in: folder) {
            expectRefused(try litectl("dump", db, "-o", target, "--force"), target, "the database being dumped")
        }
        #expect(try FileFingerprint(db) == before)
        #expect(!FileManager.default.fileExists(atPath: db + "-wal") && !FileManager.default.fileExists(atPath: db + "-journal"))
        // A csv dump (a folder) replacing the folder the database is in.
        let csv = try litectl("dump", db, "--format", "csv", "-o", folder.path, "--force")
        #expect(csv.status == 2 && csv.stderr.contains("holds the database being dumped"), "\(csv.stderr)")
        #expect(try FileFingerprint(db) == before)
        #expect(try noLeftovers(folder))
    }

    @Test func backupNeverWritesOverItsSource() throws {
        let folder = try TemporaryFolder("hostile-backup")
        let db = folder.file("a.db")
        try makeShop(db)
        let before = try FileFingerprint(db)
        for target in try selfNames(db, in: folder) {
            expectRefused(try litectl("backup", "--force", db, target), target, "the database being backed up")
        }
        // The metrics file is a file the run writes too.
        let metrics = try litectl("backup", "--metrics-file", db, db, folder.file("out"))
        #expect(metrics.status == 2 && metrics.stderr.contains("is a database being backed up itself"), "\(metrics.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("out")), "refused before anything is backed up")
        // The manifest goes beside the backup: never over the source, nor over a file already there without --force.
        let named = folder.file("b")
        try FileManager.default.copyItem(atPath: db, toPath: named + ".json")
        let json = try FileFingerprint(named + ".json")
        expectRefused(try litectl("backup", "--force", named + ".json", named), named + ".json", "the database being backed up")
        let existing = try litectl("backup", db, named)
        #expect(existing.status == 2 && existing.stderr == "litectl: \(named).json: already exists, and the backup's manifest goes there (use --force to replace it)\n",
                "\(existing.stderr)")
        #expect(try FileFingerprint(named + ".json") == json && !FileManager.default.fileExists(atPath: named))
        try FileManager.default.removeItem(atPath: named + ".json")
        #expect(try FileFingerprint(db) == before)
        #expect(try noLeftovers(folder))
    }

    /// A repository's key file is an input too: neither the metrics file of a
    /// backup nor a restore's target may replace it (every snapshot would be lost).
    @Test func theKeyFileIsNeverWrittenOver() throws {
        let folder = try TemporaryFolder("hostile-keyfile")
        let db = folder.file("a.db"), repo = folder.file("repo"), key = folder.file("repo.key")
        try makeShop(db)
        #expect(try litectl("repo", "init", repo, "--key-file", key).status == 0)
        let keyBefore = try FileFingerprint(key)
        let metrics = try litectl("backup", db, "--repo", repo, "--key-file", key, "--metrics-file", key)
        expectRefused(metrics, key, "a key, passphrase or config file the run reads")
        #expect(try litectl("backup", db, "--repo", repo, "--key-file", key).status == 0)
        let restore = try litectl("restore", "--repo", repo, "--key-file", key, "latest", "--force", "--no-keep", key)
        expectRefused(restore, key, "the repository's key or passphrase file")
        #expect(try FileFingerprint(key) == keyBefore)
        #expect(try litectl("verify", "--repo", repo, "--key-file", key, "--read-data").status == 0)
    }

    @Test func restoreNeverWritesOverItsBackup() throws {
        let folder = try TemporaryFolder("hostile-restore")
        let db = folder.file("a.db"), backup = folder.file("b.db")
        try makeShop(db)
        #expect(try litectl("backup", db, backup).status == 0)
        let before = try FileFingerprint(backup)
        for target in try selfNames(backup, in: folder) + [backup + ".json"] {
            expectRefused(try litectl("restore", "--force", backup, target), target, "the backup being restored")
        }
        #expect(try FileFingerprint(backup) == before)
        #expect(try litectl("verify", backup).status == 0, "the backup still verifies")
        #expect(try noLeftovers(folder))
    }

    @Test func loadNeverWritesOverItsInput() throws {
        let folder = try TemporaryFolder("hostile-load")
        let db = folder.file("a.db")
        try makeShop(db)
        let script = folder.file("dump.sql")
        #expect(try litectl("dump", db, "-o", script).status == 0)
        let before = try FileFingerprint(script)
        for target in [script, folder.file("dump-link.sql")] {
            if target != script { try FileManager.default.createSymbolicLink(atPath: target, withDestinationPath: script) }
            expectRefused(try litectl("load", target, script), target, "the input being loaded")
        }
        // A dump folder: loading into one of its files.
        let csv = folder.file("csv")
        #expect(try litectl("dump", db, "--format", "csv", "-o", csv).status == 0)
        let rows = csv + "/item.csv"
        let rowsBefore = try FileFingerprint(rows)
        expectRefused(try litectl("load", rows, csv), rows, "the input being loaded")
        #expect(try FileFingerprint(script) == before && FileFingerprint(rows) == rowsBefore)
        #expect(try noLeftovers(folder))
    }

    @Test func vacuumIntoAndRecoverNeverWriteOverTheirInput() throws {
        let folder = try TemporaryFolder("hostile-vacuum")
        let db = folder.file("a.db")
        try makeShop(db)
        let before = try FileFingerprint(db)
        for target in try selfNames(db, in: folder) {
            expectRefused(try litectl("vacuum", db, "--into", target, "--force"), target, "the database being vacuumed")
            expectRefused(try litectl("recover", "--force", db, target), target, "the damaged database")
        }
        #expect(try FileFingerprint(db) == before)
        #expect(try noLeftovers(folder))
    }

    @Test func aRepositoryRestoreNeverWritesIntoTheRepository() throws {
        let folder = try TemporaryFolder("hostile-repo-restore")
        let db = folder.file("a.db"), repo = folder.file("repo")
        try makeShop(db)
        #expect(try litectl("repo", "init", repo).status == 0)
        #expect(try litectl("backup", db, "--repo", repo).status == 0)
        let config = repo + "/config", configBefore = try FileFingerprint(config)
        for target in [config, repo + "/new.db", repo + "/snapshots/x.db"] {
            let r = try litectl("restore", "--repo", repo, "latest", "--force", target)
            #expect(r.status == 2 && r.stderr == "litectl: \(target): is inside the repository (\(repo)), which holds the command's inputs; write outside it\n", "\(r.stderr)")
        }
        #expect(try FileFingerprint(config) == configBefore)
        #expect(try litectl("verify", "--repo", repo, "--read-data").status == 0)
    }

    // MARK: A source that shrank to nothing is not a backup

    @Test func anEmptySourceIsRefusedAndRetentionKeepsTheLastGoodBackup() throws {
        let folder = try TemporaryFolder("hostile-empty")
        let live = folder.file("live.db"), out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        try makeBig(live)
        #expect(try litectl("backup", "--keep-last", "1", live, out).status == 0)
        let good = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix(".db") }
        #expect(good.count == 1)
        // The source wiped: refused, exit 2, one line naming it, the good backup kept.
        try Data().write(to: URL(fileURLWithPath: live))
        var r = try litectl("backup", "--keep-last", "1", live, out)
        #expect(r.status == 2 && r.stdout.isEmpty, "\(r.stderr)")
        #expect(r.stderr == "litectl: \(live): is empty (0 bytes); not backed up, since a source that shrank to nothing is not a backup (--allow-empty backs it up anyway)\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix(".db") } == good)
        // A schema-less (but not 0-byte) database too.
        try makeDatabase(live, "PRAGMA user_version=3; CREATE VIEW v AS SELECT 1;")
        r = try litectl("backup", live, out)
        #expect(r.status == 2 && r.stderr.contains("holds no tables"), "\(r.stderr)")
        // With --allow-empty it is backed up, flagged (stderr, JSON, metrics), and retention removes no older backup in that run.
        try Data().write(to: URL(fileURLWithPath: live))
        r = try litectl("backup", "--keep-last", "1", "--allow-empty", "--json", "--metrics-file", folder.file("m.prom"), live, out)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("warning: \(live): 1 page, 99% fewer than its last backup") && r.stderr.contains("retention removed no older backup"), "\(r.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let shrunk = try #require(json["shrunk"] as? [String: Any])
        #expect(shrunk["pages"] as? Int == 1 && (shrunk["previous_pages"] as? Int ?? 0) > 100)
        let metrics = try String(contentsOfFile: folder.file("m.prom"), encoding: .utf8)
        #expect(metrics.contains("litectl_backup_shrunk{source=\"\(BackupJob.resolvedPath(live))\"} 1"), "\(metrics)")
        // Next run of the cron line (no shrink against the empty backup): the
        // kept backups are all empty, so the newest with data stays.
        r = try litectl("backup", "--keep-last", "1", "--allow-empty", live, out)
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        let after = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix(".db") }.sorted()
        #expect(after.count == 2 && after.contains(good[0]), "\(after)")
        #expect(try sqlite3Scalar(out + "/" + good[0], "SELECT count(*) FROM item") == "5000")
    }

    @Test(arguments: RepoPlace.allCases)
    func anEmptySourceIsRefusedByRepositoryBackupsAndForgetKeepsData(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("hostile-empty-repo")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let live = folder.file("live.db")
        try makeBig(live)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        #expect(try repo.run(["backup", live]).status == 0)
        try Data().write(to: URL(fileURLWithPath: live))
        var r = try repo.run(["backup", live])
        #expect(r.status == 2 && r.stderr.contains("\(live): is empty (0 bytes); not backed up"), "\(r.stderr)")
        // Under --config too, with exit 2 (not the 1 of a database that fails).
        let config = folder.file("host.toml")
        try """
            repository = "\(repo.url)"
            databases = ["\(live)"]
            \(place == .s3 ? "endpoint = \"\(repo.options[1])\"" : "")
            """.write(toFile: config, atomically: true, encoding: .utf8)
        r = try runLitectl(["backup", "--config", config])
        #expect(r.status == 2 && r.stderr.contains("not backed up"), "\(r.stderr)")
        // Backed up on purpose, then retention: the snapshot with data stays.
        r = try repo.run(["backup", "--allow-empty", live])
        #expect(r.status == 0 && r.stderr.contains("99% fewer than its last backup"), "\(r.stderr)")
        r = try repo.run(["forget", "--keep-last", "1", "--prune"])
        #expect(r.status == 0, "\(r.stderr)")
        r = try repo.run(["snapshots", "--json"])
        let pages = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .compactMap { $0["page_count"] as? Int }
        #expect(pages.count == 2 && pages.contains { $0 > 100 }, "\(r.stdout)")
    }

    @Test func checkFailsOnAnEmptyFile() throws {
        let folder = try TemporaryFolder("hostile-check-empty")
        let zero = folder.file("zero.db"), bare = folder.file("bare.db")
        FileManager.default.createFile(atPath: zero, contents: Data())
        try makeDatabase(bare, "CREATE VIEW v AS SELECT 1;")
        var r = try litectl("check", "-v", zero, bare)
        #expect(r.status == 1, "an error, without --strict too: \(r.stderr)")
        #expect(r.stdout.contains("\(zero): error [empty] the file is empty (0 bytes)"), "\(r.stdout)")
        #expect(r.stdout.contains("\(bare): error [empty] the database holds no tables"), "\(r.stdout)")
        r = try litectl("check", "--strict", "--allow-empty", zero)
        #expect(r.status == 0, "unless --allow-empty says it is meant")
    }

    // MARK: A patch changes its target and nothing else

    @Test(arguments: [
        ("attach", "ATTACH '%OTHER%' AS e;\nDELETE FROM e.g;\n", "ATTACH"),
        ("attach later", "DELETE FROM item WHERE id = 1;\nATTACH '%OTHER%' AS e;\nDELETE FROM e.g;\n", "ATTACH"),
        ("shell first", ".shell touch %MARK%\nDELETE FROM item;\n", ".shell"),
        ("shell later", "DELETE FROM item;\n.shell touch %MARK%\n", ".shell"),
        ("open", ".bail on\n.open %OTHER%\nDELETE FROM g;\n", ".open"),
        ("vacuum into", "VACUUM INTO '%MARK%';\n", "VACUUM"),
        ("load_extension", "SELECT load_extension('%MARK%');\n", "load_extension"),
        ("writable_schema", "PRAGMA writable_schema=ON;\nUPDATE sqlite_schema SET sql = 'x';\n", "writable_schema"),
        ("journal_mode", "PRAGMA journal_mode=OFF;\nDELETE FROM item;\n", "journal_mode"),
        ("locking_mode", "PRAGMA locking_mode=EXCLUSIVE;\n", "locking_mode"),
        ("detach", "DETACH main;\n", "DETACH"),
    ])
    func aPatchIsConfinedToItsTarget(_ name: String, _ script: String, _ named: String) throws {
        let folder = try TemporaryFolder("hostile-patch")
        let db = folder.file("a.db"), other = folder.file("other.db"), mark = folder.file("mark")
        try makeShop(db)
        try makeDatabase(other, "CREATE TABLE g(x); INSERT INTO g VALUES (1);")
        let patch = folder.file("p.sql")
        try script.replacingOccurrences(of: "%OTHER%", with: other).replacingOccurrences(of: "%MARK%", with: mark)
            .write(toFile: patch, atomically: true, encoding: .utf8)
        let before = try FileFingerprint(db), otherBefore = try FileFingerprint(other)
        let r = try litectl("patch", db, patch)
        #expect(r.status == 2, "\(name): \(r.stderr)")
        #expect(r.stderr.hasPrefix("litectl: \(patch): ") && r.stderr.contains("the patch is refused, nothing applied") && r.stderr.contains(named),
                "\(name): \(r.stderr)")
        #expect(try FileFingerprint(db) == before && FileFingerprint(other) == otherBefore, "\(name)")
        #expect(!FileManager.default.fileExists(atPath: mark), "\(name)")
        #expect(try folder.listing() == ["a.db", "other.db", "p.sql"], "\(name): no file made")
    }

    /// A refused statement at the end of a long patch: what ran before it is
    /// rolled back, and a patch killed with SIGKILL at any moment leaves its
    /// journal, which the next connection rolls back: the database is as it
    /// was, whole, every time.
    @Test func aPatchRefusedOrKilledMidwayChangesNothing() throws {
        let folder = try TemporaryFolder("hostile-patch-kill")
        let db = folder.file("a.db"), other = folder.file("other.db"), patch = folder.file("p.sql")
        try makeBig(db)
        try makeDatabase(other, "CREATE TABLE g(x); INSERT INTO g VALUES (1);")
        let original = try litectl("hash", db).stdout
        var script = ".bail on\nBEGIN;\n"
        for i in 1...5000 { script += "UPDATE item SET name = 'patched \(i)' WHERE id = \(i);\n" }
        script += "ATTACH '\(other)' AS e;\nDELETE FROM e.g;\nCOMMIT;\n"
        try script.write(toFile: patch, atomically: true, encoding: .utf8)
        let r = try litectl("patch", db, patch)
        #expect(r.status == 2 && r.stderr.contains("ATTACH"), "\(r.stderr)")
        #expect(try litectl("hash", db).stdout == original)
        var rng = SplitMix64(seed: 11)
        for _ in 0..<5 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: litectlBinary)
            process.arguments = ["patch", db, patch]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(rng.next() % 150_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            // A writing connection (the sqlite3 shell) rolls back a hot journal.
            #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")
            #expect(try litectl("hash", db).stdout == original)
            #expect(try sqlite3Scalar(other, "SELECT count(*) FROM g") == "1")
        }
    }

    /// What a patch may do still works: litectl's own diff, through a pipe
    /// (`patch db <(...)`), a FIFO, and standard input.
    @Test func aDiffAppliesThroughAPipeAFIFOAndStandardInput() throws {
        let folder = try TemporaryFolder("hostile-patch-pipe")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeShop(a)
        try makeShop(b)
        _ = try sqlite3([b, "UPDATE item SET name = 'changed' WHERE id % 7 = 0; PRAGMA user_version = 9;"])
        let hashB = try litectl("hash", b).stdout.split(separator: " ").first
        for way in ["process substitution", "fifo", "stdin"] {
            let target = folder.file("t-\(way.count).db")
            try FileManager.default.copyItem(atPath: a, toPath: target)
            let r: ProcessResult
            switch way {
            case "process substitution":
                r = try runProcess("/bin/bash", ["-c", "\"$0\" patch \"$1\" <(\"$0\" diff --format sql \"$2\" \"$3\")", litectlBinary, target, a, b])
            case "fifo":
                let fifo = folder.file("patch.fifo")
                #expect(mkfifo(fifo, 0o600) == 0)
                r = try runProcess("/bin/bash", ["-c", "\"$0\" diff --format sql \"$2\" \"$3\" > \"$4\" & \"$0\" patch \"$1\" \"$4\"; wait",
                                                 litectlBinary, target, a, b, fifo])
                unlink(fifo)
            default:
                let diff = try litectl("diff", "--format", "sql", a, b)
                r = try litectl("patch", target, "-", input: diff.stdoutBytes)
            }
            #expect(r.status == 0, "\(way): \(r.stderr)")
            #expect(try litectl("hash", target).stdout.split(separator: " ").first == hashB, "\(way)")
        }
    }

    @Test func binaryJunkAsAPatchIsOneCleanLine() throws {
        let folder = try TemporaryFolder("hostile-patch-binary")
        let db = folder.file("a.db"), junk = folder.file("garbage.bin")
        try makeShop(db)
        var rng = SplitMix64(seed: 3)
        try Data((0..<4096).map { _ in UInt8(truncatingIfNeeded: rng.next()) }).write(to: URL(fileURLWithPath: junk))
        let before = try FileFingerprint(db)
        let r = try litectl("patch", db, junk)
        #expect(r.status == 2)
        #expect(r.stderr == "litectl: \(junk): not a SQL patch or a changeset (binary data that is not UTF-8 text)\n")
        #expect(try FileFingerprint(db) == before)
    }

    // MARK: Terminal output is escaped

    /// Bytes a terminal would act on: ESC, BEL, other C0 controls, C1
    /// controls and bidi overrides, or bytes that are not UTF-8.
    func hasControls(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        if Array(text.utf8) != bytes { return true }  // not UTF-8
        return text.unicodeScalars.contains { s in
            (s.value < 0x20 && s != "\n") || s.value == 0x7F || (0x80...0x9F).contains(s.value) || (0x202A...0x202E).contains(s.value)
        }
    }

    @Test func namesAndValuesFromFilesReachTheTerminalEscaped() throws {
        let folder = try TemporaryFolder("hostile-escape")
        // A file name with an escape sequence too.
        let db = folder.file("evil\u{1B}[31m.db"), db2 = folder.file("evil2.db")
        let table = "evil\u{1B}]0;pwned\u{07}\n\u{202E}txt"
        try makeDatabase(db, """
            CREATE TABLE "\(table)" (id INTEGER, "col\u{1B}[2J" TEXT);
            INSERT INTO "\(table)" VALUES (1, char(27) || '[2J' || char(13) || char(155) || 'x');
            INSERT INTO "\(table)" VALUES (2, CAST(x'ff1b5b324a' AS TEXT));
            """)
        try FileManager.default.copyItem(atPath: db, toPath: db2)
        _ = try sqlite3([db2, "UPDATE \"\(table)\" SET \"col\u{1B}[2J\" = 'fine' WHERE id = 1"])
        let quoted = "\"" + table + "\""
        let runs: [[String]] = [
            ["tables", db, "--format", "table"], ["tables", db, "--format", "markdown"],
            ["query", db, "SELECT * FROM \(quoted)", "--format", "table"],
            ["check", "-v", db], ["diff", db, db2], ["diff", "--summary", db, db2], ["info", db], ["hash", "--per-table", db],
            ["stats", db, "--format", "table"],
            ["query", db, "SELECT * FROM nosuch\u{1B}[2J"],  // an error line naming the table
            ["info", folder.file("missing\u{1B}]0;x\u{07}.db")],  // an error line naming the file
        ]
        for arguments in runs {
            let r = try runProcess(litectlBinary, arguments)
            #expect(!hasControls(r.stdoutBytes), "\(arguments[0]) stdout: \(r.stdout.debugDescription)")
            #expect(!hasControls(Array(r.stderr.utf8)), "\(arguments[0]) stderr: \(r.stderr.debugDescription)")
            #expect(r.stdout.contains("\\x1b") || r.stderr.contains("\\x1b"), "\(arguments) shows the escape visibly: \(r.stdout.debugDescription) \(r.stderr.debugDescription)")
        }
        // Machine formats stay exact: JSON escapes ESC as \u001b, CSV keeps the bytes.
        let json = try litectl("query", db, "SELECT \"col\u{1B}[2J\" AS v FROM \(quoted) WHERE id = 1", "--format", "json")
        #expect(json.stdout.contains("\"v\":\"\\u001B[2J\\r"), "\(json.stdout.debugDescription)")
        let csv = try litectl("query", db, "SELECT \"col\u{1B}[2J\" FROM \(quoted) WHERE id = 1", "--format", "csv", "--no-headers")
        #expect(Array(csv.stdoutBytes.prefix(4)) == [0x22, 0x1B, 0x5B, 0x32], "\(csv.stdout.debugDescription)")
        // A value that is not UTF-8 shows its bytes.
        let table2 = try litectl("query", db, "SELECT \"col\u{1B}[2J\" AS v FROM \(quoted) WHERE id = 2", "--format", "table")
        #expect(table2.stdout.contains("\\xff\\x1b[2J"), "\(table2.stdout.debugDescription)")
        // A zero-width space makes "users\u{200B}" print as "users": it shows.
        let spoof = folder.file("spoof.db")
        try makeDatabase(spoof, "CREATE TABLE users(a); CREATE TABLE \"users\u{200B}\"(a); CREATE TABLE \"u\u{FEFF}sers\"(a);")
        let listed = try litectl("tables", spoof, "--format", "table")
        #expect(listed.stdout.contains("users\\u{200B}") && listed.stdout.contains("u\\u{FEFF}sers"), "\(listed.stdout.debugDescription)")
    }

    // MARK: Clear facts in errors

    @Test func aTruncatedOrForeignFileGetsTheSameWordsEverywhere() throws {
        let folder = try TemporaryFolder("hostile-truncated")
        let full = folder.file("full.db")
        try makeShop(full)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: full))
        let cut = folder.file("cut.db"), header = folder.file("header.db"), text = folder.file("text.db")
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: cut))
        try bytes.prefix(50).write(to: URL(fileURLWithPath: header))
        try Data(String(repeating: "just some text, not a database at all\n", count: 10).utf8).write(to: URL(fileURLWithPath: text))
        let commands: [[String]] = [["info"], ["check"], ["hash"], ["tables"], ["stats"], ["dump"], ["query"], ["analyze", "--dry-run"],
                                    ["diff"], ["vacuum", "--dry-run"]]
        for (file, words) in [(cut, "truncated: not a complete SQLite database (its header gives"),
                              (header, "truncated: not a complete SQLite database (the file is 50 bytes, shorter than the 100-byte header)"),
                              (text, "not a SQLite database (no \"SQLite format 3\" header)")] {
            for command in commands {
                var arguments = command + [file]
                if command == ["query"] { arguments.append("SELECT 1") }
                if command == ["diff"] { arguments.append(full) }
                let r = try litectl(arguments)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stdout) \(r.stderr)")
                #expect(r.stderr.contains("litectl: \(file): \(words)"), "\(arguments): \(r.stderr)")
            }
        }
    }

    @Test func aLockTimeoutStatesTheWaitItMade() throws {
        let folder = try TemporaryFolder("hostile-lock")
        let db = folder.file("a.db")
        try makeShop(db)
        let shell = try ShellSession(db)
        defer { shell.close() }
        shell.run("BEGIN EXCLUSIVE; DELETE FROM item WHERE id = 1;")
        for arguments in [["backup", "--timeout", "1.5", db, folder.file("b.db")], ["check", "--busy-timeout", "1500", db]] {
            let started = Date()
            let r = try litectl(arguments)
            let waited = Date().timeIntervalSince(started)
            #expect(r.status == 2 && waited >= 1.4, "\(arguments): \(r.stderr)")
            // "gave up after waiting 1.5 s" (or a tenth more on a slow machine), never "0 ms".
            let said = r.stderr.components(separatedBy: "gave up after waiting ").last?.split(separator: " ").first.flatMap { Double($0) }
            #expect(r.stderr.contains("database is locked by another process (gave up after waiting ") && (said ?? 0) >= 1.4 && (said ?? 0) <= waited + 0.1,
                    "\(arguments): \(r.stderr)")
        }
    }
}

extension HostileInputTests {
    func litectl(_ arguments: [String]) throws -> ProcessResult { try runProcess(litectlBinary, arguments) }
    func litectl(_ arguments: String..., input: [UInt8]? = nil) throws -> ProcessResult {
        try runProcess(litectlBinary, arguments, input: input)
    }
}
