// `--cache-dir` over an S3 repository, bytes counted through the counting
// proxy (MomentDiffRequestsTests.swift) in front of moto: a second run over
// the warm cache folder fetches close to nothing (the index and the state's
// list, no pack); a cached blob with a flipped byte is never served: the
// result still equals the sqlite3 shell's on the restored file, and the
// blob is fetched again and kept whole.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct MomentCacheDirS3Tests {
    @Test func aWarmCacheFolderFetchesCloseToNothingAndADamagedBlobIsFetchedAgain() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("moment-cachedir-s3")
        let url = "s3://\(try server.makeBucket())/repo"
        let live = folder.file("app.db")
        // About 6 MB: 12,000 rows of 400-byte blobs.
        try makeDatabase(live, """
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, data BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 12000)
            INSERT INTO item SELECT i, 'item-' || i, randomblob(400) FROM r;
            """)
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint]).status == 0)
        var r = try runLitectl(["backup", live, "--repo", url, "--endpoint", server.endpoint])
        #expect(r.status == 0, "\(r.stderr)")
        let restored = folder.file("restored.db")
        r = try runLitectl(["restore", "latest", "--db", "app.db", restored, "--repo", url, "--endpoint", server.endpoint])
        #expect(r.status == 0, "\(r.stderr)")
        let sql = "SELECT id, name, hex(data) FROM item WHERE id % 50 = 0 ORDER BY id"
        let expected = try sqlite3(["-batch", "-tabs", restored, sql])

        let proxy = try CountingProxy(upstream: server)
        let cache = folder.file("cache")
        let query = ["query", "repo:app.db@latest", sql, "--format", "tsv", "--no-headers", "--repo", url,
                     "--endpoint", proxy.endpoint, "--cache-dir", cache]
        try proxy.reset()
        let cold = try runLitectl(query)
        let coldBytes = try proxy.counts().bytes
        #expect(cold.status == 0 && cold.stdout == expected, "\(cold.stderr)")
        try proxy.reset()
        let warm = try runLitectl(query)
        let warmBytes = try proxy.counts().bytes
        #expect(warm.status == 0 && warm.stdout == expected, "\(warm.stderr)")
        print("--cache-dir over S3: cold run fetched \(coldBytes) bytes, warm run \(warmBytes)")
        // The warm run reads the index and the state's list, no pack.
        #expect(coldBytes > 3_000_000)
        #expect(warmBytes * 50 < coldBytes, "cold \(coldBytes) bytes, warm \(warmBytes)")

        // A byte flipped in every cached blob: none is served, each is fetched again.
        let files = try FileManager.default.subpathsOfDirectory(atPath: cache)
            .filter { $0.count == 67 && $0.dropFirst(2).hasPrefix("/") }
        #expect(!files.isEmpty)
        var before: [String: Data] = [:]
        for file in files {
            let path = cache + "/" + file
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            before[file] = Data(bytes)
            bytes[bytes.count / 2] ^= 0x20
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
        try proxy.reset()
        let repaired = try runLitectl(query)
        let repairedBytes = try proxy.counts().bytes
        #expect(repaired.status == 0 && repaired.stdout == expected, "\(repaired.stderr)")
        #expect(repairedBytes * 10 > coldBytes * 9, "cold \(coldBytes) bytes, after the damage \(repairedBytes)")
        for file in files {
            let now = try? Data(contentsOf: URL(fileURLWithPath: cache + "/" + file))
            #expect(now == before[file], "\(file) is fetched again and kept whole")
        }
    }
}
