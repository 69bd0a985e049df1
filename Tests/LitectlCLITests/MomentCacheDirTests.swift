// `--cache-dir` (docs/moments.md): a second run over a warm cache folder
// reads no pack of the repository (the packs are moved away, so any read of
// one fails); a cache file with a flipped byte is never served (the result
// still equals the restored file's, by the sqlite3 shell) and is replaced; a
// read of a local file never makes the folder; the folder is made only where
// named, never its parents.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct MomentCacheDirTests {
    static let sql = "SELECT id, customer, status, quote(amount), hex(data) FROM orders ORDER BY id"

    /// The blob files under `cache` (relative paths), sorted.
    func blobFiles(_ cache: String) throws -> [String] {
        let all = try FileManager.default.subpathsOfDirectory(atPath: cache)
        return all.filter { $0.count == 67 && $0.dropFirst(2).hasPrefix("/") }.sorted()
    }

    @Test func aWarmCacheFolderFetchesNoPackAndAFlippedByteIsFetchedAgain() throws {
        guard let f = try MomentFixture(.folder, "moment-cachedir") else { return }
        let cache = f.folder.file("cache")
        let expected = try sqlite3(["-batch", "-tabs", f.second.file, Self.sql])
        let query = ["query", f.second.reference, Self.sql, "--format", "tsv", "--no-headers", "--cache-dir", cache]
        let cold = try f.run(query)
        #expect(cold.status == 0, "\(cold.stderr)")
        #expect(cold.stdout == expected)
        let files = try blobFiles(cache)
        #expect(!files.isEmpty)
        #expect(FileManager.default.fileExists(atPath: cache + "/CACHEDIR.TAG"))
        // Every pack gone: a warm run must read none.
        let packs = f.repo.url + "/packs", away = f.folder.file("packs-away")
        try FileManager.default.moveItem(atPath: packs, toPath: away)
        let warm = try f.run(query)
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(warm.stdout == expected)
        // Without the cache folder the same run needs the packs (the check above can fail).
        let uncached = try f.run(Array(query.dropLast(2)))
        #expect(uncached.status == 2, "\(uncached.stdout)")
        try FileManager.default.moveItem(atPath: away, toPath: packs)

        // A byte flipped in every cache file: none is served, each is fetched again.
        var before: [String: Data] = [:]
        for file in files {
            let path = cache + "/" + file
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            before[file] = Data(bytes)
            bytes[bytes.count / 2] ^= 0x20
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        let repaired = try f.run(query)
        #expect(repaired.status == 0, "\(repaired.stderr)")
        #expect(repaired.stdout == expected)
        for file in files {
            let now = try? Data(contentsOf: URL(fileURLWithPath: cache + "/" + file))
            #expect(now == before[file], "\(file) is fetched again and kept whole")
        }
        // A cache file swapped for another blob's: never served either.
        if files.count >= 2 {
            try FileManager.default.removeItem(atPath: cache + "/" + files[0])
            try before[files[1]]!.write(to: URL(fileURLWithPath: cache + "/" + files[0]))
            let swapped = try f.run(query)
            #expect(swapped.status == 0 && swapped.stdout == expected, "\(swapped.stderr)")
        }
    }

    @Test func aLocalDatabaseNeverMakesTheCacheFolder() throws {
        guard let f = try MomentFixture(.folder, "moment-cachedir-local") else { return }
        let cache = f.folder.file("cache-local")
        let r = try runLitectlIn(f.folder.path, ["query", f.live, "SELECT count(*) FROM orders", "--cache-dir", cache])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("--cache-dir"))
        #expect(!FileManager.default.fileExists(atPath: cache))
        // A missing parent is not made: only the folder named.
        let deep = f.folder.file("no-such/cache")
        let d = try f.run(["query", f.second.reference, "SELECT 1", "--cache-dir", deep])
        #expect(d.status == 2, "\(d.stderr)")
        #expect(d.stderr.contains(deep), "\(d.stderr)")
        #expect(!FileManager.default.fileExists(atPath: f.folder.file("no-such")))
        // Inside the repository: refused, nothing made there.
        let inside = f.repo.url + "/cache"
        let i = try f.run(["query", f.second.reference, "SELECT 1", "--cache-dir", inside])
        #expect(i.status == 2, "\(i.stderr)")
        #expect(!FileManager.default.fileExists(atPath: inside))
    }
}
