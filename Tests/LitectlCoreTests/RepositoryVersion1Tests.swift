// A repository that litectl wrote in format version 1 (Tests/Fixtures/repo-v1,
// made by the last litectl that wrote it) is still read, verified, restored,
// backed up into and pruned, and stays version 1. The sqlite3 CLI is the
// oracle for what the restored databases hold.
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class RepositoryVersion1Tests: XCTestCase {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/repo-v1").path

    /// A copy of the fixture folder, so that the tests never change the committed one.
    func fixtureCopy(_ folder: TemporaryFolder) throws -> String {
        let target = folder.file("repo-v1")
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: target)
        return target
    }

    func restore(_ snapshot: Snapshot, _ repository: Repository, to target: String) throws {
        _ = try RepoRestore.run(RepoRestoreRequest(snapshot: snapshot, target: target), repository: repository)
    }

    func testVersion1SnapshotsRestoreAndVerify() throws {
        let folder = try TemporaryFolder("repo-v1")
        let root = try fixtureCopy(folder)
        let repository = try Repository.open(FolderStore(path: root + "/plain"), secret: nil)
        XCTAssertEqual(repository.version, 1)
        let snapshots = try repository.snapshots().snapshots
        XCTAssertEqual(snapshots.map(\.tags), [["first"], ["second"]])
        XCTAssertEqual(snapshots[1].parent, snapshots[0].id, "the second is a delta on the first")
        for (n, snapshot) in snapshots.enumerated() {
            let target = folder.file("restored-\(n).db")
            try restore(snapshot, repository, to: target)
            XCTAssertEqual(try sqlite3Scalar(target, "PRAGMA integrity_check"), "ok")
            XCTAssertEqual(try sqlite3Scalar(target, "SELECT count(*) FROM item"), n == 0 ? "400" : "401")
            XCTAssertEqual(try sqlite3Scalar(target, "SELECT count(*) FROM item WHERE name LIKE '%!'"), n == 0 ? "0" : "57")
            XCTAssertEqual(try ContentHasher.hash(path: target).digest, snapshot.logicalHash)
        }
        var options = RepoVerifyOptions()
        options.readDataPercent = 100
        let report = try RepoVerify.run(repository, options: options)
        XCTAssertTrue(report.problems.isEmpty, "\(report.problems.map(\.message))")
        XCTAssertEqual(report.pagesRead, report.pagesIndexed)

        let encrypted = try Repository.open(FolderStore(path: root + "/encrypted"), secret: .keyFile(root + "/encrypted.key"))
        XCTAssertEqual(encrypted.version, 1)
        let only = try XCTUnwrap(try encrypted.snapshots().snapshots.first)
        try restore(only, encrypted, to: folder.file("encrypted.db"))
        XCTAssertEqual(try sqlite3Scalar(folder.file("encrypted.db"), "SELECT count(*) FROM item"), "401")
    }

    /// Backups into a version-1 repository write version-1 objects (one page
    /// per zlib blob), so that the repository stays readable by the litectl that made it.
    func testBackupForgetAndPruneKeepVersion1() throws {
        let folder = try TemporaryFolder("repo-v1")
        let root = try fixtureCopy(folder)
        let repository = try Repository.open(FolderStore(path: root + "/plain"), secret: nil)
        let before = Set(try repository.store.list(prefix: "index/").map(\.key))
        let db = folder.file("app.db")
        try restore(try repository.snapshots().snapshots[1], repository, to: db)
        _ = try sqlite3([db, "UPDATE item SET price = price * 2 WHERE id % 5 = 0; DELETE FROM item WHERE id % 11 = 0;"])
        var request = RepoBackupRequest(source: db)
        request.temporaryFolder = folder.path
        let outcome = try RepoBackup.run(request, repository: repository, index: SharedIndex(try repository.loadIndex()),
                                         snapshots: try repository.snapshots().snapshots, lock: nil)
        XCTAssertGreaterThan(outcome.pagesNew, 0)
        let added = Set(try repository.store.list(prefix: "index/").map(\.key)).subtracting(before)
        XCTAssertEqual(added.count, 1)
        for key in added {
            let raw = try decompressObject(try repository.getObject(key), what: key)
            XCTAssertEqual(Array(raw.prefix(8)), Array("LCIX".utf8) + [1, 0, 0, 0], "a version-1 index object")
        }
        let config = try String(decoding: repository.store.get("config"), as: UTF8.self)
        XCTAssertTrue(config.contains("\"version\": 1"), config)
        let expected = try ContentHasher.hash(path: db).digest

        // Forget the two fixture snapshots and prune: the new one still restores.
        let old = try repository.snapshots().snapshots.filter { $0.id != outcome.snapshot.id }
        try RepoForget.remove(old, from: repository)
        let report = try RepoPrune.run(repository, dryRun: false, lock: nil)
        XCTAssertGreaterThan(report.pagesRemoved, 0)
        let reopened = try Repository.open(FolderStore(path: root + "/plain"), secret: nil)
        XCTAssertEqual(reopened.version, 1)
        let left = try reopened.snapshots().snapshots
        XCTAssertEqual(left.map(\.id), [outcome.snapshot.id])
        try restore(left[0], reopened, to: folder.file("after-prune.db"))
        XCTAssertEqual(try ContentHasher.hash(path: folder.file("after-prune.db")).digest, expected)
        XCTAssertEqual(try sqlite3Scalar(folder.file("after-prune.db"), "PRAGMA integrity_check"), "ok")
        var options = RepoVerifyOptions()
        options.readDataPercent = 100
        XCTAssertTrue(try RepoVerify.run(reopened, options: options).problems.isEmpty)
    }
}
