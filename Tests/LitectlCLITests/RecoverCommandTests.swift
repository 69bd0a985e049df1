// `litectl recover` through the built binary: exit 0 for a sound database
// copied whole, 1 with a report of what was damaged and lost, 2 when nothing
// could be done (and no OUT); OUT never written over without --force; the
// text report against a golden file and the JSON report's shape; and the
// hidden temporary file of a run killed with SIGKILL removed by the next run.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RecoverCommandTests {
    /// A small database of a few pages: 300 rows in two tables, an index, a
    /// view and a trigger, on 1024-byte pages.
    func makeShop(_ path: String) throws {
        try makeDatabase(path, """
            PRAGMA page_size = 1024;
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL);
            CREATE TABLE note(body TEXT);
            CREATE INDEX item_name ON item(name);
            CREATE VIEW cheap AS SELECT * FROM item WHERE price < 10;
            CREATE TRIGGER note_item AFTER INSERT ON item BEGIN INSERT INTO note VALUES (new.name); END;
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 250)
              INSERT INTO item(id, name, price) SELECT i, 'item ' || i, i * 0.25 FROM r;
            DELETE FROM note WHERE rowid > 50;
            """)
    }

    /// The page number of the second leaf of table `item`.
    func secondLeafOfItem(_ path: String) throws -> UInt32 {
        let map = try PageMap.read(path)
        let leaves = try #require(map.trees["item"]?.leaves)
        try #require(leaves.count >= 3)
        return leaves[1]
    }

    func zero(_ path: String, page: UInt32, pageSize: Int) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(Int(page - 1) * pageSize))
        try handle.write(contentsOf: Data(count: pageSize))
        try handle.close()
    }

    @Test func soundDatabaseIsCopiedWhole() throws {
        let folder = try TemporaryFolder("cli-recover-sound")
        try makeShop(folder.file("shop.db"))
        let before = try FileFingerprint(folder.file("shop.db"))
        // On a pipe, as cron has it, a sound copy says nothing (docs/output.md).
        let silent = try litectl("recover", "shop.db", "out.db", in: folder.path)
        #expect(silent.status == 0 && silent.stdout.isEmpty && silent.stderr.isEmpty, "\(silent.stdout)\(silent.stderr)")
        #expect(try sqlite3Scalar(folder.file("out.db"), "SELECT count(*) FROM item") == "250")
        let result = try litectl("recover", "-v", "--force", "shop.db", "out.db", in: folder.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)
        #expect(result.stdout.hasPrefix("shop.db: "))
        #expect(result.stdout.contains("sound: every page accounted for; 300 rows in 2 tables copied to out.db"))
        #expect(try FileFingerprint(folder.file("shop.db")) == before, "the source is only read")
        #expect(try sqlite3Scalar(folder.file("out.db"), "PRAGMA integrity_check") == "ok")
        let hashes = try litectl("hash", "shop.db", "out.db", in: folder.path).stdout.split(separator: "\n").map { $0.prefix(64) }
        #expect(hashes.count == 2 && hashes[0] == hashes[1], "same logical content")
        #expect(try folder.listing() == ["out.db", "shop.db"], "no temporary file left")
    }

    @Test func damagedDatabaseReportsWhatWasLost() throws {
        let folder = try TemporaryFolder("cli-recover-damaged")
        let source = folder.file("shop.db")
        try makeShop(source)
        let leaf = try secondLeafOfItem(source)
        try zero(source, page: leaf, pageSize: 1024)
        let result = try litectl("recover", "shop.db", "out.db", in: folder.path)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stdout.contains("damaged pages (1):\n    page \(leaf): "))
        #expect(try sqlite3Scalar(folder.file("out.db"), "PRAGMA integrity_check") == "ok")
        let kept = try #require(Int(try sqlite3Scalar(folder.file("out.db"), "SELECT count(*) FROM item")))
        #expect(kept > 150 && kept < 250, "the rows of the other leaves are there")
        #expect(try sqlite3Scalar(folder.file("out.db"), "SELECT count(*) FROM note") == "50")

        let json = try litectl("recover", "--json", "--force", "shop.db", "out.db", in: folder.path)
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["status"] as? String == "damaged")
        #expect(object["rows_recovered"] as? Int == kept + 50)
        let damaged = try #require(object["damaged_pages"] as? [[String: Any]])
        #expect(damaged.map { $0["page"] as? Int } == [Int(leaf)])
        let tables = try #require(object["tables"] as? [[String: Any]])
        #expect(tables.map { $0["name"] as? String } == ["item", "note"])
        #expect(tables[0]["damaged"] as? Bool == true && tables[0]["pages_damaged"] as? Int == 1)
        // Keys in the documented order.
        let keys = ["source", "output", "status", "page_size", "page_count", "encoding", "wal_pages", "rows_recovered",
                    "lost_and_found", "tables", "rtrees", "damaged_pages", "unreadable_cells", "orphan_pages", "unaccounted_pages",
                    "freelist_pages", "freelist_rows_ignored", "schema_damaged", "objects_not_recreated", "problems"]
        let positions = keys.map { json.stdout.range(of: "\"\($0)\":")?.lowerBound }
        #expect(positions.allSatisfy { $0 != nil })
        #expect(positions.compactMap { $0 } == positions.compactMap { $0 }.sorted())
    }

    @Test func textReportMatchesTheGoldenFile() throws {
        let folder = try TemporaryFolder("cli-recover-golden")
        let source = folder.file("shop.db")
        try makeShop(source)
        try zero(source, page: try secondLeafOfItem(source), pageSize: 1024)
        let result = try litectl("recover", "shop.db", "out.db", in: folder.path)
        let golden = try String(contentsOfFile: packageRoot + "/Tests/LitectlCLITests/Golden/recover-shop.txt", encoding: .utf8)
        #expect(result.stdout == golden)
    }

    @Test func anExistingOutIsNotOverwrittenWithoutForce() throws {
        let folder = try TemporaryFolder("cli-recover-exists")
        try makeShop(folder.file("shop.db"))
        try Data("precious".utf8).write(to: URL(fileURLWithPath: folder.file("out.db")))
        let refused = try litectl("recover", "shop.db", "out.db", in: folder.path)
        #expect(refused.status == 2)
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr == "litectl: out.db: already exists; not overwritten (give --force to replace it)\n")
        #expect(try String(contentsOfFile: folder.file("out.db"), encoding: .utf8) == "precious")
        let forced = try litectl("recover", "--force", "shop.db", "out.db", in: folder.path)
        #expect(forced.status == 0)
        #expect(try sqlite3Scalar(folder.file("out.db"), "SELECT count(*) FROM item") == "250")
        #expect(try folder.listing() == ["out.db", "shop.db"])
    }

    /// --force never renames the new file over DAMAGED itself (by name, a
    /// hard link or a symbolic link: that would destroy the original), nor
    /// over an OUT with a -wal or -journal beside it, which SQLite would
    /// replay onto the new file. Both are refused with OUT named, and nothing
    /// changes.
    @Test func forceRefusesTheDamagedFileAndALeftoverJournal() throws {
        let folder = try TemporaryFolder("cli-recover-self")
        let db = folder.file("shop.db")
        try makeShop(db)
        try zero(db, page: try secondLeafOfItem(db), pageSize: 1024)
        try FileManager.default.linkItem(atPath: db, toPath: folder.file("hard.db"))
        try FileManager.default.createSymbolicLink(atPath: folder.file("soft.db"), withDestinationPath: db)
        let before = try FileFingerprint(db)
        for target in [db, folder.file("hard.db"), folder.file("soft.db")] {
            let r = try litectl("recover", "--force", db, target)
            #expect(r.status == 2 && r.stderr == "litectl: \(target): is the damaged database itself (the same file); write to another file\n",
                    "\(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        #expect(try FileFingerprint(db) == before)
        #expect(try folder.listing() == ["hard.db", "shop.db", "soft.db"], "no temporary file left")

        // An old database in WAL mode whose WAL was left behind (a copy taken mid-write).
        let old = folder.file("old.db")
        try makeDatabase(old, "PRAGMA journal_mode=WAL; CREATE TABLE gone(x); INSERT INTO gone VALUES (1);")
        try Data("not really a WAL".utf8).write(to: URL(fileURLWithPath: old + "-wal"))
        for suffix in ["-wal", "-journal"] {
            if suffix == "-journal" {
                try FileManager.default.moveItem(atPath: old + "-wal", toPath: old + "-journal")
            }
            let oldBytes = try FileFingerprint(old)
            let r = try litectl("recover", "--force", db, old)
            #expect(r.status == 2 && r.stderr.contains("\(old): old.db\(suffix) exists beside it"), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1)
            #expect(try FileFingerprint(old) == oldBytes)
            // Also when OUT does not exist yet: the leftover would meet the new file.
            try FileManager.default.moveItem(atPath: old, toPath: old + ".moved")
            let r2 = try litectl("recover", db, old)
            #expect(r2.status == 2 && r2.stderr.contains("old.db\(suffix) exists beside it"), "\(r2.stderr)")
            #expect(!FileManager.default.fileExists(atPath: old))
            try FileManager.default.moveItem(atPath: old + ".moved", toPath: old)
        }
        #expect(try folder.listing().filter { $0.contains(".tmp-") }.isEmpty)
    }

    @Test func nothingToRecoverIsAnErrorWithoutOut() throws {
        let folder = try TemporaryFolder("cli-recover-nothing")
        let missing = try litectl("recover", "missing.db", "out.db", in: folder.path)
        #expect(missing.status == 2)
        #expect(missing.stderr == "litectl: missing.db: no such file\n")
        try Data(String(repeating: "plain text, not a database\n", count: 200).utf8).write(to: URL(fileURLWithPath: folder.file("text.db")))
        let text = try litectl("recover", "text.db", "out.db", in: folder.path)
        #expect(text.status == 2)
        #expect(text.stderr.hasPrefix("litectl: text.db: ") && text.stderr.split(separator: "\n").count == 1)
        #expect(try folder.listing() == ["text.db"], "no OUT and no temporary file")
        try makeShop(folder.file("shop.db"))
        let folderOut = try litectl("recover", "shop.db", ".", in: folder.path)
        #expect(folderOut.status == 2)
        #expect(folderOut.stderr.contains("is a folder"))
    }

    @Test func theNextRunRemovesWhatAKilledOneLeft() throws {
        let folder = try TemporaryFolder("cli-recover-killed")
        let source = folder.file("big.db")
        try makeDatabase(source, """
            CREATE TABLE t(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 60000) INSERT INTO t SELECT randomblob(600) FROM r;
            """)
        var leftovers: [String] = []
        for _ in 0..<5 where leftovers.isEmpty {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: litectlBinary)
            process.arguments = ["recover", source, folder.file("out.db")]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline && process.isRunning {
                if try folder.listing().contains(where: { $0.contains(".tmp-") }) { break }
                usleep(2_000)
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            leftovers = try folder.listing().filter { $0.contains(".tmp-") }
            try? FileManager.default.removeItem(atPath: folder.file("out.db"))
        }
        #expect(!leftovers.isEmpty, "a killed run left its temporary file (the case to close)")
        let result = try litectl("recover", source, folder.file("out.db"))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try folder.listing() == ["big.db", "out.db"], "the leftover is gone")
    }
}
