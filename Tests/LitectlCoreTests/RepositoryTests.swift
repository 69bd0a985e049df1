// The repository format against the real thing: snapshots made of random
// databases through many changes, forget and prune, then every snapshot left
// restored and compared with the database it was taken from (litectl hash
// and the sqlite3 CLI's integrity_check as the oracles); damaged objects are
// errors, never crashes; a wrong key is refused.
import Crypto
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class RepositoryTests: XCTestCase {
    func makeRepo(_ folder: TemporaryFolder, secret: RepoSecret? = nil, version: Int = Repository.version,
                  name: String = "repo") throws -> Repository {
        let store = FolderStore(path: folder.file(name))
        try store.createRoot()
        return try Repository.initialize(store, secret: secret, version: version)
    }

    /// The file at `path` is, byte for byte, the one `snapshot` recorded: its
    /// SHA-256 (snapshot version 1), or (version 2) the SHA-256 of its pages'
    /// SHA-256 digests in order, computed here from the file itself.
    func assertIsTheRecordedFile(_ path: String, _ snapshot: Snapshot, file: StaticString = #filePath, line: UInt = #line) throws {
        if let sha = snapshot.databaseSHA256 {
            XCTAssertNil(snapshot.pagesSHA256, file: file, line: line)
            XCTAssertEqual(try FileStreams.digest(of: path).sha256, sha, "the file comes back byte for byte", file: file, line: line)
            return
        }
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: path), file: file, line: line)
        XCTAssertEqual(bytes.count, snapshot.pageSize * snapshot.pageCount, file: file, line: line)
        var ids: [UInt8] = []
        for n in 0..<snapshot.pageCount {
            ids += SHA256.hash(data: bytes[n * snapshot.pageSize..<(n + 1) * snapshot.pageSize])
        }
        let digest = SHA256.hash(data: ids).map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(digest, try XCTUnwrap(snapshot.pagesSHA256, file: file, line: line), "the file comes back page for page", file: file, line: line)
    }

    /// One backup of `db`; `configure` sets the request's switches (pages
    /// from the copy's writes or a scan, a WAL source's snapshot or a whole
    /// copy, blobs with or without zstd's content checksum).
    func backup(_ db: String, _ repository: Repository, configure: (inout RepoBackupRequest) -> Void = { _ in }) throws -> RepoBackupOutcome {
        let index = SharedIndex(try repository.loadIndex())
        var request = RepoBackupRequest(source: db)
        request.temporaryFolder = DurableFolder.parent(of: db)
        configure(&request)
        return try RepoBackup.run(request, repository: repository, index: index,
                                  snapshots: try repository.snapshots().snapshots, lock: nil)
    }

    /// Every pack read back, every page rehashed (`verify --read-data`).
    func readAll(_ repository: Repository) throws -> RepoVerifyReport {
        try RepoVerify.run(repository, options: { var o = RepoVerifyOptions(); o.readDataPercent = 100; return o }())
    }

    /// A repository holding one backup of a.db, made by `sql`, and the key of its first pack.
    func oneBackup(_ folder: TemporaryFolder, _ sql: String, version: Int = Repository.version,
                   configure: (inout RepoBackupRequest) -> Void = { _ in }) throws -> (Repository, RepoBackupOutcome, FolderStore, String) {
        let repository = try makeRepo(folder, version: version)
        let db = folder.file("a.db")
        try makeDatabase(db, sql)
        let outcome = try backup(db, repository, configure: configure)
        let store = FolderStore(path: folder.file("repo"))
        return (repository, outcome, store, try XCTUnwrap(try store.list(prefix: "packs/").first).key)
    }

    func restore(_ snapshot: Snapshot, _ repository: Repository, to target: String) throws {
        _ = try RepoRestore.run(RepoRestoreRequest(snapshot: snapshot, target: target), repository: repository)
    }

    /// Many snapshots of a changing database (updates in place, inserts, deletes,
    /// a VACUUM, growth and shrinkage), small packs, forget and prune between
    /// them: every snapshot kept restores to exactly what was backed up.
    /// Every page matches its id, yet the file is not what the snapshot
    /// recorded (its SHA-256, or its logical hash): nothing is restored and
    /// nothing is left beside the target.
    /// Two databases whose paths differ only in their Unicode form (NFC
    /// "café.db", NFD "café.db") are two files on Linux and two series of
    /// snapshots: retention keeps each one's newest, `latest` of one never
    /// picks the other's (Swift's String == would call the names equal).
    func testPathsThatDifferOnlyInUnicodeFormAreTwoSeries() throws {
        let folder = try TemporaryFolder("repo-nfd")
        let repository = try makeRepo(folder)
        let nfc = folder.file("caf\u{E9}.db"), nfd = folder.file("cafe\u{301}.db")
        XCTAssertFalse(Array(nfc.utf8) == Array(nfd.utf8))
        try makeDatabase(nfc, "CREATE TABLE t(v); INSERT INTO t VALUES ('nfc');")
        try makeDatabase(nfd, "CREATE TABLE t(v); INSERT INTO t VALUES ('nfd'), ('nfd');")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".db") }.count, 2)
        _ = try backup(nfd, repository)
        let newest = try backup(nfc, repository).snapshot
        let snapshots = try repository.snapshots().snapshots
        XCTAssertEqual(snapshots.count, 2)
        let decision = RepoForget.decide(snapshots, policy: RetentionPolicy(last: 1))
        XCTAssertEqual(decision.remove.count, 0, "each series keeps its newest")
        let picked = try SnapshotSelector.select("latest", from: snapshots, database: nfd, at: nil, location: "repo")
        XCTAssertTrue(Array(picked.path.utf8) == Array(nfd.utf8), "latest of the NFD path is its own snapshot")
        XCTAssertNotEqual(picked.id, newest.id)
        XCTAssertThrowsError(try SnapshotSelector.select("latest", from: snapshots, database: nil, at: nil, location: "repo"),
                             "two databases: latest is ambiguous")
    }

    func testRestoreRefusesAFileThatIsNotTheRecordedOne() throws {
        for version in [2, 3] {
            let folder = try TemporaryFolder("repo")
            let repository = try makeRepo(folder, version: version)
            let db = folder.file("app.db")
            try makeDatabase(db, "CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('a'), (x'00ff'), (1.5), (NULL);")
            let snapshot = try backup(db, repository).snapshot
            XCTAssertEqual(snapshot.pagesSHA256 != nil, version == 3)
            var wrongHash = snapshot
            wrongHash.logicalHash = String(repeating: "0", count: 64)
            var wrongSHA = snapshot
            if version == 3 { wrongSHA.pagesSHA256 = String(repeating: "0", count: 64) } else { wrongSHA.databaseSHA256 = String(repeating: "0", count: 64) }
            wrongSHA.logicalHash = wrongHash.logicalHash  // the SHA-256 is named first
            for (doctored, message) in [(wrongHash, "logical hash differs"),
                                        (wrongSHA, version == 3 ? "does not match snapshot \(snapshot.shortID)'s pages_sha256" : "file's SHA-256 does not match snapshot \(snapshot.shortID)")] {
                let target = folder.file("restored.db")
                XCTAssertThrowsError(try RepoRestore.run(RepoRestoreRequest(snapshot: doctored, target: target), repository: repository)) {
                    XCTAssertTrue("\($0)".contains(message), "\($0)")
                    if message.contains("sha256") || message.contains("SHA-256") {
                        // Every page is its id's: the list or the snapshot is named instead of a pack.
                        XCTAssertTrue("\($0)".contains("matches its id") && "\($0)".contains("lists/" + snapshot.list), "\($0)")
                    }
                }
                XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix("repo") }.sorted(), ["app.db"])
            }
            _ = try RepoRestore.run(RepoRestoreRequest(snapshot: snapshot, target: folder.file("restored.db")), repository: repository)
            XCTAssertEqual(try ContentHasher.hash(path: folder.file("restored.db")).digest, snapshot.logicalHash)
            try assertIsTheRecordedFile(folder.file("restored.db"), snapshot)
        }
    }

    /// Version 3 records the SHA-256 of the page ids (the file is not hashed
    /// as a whole); a version-2 repository keeps recording the file's SHA-256,
    /// as the litectl that made it reads it. Both restore exactly.
    func testEachVersionRecordsItsDigest() throws {
        let folder = try TemporaryFolder("repo")
        let base = folder.file("base.db")
        try makeDatabase(base, """
            PRAGMA page_size=1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000) INSERT INTO t SELECT x, printf('%.50d', x) FROM c;
            """)
        let before = try ContentHasher.hash(path: base).digest
        for version in [2, 3] {
            let db = folder.file("app\(version).db")
            try FileManager.default.copyItem(atPath: base, toPath: db)
            let repository = try makeRepo(folder, version: version, name: "repo\(version)")
            let config = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: folder.file("repo\(version)/config")))) as? [String: Any]
            XCTAssertEqual((config?["version"] as? NSNumber)?.intValue, version)
            let first = try backup(db, repository).snapshot
            _ = try sqlite3([db, "UPDATE t SET v = v || 'x' WHERE id % 50 = 0"])
            let second = try backup(db, repository).snapshot
            XCTAssertNotNil(second.parent)
            let stored = try String(contentsOfFile: folder.file("repo\(version)/snapshots/\(second.id)"), encoding: .utf8)
            if version == 3 {
                XCTAssertTrue(stored.contains("\"version\":2") && stored.contains("\"pages_sha256\"") && !stored.contains("database_sha256"), stored)
                XCTAssertNil(first.databaseSHA256)
            } else {
                XCTAssertTrue(stored.contains("\"version\":1") && stored.contains("\"database_sha256\"") && !stored.contains("pages_sha256"), stored)
                XCTAssertNil(first.pagesSHA256)
            }
            // Read back as written.
            let listed = try repository.snapshots().snapshots
            XCTAssertEqual(listed.map(\.databaseSHA256), [first.databaseSHA256, second.databaseSHA256])
            XCTAssertEqual(listed.map(\.pagesSHA256), [first.pagesSHA256, second.pagesSHA256])
            for (n, snapshot) in [first, second].enumerated() {
                let target = folder.file("back\(version)-\(n).db")
                try restore(snapshot, repository, to: target)
                try assertIsTheRecordedFile(target, snapshot)
            }
            // The second list is a delta: a mismatch names it and its base.
            var doctored = second
            if version == 3 { doctored.pagesSHA256 = String(repeating: "0", count: 64) } else { doctored.databaseSHA256 = String(repeating: "0", count: 64) }
            XCTAssertThrowsError(try restore(doctored, repository, to: folder.file("doctored.db"))) {
                XCTAssertTrue("\($0)".contains("lists/\(second.list) (a delta on ") && "\($0)".contains("lists/\(first.list))"), "\($0)")
            }
            XCTAssertEqual(try ContentHasher.hash(path: folder.file("back\(version)-0.db")).digest, before)
            XCTAssertEqual(try ContentHasher.hash(path: folder.file("back\(version)-1.db")).digest, try ContentHasher.hash(path: db).digest)
            XCTAssertTrue(try readAll(repository).problems.isEmpty)
        }
    }

    /// A version-3 page list replaced by another valid one (of a database of
    /// the same page count): every page then matches its id, but the ids'
    /// SHA-256 is not the snapshot's, so verify names the list and restore
    /// refuses it.
    func testAListSwappedForAnotherIsFound() throws {
        let folder = try TemporaryFolder("repo")
        let repository = try makeRepo(folder)
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(x); INSERT INTO t VALUES ('a');")
        try makeDatabase(b, "CREATE TABLE t(x); INSERT INTO t VALUES ('b');")
        let first = try backup(a, repository).snapshot, second = try backup(b, repository).snapshot
        XCTAssertEqual(first.pageCount, second.pageCount)
        XCTAssertNil(first.parent)
        XCTAssertNil(second.parent)
        // Swapped in place (another list's bytes under this list's name): the
        // name is the SHA-256 of the bytes, so the read itself refuses it.
        let lists = folder.file("repo/lists/")
        let original = try Data(contentsOf: URL(fileURLWithPath: lists + first.list))
        try FileManager.default.removeItem(atPath: lists + first.list)
        try FileManager.default.copyItem(atPath: lists + second.list, toPath: lists + first.list)
        var report = try readAll(repository)
        XCTAssertEqual(report.problems.map(\.object), ["snapshots/" + first.id], "\(report.problems.map(\.message))")
        XCTAssertTrue(report.problems.first?.message.contains("lists/\(first.list): damaged or swapped object") == true)
        XCTAssertEqual(report.damagedSnapshots, [first.id])
        XCTAssertThrowsError(try restore(first, repository, to: folder.file("back.db"))) {
            XCTAssertTrue("\($0)".contains("damaged or swapped object"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.file("back.db")))
        try original.write(to: URL(fileURLWithPath: lists + first.list))

        // A snapshot rewritten to name the other's list, stored under its new
        // name (a valid object, as a broken or hostile writer could make): every
        // page then matches its id, and the ids' digest is what finds it.
        let snapshots = folder.file("repo/snapshots/")
        let json = try String(contentsOfFile: snapshots + first.id, encoding: .utf8).replacingOccurrences(of: first.list, with: second.list)
        let renamed = folder.file("renamed.json")
        try json.write(toFile: renamed, atomically: true, encoding: .utf8)
        let newID = String(try runProcess("/usr/bin/sha256sum", [renamed]).stdout.prefix(64))
        try FileManager.default.moveItem(atPath: renamed, toPath: snapshots + newID)
        try FileManager.default.removeItem(atPath: snapshots + first.id)
        report = try readAll(repository)
        XCTAssertEqual(report.problems.map(\.object), ["lists/" + second.list], "\(report.problems.map(\.message))")
        XCTAssertEqual(report.damagedSnapshots, [newID])
        let forged = try XCTUnwrap(try repository.snapshots().snapshots.first { $0.id == newID })
        XCTAssertThrowsError(try restore(forged, repository, to: folder.file("back.db"))) {
            XCTAssertTrue("\($0)".contains("page ids in \(lists + second.list) does not match snapshot \(forged.shortID)'s pages_sha256")
                          && "\($0)".contains("every page of the rebuilt file matches its id"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.file("back.db")))
    }

    func testSnapshotsThroughChangesForgetAndPruneRestoreExactly() throws {
        let folder = try TemporaryFolder("repo")
        setenv("LITECTL_PACK_SIZE", "65536", 1)
        defer { unsetenv("LITECTL_PACK_SIZE") }
        let repository = try makeRepo(folder)
        XCTAssertEqual(repository.packSize, 65536)
        let db = folder.file("app.db")
        try makeDatabase(db, """
            PRAGMA page_size=1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, r REAL, b BLOB);
            CREATE INDEX t_v ON t(v);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000)
            INSERT INTO t SELECT x, hex(randomblob(20)), x*0.5, randomblob(x%200) FROM c;
            """)
        var rng = SplitMix64(seed: 42)
        var expected: [String: String] = [:]   // snapshot id -> litectl hash of the source then
        for step in 0..<12 {
            let sql: String
            switch step % 4 {
            case 0: sql = "UPDATE t SET v = hex(randomblob(20)) WHERE id % \(Int.random(in: 50...200, using: &rng)) = 0;"
            case 1: sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<\(Int.random(in: 100...800, using: &rng))) INSERT INTO t(v, r, b) SELECT hex(randomblob(30)), random(), randomblob(500) FROM c;"
            case 2: sql = "DELETE FROM t WHERE id % \(Int.random(in: 3...9, using: &rng)) = 1;"
            default: sql = "VACUUM;"
            }
            if step > 0 { _ = try sqlite3([db, sql]) }
            let outcome = try backup(db, repository)
            expected[outcome.snapshot.id] = try ContentHasher.hash(path: db).digest
            XCTAssertEqual(outcome.snapshot.logicalHash, expected[outcome.snapshot.id])
            if step > 0 && step % 4 != 3 {
                XCTAssertLessThan(outcome.pagesNew, outcome.pagesRead, "an incremental step stores only changed pages")
            }
            if step == 5 {
                let decision = RepoForget.decide(try repository.snapshots().snapshots, policy: RetentionPolicy(last: 2))
                XCTAssertEqual(decision.remove.count, 4)
                try RepoForget.remove(decision.remove, from: repository)
                for s in decision.remove { expected[s.id] = nil }
                let report = try RepoPrune.run(repository, dryRun: false, lock: nil)
                XCTAssertGreaterThan(report.packsDeleted + report.packsRewritten, 0, "forgotten snapshots free packs")
            }
        }
        let report = try readAll(repository)
        XCTAssertTrue(report.problems.isEmpty, "\(report.problems.map(\.message))")
        let snapshots = try repository.snapshots().snapshots
        XCTAssertEqual(Set(snapshots.map(\.id)), Set(expected.keys))
        XCTAssertTrue(snapshots.contains { $0.parent != nil }, "later snapshots are deltas on a parent")
        for (n, snapshot) in snapshots.enumerated() {
            let target = folder.file("restored-\(n).db")
            try restore(snapshot, repository, to: target)
            XCTAssertEqual(try ContentHasher.hash(path: target).digest, expected[snapshot.id])
            try assertIsTheRecordedFile(target, snapshot)
            XCTAssertEqual(try sqlite3Scalar(target, "PRAGMA integrity_check"), "ok")
        }
    }

    func testIdenticalBackupStoresNoPagesAndListIsADelta() throws {
        let folder = try TemporaryFolder("repo")
        let repository = try makeRepo(folder)
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<5000) INSERT INTO t SELECT randomblob(100) FROM c;")
        let first = try backup(db, repository)
        XCTAssertEqual(first.pagesNew, Set(try repository.pageIDs(of: first.snapshot)).count, "each distinct page stored once")
        let second = try backup(db, repository)
        XCTAssertEqual(second.pagesNew, 0)
        XCTAssertEqual(second.packsWritten, 0)
        XCTAssertEqual(second.snapshot.parent, first.snapshot.id)
        XCTAssertLessThan(second.bytesAdded, 4096, "an unchanged database adds a small delta list and a snapshot")
        XCTAssertEqual(try repository.pageIDs(of: second.snapshot), try repository.pageIDs(of: first.snapshot))
    }

    func testEncryptedRepositoryHidesContentAndRefusesAWrongKey() throws {
        let folder = try TemporaryFolder("repo")
        let keyPath = folder.file("repo.key")
        let repository = try makeRepo(folder, secret: .keyFile(keyPath))
        XCTAssertTrue(repository.encrypted)
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE secret(x); INSERT INTO secret VALUES ('plain text that must not show');")
        let outcome = try backup(db, repository)
        // No stored object shows the table's text or name.
        let store = FolderStore(path: folder.file("repo"))
        for object in try store.list(prefix: "") where object.key != "config" {
            let bytes = try store.get(object.key)
            XCTAssertNil(String(decoding: bytes, as: UTF8.self).range(of: "plain text"), object.key)
            XCTAssertNil(String(decoding: bytes, as: UTF8.self).range(of: "litectl-snapshot"), object.key)
        }
        let ids = try repository.pageIDs(of: outcome.snapshot)
        XCTAssertEqual(ids.count, outcome.snapshot.pageCount)
        // A wrong key file and a missing key are clear errors.
        let wrong = folder.file("wrong.key")
        try RepoKeyFile.createIfMissing(wrong)
        XCTAssertThrowsError(try Repository.open(store, secret: .keyFile(wrong))) { error in
            XCTAssertTrue("\(error)".contains("wrong key"), "\(error)")
        }
        XCTAssertThrowsError(try Repository.open(store, secret: nil)) { error in
            XCTAssertTrue("\(error)".contains("encrypted"), "\(error)")
        }
        let reopened = try Repository.open(store, secret: .keyFile(keyPath))
        try restore(try reopened.snapshots().snapshots[0], reopened, to: folder.file("back.db"))
        XCTAssertEqual(try sqlite3Scalar(folder.file("back.db"), "SELECT x FROM secret"), "plain text that must not show")
        // The page ids are keyed: the restored file's pages are the stored ones, and
        // no id is a plain SHA-256 of any of them (stored names reveal no content).
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: folder.file("back.db")))
        let pageSize = outcome.snapshot.pageSize
        XCTAssertEqual(bytes.count, ids.count * pageSize)
        let plain = Set(stride(from: 0, to: bytes.count, by: pageSize).map { PageID(digest: SHA256.hash(data: bytes[$0..<$0 + pageSize])) })
        XCTAssertTrue(plain.isDisjoint(with: ids))
    }

    /// Damaged or hostile objects are errors naming the object, never a crash:
    /// random bytes, truncations and bit flips of every binary object.
    func testDamagedObjectsAreErrorsNotCrashes() throws {
        let folder = try TemporaryFolder("repo")
        let repository = try makeRepo(folder)
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<2000) INSERT INTO t SELECT randomblob(50) FROM c;")
        _ = try backup(db, repository)
        _ = try sqlite3([db, "UPDATE t SET x = randomblob(50) WHERE rowid % 97 = 0"])
        _ = try backup(db, repository)
        let store = FolderStore(path: folder.file("repo"))
        var rng = SplitMix64(seed: 7)
        for object in try store.list(prefix: "") where object.key.hasPrefix("index/") || object.key.hasPrefix("lists/") || object.key.hasPrefix("snapshots/") {
            let original = try store.get(object.key)
            for trial in 0..<40 {
                var bytes = original
                switch trial % 4 {
                case 0: bytes = Array(bytes.prefix(Int.random(in: 0..<max(1, bytes.count), using: &rng)))
                case 1: bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                case 2: bytes = (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                default: bytes += (0..<8).map { _ in UInt8.random(in: 0...255, using: &rng) }
                }
                try store.put(object.key, bytes)
                // Either it still reads (a harmless change) or it is a StoreError; nothing else.
                do {
                    let snapshots = try repository.snapshots().snapshots
                    _ = try repository.loadIndex()
                    for s in snapshots { _ = try? repository.pageIDs(of: s) }
                    _ = try RepoVerify.run(repository)
                } catch is StoreError {
                }
            }
            try store.put(object.key, original)
        }
        let report = try readAll(repository)
        XCTAssertTrue(report.problems.isEmpty)
    }

    /// Since version 2, runs of new pages are compressed together, and prune takes the
    /// live pages out of blobs that are mostly dead and groups them anew.
    func testBlobsGroupPagesAndPruneRegroupsPartlyLiveOnes() throws {
        let folder = try TemporaryFolder("repo")
        setenv("LITECTL_PACK_SIZE", "65536", 1)
        defer { unsetenv("LITECTL_PACK_SIZE") }
        let repository = try makeRepo(folder)
        XCTAssertGreaterThanOrEqual(repository.version, 2, "blobs of several pages")
        let db = folder.file("a.db")
        try makeDatabase(db, """
            PRAGMA page_size=1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<6000)
            INSERT INTO t SELECT x, printf('%.60d', x) FROM c;
            """)
        let first = try backup(db, repository)
        var index = try repository.loadIndex()
        XCTAssertEqual(index.count, first.pagesNew)
        // Blobs of up to 255 pages of 1 KiB, and page 1 (written last by the copy) in one of its own.
        XCTAssertTrue(((first.pagesNew + 254) / 255...(first.pagesNew + 254) / 255 + 1).contains(index.blobs.count), "\(index.blobs.count) blobs")
        XCTAssertEqual(index.blobs.map { Int($0.pages) }.reduce(0, +), first.pagesNew)
        // Three rows in four changed: most pages of every blob die with the first snapshot.
        _ = try sqlite3([db, "UPDATE t SET v = printf('%.60d', id * 7) WHERE id % 4 != 0"])
        let second = try backup(db, repository)
        try RepoForget.remove([first.snapshot], from: repository)
        let report = try RepoPrune.run(repository, dryRun: false, lock: nil)
        XCTAssertGreaterThan(report.packsRewritten, 0)
        XCTAssertGreaterThan(report.pagesRemoved, 0)
        index = try repository.loadIndex()
        let live = Set(try repository.pageIDs(of: second.snapshot))
        XCTAssertEqual(Set(index.entries.map(\.id)), live, "only the second snapshot's pages are left")
        XCTAssertTrue(index.blobs.contains { Int($0.pages) < 255 && Int($0.pages) > 1 }, "live pages regrouped")
        let verify = try readAll(repository)
        XCTAssertTrue(verify.problems.isEmpty, "\(verify.problems.map(\.message))")
        try restore(second.snapshot, repository, to: folder.file("back.db"))
        try assertIsTheRecordedFile(folder.file("back.db"), second.snapshot)
        XCTAssertEqual(try sqlite3Scalar(folder.file("back.db"), "SELECT count(*) FROM t WHERE v = printf('%.60d', id * 7)"), "4500")
    }

    /// The page ids taken from the copy's writes and those of a scan of the
    /// whole copy (what a copy that restarted falls back to) make the same
    /// snapshot: the same pages, file hash and logical hash.
    func testPagesFromTheWritesEqualAScanOfTheCopy() throws {
        let folder = try TemporaryFolder("repo")
        let db = folder.file("a.db")
        try makeDatabase(db, """
            PRAGMA page_size=2048;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<4000)
            INSERT INTO t SELECT x, printf('%.40d', x), CASE WHEN x % 97 = 0 THEN randomblob(5000) END FROM c;
            INSERT INTO w SELECT v, id FROM t;
            """)
        func run(writes: Bool, _ name: String, version: Int) throws -> [RepoBackupOutcome] {
            let store = FolderStore(path: folder.file(name))
            try store.createRoot()
            let repository = try Repository.initialize(store, secret: nil, version: version)
            let copy = folder.file(name + ".db")
            try? FileManager.default.removeItem(atPath: copy)
            try FileManager.default.copyItem(atPath: db, toPath: copy)
            var outcomes = [try backup(copy, repository) { $0.pagesFromWrites = writes }]
            _ = try sqlite3([copy, "UPDATE t SET v = v || '!' WHERE id % 31 = 0; DELETE FROM w WHERE v % 13 = 0;"])
            outcomes.append(try backup(copy, repository) { $0.pagesFromWrites = writes })
            for o in outcomes { XCTAssertEqual(try repository.pageIDs(of: o.snapshot).count, o.snapshot.pageCount) }
            return outcomes
        }
        for version in [2, 3] {
            let fromWrites = try run(writes: true, "w\(version)", version: version), fromScan = try run(writes: false, "s\(version)", version: version)
            XCTAssertEqual(fromWrites.map { $0.snapshot.pagesSHA256 != nil }, [version == 3, version == 3])
            // Each way was taken (the copy's writes are followed with or without the file's SHA-256).
            XCTAssertEqual(fromWrites.map(\.pagesFromWrites), [true, true], "version \(version)")
            XCTAssertEqual(fromScan.map(\.pagesFromWrites), [false, false], "version \(version)")
            for (a, b) in zip(fromWrites, fromScan) {
                XCTAssertEqual(a.snapshot.databaseSHA256, b.snapshot.databaseSHA256)
                XCTAssertEqual(a.snapshot.pagesSHA256, b.snapshot.pagesSHA256)
                XCTAssertEqual(a.snapshot.logicalHash, b.snapshot.logicalHash)
                XCTAssertEqual(a.pagesNew, b.pagesNew)
            }
            XCTAssertGreaterThan(fromWrites[1].hashPagesReused, 0)
        }
    }

    /// A copy of many 2 MiB chunks, whose page ids are computed in slices
    /// by the copy's threads (SQLite's own while it waits for a buffer, and
    /// the hashing thread) ahead of the in-order classification: the same
    /// snapshot as a scan of the whole copy, and it restores to the file,
    /// for the smallest page size, the usual one and the largest (a slice of 4 pages).
    func testPageIDsComputedInSlicesEqualAScan() throws {
        let folder = try TemporaryFolder("repo")
        for pageSize in [512, 4096, 65536] {
            let db = folder.file("a\(pageSize).db")
            try makeDatabase(db, """
                PRAGMA page_size=\(pageSize);
                CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
                WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<60000)
                INSERT INTO t SELECT x, printf('%.200d', x * 7) FROM c;
                """)
            var outcomes: [Bool: RepoBackupOutcome] = [:]
            for writes in [true, false] {
                let store = FolderStore(path: folder.file("r\(pageSize)\(writes)"))
                try store.createRoot()
                let repository = try Repository.initialize(store, secret: nil)
                outcomes[writes] = try backup(db, repository) { $0.pagesFromWrites = writes }
                XCTAssertEqual(outcomes[writes]!.pagesFromWrites, writes)
                let back = folder.file("back\(pageSize)\(writes).db")
                try restore(outcomes[writes]!.snapshot, repository, to: back)
                try assertIsTheRecordedFile(back, outcomes[writes]!.snapshot)
                // The source's bytes but for page 1's header (the backup API's copy sets its counters).
                XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: back)).dropFirst(100),
                               try Data(contentsOf: URL(fileURLWithPath: db)).dropFirst(100))
            }
            let (a, b) = (outcomes[true]!, outcomes[false]!)
            XCTAssertEqual(a.snapshot.pageSize, pageSize)
            XCTAssertGreaterThan(a.snapshot.pageCount * pageSize, 4 * (2 << 20))
            XCTAssertEqual(a.snapshot.pagesSHA256, b.snapshot.pagesSHA256)
            XCTAssertEqual(a.snapshot.logicalHash, b.snapshot.logicalHash)
            XCTAssertEqual(a.pagesNew, b.pagesNew)
        }
    }

    /// A WAL source with commits still in its -wal (a writer holds it open):
    /// its pages are read from the source's snapshot, the temporary copy
    /// keeping only page 1, and the snapshots are those of whole copies (the
    /// same pages, digests and logical hashes); each restores to the source
    /// as it was. A rollback-journal source is copied whole.
    func testAWALSourceIsReadFromItsSnapshot() throws {
        let folder = try TemporaryFolder("repo")
        let db = folder.file("a.db")
        try makeDatabase(db, """
            PRAGMA page_size=2048; PRAGMA journal_mode=wal;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000)
            INSERT INTO t SELECT x, printf('%.40d', x), CASE WHEN x % 97 = 0 THEN randomblob(5000) END FROM c;
            INSERT INTO w SELECT v, id FROM t;
            """)
        // A writer that keeps its commits in the -wal (no checkpoint) while the backups run.
        let writer = try Connection(path: db, mode: .readWrite)
        defer { try? writer.close() }
        try writer.execute("PRAGMA wal_autocheckpoint=0")
        let steps = [
            "UPDATE t SET v = v || '!' WHERE id % 31 = 0; INSERT INTO t(v, b) VALUES ('new', randomblob(9000))",
            "DELETE FROM w WHERE v % 13 = 0; UPDATE t SET b = randomblob(3000) WHERE id % 101 = 0",
            "INSERT INTO t(v) SELECT v || '+' FROM t WHERE id % 5 = 0",
        ]
        func repo(_ name: String) throws -> Repository {
            let store = FolderStore(path: folder.file(name))
            try store.createRoot()
            return try Repository.initialize(store, secret: nil, version: Repository.version)
        }
        let kept = try repo("kept"), whole = try repo("whole")
        for (n, sql) in steps.enumerated() {
            try writer.execute(sql)
            let walSize = (try FileManager.default.attributesOfItem(atPath: db + "-wal")[.size] as? Int) ?? 0
            XCTAssertGreaterThan(walSize, 0, "the -wal holds commits")
            let a = try backup(db, kept)
            let b = try backup(db, whole) { $0.readsSourceSnapshot = false }
            XCTAssertTrue(a.pagesFromSource, "step \(n)")
            XCTAssertTrue(a.checkedDuringCopy, "step \(n)")
            XCTAssertTrue(a.snapshot.verification.hasSuffix("quick_check ok"), a.snapshot.verification)
            XCTAssertFalse(b.pagesFromSource, "step \(n)")
            XCTAssertTrue(a.pagesFromWrites && b.pagesFromWrites)
            XCTAssertEqual(a.snapshot.pagesSHA256, b.snapshot.pagesSHA256)
            XCTAssertEqual(a.snapshot.logicalHash, b.snapshot.logicalHash)
            XCTAssertEqual(a.snapshot.logicalHash, try ContentHasher.hash(path: db).digest)
            XCTAssertEqual(a.pagesNew, b.pagesNew)
            if n > 0 { XCTAssertGreaterThan(a.hashPagesReused, 0) }
            let out = folder.file("back-\(n).db")
            try restore(a.snapshot, kept, to: out)
            try assertIsTheRecordedFile(out, a.snapshot)
            XCTAssertEqual(try sqlite3Scalar(out, "PRAGMA integrity_check"), "ok")
            XCTAssertEqual(try ContentHasher.hash(path: out).digest, a.snapshot.logicalHash)
        }
        XCTAssertTrue(try readAll(kept).problems.isEmpty)
        // No copy is left, and a rollback-journal source is copied whole.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.contains(RepoBackup.temporaryStem) }, [])
        let plain = folder.file("plain.db")
        try makeDatabase(plain, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (x'00'), (2.5);")
        XCTAssertFalse(try backup(plain, kept).pagesFromSource)
    }

    /// Damaged packs (flipped, cut, replaced bytes) make restore fail with a
    /// one-line error, never a crash or a wrong file, and verify names them.
    func testDamagedPacksFailRestoreCleanly() throws {
        let folder = try TemporaryFolder("repo")
        let (repository, outcome, store, pack) = try oneBackup(folder, "CREATE TABLE t(x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<3000) INSERT INTO t SELECT printf('%.80d', x) FROM c;")
        let original = try store.get(pack)
        var rng = SplitMix64(seed: 11)
        for trial in 0..<60 {
            var bytes = original
            switch trial % 3 {
            case 0: bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            case 1: bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &rng)))
            default:
                let at = Int.random(in: 0..<bytes.count, using: &rng)
                for i in at..<min(bytes.count, at + 64) { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
            }
            try store.put(pack, bytes)
            let target = folder.file("t\(trial).db")
            XCTAssertThrowsError(try restore(outcome.snapshot, repository, to: target), "trial \(trial)") { error in
                XCTAssertTrue(error is StoreError || error is DatabaseError, "\(error)")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: target), "no file under the target's name")
            let report = try readAll(repository)
            XCTAssertEqual(report.damagedSnapshots, [outcome.snapshot.id], "trial \(trial)")
        }
    }

    /// A byte flipped in a pack where zstd stored incompressible rows as they
    /// are. In blobs without zstd's content checksum (as litectl wrote them
    /// before 2026-11-26) the pack still decompresses, to other page content:
    /// restore does not check pages against their ids as it writes them, so it
    /// is found once the file is written (version 3: its pages against their
    /// ids; version 2: the file's SHA-256 differs, then each page is checked),
    /// and the error names the pack and the first damaged page. Blobs written
    /// now carry the checksum, and the same damage stops the restore at that
    /// pack. Either way nothing is left beside the target, and verify names
    /// the snapshot.
    func testAPackThatDecompressesToOtherPagesIsNamed() throws {
        for version in [2, 3] {
            for checksum in [false, true] {
                let folder = try TemporaryFolder("repo")
                let (repository, outcome, store, pack) = try oneBackup(folder, "CREATE TABLE t(x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<400) INSERT INTO t SELECT randomblob(3000) FROM c;",
                                                                       version: version) { $0.frameChecksums = checksum }
                XCTAssertEqual(outcome.snapshot.pagesSHA256 != nil, version == 3)
                var bytes = try store.get(pack)
                // Random rows do not compress: zstd stores them as they are, and
                // without the checksum a flipped byte still decompresses.
                bytes[bytes.count / 2] ^= 0x01
                try store.put(pack, bytes)
                let target = folder.file("restored.db")
                XCTAssertThrowsError(try restore(outcome.snapshot, repository, to: target)) { error in
                    XCTAssertTrue(error is StoreError, "\(error)")
                    let text = "\(error)"
                    let expected = checksum ? "cannot decompress" : "damaged pack: page "
                    XCTAssertTrue(text.contains(pack) && text.contains(expected), "checksum \(checksum): \(text)")
                    if !checksum { XCTAssertTrue(text.contains("does not match its id"), text) }
                }
                XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasPrefix("repo") }.sorted(), ["a.db"])
                XCTAssertEqual(try readAll(repository).damagedSnapshots, [outcome.snapshot.id])
            }
        }
    }

    func testInitRefusesANonEmptyLocationAndAnExistingRepository() throws {
        let folder = try TemporaryFolder("repo")
        _ = try makeRepo(folder)
        XCTAssertThrowsError(try Repository.initialize(FolderStore(path: folder.file("repo")), secret: nil)) {
            XCTAssertTrue("\($0)".contains("already a repository"), "\($0)")
        }
        let other = FolderStore(path: folder.file("other"))
        try other.createRoot()
        try other.put("notes.txt", Array("hello".utf8))
        XCTAssertThrowsError(try Repository.initialize(other, secret: nil)) {
            XCTAssertTrue("\($0)".contains("not empty"), "\($0)")
        }
        XCTAssertThrowsError(try Repository.open(other, secret: nil)) {
            XCTAssertTrue("\($0)".contains("not a litectl repository"), "\($0)")
        }
    }

    func testSnapshotSelection() throws {
        func snap(_ id: String, _ db: String, _ t: Double) -> Snapshot {
            Snapshot(id: id, database: db, path: "/x/" + db, hostname: "h", time: t, tags: [], pageSize: 4096, pageCount: 1,
                     list: String(repeating: "0", count: 64), parent: nil, databaseSHA256: "", logicalHash: "", header: [],
                     pagesNew: 0, bytesAdded: 0, durationSeconds: 0, strategy: "", verification: "")
        }
        let all = [snap("aa11", "a.db", 100), snap("aa22", "a.db", 200), snap("bb33", "b.db", 300)]
        XCTAssertEqual(try SnapshotSelector.select("latest", from: all, database: "a.db", at: nil, location: "r").id, "aa22")
        XCTAssertEqual(try SnapshotSelector.select("latest", from: all, database: "a.db", at: 150, location: "r").id, "aa11")
        XCTAssertEqual(try SnapshotSelector.select("bb33", from: all, database: nil, at: nil, location: "r").id, "bb33")
        // Fewer than 4 hex digits name a snapshot only by chance: refused, even when one matches.
        XCTAssertThrowsError(try SnapshotSelector.select("bb", from: all, database: nil, at: nil, location: "r")) {
            XCTAssertTrue("\($0)".contains("too short to name a snapshot"), "\($0)")
        }
        let longer = [snap("aa11cc", "a.db", 100), snap("aa11dd", "a.db", 200)]
        XCTAssertThrowsError(try SnapshotSelector.select("aa11", from: longer, database: nil, at: nil, location: "r"))
        XCTAssertThrowsError(try SnapshotSelector.select("latest", from: all, database: nil, at: nil, location: "r"))
        XCTAssertThrowsError(try SnapshotSelector.select("latest", from: all, database: "a.db", at: 50, location: "r"))
        // A whole second, minute or date reaches its last microsecond (a state observed at .9995 is in it).
        XCTAssertEqual(try SnapshotSelector.parseTime("1970-01-01T00:01:40Z"), 100.999999, accuracy: 1e-7)
        XCTAssertEqual(try SnapshotSelector.parseTime("1970-01-01T00:01Z"), 119.999999, accuracy: 1e-7)
        XCTAssertEqual(try SnapshotSelector.parseTime("1970-01-02"), 86_400 + 86_399.999999, accuracy: 1e-7)
        XCTAssertEqual(try SnapshotSelector.parseTime("1970-01-01T00:01:40.5Z"), 100.599999, accuracy: 1e-7)
        XCTAssertThrowsError(try SnapshotSelector.parseTime("yesterday"))
    }
}
