// A database an application left with a hot rollback journal (killed inside a
// write transaction): every read-only command and `backup` reads its last
// committed state, from a private copy SQLite rolls back, instead of failing
// with "attempt to write a readonly database"; neither the database nor its
// journal changes a byte, and nothing is left in $TMPDIR. The oracle is the
// sqlite3 CLI on a copy of the pair, rolled back by its read-write open.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// An application killed inside a write transaction, for real: python3's
/// sqlite3 module commits rows, then, in rollback-journal mode and with a
/// page cache of 10 pages (so that its changes spill into the file), begins
/// a transaction, changes every row and adds thousands, and SIGKILLs itself.
struct CrashedApp {
    let folder: TemporaryFolder
    /// The database and its hot journal.
    let db: String
    let journal: String
    /// The $TMPDIR litectl gets: empty before and after every run.
    let scratch: String
    /// A copy of the pair rolled back by the sqlite3 CLI: the committed state.
    let oracle: String
    let fingerprints: [FileFingerprint]

    static let crashScript = """
        import os, signal, sqlite3, sys
        path, rows, spill, pad, synchronous = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=DELETE")
        db.execute("PRAGMA synchronous=" + synchronous)
        db.execute("PRAGMA user_version=7")
        db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, n INTEGER, r REAL, b BLOB)")
        db.execute("CREATE INDEX t_v ON t(v)")
        db.execute("CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID")
        db.execute("BEGIN")
        for i in range(rows):
            db.execute("INSERT INTO t(v, n, r, b) VALUES (?, ?, ?, ?)",
                       ("committed-%d" % i, i * 7 - 3, i / 3.0, bytes([i % 256]) * (i % 50 + pad)))
        db.execute("INSERT INTO kv VALUES ('a', NULL), ('b', 1.5), ('c', x'00ff')")
        db.execute("COMMIT")
        db.execute("PRAGMA cache_size=10")
        db.execute("BEGIN")
        db.execute("UPDATE t SET v = 'uncommitted', n = NULL")
        db.execute("DELETE FROM kv")
        for i in range(spill):
            db.execute("INSERT INTO t(v, b) VALUES ('uncommitted', randomblob(400))")
        os.kill(os.getpid(), signal.SIGKILL)
        """

    /// `rows` committed rows (with `pad` more bytes of BLOB each), then
    /// `spill` uncommitted ones of 400 bytes. `synchronous` is the
    /// application's setting: FULL, SQLite's default, syncs the journal before
    /// each spill (and writes its header's magic only then); OFF writes it at
    /// once and never syncs (a large state made fast).
    init(_ label: String, rows: Int = 2000, spill: Int = 5000, pad: Int = 0, synchronous: String = "FULL") throws {
        folder = try TemporaryFolder(label)
        db = folder.file("app.db")
        journal = db + "-journal"
        scratch = folder.file("tmp")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        let killed = try runProcess("/usr/bin/python3", ["-c", Self.crashScript, db, String(rows), String(spill), String(pad), synchronous])
        #expect(killed.status == 9, "the application was killed: \(killed.stderr)")
        // It is the state of the issue: a hot journal that a read-only open cannot roll back.
        #expect(FileManager.default.fileExists(atPath: journal))
        let readOnly = try runProcess(sqlite3Binary, ["file:\(db)?mode=ro", "SELECT count(*) FROM t"])
        #expect(readOnly.status != 0 && readOnly.stderr.contains("readonly"), "\(readOnly.stderr)")

        let oracleFolder = folder.file("oracle")
        try FileManager.default.createDirectory(atPath: oracleFolder, withIntermediateDirectories: false)
        oracle = oracleFolder + "/app.db"
        try FileManager.default.copyItem(atPath: db, toPath: oracle)
        try FileManager.default.copyItem(atPath: journal, toPath: oracle + "-journal")
        #expect(try sqlite3Scalar(oracle, "PRAGMA integrity_check") == "ok")
        #expect(!FileManager.default.fileExists(atPath: oracle + "-journal"), "sqlite3 rolled the oracle back")
        #expect(try sqlite3Scalar(oracle, "SELECT count(*), count(*) FILTER (WHERE v = 'uncommitted') FROM t") == "\(rows)|0")
        fingerprints = [try FileFingerprint(db), try FileFingerprint(journal)]
    }

