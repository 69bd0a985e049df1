// The repository's named reads (Repository/RepositoryReads.swift) against
// the database file itself: every page of a backed-up database read back
// through its page list and its blob's pack range alone is the file's page,
// byte for byte (page 1's change counters apart: the copy keeps its own); a
// page whose blob was damaged is refused, never returned.
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class RepositoryReadsTests: XCTestCase {
    func testEveryPageReadByItsBlobsPackRangeIsTheFilesPage() throws {
        let folder = try TemporaryFolder("repo-reads")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: .passphrase(Array("reads".utf8)))
        let db = folder.file("a.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
            INSERT INTO t SELECT i, randomblob(700) FROM n;
            """)
        var request = RepoBackupRequest(source: db)
        request.temporaryFolder = folder.path
        let snapshot = try RepoBackup.run(request, repository: repository, index: SharedIndex(try repository.loadIndex()),
                                          snapshots: [], lock: nil).snapshot
        let file = try XCTUnwrap(FileManager.default.contents(atPath: db))
        let ids = try repository.readPageList(of: snapshot)
        XCTAssertEqual(ids.count * snapshot.pageSize, file.count)
        let index = try repository.loadIndex()
        let decompressor = ZstdDecompressor()
        for (n, id) in ids.enumerated() {
            let location = try XCTUnwrap(repository.blobLocation(of: id, in: index), "page \(n + 1)")
            let pages = try repository.readBlob(location, id: id, decompressor: decompressor)
            var page = Array(pages[location.slot * location.pageSize..<(location.slot + 1) * location.pageSize])
            var original = Array(file[n * snapshot.pageSize..<(n + 1) * snapshot.pageSize])
            if n == 0 {
                // The copy's header has its own change counter and version-valid-for number.
                for i in Array(24..<28) + Array(92..<96) { page[i] = 0; original[i] = 0 }
            }
            XCTAssertEqual(page, original, "page \(n + 1)")
        }
        // A damaged blob is refused (one byte of its pack flipped).
        let location = try XCTUnwrap(repository.blobLocation(of: ids[0], in: index))
        let packPath = folder.file("repo/" + location.pack.name)
        var pack = try XCTUnwrap(FileManager.default.contents(atPath: packPath))
        pack[Int(location.offset) + location.length / 2] ^= 0x55
        try FileManager.default.removeItem(atPath: packPath)
        XCTAssertTrue(FileManager.default.createFile(atPath: packPath, contents: pack))
        XCTAssertThrowsError(try repository.readBlob(location, id: ids[0], decompressor: decompressor))
    }
}
