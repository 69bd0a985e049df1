// The backup engine's parts on their own: the hot copy's progress and
// snapshot, the SHA-256 computed as the copy is written (judged by
// sha256sum), permissions of temporary files under any umask, streaming gzip
// judged by the gzip CLI, and retention judged by Foundation's calendar.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct BackupTests {
    @Test func hotCopyReportsProgressAndCopiesEverything() throws {
        let folder = try TemporaryFolder("core-hotcopy")
        let db = folder.file("src.db")
        try makeDatabase(db, """
            PRAGMA page_size=1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, x BLOB, y REAL, z TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<30000)
            INSERT INTO t SELECT i, randomblob(i % 50), i * 0.1, 'z' || i FROM r;
            """)
        let file = try TemporaryFile(in: folder.path, stem: "copy.db", permissions: 0o640)
        var seen: [CopyProgress] = []
        var options = HotCopyOptions()
        options.pagesPerStep = 100
        let source = try Connection(path: db, mode: .readOnly)
        let result = try HotCopy.copy(from: source, into: file.path, options: options) { seen.append($0) }
        #expect(result.strategy == .steps)
        #expect(result.restarts == 0)
        let pages = Int(try sqlite3Scalar(db, "PRAGMA page_count"))!
        #expect(seen.count >= pages / 100)
        #expect(seen.last?.pagesCopied == pages && seen.last?.pageCount == pages)
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.pagesCopied <= $1.pagesCopied })
        try file.commit(as: folder.file("copy.db"))
        #expect(try sqlite3(["-batch", folder.file("copy.db"), ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))
        #expect(try FileManager.default.attributesOfItem(atPath: folder.file("copy.db"))[.posixPermissions] as? Int == 0o640)
        #expect(try folder.listing() == ["copy.db", "src.db"], "no temporary name left")
    }

    func sha256sum(_ path: String) throws -> String {
        try runProcess("/usr/bin/sha256sum", [path]).stdout.split(separator: " ").first.map(String.init) ?? ""
    }

    /// A quiet source, rollback or WAL, much larger than the destination's
    /// page cache and the writer's buffers, so most pages reach the file
    /// before page 1 (rewritten at commit): the copy's SHA-256 comes from its
    /// writes, and is right.
    @Test(arguments: ["delete", "wal"])
    func hotCopyHashesTheCopyAsItIsWritten(journal: String) throws {
        let folder = try TemporaryFolder("core-written-hash")
        let db = folder.file("src.db")
        try makeDatabase(db, """
            PRAGMA journal_mode=\(journal);
            CREATE TABLE t(id INTEGER PRIMARY KEY, x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<6000) INSERT INTO t SELECT i, randomblob(4000) FROM r;
            CREATE INDEX t_x ON t(substr(x, 1, 8));
            """)
        let file = try TemporaryFile(in: folder.path, stem: "copy.db", permissions: 0o600)
        var options = HotCopyOptions()
        options.pagesPerStep = 500
        let result = try HotCopy.copy(from: try Connection(path: db, mode: .readOnly), into: file.path, options: options)
        try file.commit(as: folder.file("copy.db"))
        let digest = try #require(result.digest, "the writes of a quiet \(journal) source are hashed as they go")
        #expect(digest.sha256 == (try sha256sum(folder.file("copy.db"))))
        #expect(digest.bytes == (try FileManager.default.attributesOfItem(atPath: folder.file("copy.db"))[.size] as? NSNumber)?.int64Value)
        #expect(digest.bytes > 16 << 20)
        #expect(try sqlite3Scalar(folder.file("copy.db"), "PRAGMA integrity_check") == "ok")
    }

    /// Page 1 only in the `-wal` file (a table created and not checkpointed):
    /// the prediction read from the database file is wrong, the hash from the
    /// writes is dropped, and the manifest gets the hash of the file instead.
    @Test func aStalePageOneFallsBackToHashingTheFile() throws {
        let folder = try TemporaryFolder("core-stale-page1")
        let db = folder.file("src.db")
        try makeDatabase(db, """
            PRAGMA journal_mode=wal;
            CREATE TABLE t(x BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<3000) INSERT INTO t SELECT randomblob(1000) FROM r;
            """)
        let writer = try Connection(path: db, mode: .readWrite)
        defer { try? writer.close() }
        try writer.execute("PRAGMA wal_autocheckpoint=0; CREATE TABLE u(y); INSERT INTO u VALUES (42);")

        let file = try TemporaryFile(in: folder.path, stem: "copy.db", permissions: 0o600)
        let result = try HotCopy.copy(from: try Connection(path: db, mode: .readOnly), into: file.path)
        try file.commit(as: folder.file("copy.db"))
        #expect(result.digest == nil)
        #expect(try sqlite3Scalar(folder.file("copy.db"), "SELECT y FROM u") == "42", "the copy holds the snapshot, WAL included")

        let outcome = try BackupJob.run(BackupRequest(source: db, destination: folder.file("job.db"), destinationIsFolder: false))
        #expect(outcome.manifest.sha256 == (try sha256sum(folder.file("job.db"))))
        #expect(outcome.manifest.databaseSHA256 == outcome.manifest.sha256)
    }

    @Test func vacuumIntoMakesACompactedCopy() throws {
        let folder = try TemporaryFolder("core-vacuum")
        let db = folder.file("src.db")
        try makeDatabase(db, """
            CREATE TABLE t(x);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<20000) INSERT INTO t SELECT randomblob(100) FROM r;
            DELETE FROM t WHERE rowid % 2 = 0;
            """)
        let file = try TemporaryFile(in: folder.path, stem: "v.db", permissions: 0o600)
        var options = HotCopyOptions(); options.vacuum = true
        let result = try HotCopy.copy(from: try Connection(path: db), into: file.path, options: options)
        #expect(result.strategy == .vacuumInto)
        try file.commit(as: folder.file("v.db"))
        #expect(try sqlite3Scalar(folder.file("v.db"), "PRAGMA freelist_count") == "0")
        #expect(Int(try sqlite3Scalar(folder.file("v.db"), "PRAGMA page_count"))! < Int(try sqlite3Scalar(db, "PRAGMA page_count"))!)
        #expect(try sqlite3(["-batch", folder.file("v.db"), ".dump"]) == (try sqlite3(["-batch", db, ".dump"])))
    }

    @Test func temporaryFilesIgnoreTheUmaskAndVanishOnDiscard() throws {
        let folder = try TemporaryFolder("core-tempfile")
        let old = umask(0)
        defer { umask(old) }
        for mode: mode_t in [0o600, 0o640, 0o644] {
            let file = try TemporaryFile(in: folder.path, stem: "x", permissions: mode)
            #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int == Int(mode))
            file.discard()
        }
        #expect(try folder.listing().isEmpty)
        // commit never replaces an existing file unless asked.
        try "old".write(toFile: folder.file("final"), atomically: false, encoding: .utf8)
        let file = try TemporaryFile(in: folder.path, stem: "final", permissions: 0o600)
        #expect(throws: DatabaseError.self) { try file.commit(as: folder.file("final")) }
        file.discard()
        #expect(try String(contentsOfFile: folder.file("final"), encoding: .utf8) == "old")
        #expect(try folder.listing() == ["final"])
    }

    @Test func gzipStreamsAreReadByTheGzipTool() throws {
        let folder = try TemporaryFolder("core-gzip")
        // Three gzip members' worth (4 MiB blocks) of mixed bytes.
        var bytes = [UInt8](repeating: 0, count: 9 * 1024 * 1024 + 12345)
        var state: UInt64 = 0x9E3779B97F4A7C15
        for i in bytes.indices {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            bytes[i] = i % 3 == 0 ? UInt8(truncatingIfNeeded: state >> 33) : UInt8(i % 7)
        }
        let input = folder.file("in.bin")
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let gz = try TemporaryFile(in: folder.path, stem: "out.gz", permissions: 0o600)
        let (inDigest, outDigest) = try FileStreams.gzip(input, into: gz, level: 1)
        try gz.commit(as: folder.file("out.gz"))
        let shaOf = { (path: String) in
            try runProcess("/usr/bin/sha256sum", [path]).stdout.split(separator: " ").first.map(String.init) ?? ""
        }
        #expect(inDigest.bytes == Int64(bytes.count))
        #expect(inDigest.sha256 == (try shaOf(input)))
        #expect(outDigest.sha256 == (try shaOf(folder.file("out.gz"))))
        let unzipped = try runProcess("/bin/gzip", ["-dc", folder.file("out.gz")])
        #expect(unzipped.status == 0)
        #expect(unzipped.stdoutBytes == bytes)

        // And back through our gunzip, from a file the gzip tool made.
        _ = try runProcess("/bin/gzip", ["-9", "-k", input])
        let back = try TemporaryFile(in: folder.path, stem: "back", permissions: 0o600)
        let (gzDigest, plain) = try FileStreams.gunzip(input + ".gz", into: back)
        #expect(gzDigest.sha256 == (try shaOf(input + ".gz")))
        #expect(plain.sha256 == inDigest.sha256)
        try back.commit(as: folder.file("back.bin"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file("back.bin"))) == Data(bytes))

        // Our own multi-member output back through our gunzip.
        let ours = try TemporaryFile(in: folder.path, stem: "ours", permissions: 0o600)
        #expect(try FileStreams.gunzip(folder.file("out.gz"), into: ours).output.sha256 == inDigest.sha256)
        ours.discard()
        // Two members made by the gzip tool, concatenated (`cat a.gz b.gz`), read as one stream.
        try Data("second member\n".utf8).write(to: URL(fileURLWithPath: folder.file("b.txt")))
        _ = try runProcess("/bin/gzip", ["-1", "-k", folder.file("b.txt")])
        let cat = try Data(contentsOf: URL(fileURLWithPath: input + ".gz")) + Data(contentsOf: URL(fileURLWithPath: folder.file("b.txt.gz")))
        try cat.write(to: URL(fileURLWithPath: folder.file("cat.gz")))
        let joined = try TemporaryFile(in: folder.path, stem: "joined", permissions: 0o600)
        #expect(try FileStreams.gunzip(folder.file("cat.gz"), into: joined).output.bytes == Int64(bytes.count + "second member\n".utf8.count))
        joined.discard()
        // Bytes after the last member that are not a member: corrupt, not ignored.
        try (cat + Data([0, 0, 0, 0])).write(to: URL(fileURLWithPath: folder.file("junk.gz")))
        let junk = try TemporaryFile(in: folder.path, stem: "junk", permissions: 0o600)
        #expect(throws: DatabaseError.self) { try FileStreams.gunzip(folder.file("junk.gz"), into: junk) }
        junk.discard()
    }

    @Test func retentionMatchesCalendarBuckets() throws {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var generator = SystemRandomNumberGenerator()
        let start = 1_735_689_600.0  // 2025-01-01
        for _ in 0..<20 {
            let times = (0..<300).map { _ in start + Double.random(in: 0..<(400 * 86_400), using: &generator) }
            let policy = RetentionPolicy(last: Int.random(in: 0...3), hourly: Int.random(in: 0...24), daily: Int.random(in: 0...10),
                                         weekly: Int.random(in: 0...6), monthly: Int.random(in: 0...14))
            let order = times.indices.sorted { times[$0] > times[$1] }
            func keep(_ n: Int, _ components: Set<Calendar.Component>?) -> Set<Int> {
                var seen: [DateComponents] = [], kept = Set<Int>()
                for i in order {
                    let b = components.map { calendar.dateComponents($0, from: Date(timeIntervalSince1970: times[i])) }
                        ?? DateComponents(nanosecond: i)
                    if seen.last != b && seen.count < n { seen.append(b); kept.insert(i) }
                }
                return kept
            }
            var expected = keep(policy.last, nil)
                .union(keep(policy.hourly, [.year, .month, .day, .hour]))
                .union(keep(policy.daily, [.year, .month, .day]))
                .union(keep(policy.weekly, [.yearForWeekOfYear, .weekOfYear]))
                .union(keep(policy.monthly, [.year, .month]))
            if policy.isEmpty { expected = Set(times.indices) }
            #expect(Retention.kept(times: times, policy: policy) == expected, "\(policy)")
        }
    }
}