    /// Runs litectl in the folder with `scratch` as its $TMPDIR.
    func run(_ arguments: [String]) throws -> ProcessResult {
        try runProcess("/usr/bin/env", ["TMPDIR=" + scratch, litectlBinary] + arguments, currentDirectory: folder.path)
    }

    /// The database and its journal exactly as the application left them,
    /// and no temporary file left behind.
    func expectUntouched(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try FileFingerprint(db) == fingerprints[0], "\(what): the database changed", sourceLocation: sourceLocation)
        #expect(try FileFingerprint(journal) == fingerprints[1], "\(what): the journal changed", sourceLocation: sourceLocation)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == [], "\(what): left in $TMPDIR", sourceLocation: sourceLocation)
        let beside = try folder.listing().filter { $0.hasPrefix("app.db") }
        #expect(beside == ["app.db", "app.db-journal"], "\(what): files beside the database", sourceLocation: sourceLocation)
    }

    /// `sqlite3 DB .dump`: the oracle's view of a database's content.
    static func dump(_ path: String) throws -> String { try sqlite3(["-batch", path, ".dump"]) }
}

@Suite struct HotJournalTests {
    enum Command: String, CaseIterable, Sendable {
        case info, check, hash, tables, stats, dump, query, queryAttach, queryEach, diff, report, backup, backupRepo
    }

