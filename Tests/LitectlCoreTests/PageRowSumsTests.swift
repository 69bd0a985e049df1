// The logical hash a repository backup records, summed page by page in its
// scan with the sums of unchanged pages taken from the previous backup
// (PageRowSums, RowSumCache), against `litectl hash` of the source by both of
// its paths (page reader and statements): random databases of every page
// size, text encoding and table kind, changed between backups by updates,
// deletes, inserts, ALTER TABLE ADD COLUMN and VACUUM; a damaged or foreign
// cache is ignored, never trusted. A restore sums the rebuilt file the same
// way, with the cache of the last backup, whichever snapshot it restores.
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class PageRowSumsTests: XCTestCase {
    func backup(_ db: String, _ repository: Repository, folder: TemporaryFolder, pagesFromWrites: Bool = true) throws -> RepoBackupOutcome {
        var request = RepoBackupRequest(source: db)
        request.temporaryFolder = folder.path
        request.pagesFromWrites = pagesFromWrites
        // Some random schemas fail quick_check after ADD COLUMN (a STRICT
        // column's default): the hash is what is tested here.
        request.verify = .none
        return try RepoBackup.run(request, repository: repository, index: SharedIndex(try repository.loadIndex()),
                                  snapshots: try repository.snapshots().snapshots, lock: nil)
    }

    /// An empty, unencrypted repository in `folder`.
    func newRepository(in folder: TemporaryFolder) throws -> Repository {
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        return try Repository.initialize(store, secret: nil)
    }

    /// Both of `litectl hash`'s paths for the file as it is now.
    func hashes(_ db: String) throws -> (pages: String, statements: String) {
        var statements = ContentHashOptions()
        statements.readPages = false
        return (try ContentHasher.hash(path: db).digest, try ContentHasher.hash(path: db, options: statements).digest)
    }

    /// Changes of every kind to every table, each allowed to fail (constraints).
    func change(_ db: String, step: Int, rng: inout SplitMix64) throws {
        let connection = try Connection(path: db, mode: .readWrite)
        defer { try? connection.close() }
        let tables = try connection.rows("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%'")
            .compactMap { row -> String? in if case .text(let b) = row[0] { String(decoding: b, as: UTF8.self) } else { nil } }
        for table in tables {
            let quoted = quoteIdentifier(table)
            let columns = try connection.rows("SELECT name FROM pragma_table_xinfo(?) WHERE hidden = 0", [.text(Array(table.utf8))])
                .compactMap { row -> String? in if case .text(let b) = row[0] { String(decoding: b, as: UTF8.self) } else { nil } }
            guard let column = columns.randomElement(using: &rng) else { continue }
            let c = quoteIdentifier(column)
            let k = Int.random(in: 3...9, using: &rng)
            for sql in ["UPDATE \(quoted) SET \(c) = \(c) || 'x' WHERE abs(random()) % \(k) = 0",
                        "DELETE FROM \(quoted) WHERE abs(random()) % \(k + 5) = 0",
                        "INSERT INTO \(quoted)(\(c)) VALUES (randomblob(\(Int.random(in: 1...3000, using: &rng))))"] {
                try? connection.execute(sql)
            }
            if step == 2 { try? connection.execute("ALTER TABLE \(quoted) ADD COLUMN added\(step) TEXT DEFAULT 'd'") }
        }
        if step == 3 { try? connection.execute("VACUUM") }
    }

    func testSummedHashEqualsBothPathsThroughChanges() throws {
        let folder = try TemporaryFolder("rowsums")
        let repository = try newRepository(in: folder)
        var reusedSomewhere = false, restoredFromCache = false
        var snapshots: [Snapshot] = []
        for seed in UInt64(1)...16 {
            var rng = SplitMix64(seed: seed &* 977)
            let db = folder.file("db\(seed).db")
            var random: RandomDatabase? = try RandomDatabase.make(at: db, seed: seed, tableCount: Int.random(in: 1...4, using: &rng), maxRows: 400)
            for step in 0..<5 {
                if step > 0 {
                    if let writer = random?.writer { try writer.close(); random = nil }
                    try change(db, step: step, rng: &rng)
                }
                let outcome = try backup(db, repository, folder: folder)
                let (pages, statements) = try hashes(db)
                XCTAssertEqual(outcome.snapshot.logicalHash, pages, "seed \(seed) step \(step)")
                XCTAssertEqual(outcome.snapshot.logicalHash, statements, "seed \(seed) step \(step)")
                if step == 1 && outcome.hashPagesReused > 0 { reusedSomewhere = true }
                if step == 0 { XCTAssertEqual(outcome.hashPagesReused, 0, "nothing to reuse on a first backup") }
                snapshots.append(outcome.snapshot)
            }
            // Every state restored with the cache the last backup left: the
            // restore checks its summed hash against the recorded one.
            for (step, snapshot) in snapshots.enumerated() {
                let target = folder.file("restored-\(seed)-\(step).db")
                var request = RepoRestoreRequest(snapshot: snapshot, target: target)
                request.verify = VerifyLevel.none
                let restored = try RepoRestore.run(request, repository: repository)
                if step == snapshots.count - 1 && restored.hashPagesReused > 0 { restoredFromCache = true }
                XCTAssertEqual(try hashes(target).statements, snapshot.logicalHash, "seed \(seed) step \(step)")
            }
            snapshots.removeAll()
        }
        XCTAssertTrue(reusedSomewhere, "incremental backups reuse the sums of unchanged pages")
        XCTAssertTrue(restoredFromCache, "a restore of the last state reuses the sums its backup left")
    }

    /// A page decoded once is reused by every later backup until it changes
    /// again (the cache lists pages in order, reused and decoded ones mixed
    /// in one chunk), by both ways of scanning; a killed run's temporary
    /// cache file is removed by the next run.
    func testChangedPagesAreDecodedOnce() throws {
        for fromWrites in [true, false] {
            let folder = try TemporaryFolder("rowsums")
            let repository = try newRepository(in: folder)
            let db = folder.file("app.db")
            try makeDatabase(db, """
                CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
                WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000)
                INSERT INTO t SELECT x, printf('%.50d', x), CASE WHEN x % 100 = 0 THEN randomblob(9000) END FROM c;
                """)
            _ = try backup(db, repository, folder: folder, pagesFromWrites: fromWrites)
            // Unchanged: only the pages whose rows run into overflow pages are decoded.
            let baseline = try backup(db, repository, folder: folder, pagesFromWrites: fromWrites).hashPagesDecoded
            _ = try sqlite3([db, "UPDATE t SET v = v || '!' WHERE id % 150 = 7"])
            let changed = try backup(db, repository, folder: folder, pagesFromWrites: fromWrites)
            XCTAssertGreaterThan(changed.hashPagesDecoded, baseline)
            XCTAssertGreaterThan(changed.hashPagesReused, 0)
            // A temporary cache file of a process that is gone.
            let cache = try XCTUnwrap(RowSumCache.location(repository: repository.id, host: RepoLock.hostname,
                                                           path: BackupJob.resolvedPath(db)))
            let cacheFolder = (cache as NSString).deletingLastPathComponent
            var dead: Int32 = 4_000_000
            while kill(dead, 0) == 0 || errno != ESRCH { dead += 1 }
            let stale = cacheFolder + "/.\((cache as NSString).lastPathComponent).tmp-\(dead)-12345"
            XCTAssertTrue(FileManager.default.createFile(atPath: stale, contents: Data(count: 100)))
            let again = try backup(db, repository, folder: folder, pagesFromWrites: fromWrites)
            XCTAssertEqual(again.hashPagesDecoded, baseline, "pages written by \(fromWrites ? "the copy" : "the scan")")
            XCTAssertEqual(again.snapshot.logicalHash, changed.snapshot.logicalHash)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: cacheFolder), [(cache as NSString).lastPathComponent])
        }
    }

    /// A restore of the last state takes every unchanged page's sums from the
    /// cache its backup left; a restore of an earlier state decodes the pages
    /// that changed since, and both land with the recorded logical hash.
    func testRestoreReusesTheCacheOnlyForPagesItMatches() throws {
        let folder = try TemporaryFolder("rowsums")
        let repository = try newRepository(in: folder)
        let db = folder.file("app.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<4000)
            INSERT INTO t SELECT x, printf('%.50d', x) FROM c;
            INSERT INTO w SELECT printf('k%06d', id), v FROM t;
            """)
        let first = try backup(db, repository, folder: folder).snapshot
        _ = try sqlite3([db, "UPDATE t SET v = v || '!' WHERE id % 400 = 7; DELETE FROM w WHERE k LIKE '%3'"])
        let second = try backup(db, repository, folder: folder).snapshot
        XCTAssertNotEqual(first.logicalHash, second.logicalHash)

        let last = try RepoRestore.run(RepoRestoreRequest(snapshot: second, target: folder.file("last.db")), repository: repository)
        XCTAssertEqual(last.hashPagesDecoded, 0, "every page of the last state is in the cache")
        XCTAssertGreaterThan(last.hashPagesReused, 20)
        let earlier = try RepoRestore.run(RepoRestoreRequest(snapshot: first, target: folder.file("first.db")), repository: repository)
        XCTAssertGreaterThan(earlier.hashPagesDecoded, 0, "the pages that changed since are decoded")
        XCTAssertGreaterThan(earlier.hashPagesReused, 0)
        XCTAssertEqual(try hashes(folder.file("first.db")).statements, first.logicalHash)
        XCTAssertEqual(try hashes(folder.file("last.db")).statements, second.logicalHash)
    }

    /// A cache that is damaged, or that another schema made, is ignored.
    func testDamagedOrForeignCacheIsIgnored() throws {
        let folder = try TemporaryFolder("rowsums")
        let repository = try newRepository(in: folder)
        let db = folder.file("app.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000)
            INSERT INTO t SELECT x, printf('%.50d', x), CASE WHEN x % 100 = 0 THEN randomblob(9000) END FROM c;
            INSERT INTO w SELECT printf('k%06d', id), v FROM t;
            """)
        let first = try backup(db, repository, folder: folder)
        XCTAssertGreaterThan(first.hashPagesDecoded, 0)
        let cache = try XCTUnwrap(RowSumCache.location(repository: repository.id, host: RepoLock.hostname,
                                                       path: BackupJob.resolvedPath(db)))
        XCTAssertTrue(FileManager.default.fileExists(atPath: cache))
        // Unchanged: every page's sum comes from the cache (pages with overflow rows excepted).
        let again = try backup(db, repository, folder: folder)
        XCTAssertGreaterThan(again.hashPagesReused, 0)
        XCTAssertEqual(again.snapshot.logicalHash, first.snapshot.logicalHash)

        // A flipped byte anywhere: the whole file is ignored.
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: cache))
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: cache))
        _ = try sqlite3([db, "UPDATE t SET v = v || '!' WHERE id % 50 = 0"])
        let damaged = try backup(db, repository, folder: folder)
        XCTAssertEqual(damaged.hashPagesReused, 0)
        XCTAssertEqual(damaged.snapshot.logicalHash, try hashes(db).statements)

        // Another schema (a column added): the fingerprint differs, nothing is reused.
        _ = try sqlite3([db, "ALTER TABLE t ADD COLUMN extra REAL DEFAULT 1.0"])
        let altered = try backup(db, repository, folder: folder)
        XCTAssertEqual(altered.hashPagesReused, 0)
        XCTAssertEqual(altered.snapshot.logicalHash, try hashes(db).statements)

        // A cache of another database put in its place: its pages' contents differ, nothing is wrongly reused.
        let other = folder.file("other.db")
        try makeDatabase(other, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB); CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID; ALTER TABLE t ADD COLUMN extra REAL DEFAULT 1.0; INSERT INTO t(v) VALUES ('other');")
        _ = try backup(other, repository, folder: folder)
        let otherCache = try XCTUnwrap(RowSumCache.location(repository: repository.id, host: RepoLock.hostname,
                                                            path: BackupJob.resolvedPath(other)))
        try FileManager.default.removeItem(atPath: cache)
        try FileManager.default.copyItem(atPath: otherCache, toPath: cache)
        _ = try sqlite3([db, "DELETE FROM w WHERE k LIKE '%7'"])
        let swapped = try backup(db, repository, folder: folder)
        XCTAssertEqual(swapped.snapshot.logicalHash, try hashes(db).statements)
    }
}
