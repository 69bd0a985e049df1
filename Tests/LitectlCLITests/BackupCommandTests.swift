// `litectl backup`, `verify` and `restore` through the built binary, judged by
// independent tools: the sqlite3 CLI (integrity_check, .dump, an invariant a
// concurrent writer keeps), gunzip, sha256sum, and the file system itself
// (no file under a final name after errors, kills and full disks).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct BackupCommandTests {
    /// Accounts whose balances always total 1,000,000, plus filler rows so a
    /// copy takes many backup steps.
    func makeBank(_ path: String, journal: String, fillerRows: Int = 40_000) throws {
        try makeDatabase(path, """
            PRAGMA journal_mode=\(journal);
            CREATE TABLE acct(id INTEGER PRIMARY KEY, bal INTEGER NOT NULL);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<1000) INSERT INTO acct SELECT i, 1000 FROM r;
            CREATE TABLE log(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<\(fillerRows)) INSERT INTO log SELECT randomblob(300) FROM r;
            CREATE INDEX log_x ON log(x);
            """)
    }

    /// A python3 process that moves amounts between accounts in transactions
    /// (the total never changes) until `stopFile` exists; prints its commit count.
    func startWriter(_ db: String, folder: TemporaryFolder) throws -> (Process, String) {
        let script = folder.file("writer.py")
        try """
            import sqlite3, sys, random, os, time
            db, stop = sys.argv[1], sys.argv[2]
            c = sqlite3.connect(db, timeout=60, isolation_level=None)
            rnd = random.Random(7); n = 0
            while not os.path.exists(stop):
                a, b, amt = rnd.randrange(1, 1001), rnd.randrange(1, 1001), rnd.randrange(1, 100)
                c.execute("BEGIN IMMEDIATE")
                c.execute("UPDATE acct SET bal = bal - ? WHERE id = ?", (amt, a))
                c.execute("UPDATE acct SET bal = bal + ? WHERE id = ?", (amt, b))
                c.execute("INSERT INTO log(x) VALUES (randomblob(200))")
                c.execute("COMMIT"); n += 1
                time.sleep(0.002)
            print(n)
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        let stop = folder.file("stop")
        process.arguments = [script, db, stop]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        return (process, stop)
    }

    func shell(_ script: String, in folder: String? = nil) throws -> ProcessResult {
        try runProcess("/bin/bash", ["-c", script], currentDirectory: folder)
    }

    /// Files in `folder` that are not hidden (backups and manifests).
    func visible(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") }.sorted()
    }

    func manifest(_ path: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    }

    @Test(arguments: ["wal", "delete"])
    func backupUnderAConcurrentWriter(journal: String) throws {
        let folder = try TemporaryFolder("backup-writer")
        let db = folder.file("bank.db")
        try makeBank(db, journal: journal)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let (writer, stop) = try startWriter(db, folder: folder)
        Thread.sleep(forTimeInterval: 0.3)
        var results: [ProcessResult] = []
        for _ in 0..<3 { results.append(try litectl("backup", "--timeout", "30", "-v", db, out)) }
        FileManager.default.createFile(atPath: stop, contents: nil)
        writer.waitUntilExit()
        for result in results {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.isEmpty)
        }
        let backups = try visible(out).filter { $0.hasSuffix(".db") }
        #expect(backups.count == 3)
        var states = Set<String>()
        for name in backups {
            let path = out + "/" + name
            #expect(try sqlite3Scalar(path, "PRAGMA integrity_check") == "ok")
            #expect(try sqlite3Scalar(path, "SELECT sum(bal) FROM acct") == "1000000")
            states.insert(try sqlite3Scalar(path, "SELECT count(*) FROM log"))
            let m = try manifest(path + ".json")
            #expect(m["journal_mode"] as? String == journal)
            // Hashed as written, or (after a restart rewrote pages) read back: either way the file's hash.
            let sha = try shell("sha256sum '\(path)' | cut -d' ' -f1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(m["sha256"] as? String == sha)
            if journal == "wal" {
                #expect(m["strategy"] as? String == "wal-snapshot")
                #expect(m["writers_blocked_seconds"] as? Double == 0)
            } else {
                #expect(["steps", "locked-snapshot"].contains(m["strategy"] as? String ?? ""))
            }
        }
        // The writer committed between the runs: each copy is a different committed state.
        #expect(states.count >= 2)
        #expect(try sqlite3Scalar(db, "SELECT sum(bal) FROM acct") == "1000000")
    }

    @Test func manifestPermissionsAndVerify() throws {
        let folder = try TemporaryFolder("backup-manifest")
        let db = folder.file("app.sqlite3")
        try makeBank(db, journal: "delete", fillerRows: 2000)
        try makeDatabase(db, "PRAGMA user_version=42;")
        chmod(db, 0o600)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        // umask 0 must not widen the backup's permissions.
        let result = try shell("umask 000; exec '\(litectlBinary)' backup '\(db)' '\(out)'")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.isEmpty && result.stderr.isEmpty, "silent on success")
        let names = try visible(out)
        #expect(names.count == 2)
        let backup = try #require(names.first { $0.hasSuffix(".db") })
        #expect(backup.hasPrefix("app-") && backup.count == "app-20261122T023209Z.db".count)
        for name in names {
            let mode = try #require(FileManager.default.attributesOfItem(atPath: out + "/" + name)[.posixPermissions] as? Int)
            #expect(mode == 0o600, "\(name)")
        }
        let m = try manifest(out + "/" + backup + ".json")
        let sha = try shell("sha256sum '\(out)/\(backup)' | cut -d' ' -f1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(m["sha256"] as? String == sha)
        #expect(m["backup"] as? String == backup)
        #expect(m["source"] as? String == db)
        #expect((m["user_version"] as? NSNumber)?.intValue == 42)
        #expect((m["page_count"] as? NSNumber)?.stringValue == (try sqlite3Scalar(db, "PRAGMA page_count")))
        #expect((m["bytes"] as? NSNumber)?.int64Value == (try FileManager.default.attributesOfItem(atPath: db)[.size] as? NSNumber)?.int64Value)
        #expect((m["verification"] as? [String: Any])?["result"] as? String == "ok")
        #expect(try sqlite3(["-batch", out + "/" + backup, ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))

        // verify: good, then a flipped byte (hash mismatch) gives exit 1.
        let good = try litectl("verify", "-v", out + "/" + backup)
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        #expect(good.stdout.hasPrefix("ok "))
        var bytes = try Data(contentsOf: URL(fileURLWithPath: out + "/" + backup))
        bytes[bytes.count - 10] ^= 0x55
        try bytes.write(to: URL(fileURLWithPath: out + "/" + backup))
        let bad = try litectl("verify", out + "/" + backup)
        #expect(bad.status == 1)
        #expect(bad.stdout.contains("SHA-256 does not match"))
        let missing = try litectl("verify", out + "/nope.db")
        #expect(missing.status == 2)
        #expect(missing.stderr == "litectl: \(out)/nope.db: no such file\n")
    }

    /// The gzip member offsets of `path`, by Python's zlib (an independent reader).
    func gzipMembers(_ path: String) throws -> [Int] {
        let script = """
            import sys, zlib
            data = open(sys.argv[1], 'rb').read(); pos = 0; starts = []
            while pos < len(data):
                d = zlib.decompressobj(31); d.decompress(data[pos:])
                if not d.eof: sys.exit('truncated member at %d' % pos)
                starts.append(pos); pos = len(data) - len(d.unused_data)
            print(' '.join(map(str, starts)))
            """
        let result = try runProcess("/usr/bin/python3", ["-c", script, path])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
    }

    func contentHash(_ path: String) throws -> String {
        String(try litectl("hash", path).stdout.split(separator: " ").first ?? "")
    }

    @Test func gzipRoundTrip() throws {
        let folder = try TemporaryFolder("backup-gzip")
        let db = folder.file("bank.db")
        try makeBank(db, journal: "wal", fillerRows: 30_000)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let result = try litectl("backup", "--gzip-level", "1", "--json", db, out)
        #expect(result.status == 0, "\(result.stderr)")
        let line = try #require(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let gz = try #require(line["backup"] as? String)
        #expect(gz.hasSuffix(".db.gz"))
        let m = try #require(line["manifest"] as? [String: Any])
        // The independent gunzip gives back exactly the database the manifest describes.
        let unzipped = folder.file("unzipped.db")
        #expect(try shell("gunzip -c '\(gz)' > '\(unzipped)'").status == 0)
        let sha = try shell("sha256sum '\(unzipped)' | cut -d' ' -f1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(m["database_sha256"] as? String == sha)
        #expect((m["compressed_bytes"] as? NSNumber)?.int64Value == (try FileManager.default.attributesOfItem(atPath: gz)[.size] as? NSNumber)?.int64Value)
        #expect(try sqlite3(["-batch", unzipped, ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))
        #expect(try contentHash(unzipped) == (try contentHash(db)))
        #expect(try litectl("verify", "--quick", gz).status == 0)
        // One gzip member per 4 MiB block of the database, compressed in parallel.
        let bytes = Int(try #require((m["bytes"] as? NSNumber)?.intValue))
        let members = try gzipMembers(gz)
        #expect(bytes > 12 << 20)
        #expect(members.count == (bytes + (4 << 20) - 1) / (4 << 20))

        // restore from .gz into a new file: same content as the source.
        let restored = folder.file("restored.db")
        let r = try litectl("restore", gz, restored)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try sqlite3(["-batch", restored, ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))
        #expect(try contentHash(restored) == (try contentHash(db)))
        #expect(try visible(out).count == 2, "verify/restore leave no decompressed copies")

        // Cut at a member boundary the file is still valid gzip (gunzip reads
        // it): the SHA-256 against the manifest is what tells it is short.
        let whole = try Data(contentsOf: URL(fileURLWithPath: gz))
        try whole.prefix(members[members.count - 1]).write(to: URL(fileURLWithPath: gz))
        #expect(try shell("gunzip -t '\(gz)'").status == 0)
        let cut = try litectl("verify", gz)
        #expect(cut.status == 1)
        #expect(cut.stdout.contains("SHA-256 does not match the manifest"), "\(cut.stdout)")
        // Bytes after the last member that are not a member: a damaged file.
        try (whole + Data("not gzip".utf8)).write(to: URL(fileURLWithPath: gz))
        let trailing = try litectl("verify", gz)
        #expect(trailing.status == 1)
        #expect(trailing.stdout.contains("not a valid gzip file"), "\(trailing.stdout)")

        // A truncated .gz is a bad backup (exit 1), and restore refuses it.
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: gz))
        let v = try litectl("verify", gz)
        #expect(v.status == 1)
        #expect(v.stdout.contains("BAD"))
        let r2 = try litectl("restore", gz, folder.file("r2.db"))
        #expect(r2.status == 2)
        #expect(!FileManager.default.fileExists(atPath: folder.file("r2.db")))
    }

    @Test func corruptSourceKeepsNothing() throws {
        let folder = try TemporaryFolder("backup-corrupt")
        let db = folder.file("bank.db")
        try makeBank(db, journal: "delete", fillerRows: 3000)
        // Flip bytes inside a b-tree page of the log table (not page 1, so it opens).
        let root = Int(try sqlite3Scalar(db, "SELECT rootpage FROM sqlite_schema WHERE name='log'"))!
        let pageSize = Int(try sqlite3Scalar(db, "PRAGMA page_size"))!
        var bytes = try Data(contentsOf: URL(fileURLWithPath: db))
        for i in 0..<64 { bytes[(root - 1) * pageSize + 8 + i] ^= 0xA5 }
        try bytes.write(to: URL(fileURLWithPath: db))
        let before = try FileFingerprint(db)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let result = try litectl("backup", db, out)
        #expect(result.status == 2)
        #expect(result.stderr.hasPrefix("litectl: \(db): "), "\(result.stderr)")
        #expect(result.stderr.contains("corrupt"))
        #expect(result.stderr.split(separator: "\n").count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [".litectl-backup.lock"])
        #expect(try FileFingerprint(db) == before)
    }

    @Test func killedAtSeveralPointsLeavesNothingUnderTheFinalName() throws {
        let folder = try TemporaryFolder("backup-kill")
        let db = folder.file("big.db")
        try makeBank(db, journal: "wal", fillerRows: 150_000)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        for (signal, delay) in [("KILL", 0.02), ("KILL", 0.1), ("KILL", 0.25), ("TERM", 0.1), ("INT", 0.2)] {
            let result = try shell("""
                '\(litectlBinary)' backup --gzip '\(db)' '\(out)' & pid=$!
                sleep \(delay); kill -\(signal) $pid; wait $pid; echo "status=$?"
                """)
            let names = try visible(out)
            if names.count == 1 && signal == "KILL" {
                // Killed between the manifest's rename and the backup's: a
                // manifest without its backup, which verify reports (retention
                // removes it: aManifestWithoutItsBackupIsReportedAndPruned).
                #expect(names[0].hasSuffix(".db.gz.json"), "\(names)")
                #expect(try litectl("verify", out).stdout.contains("missing"))
                try FileManager.default.removeItem(atPath: out + "/" + names[0])
                continue
            }
            #expect(names.isEmpty || names.count == 2, "\(signal) after \(delay) s: \(names)")
            if names.count == 2 {
                // The run finished before the signal: then the backup is whole.
                #expect(try litectl("verify", "--quick", out + "/" + names.first { $0.hasSuffix(".gz") }!).status == 0)
                for name in names { try FileManager.default.removeItem(atPath: out + "/" + name) }
            } else if signal != "KILL" {
                #expect(result.stdout.contains("status=2"), "\(result.stdout)")
                // The handler removed its temporary files.
                #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [".litectl-backup.lock"])
            }
        }
        // The next run removes what SIGKILL left, and succeeds.
        let next = try litectl("backup", "--keep-last", "5", db, out)
        #expect(next.status == 0, "\(next.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.contains(".tmp-") }
        #expect(left.isEmpty, "\(left)")
        #expect(try visible(out).count == 2, "the new backup and its manifest only")
    }

    /// What a SIGKILL between the manifest's rename and the backup's leaves
    /// (the manifest under its final name, the backup under its hidden
    /// temporary name), made by hand since that window is too short to hit:
    /// verify reports it, whether given the folder, the manifest or the
    /// backup's path; retention removes it for its own source only.
    @Test func aManifestWithoutItsBackupIsReportedAndPruned() throws {
        let folder = try TemporaryFolder("backup-dangling")
        let db = folder.file("app.db"), other = folder.file("other.db")
        try makeBank(db, journal: "wal", fillerRows: 10)
        try makeBank(other, journal: "delete", fillerRows: 10)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        for source in [db, db, other] { #expect(try litectl("backup", source, out).status == 0) }
        let apps = try visible(out).filter { $0.hasPrefix("app-") && $0.hasSuffix(".db") }
        let otherBackup = try #require(try visible(out).first { $0.hasPrefix("other-") && $0.hasSuffix(".db") })
        #expect(apps.count == 2)
        let lost = apps[0], kept = apps[1]
        #expect(rename(out + "/" + lost, out + "/." + lost + ".tmp-2147483647-1") == 0)
        #expect(unlink(out + "/" + otherBackup) == 0)
        // JSON litectl did not make, and a litectl manifest not named after its backup: never touched.
        try #"{"format": "something else", "backup": "x.db"}"#.write(toFile: out + "/notes.json", atomically: false, encoding: .utf8)
        try FileManager.default.copyItem(atPath: out + "/" + lost + ".json", toPath: out + "/renamed.json")

        let missing = "missing: \(lost).json is there but the backup file is not"
        let all = try litectl("verify", "-v", "--quick", out)
        #expect(all.status == 1)
        let lines = all.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(all.stdout)")
        #expect(lines.contains { $0.hasPrefix("BAD \(out)/\(lost): \(missing)") }, "\(all.stdout)")
        #expect(lines.contains { $0.hasPrefix("BAD \(out)/\(otherBackup): missing: ") })
        #expect(lines.contains { $0.hasPrefix("ok \(out)/\(kept) ") })
        for argument in [out + "/" + lost + ".json", out + "/" + lost] {
            let one = try litectl("verify", argument)
            #expect(one.status == 1)
            #expect(one.stdout.hasPrefix("BAD \(out)/\(lost): \(missing)"), "\(argument): \(one.stdout)")
        }
        let json = try litectl("verify", "--json", out + "/" + lost + ".json")
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["ok"] as? Bool == false)
        #expect(object["compressed"] is NSNull && object["sha256"] is NSNull && object["check"] is NSNull)
        #expect(object["manifest"] as? String == out + "/" + lost + ".json")
        #expect((object["result"] as? String)?.hasPrefix(missing) == true)
        #expect(try litectl("verify", folder.path).status == 2, "a folder without manifests is an error")

        // --dry-run names it, for this source only, and removes nothing.
        let dry = try litectl("backup", "--dry-run", "--keep-last", "10", db, out)
        #expect(dry.status == 0)
        #expect(dry.stdout == "would remove \(out)/\(lost).json (a manifest whose backup does not exist)\n")
        #expect(FileManager.default.fileExists(atPath: out + "/" + lost + ".json"))
        // A run with retention removes it and says so; the other source's stays.
        let run = try litectl("backup", "-v", "--keep-last", "10", db, out)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("pruned \(out)/\(lost).json (a manifest whose backup does not exist)\n"), "\(run.stdout)")
        #expect(!FileManager.default.fileExists(atPath: out + "/" + lost + ".json"))
        #expect(!FileManager.default.fileExists(atPath: out + "/." + lost + ".tmp-2147483647-1"), "stale temporary file removed")
        for name in [otherBackup + ".json", "notes.json", "renamed.json", kept, kept + ".json"] {
            #expect(FileManager.default.fileExists(atPath: out + "/" + name), "\(name)")
        }
        // --json names what it removed.
        #expect(unlink(out + "/" + kept) == 0)
        let quiet = try litectl("backup", "--json", "--keep-last", "10", db, out)
        let line = try #require(JSONSerialization.jsonObject(with: Data(quiet.stdout.utf8)) as? [String: Any])
        #expect(line["pruned_manifests"] as? [String] == [out + "/" + kept + ".json"])
        #expect(line["pruned"] as? [String] == [])
        let after = try litectl("verify", "--quick", out)
        #expect(after.status == 1)
        #expect(after.stdout.split(separator: "\n").filter { $0.hasPrefix("BAD ") }.count == 1, "only the other source's: \(after.stdout)")
    }

    @Test func fullDiskIsAClearError() throws {
        let folder = try TemporaryFolder("backup-full")
        let db = folder.file("bank.db")
        try makeBank(db, journal: "delete", fillerRows: 20_000)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        // ulimit -f counts 1024-byte blocks: 2 MB is less than the database.
        for extra in ["", "--gzip-level 1 --verify none", "--vacuum"] {
            let result = try shell("ulimit -f 2048; exec '\(litectlBinary)' backup \(extra) '\(db)' '\(out)'")
            #expect(result.status == 2, "\(extra): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("litectl: \(out)/bank-"), "names the destination: \(result.stderr)")
            #expect(result.stderr.contains("cannot write the copy: "), "\(result.stderr)")
            #expect(!result.stderr.contains("not an error") && !result.stderr.contains(".tmp-"), "\(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [".litectl-backup.lock"], "\(extra)")
        }
    }

    /// A real full disk (a small tmpfs, when this process may mount one): for
    /// sizes around the database's, each run either keeps a backup and its
    /// manifest, or nothing at all.
    @Test func aFullFilesystemLeavesABackupWithItsManifestOrNothing() throws {
        let folder = try TemporaryFolder("backup-tmpfs")
        let db = folder.file("bank.db")
        try makeBank(db, journal: "delete", fillerRows: 20_000)
        let size = Int(try FileManager.default.attributesOfItem(atPath: db)[.size] as! Int)
        var mounted = 0
        for kib in stride(from: size / 1024 - 64, through: size / 1024 + 96, by: 8) {
            let mount = folder.file("mnt\(kib)")
            try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
            guard try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=\(kib)k", "tmpfs", mount]).status == 0 else { continue }
            mounted += 1
            defer { _ = try? runProcess("/bin/umount", [mount]) }
            let result = try litectl("backup", "--verify", "none", db, mount + "/")
            let files = try FileManager.default.contentsOfDirectory(atPath: mount).filter { $0 != ".litectl-backup.lock" }
            if result.status == 0 {
                #expect(files.count == 2 && files.contains { $0.hasSuffix(".db") } && files.contains { $0.hasSuffix(".db.json") },
                        "\(kib) KiB: \(files)")
            } else {
                #expect(result.status == 2)
                #expect(files.isEmpty, "\(kib) KiB left \(files) after: \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            }
        }
        if mounted == 0 { print("tmpfs could not be mounted here; covered by the ulimit test only") }
    }

    @Test func lockMakesASecondRunWaitOrFail() throws {
        let folder = try TemporaryFolder("backup-lock")
        let db = folder.file("bank.db")
        try makeBank(db, journal: "wal", fillerRows: 100)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        // O_CLOEXEC: a child spawned meanwhile by a test running in parallel
        // must not inherit the descriptor, which would hold the lock after close.
        let fd = open(out + "/.litectl-backup.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(flock(fd, LOCK_EX) == 0)
        let fails = try litectl("backup", "--timeout", "0.3", db, out)
        #expect(fails.status == 2)
        #expect(fails.stderr.contains("another litectl backup"), "\(fails.stderr)")
        #expect(try visible(out).isEmpty)
        // Released while the second run waits: it then proceeds.
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.4) { close(fd) }
        let waits = try litectl("backup", "--timeout", "20", db, out)
        #expect(waits.status == 0, "\(waits.stderr)")
        #expect(try visible(out).count == 2)
    }

    @Test func severalSourcesAreIndependentAndMetricsAreWritten() throws {
        let folder = try TemporaryFolder("backup-several")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeBank(a, journal: "wal", fillerRows: 100)
        try makeBank(b, journal: "delete", fillerRows: 100)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let metrics = folder.file("litectl.prom")
        let result = try litectl("backup", "--metrics-file", metrics, a, folder.file("missing.db"), b, out)
        #expect(result.status == 2)
        #expect(result.stderr == "litectl: \(folder.file("missing.db")): no such file\n")
        let names = try visible(out)
        #expect(names.filter { $0.hasSuffix(".db") }.count == 2)
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("litectl_backup_success{source=\"\(a)\"} 1"))
        #expect(text.contains("litectl_backup_success{source=\"\(folder.file("missing.db"))\"} 0"))
        #expect(text.contains("litectl_backup_verified{source=\"\(b)\"} 1"))
        #expect(text.contains("litectl_backup_last_success_timestamp_seconds{source=\"\(b)\"} "))
        // promtool's grammar, in short: every sample line is NAME{LABELS} NUMBER.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.wholeMatch(of: /litectl_backup_[a-z_]+\{source="[^"]*"\} -?[0-9.]+/) != nil, "\(line)")
        }
        // A failure later keeps the last success time of a source.
        let old = text.split(separator: "\n").first { $0.hasPrefix("litectl_backup_last_success_timestamp_seconds{source=\"\(a)\"}") }
        try FileManager.default.removeItem(atPath: a)
        #expect(try litectl("backup", "--metrics-file", metrics, a, out).status == 2)
        let text2 = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text2.contains(String(try #require(old))))
        #expect(text2.contains("litectl_backup_success{source=\"\(a)\"} 0"))
    }

    @Test func retentionOverASimulatedYear() throws {
        let folder = try TemporaryFolder("backup-retention")
        let db = folder.file("app.db")
        try makeBank(db, journal: "wal", fillerRows: 10)
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        #expect(try litectl("backup", db, out).status == 0)
        let real = try #require(try visible(out).first { $0.hasSuffix(".db") })
        let template = try String(contentsOfFile: out + "/" + real + ".json", encoding: .utf8)
        // A year of backups every 7 hours, ending 10 days ago (so a new one is the newest).
        let now = Date().timeIntervalSince1970
        var times: [Double] = []
        var t = now - 10 * 86_400 - 365 * 86_400
        while t < now - 10 * 86_400 { times.append(t); t += 7 * 3_600 }
        // Named as litectl names folder backups: retention removes nothing else.
        let stamp = DateFormatter()
        stamp.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        stamp.timeZone = TimeZone(identifier: "UTC")
        stamp.locale = Locale(identifier: "en_US_POSIX")
        func oldName(_ i: Int) -> String { "app-\(stamp.string(from: Date(timeIntervalSince1970: times[i]))).db" }
        for (i, time) in times.enumerated() {
            let name = oldName(i)
            try "x".write(toFile: out + "/" + name, atomically: false, encoding: .utf8)
            let json = template.replacingOccurrences(of: real, with: name)
                .replacing(#/"started_at_unix": [0-9.e+]+/#, with: "\"started_at_unix\": \(time)")
            try json.write(toFile: out + "/" + name + ".json", atomically: false, encoding: .utf8)
        }
        // Files litectl did not make, and backups of another source, are never touched.
        try "keep me".write(toFile: out + "/notes.txt", atomically: false, encoding: .utf8)
        try "y".write(toFile: out + "/other-old.db", atomically: false, encoding: .utf8)
        try template.replacingOccurrences(of: real, with: "other-old.db").replacingOccurrences(of: db, with: db + "-other")
            .replacing(#/"started_at_unix": [0-9.e+]+/#, with: "\"started_at_unix\": \(times[0])")
            .write(toFile: out + "/other-old.db.json", atomically: false, encoding: .utf8)

        let dry = try litectl("backup", "--dry-run", "--keep-last", "3", "--keep-daily", "7", "--keep-weekly", "5",
                              "--keep-monthly", "12", db, out)
        #expect(dry.status == 0)
        let listed = dry.stdout.split(separator: "\n").map { String($0.dropFirst("would remove \(out)/".count)) }
        let result = try litectl("backup", "-v", "--keep-last", "3", "--keep-daily", "7", "--keep-weekly", "5",
                                 "--keep-monthly", "12", db, out)
        #expect(result.status == 0, "\(result.stderr)")
        let newest = try #require(try visible(out).first {
            $0.hasPrefix("app-2") && $0.hasSuffix(".db") && $0 != real && !(0..<times.count).map(oldName).contains($0)
        })

        // The oracle: Foundation's calendar (UTC, ISO weeks), newest backup per
        // bucket for the N newest buckets of each rule, union of the rules.
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let all: [(String, Double)] = [(real, (try manifest(out + "/" + real + ".json"))["started_at_unix"] as! Double)]
            + times.enumerated().map { (oldName($0.offset), $0.element) } + [(newest, now)]
        let newestFirst = all.sorted { $0.1 > $1.1 }
        func keep(_ n: Int, _ bucket: (Date) -> [Int]) -> Set<String> {
            var seen: [[Int]] = [], kept = Set<String>()
            for (name, time) in newestFirst {
                let b = bucket(Date(timeIntervalSince1970: time))
                if seen.last != b && seen.count < n { seen.append(b); kept.insert(name) }
            }
            return kept
        }
        let expectedKept = keep(3) { _ in [Int.random(in: 0...Int.max)] }
            .union(keep(7) { calendar.dateComponents([.year, .month, .day], from: $0).values })
            .union(keep(5) { calendar.dateComponents([.yearForWeekOfYear, .weekOfYear], from: $0).values })
            .union(keep(12) { calendar.dateComponents([.year, .month], from: $0).values })
        let remaining = Set(try visible(out).filter { $0.hasPrefix("app-") && $0.hasSuffix(".db") })
        #expect(remaining == expectedKept)
        #expect(remaining.count < all.count)
        for name in remaining { #expect(FileManager.default.fileExists(atPath: out + "/" + name + ".json")) }
        #expect(FileManager.default.fileExists(atPath: out + "/notes.txt"))
        #expect(FileManager.default.fileExists(atPath: out + "/other-old.db"))
        #expect(FileManager.default.fileExists(atPath: out + "/other-old.db.json"))
        // --dry-run listed exactly what went (the new backup took the place it assumed).
        let removed = Set(all.map(\.0)).subtracting(remaining)
        #expect(Set(listed) == removed)
        #expect(result.stdout.split(separator: "\n").filter { $0.hasPrefix("pruned ") }.count == removed.count)
    }

    @Test func restoreWithAndWithoutForce() throws {
        let folder = try TemporaryFolder("backup-restore")
        let db = folder.file("app.db")
        try makeBank(db, journal: "wal", fillerRows: 500)
        let backupPath = folder.file("app-backup.db")
        #expect(try litectl("backup", db, backupPath).status == 0)
        #expect(try litectl("backup", db, backupPath).status == 2, "an existing destination file needs --force")

        // The live database moves on; then restore the backup over it.
        let target = folder.file("target.db")
        try FileManager.default.copyItem(atPath: db, toPath: target)
        try makeDatabase(target, "UPDATE acct SET bal = 0 WHERE id = 1; CREATE TABLE extra(x);")
        let changed = try sqlite3(["-batch", target, ".dump"])
        let refused = try litectl("restore", backupPath, target)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("already exists"))
        #expect(try sqlite3(["-batch", target, ".dump"]) == changed)

        // A connection that has the target open sees the restored content afterwards.
        let reader = try Connection(path: target, mode: .readOnly)
        #expect(try reader.scalar("SELECT count(*) FROM sqlite_schema WHERE name='extra'") == .integer(1))
        let forced = try litectl("restore", "--force", "-v", backupPath, target)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try reader.scalar("SELECT count(*) FROM sqlite_schema WHERE name='extra'") == .integer(0))
        #expect(try sqlite3(["-batch", target, ".dump"]) == (try sqlite3(["-batch", backupPath, ".dump"])))
        #expect(try sqlite3Scalar(target, "PRAGMA integrity_check") == "ok")
        let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("target.db.before-restore-") && !$0.hasSuffix(".json") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
        #expect(kept.count == 1)
        #expect(try sqlite3(["-batch", folder.file(try #require(kept.first)), ".dump"]) == changed)

        let noKeep = try litectl("restore", "--force", "--no-keep", backupPath, target)
        #expect(noKeep.status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("target.db.before-restore-") && !$0.hasSuffix(".json") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.count == 1)
    }
}

extension BackupCommandTests {
    @Test func restoreOverAFileThatIsNoLongerADatabase() throws {
        let folder = try TemporaryFolder("backup-restore-garbage")
        let db = folder.file("app.db")
        try makeBank(db, journal: "delete", fillerRows: 200)
        let backupPath = folder.file("backup.db")
        #expect(try litectl("backup", db, backupPath).status == 0)
        let target = folder.file("target.db")
        let garbage = Data(String(repeating: "overwritten by a bad script\n", count: 300).utf8)
        try garbage.write(to: URL(fileURLWithPath: target))
        let result = try litectl("restore", "--force", backupPath, target)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try sqlite3(["-batch", target, ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))
        let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("target.db.before-restore-") }
        #expect(kept.count == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file(try #require(kept.first)))) == garbage)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.contains(".tmp-") }.isEmpty)
    }
}

extension BackupCommandTests {
    @Test func restoreOverADamagedDatabase() throws {
        let folder = try TemporaryFolder("backup-restore-corrupt")
        let db = folder.file("app.db")
        try makeBank(db, journal: "delete", fillerRows: 200)
        let backupPath = folder.file("backup.db")
        #expect(try litectl("backup", db, backupPath).status == 0)
        // The target keeps its header but its schema page is scribbled over.
        let target = folder.file("target.db")
        try FileManager.default.copyItem(atPath: db, toPath: target)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: target))
        for i in 100..<400 { bytes[i] = 0xEE }
        try bytes.write(to: URL(fileURLWithPath: target))
        #expect(try runProcess(sqlite3Binary, [target, "PRAGMA integrity_check"]).stdout != "ok\n")
        let result = try litectl("restore", "--force", backupPath, target)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try sqlite3(["-batch", target, ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))
        let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix("target.db.before-restore-") }
        #expect(kept.count == 1)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file(try #require(kept.first)))) == bytes)
    }
}

extension DateComponents {
    var values: [Int] { [year, month, day, yearForWeekOfYear, weekOfYear].compactMap { $0 } }
}