    @Test(arguments: Command.allCases)
    func readsTheCommittedStateAndWritesNothing(command: Command) throws {
        let app = try CrashedApp("hot-\(command.rawValue)", rows: 1500, spill: 3000)
        let out = app.folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        func run(_ arguments: String...) throws -> ProcessResult {
            let result = try app.run(arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("readonly"), "\(result.stderr)")
            return result
        }
        func oracle(_ sql: String) throws -> String { try sqlite3Scalar(app.oracle, sql) }

        switch command {
        case .info:
            let result = try run("info", "--json", "app.db")
            let info = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            for pragma in ["page_count", "freelist_count", "schema_version", "user_version"] {
                #expect((info[pragma] as? NSNumber)?.stringValue == (try oracle("PRAGMA \(pragma)")), "\(pragma)")
            }
            let objects = try #require(info["objects"] as? [String: Any])
            #expect(objects["tables"] as? Int == 2)
            #expect((objects["indexes"] as? NSNumber)?.stringValue == (try oracle("SELECT count(*) FROM sqlite_schema WHERE type = 'index'")))
        case .check:
            let result = try run("check", "--json", "app.db")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            let findings = try #require(report["findings"] as? [[String: Any]])
            let hot = findings.filter { $0["check"] as? String == "hot-journal" }
            #expect(hot.count == 1 && hot.first?["severity"] as? String == "warning", "\(findings)")
            #expect(!findings.contains { $0["severity"] as? String == "error" }, "\(findings)")
            // A warning: it fails the check with --strict.
            #expect(try app.run(["check", "--strict", "app.db"]).status == 1)
        case .hash:
            let hashed = try run("hash", "--json", "app.db")
            let expected = try litectl("hash", "--json", app.oracle)
            func digest(_ text: String) throws -> String? {
                (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["digest"] as? String
            }
            #expect(try digest(hashed.stdout) != nil)
            #expect(try digest(hashed.stdout) == (try digest(expected.stdout)))
        case .tables:
            let listed = try run("tables", "--counts", "--format", "csv", "--no-headers", "app.db")
            let expected = try litectl("tables", "--counts", "--format", "csv", "--no-headers", app.oracle)
            #expect(listed.stdout.replacingOccurrences(of: "app.db", with: "X")
                    == expected.stdout.replacingOccurrences(of: app.oracle, with: "X"))
            #expect(listed.stdout.contains(",1500"), "\(listed.stdout)")
        case .stats:
            let stats = try run("stats", "--format", "csv", "app.db")
            let expected = try litectl("stats", "--format", "csv", app.oracle)
            #expect(stats.stdout.replacingOccurrences(of: "app.db", with: "X")
                    == expected.stdout.replacingOccurrences(of: app.oracle, with: "X"))
        case .dump:
            _ = try run("dump", "app.db", "-o", "out/app.sql")
            let loaded = out + "/loaded.db"
            _ = try sqlite3(["-batch", loaded], input: try String(contentsOfFile: out + "/app.sql", encoding: .utf8))
            #expect(try CrashedApp.dump(loaded) == (try CrashedApp.dump(app.oracle)))
        case .query:
            let rows = try run("query", "--format", "csv", "app.db", "SELECT * FROM t ORDER BY id")
            let expected = try litectl("query", "--format", "csv", app.oracle, "SELECT * FROM t ORDER BY id")
            #expect(rows.stdout == expected.stdout && rows.stdout.count > 1000)
            #expect(!rows.stdout.contains("uncommitted"))
        case .queryAttach:
            let sql = "SELECT count(*), count(*) FILTER (WHERE v = 'uncommitted'), (SELECT count(*) FROM a.kv) FROM a.t"
            let rows = try run("query", "--format", "csv", "--no-headers", "--attach", "a=app.db", sql)
            #expect(rows.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1500,0,3")
        case .queryEach:
            let rows = try run("query", "--format", "csv", "--no-headers", "--each", "app.db", "SELECT count(*), sum(n) FROM t")
            #expect(rows.stdout.contains("1500,\(try oracle("SELECT sum(n) FROM t"))"), "\(rows.stdout)")
        case .diff:
            // Both sides: the hot database against its committed state, either way round.
            let ab = try run("diff", "app.db", app.oracle)
            let ba = try run("diff", app.oracle, "app.db")
            #expect(ab.stdout.isEmpty && ba.stdout.isEmpty)
            let itself = try run("diff", "-v", "app.db", "app.db")
            #expect(itself.stderr.components(separatedBy: "rollback journal is hot").count == 2,
                    "one copy serves both sides: \(itself.stderr)")
        case .report:
            // Its check and its statistics read at once, on two connections: one copy serves both.
            let reported = try run("report", "-v", "app.db", "-o", "out/report.html")
            #expect(FileManager.default.fileExists(atPath: out + "/report.html"))
            #expect(reported.stderr.components(separatedBy: "rollback journal is hot").count == 2, "\(reported.stderr)")
        case .backup:
            _ = try run("backup", "app.db", "out")
            let backups = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix(".db") }
            let backup = out + "/" + (try #require(backups.first))
            #expect(try sqlite3Scalar(backup, "PRAGMA integrity_check") == "ok")
            #expect(try CrashedApp.dump(backup) == (try CrashedApp.dump(app.oracle)))
            let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: backup + ".json"))) as? [String: Any])
            #expect(manifest["strategy"] as? String == "rolled-back-copy")
            #expect(manifest["page_count"] as? Int == Int(try oracle("PRAGMA page_count")))
        case .backupRepo:
            let repo = out + "/repo"
            _ = try run("repo", "init", repo)
            _ = try run("backup", "app.db", "--repo", repo)
            let listed = try run("snapshots", "--repo", repo, "--json")
            #expect(listed.stdout.contains("\"strategy\":\"rolled-back-copy\""), "\(listed.stdout)")
            _ = try run("restore", "--repo", repo, "latest", out + "/restored.db")
            #expect(try CrashedApp.dump(out + "/restored.db") == (try CrashedApp.dump(app.oracle)))
        }
        try app.expectUntouched(command.rawValue)
    }

    @Test func saysSoInOneLineWithVerbose() throws {
        let app = try CrashedApp("hot-verbose", rows: 500, spill: 2000)
        let quiet = try app.run(["info", "app.db"])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
        let verbose = try app.run(["info", "-v", "app.db"])
        #expect(verbose.status == 0)
        let lines = verbose.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(verbose.stderr)")
        let line = String(lines.first ?? "")
        #expect(line.hasPrefix("litectl: note: app.db: the rollback journal is hot"), "\(line)")
        #expect(line.contains("copied to \(app.scratch)") && line.contains("not written"), "\(line)")
        try app.expectUntouched("info -v")
    }

    /// A real multi-file transaction killed while committing: the
    /// super-journal exists and both databases' journals name it. The
    /// transaction did not commit: both read as before it, and neither
    /// database, journal nor the super-journal is written or removed.
    @Test func aMultiFileTransactionThatDidNotCommitIsRolledBack() throws {
        let folder = try TemporaryFolder("hot-super")
        let scratch = folder.file("tmp")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        let script = """
            import os, signal, sqlite3, sys, threading
            folder = sys.argv[1]
            a, b = os.path.join(folder, "ma.db"), os.path.join(folder, "mb.db")
            db = sqlite3.connect(a, isolation_level=None, check_same_thread=False)
            db.execute("ATTACH ? AS b", (b,))
            for s in ("main", "b"):
                db.execute(f"CREATE TABLE {s}.t(id INTEGER PRIMARY KEY, v TEXT)")
                db.execute(f"INSERT INTO {s}.t(v) SELECT 'committed' FROM (WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) SELECT i FROM c)")
            MAGIC = bytes.fromhex("d9d505f920a163d7")
            def watch():
                # Killed once the super-journal exists and mb.db's journal names it
                # (it ends with a super-journal record): inside the commit.
                while True:
                    if any("-mj" in n for n in os.listdir(folder)):
                        try:
                            with open(b + "-journal", "rb") as f:
                                f.seek(-8, 2)
                                if f.read(8) == MAGIC:
                                    os.kill(os.getpid(), signal.SIGKILL)
                        except OSError:
                            pass
            threading.Thread(target=watch, daemon=True).start()
            db.execute("BEGIN")
            for s in ("main", "b"):
                db.execute(f"UPDATE {s}.t SET v = 'uncommitted' || randomblob(300)")
            db.execute("COMMIT")
            """
        var caught = false
        for _ in 0..<10 where !caught {
            for name in (try? folder.listing()) ?? [] where name.hasPrefix("m") { try? FileManager.default.removeItem(atPath: folder.file(name)) }
            caught = try runProcess("/usr/bin/python3", ["-c", script, folder.path]).status == 9
        }
        try #require(caught, "the commit was never caught in the middle")
        let names = try folder.listing().filter { $0.hasPrefix("m") }
        let superJournal = try #require(names.first { $0.contains("-mj") })
        #expect(names.contains("ma.db-journal") && names.contains("mb.db-journal"), "\(names)")
        // A journal is hot once synced (its header's magic written then); the
        // commit writes ma.db's pages first, so its journal is hot. mb.db's may
        // not be synced yet: then SQLite reads mb.db as it is, and so does litectl.
        func isHot(_ journal: String) throws -> Bool { (try Data(contentsOf: URL(fileURLWithPath: folder.file(journal)))).first != 0 }
        #expect(try isHot("ma.db-journal"))
        let files = names.map { folder.file($0) }
        let before = try files.map { try FileFingerprint($0) }

        for database in ["ma.db", "mb.db"] {
            let result = try runProcess("/usr/bin/env", ["TMPDIR=" + scratch, litectlBinary, "query", "-v", "--format", "csv", "--no-headers",
                                                         database, "SELECT count(*), count(*) FILTER (WHERE v = 'committed') FROM t"],
                                        currentDirectory: folder.path)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1000,1000", "\(database): \(result.stdout)")
            if try isHot(database + "-journal") {
                #expect(result.stderr.contains("its super-journal \(folder.file(superJournal)) (the multi-file transaction did not commit) was left as it is"), "\(result.stderr)")
            } else {
                #expect(result.stderr.isEmpty, "\(result.stderr)")
            }
            let backup = try runProcess("/usr/bin/env", ["TMPDIR=" + scratch, litectlBinary, "backup", database, "bk-" + database],
                                        currentDirectory: folder.path)
            #expect(backup.status == 0, "\(backup.stderr)")
            #expect(try sqlite3Scalar(folder.file("bk-" + database), "SELECT count(*), count(*) FILTER (WHERE v = 'committed') FROM t") == "1000|1000")
        }
        #expect(try files.map { try FileFingerprint($0) } == before, "nothing written, the super-journal kept")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == [])
    }

    /// The state between a multi-file commit's commit point (its super-journal
    /// deleted) and the removal of each journal: SQLite discards such a
    /// journal unplayed, and so does the read. Made by appending a
    /// super-journal record that names a missing file to a hot journal whose
    /// pages, were they played back, would put other rows in.
    @Test func aJournalWhoseSuperJournalIsGoneIsNotPlayedBack() throws {
        let app = try CrashedApp("hot-super-gone", rows: 300, spill: 1000)
        // The file in its committed state, changed since in a way the journal's
        // pages would undo (the journal kept aside meanwhile: sqlite3 would roll it back).
        try FileManager.default.moveItem(atPath: app.journal, toPath: app.folder.file("kept-journal"))
        try FileManager.default.removeItem(atPath: app.db)
        try FileManager.default.copyItem(atPath: app.oracle, toPath: app.db)
        try sqlite3(["-batch", app.db, "UPDATE t SET v = 'second commit'"])
        let expected = try CrashedApp.dump(app.db)
        #expect(expected.contains("second commit"))
        try FileManager.default.moveItem(atPath: app.folder.file("kept-journal"), toPath: app.journal)
        // The super-journal record (pager.c writeSuperJournal), naming a file that does not exist.
        let name = Array(app.folder.file("app.db-mj0123456789").utf8)
        var record: [UInt8] = [0, 4, 0, 1] + name  // PAGER_SJ_PGNO for 4096-byte pages, unused by readers
        func be32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * UInt32($0))) } }
        record += be32(UInt32(name.count)) + be32(name.reduce(UInt32(0)) { $0 &+ UInt32($1) }) + [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: app.journal))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(record))
        try handle.close()
        // sqlite3 itself, on a copy, discards the journal: the oracle.
        let check = app.folder.file("oracle/check.db")
        try FileManager.default.copyItem(atPath: app.db, toPath: check)
        try FileManager.default.copyItem(atPath: app.journal, toPath: check + "-journal")
        #expect(try CrashedApp.dump(check) == expected)
        let fingerprints = [try FileFingerprint(app.db), try FileFingerprint(app.journal)]

        let result = try app.run(["dump", "-v", "app.db", "-o", "out.sql"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("names a super-journal that is gone"), "\(result.stderr)")
        let loaded = app.folder.file("loaded.db")
        _ = try sqlite3(["-batch", loaded], input: try String(contentsOfFile: app.folder.file("out.sql"), encoding: .utf8))
        #expect(try CrashedApp.dump(loaded) == expected)
        #expect([try FileFingerprint(app.db), try FileFingerprint(app.journal)] == fingerprints)
        #expect(try FileManager.default.contentsOfDirectory(atPath: app.scratch) == [])
    }

    /// A journal that is not hot after all is read as it is, with no copy:
    /// a live writer's (it holds RESERVED), and one whose header is zeroed
    /// (journal_mode=PERSIST after a commit). (A guard: today's main reads
    /// these too; the change must not start copying them.)
    @Test func aJournalThatIsNotHotIsReadInPlace() throws {
        let folder = try TemporaryFolder("not-hot")
        let scratch = folder.file("tmp")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
        let db = folder.file("w.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);")
        let writer = try ShellSession(db)
        #expect(writer.run("BEGIN IMMEDIATE; INSERT INTO t VALUES (3); SELECT 'in', count(*) FROM t;").contains("in|3"))
        #expect(FileManager.default.fileExists(atPath: db + "-journal"))
        let live = try runProcess("/usr/bin/env", ["TMPDIR=" + scratch, litectlBinary, "query", "-v", "--format", "csv", "--no-headers", db, "SELECT count(*) FROM t"])
        #expect(live.status == 0 && live.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "2" && live.stderr.isEmpty, "\(live.stdout) \(live.stderr)")
        writer.run("COMMIT;")
        writer.close()

        let persist = folder.file("p.db")
        try makeDatabase(persist, "PRAGMA journal_mode=PERSIST; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        #expect((fileSize(persist + "-journal") ?? 0) > 0)
        let zeroed = try runProcess("/usr/bin/env", ["TMPDIR=" + scratch, litectlBinary, "info", "-v", persist])
        #expect(zeroed.status == 0 && zeroed.stderr.isEmpty, "\(zeroed.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == [])
    }

    /// SIGTERM while the private copy exists (a check of 70 MB takes a
    /// while): the registered temporary files go, and the command exits 2.
    /// `check --connections 3` on a file of 64 MiB and more: its workers
    /// read the one copy the first connection made.
    @Test func aSignalRemovesTheCopyAndWorkersShareIt() throws {
        let app = try CrashedApp("hot-big", rows: 160_000, spill: 2_000, pad: 400, synchronous: "OFF")
        #expect((fileSize(app.oracle) ?? 0) > 64 << 20)
        let checked = try app.run(["check", "-v", "--connections", "3", "app.db"])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stderr.components(separatedBy: "rollback journal is hot (a writer").count == 2, "one copy: \(checked.stderr)")
        try app.expectUntouched("check --connections 3")

        // Started through python3, which unblocks every signal first: the test
        // process may run with SIGTERM blocked, and children inherit the mask.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
                             "/usr/bin/env", "TMPDIR=" + app.scratch, litectlBinary, "check", app.db]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        var sawCopy = false
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline && !sawCopy {
            sawCopy = ((try? FileManager.default.contentsOfDirectory(atPath: app.scratch)) ?? []).contains { $0.hasPrefix(".litectl-rollback") }
            if !sawCopy { usleep(2_000) }
        }
        #expect(sawCopy, "the copy was made in $TMPDIR")
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 2)
        try app.expectUntouched("SIGTERM")
    }

    /// A FIFO named like the journal (SQLite never makes one): refused at
    /// once with one line, never waited on. (SQLite opens the journal to see
    /// whether it is hot, and the open of a FIFO blocks until a writer comes:
    /// every command hung on it, in WAL mode too.)
    @Test(arguments: ["DELETE", "WAL"])
    func aFIFONamedLikeTheJournalIsRefusedNotWaitedOn(mode: String) throws {
        let suffix = "-journal"
        let folder = try TemporaryFolder("fifo")
        let db = folder.file("x.db")
        try makeDatabase(db, "PRAGMA journal_mode=\(mode); CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        #expect(mkfifo(db + suffix, 0o600) == 0)
        for arguments in [["info", "x.db"], ["check", "x.db"], ["backup", "x.db", "bk.db"], ["query", "--attach", "a=x.db", "SELECT 1"]] {
            // SIGKILL: the test process may run (and so its children) with SIGTERM blocked.
            let result = try runProcess("/usr/bin/timeout", ["-s", "KILL", "20", litectlBinary] + arguments, currentDirectory: folder.path)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("its \(suffix) file \(folder.file("x.db" + suffix)) is a FIFO"), "\(result.stderr)")
        }
    }

    /// A $TMPDIR without room for the copy (here a file-size limit): exit 2,
    /// a message that says what is needed, and nothing left.
    @Test func noRoomForTheCopyIsSaidAndLeavesNothing() throws {
        let app = try CrashedApp("hot-full", rows: 500, spill: 3000)
        let result = try runProcess("/bin/sh", ["-c", "ulimit -f 64; exec env TMPDIR=\"$1\" \"$2\" info app.db", "sh", app.scratch, litectlBinary],
                                    currentDirectory: app.folder.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains("does not fit in \(app.scratch)") && result.stderr.contains("TMPDIR"), "\(result.stderr)")
        try app.expectUntouched("full")
    }
}

/// The size of a file (nil when there is none).
private func fileSize(_ path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
}
