// `litectl dump` and `litectl load` through the built binary: `dump | load`
// and `dump | sqlite3` rebuild the database (litectl hash), a damaged table
// is exit 2 with one line naming table and row and no usable output, files
// and folders appear whole, and killed runs leave nothing a later run keeps.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DumpCommandTests {
    func hash(_ path: String) throws -> String {
        let r = try litectl("hash", path)
        #expect(r.status == 0, "\(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    @Test func dumpPipedIntoLoadAndIntoTheShell() throws {
        let folder = try TemporaryFolder("cli-dump")
        var fixture = EveryTypeDatabase()
        fixture.seed = 21
        fixture.rows = 120
        let db = folder.file("r.db")
        try fixture.make(at: db)
        let before = try FileFingerprint(db)
        let dump = try litectl("dump", db)
        #expect(dump.status == 0, "\(dump.stderr)")
        // The one thing a dump cannot keep is said on stderr.
        #expect(dump.stderr == "litectl: \(db): note: the rowids of hidden are not kept (its columns rowid, _rowid_ and oid hide them)\n")
        #expect(try FileFingerprint(db) == before, "dump only reads")
        #expect(dump.stdout.hasSuffix("COMMIT;\n"))

        let load = try litectl("load", folder.file("by-load.db"), "-", input: dump.stdoutBytes)
        #expect(load.status == 0 && load.stdout.isEmpty && load.stderr.isEmpty, "\(load.stderr)")
        #expect(try hash(folder.file("by-load.db")) == hash(db))
        let shell = try runProcess(sqlite3Binary, ["-batch", "-bail", folder.file("by-shell.db")], input: dump.stdoutBytes)
        #expect(shell.status == 0, "\(shell.stderr)")
        #expect(try hash(folder.file("by-shell.db")) == hash(db))

        for path in realDatabaseFiles {
            let out = folder.file((path as NSString).lastPathComponent + ".sql")
            let r = try litectl("dump", path, "-o", out)
            #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stderr)")
            let copy = out + ".db"
            #expect(try litectl("load", copy, out).status == 0)
            #expect(try hash(copy) == hash(path), "\(path)")
        }
    }

    @Test func aDamagedDatabaseIsExitTwoNamingTableAndRow() throws {
        let folder = try TemporaryFolder("cli-dump-damaged")
        let db = folder.file("d.db")
        try makeDatabase(db, """
            CREATE TABLE orders(id INTEGER PRIMARY KEY, note TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4286)
            INSERT INTO orders SELECT i, printf('order %d %.*c', i, 150, 'z') FROM n;
            """)
        let page = Int(try sqlite3Scalar(db, "SELECT pageno FROM dbstat WHERE name = 'orders' AND pagetype = 'leaf' ORDER BY pageno LIMIT 1 OFFSET 10"))!
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: db))
        try handle.seek(toOffset: UInt64((page - 1) * 4096))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
        try handle.close()

        // The sqlite3 shell's own .dump notes the damage in a comment and exits 0.
        let r = try litectl("dump", db)
        #expect(r.status == 2)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(r.stderr.hasPrefix("litectl: \(db): table \"orders\": row "))
        #expect(r.stderr.contains("could not be read (the row after rowid "))
        #expect(r.stderr.contains("litectl recover"))
        #expect(r.stdout.hasSuffix("ROLLBACK;\n"))
        let load = try litectl("load", folder.file("copy.db"), "-", input: r.stdoutBytes)
        #expect(load.status == 2 && load.stderr.contains("the script rolls back"))
        #expect(!FileManager.default.fileExists(atPath: folder.file("copy.db")))

        let file = try litectl("dump", db, "-o", folder.file("d.sql"))
        #expect(file.status == 2)
        let folderDump = try litectl("dump", db, "--format", "csv", "-o", folder.file("csv"))
        #expect(folderDump.status == 2)
        #expect(try folder.listing() == ["d.db"], "no file, no folder, no leftover")
    }

    @Test func outputFilesAndFoldersNeverReplaceWithoutForce() throws {
        let folder = try TemporaryFolder("cli-dump-output")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1.5), ('x'), (x'00');")
        try "old".write(toFile: folder.file("a.sql"), atomically: false, encoding: .utf8)
        let refused = try litectl("dump", db, "-o", folder.file("a.sql"))
        #expect(refused.status == 2)
        #expect(refused.stderr == "litectl: \(folder.file("a.sql")): already exists; not overwritten (--force replaces it)\n")
        #expect(try String(contentsOfFile: folder.file("a.sql"), encoding: .utf8) == "old")
        #expect(try litectl("dump", db, "-o", folder.file("a.sql"), "--force").status == 0)
        #expect(try String(contentsOfFile: folder.file("a.sql"), encoding: .utf8).contains("INSERT INTO \"t\"(rowid,\"a\") VALUES(3,x'00');"))

        let json = try litectl("dump", db, "--format", "jsonl", "-o", folder.file("rows"), "--json")
        #expect(json.status == 0, "\(json.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(report["rows"] as? Int == 3)
        #expect(try String(contentsOfFile: folder.file("rows/t.jsonl"), encoding: .utf8)
                == "{\"rowid\":1,\"a\":1.5}\n{\"rowid\":2,\"a\":\"x\"}\n{\"rowid\":3,\"a\":{\"blob\":\"00\"}}\n")
        let back = try litectl("load", folder.file("b.db"), folder.file("rows"), "-v")
        #expect(back.status == 0)
        #expect(back.stdout.hasPrefix("\(folder.file("b.db")) (new): "))
        #expect(try hash(folder.file("b.db")) == hash(db))

        let single = try litectl("load", folder.file("b.db"), folder.file("rows/t.jsonl"), "--table", "t", "--json")
        #expect(single.status == 2, "the rowids are taken")
        #expect(single.stderr.contains("t.jsonl:1: UNIQUE constraint failed"))

        #expect(try litectl("dump", db, "--format", "csv").status == 64)
        #expect(try litectl("dump", db, "--schema-only", "--data-only").status == 64)
        #expect(try litectl("dump", folder.file("nope.db")).stderr == "litectl: \(folder.file("nope.db")): no such file\n")
    }

    @Test func aKilledDumpLeavesOnlyWhatTheNextRemoves() throws {
        let work = try TemporaryFolder("cli-dump-kill-src")
        let db = work.file("big.db")
        try makeDatabase(db, """
            CREATE TABLE t(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<40000) INSERT INTO t SELECT randomblob(1000) FROM r;
            """)
        for (index, format) in ["sql", "csv"].enumerated() {
            let folder = try TemporaryFolder("cli-dump-kill-\(index)")
            let arguments = ["dump", db, "--format", format, "-o", folder.file("big")]
            var leftovers: [String] = []
            for _ in 0..<5 where leftovers.isEmpty {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: litectlBinary)
                process.arguments = arguments
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                while process.isRunning, try folder.listing().filter({ $0.contains(".tmp-") }).isEmpty { usleep(2_000) }
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                leftovers = try folder.listing().filter { $0.contains(".tmp-") }
            }
            #expect(!leftovers.isEmpty, "a killed dump left its hidden file or folder (the case to close)")
            #expect(try folder.listing().allSatisfy { $0.hasPrefix(".") }, "nothing under a final name")
            let r = try runProcess(litectlBinary, arguments)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try folder.listing().filter { $0.contains(".tmp-") }.isEmpty)
        }
    }
}
