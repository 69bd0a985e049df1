// The cache folder of moments (Moments/BlobFolder.swift): it stays within its
// bound, removing the least recently used files first; two writers sharing
// it at once leave only whole files; it is made only where named; a killed
// run's temporary file is removed by a later run; only its own files are
// ever deleted.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct MomentBlobFolderTests {
    func id(_ n: UInt64) -> PageID { PageID(a: n, b: n &* 31, c: 7, d: 9) }

    @Test func staysWithinItsBoundDroppingTheLeastRecentlyUsed() throws {
        let folder = try TemporaryFolder("blobfolder-bound")
        let path = folder.file("cache")
        let cache = try BlobFolder(path: path, limit: 64 << 10)
        // A file of the user's beside the blobs is never removed.
        try Data("mine".utf8).write(to: URL(fileURLWithPath: path + "/notes.txt"))
        let first = BlobFolder.name(ids: [id(0)], pageSize: 4096)
        cache.put(first, [UInt8](repeating: 1, count: 4096))
        for n in 1...40 {
            // The first is read again and again: used recently, it stays.
            #expect(cache.get(first) != nil, "the first blob was removed at \(n)")
            Thread.sleep(forTimeInterval: 0.01)
            cache.put(BlobFolder.name(ids: [id(UInt64(n))], pageSize: 4096), [UInt8](repeating: UInt8(n), count: 4096))
        }
        let names = try FileManager.default.subpathsOfDirectory(atPath: path).filter { $0.count == 67 }
        let total = try names.reduce(0) { $0 + ((try FileManager.default.attributesOfItem(atPath: path + "/" + $1)[.size] as? Int) ?? 0) }
        #expect(total <= 64 << 10, "\(total) bytes kept")
        #expect(names.count >= 10, "\(names.count) kept")
        #expect(cache.get(first) == [UInt8](repeating: 1, count: 4096))
        #expect(cache.get(BlobFolder.name(ids: [id(1)], pageSize: 4096)) == nil, "the least recently used went first")
        #expect(FileManager.default.fileExists(atPath: path + "/notes.txt"))
        #expect(FileManager.default.fileExists(atPath: path + "/CACHEDIR.TAG"))
    }

    @Test func namesTellPageSizesAndSlotsApart() {
        let a = BlobFolder.name(ids: [id(1), id(2)], pageSize: 4096)
        #expect(a != BlobFolder.name(ids: [id(2), id(1)], pageSize: 4096))
        #expect(a != BlobFolder.name(ids: [id(1), id(2)], pageSize: 8192))
        #expect(a != BlobFolder.name(ids: [id(1), nil], pageSize: 4096))
        #expect(a == BlobFolder.name(ids: [id(1), id(2)], pageSize: 4096))
        #expect(BlobFolder.isBlobName(String(a.prefix(2)), String(a.dropFirst(3))))
    }

    @Test func isMadeOnlyWhereNamedAndNeverThroughAFile() throws {
        let folder = try TemporaryFolder("blobfolder-make")
        #expect(throws: (any Error).self) { try BlobFolder(path: folder.file("missing/cache")) }
        #expect(!FileManager.default.fileExists(atPath: folder.file("missing")))
        try Data("x".utf8).write(to: URL(fileURLWithPath: folder.file("file")))
        #expect(throws: (any Error).self) { try BlobFolder(path: folder.file("file")) }
    }

    @Test func openingNoMomentMakesNoCacheFolder() throws {
        let folder = try TemporaryFolder("blob-folder-none")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil, version: Repository.version)
        var options = MomentOptions()
        options.cacheFolder = folder.file("cache")
        #expect(try Moment.open([], repository: repository, options: options).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: folder.file("cache")))
    }

    @Test func writersSharingItLeaveOnlyWholeFilesAndStaleTemporariesGo() throws {
        let folder = try TemporaryFolder("blobfolder-shared")
        let path = folder.file("cache")
        let a = try BlobFolder(path: path), b = try BlobFolder(path: path)
        // A temporary file a killed run (a pid that cannot be running) left.
        try FileManager.default.createDirectory(atPath: path + "/ab", withIntermediateDirectories: true)
        let stale = path + "/ab/.\(String(repeating: "ab", count: 32)).tmp-2147483646-17"
        try Data("half".utf8).write(to: URL(fileURLWithPath: stale))
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            for n in 0..<50 {
                let bytes = [UInt8](repeating: UInt8(n), count: 1000 + n * 37)
                (i % 2 == 0 ? a : b).put(BlobFolder.name(ids: [id(UInt64(n))], pageSize: 1024), bytes)
            }
        }
        for n in 0..<50 {
            #expect(a.get(BlobFolder.name(ids: [id(UInt64(n))], pageSize: 1024)) == [UInt8](repeating: UInt8(n), count: 1000 + n * 37))
        }
        #expect(!FileManager.default.fileExists(atPath: stale))
        let hidden = try FileManager.default.subpathsOfDirectory(atPath: path).filter { $0.contains(".tmp-") }
        #expect(hidden.isEmpty, "\(hidden)")
    }
}
