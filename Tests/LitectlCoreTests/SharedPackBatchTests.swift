// The shared rounds of `replicate --dir`'s first copies (Repository/
// SharedPackBatch.swift): several databases stored at once share packs and
// index objects (fewer rounds than databases), and every page of every one
// of them reads back from the repository's index, byte for byte (a page all
// of them share included); a round whose pack cannot be written fails every
// database in it, and the next round works. FleetLock: one repository lock
// for many units at once.
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class SharedPackBatchTests: XCTestCase {
    static let pageSize = 4096
    var pageSize: Int { Self.pageSize }

    /// Page `p` of database `db`: the first 10 pages the same in every
    /// database, the others its own (half random, half a repeated pattern).
    static func page(_ db: Int, _ p: UInt32) -> [UInt8] {
        var rng = SplitMix(seed: p <= 10 ? UInt64(p) : UInt64(db) << 32 | UInt64(p))
        return (0..<pageSize).map { i in i < pageSize / 2 ? UInt8(truncatingIfNeeded: rng.next()) : UInt8(truncatingIfNeeded: i / 64) }
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    func makeRepository(_ folder: TemporaryFolder) throws -> (Repository, FolderStore) {
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        return (try Repository.initialize(store, secret: nil, version: Repository.version), store)
    }

    func testDatabasesStoredAtOnceShareRoundsAndEveryPageReadsBack() throws {
        let folder = try TemporaryFolder("shared-pack-batch")
        let (repository, store) = try makeRepository(folder)
        let batch = SharedPackBatch(repository: repository, window: 0.3)
        let count = 6, pages: UInt32 = 300, pageSize = Self.pageSize
        let results = Locked([Int: Repository.StoredPages]())
        DispatchQueue.concurrentPerform(iterations: count) { db in
            let stored = try? repository.storePages(pageCount: pages, pageSize: pageSize, batch: batch) { Self.page(db, $0) }
            results.withLock { $0[db] = stored }
        }
        let stored = results.withLock { $0 }
        XCTAssertEqual(stored.count, count)
        let indexes = try store.list(prefix: "index/").count
        XCTAssertEqual(indexes, batch.roundsWritten)
        XCTAssert(indexes >= 1 && indexes < count, "\(count) databases in \(indexes) index objects (shared rounds)")
        let index = try repository.loadIndex()
        let decompressor = ZstdDecompressor()
        for db in 0..<count {
            let ids = try XCTUnwrap(stored[db]).ids
            XCTAssertEqual(ids.count, Int(pages))
            for p in stride(from: UInt32(1), through: pages, by: 7) {
                let want = Self.page(db, p)
                XCTAssertEqual(ids[Int(p) - 1], want.withUnsafeBytes { repository.pageID($0) })
                let location = try XCTUnwrap(repository.blobLocation(of: ids[Int(p) - 1], in: index), "page \(p) of database \(db) is indexed")
                let blob = try repository.readBlob(location, id: ids[Int(p) - 1], decompressor: decompressor)
                XCTAssertEqual(Array(blob[location.slot * pageSize..<(location.slot + 1) * pageSize]), want, "page \(p) of database \(db)")
            }
        }
    }

    func testARoundThatCannotBeWrittenFailsItsDatabasesAndTheNextRoundWorks() throws {
        let folder = try TemporaryFolder("shared-pack-batch-fail")
        let (repository, store) = try makeRepository(folder)
        let batch = SharedPackBatch(repository: repository, window: 0.05)
        // The index folder unwritable: the round's index object cannot be written.
        let indexFolder = folder.file("repo/index")
        try? FileManager.default.createDirectory(atPath: indexFolder, withIntermediateDirectories: true)
        XCTAssertEqual(chmod(indexFolder, 0o500), 0)
        if getuid() == 0 {
            // (root writes anyway: a file where the folder was instead.)
            XCTAssertEqual(chmod(indexFolder, 0o755), 0)
            try FileManager.default.removeItem(atPath: indexFolder)
            FileManager.default.createFile(atPath: indexFolder, contents: Data("not a folder".utf8))
        }
        XCTAssertThrowsError(try repository.storePages(pageCount: 20, pageSize: pageSize, batch: batch) { Self.page(1, $0) })
        if getuid() == 0 { try FileManager.default.removeItem(atPath: indexFolder) } else { XCTAssertEqual(chmod(indexFolder, 0o755), 0) }
        let stored = try repository.storePages(pageCount: 20, pageSize: pageSize, batch: batch) { Self.page(2, $0) }
        XCTAssertEqual(try store.list(prefix: "index/").count, 1)
        let index = try repository.loadIndex()
        for id in stored.ids { XCTAssertNotNil(repository.blobLocation(of: id, in: index)) }
    }

    func testAFleetHoldsOneLockForManyUnitsAtOnce() throws {
        let folder = try TemporaryFolder("fleet-lock")
        let (repository, store) = try makeRepository(folder)
        let lock = FleetLock(repository: repository)
        let most = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<5 {
                try? lock.enter()
                let held = (try? store.list(prefix: "locks/").count) ?? 0
                most.withLock { $0 = max($0, held) }
                Thread.sleep(forTimeInterval: 0.01)
                lock.leave()
            }
        }
        XCTAssertEqual(most.withLock { $0 }, 1, "one lock object at most")
        XCTAssertLessThanOrEqual(lock.taken, 2, "taken \(lock.taken) times for 40 units")
        lock.release()
        XCTAssertEqual(try store.list(prefix: "locks/").count, 0)
    }
}
