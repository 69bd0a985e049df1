// `diff` of a moment of an S3 repository against two kinds of other side,
// bytes counted through the counting proxy (MomentDiffRequestsTests.swift):
// another moment, where a few rows changed in a large WITHOUT ROWID table
// (its interior pages hold rows too), and a local file whose pages are
// hashed as the repository names them (SHA-256, or keyed in an encrypted
// repository). Each fetches a small share of the database; the output is
// what `diff` of the restored files prints, and the SQL patch turns the
// restored moment into the local file as `sqldiff` sees it.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct MomentDiffLocalRequestsTests {
    @Test(arguments: [false, true])
    func aMomentAgainstAMomentOrALocalFileFetchesOnlyWhatChanged(encrypted: Bool) throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("moment-diff-local")
        let url = "s3://\(try server.makeBucket())/repo"
        let key = folder.file("repo.key")
        let keyed = encrypted ? ["--key-file", key] : []
        let direct = ["--repo", url, "--endpoint", server.endpoint] + keyed
        let live = folder.file("app.db")
        // About 34 MB: 40,000 rows of 400-byte blobs in a rowid table, 60,000
        // rows in a WITHOUT ROWID table keyed by text and integer.
        try makeDatabase(live, """
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, data BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 40000)
            INSERT INTO item SELECT i, 'item-' || i, i * 0.25, randomblob(400) FROM r;
            CREATE TABLE kv(k TEXT, n INTEGER, v BLOB, r REAL, PRIMARY KEY(k, n)) WITHOUT ROWID;
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 60000)
            INSERT INTO kv SELECT printf('key-%08d', i * 7 % 60013), i % 3, randomblob(150), i * 0.5 FROM r;
            """)
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint] + keyed).status == 0)
        var r = try runLitectl(["backup", live] + direct)
        #expect(r.status == 0, "\(r.stderr)")
        let between = String(format: "%.3f", Date().timeIntervalSince1970 + 0.5)
        Thread.sleep(forTimeInterval: 1.2)
        // A few rows changed in each table, spread over them.
        try makeDatabase(live, """
            UPDATE item SET price = -price WHERE id IN (7, 12001, 30000, 39999);
            UPDATE kv SET v = x'00ff', r = NULL WHERE k IN ('key-00000007', 'key-00030001', 'key-00059999');
            DELETE FROM kv WHERE k = 'key-00045000';
            INSERT INTO kv VALUES ('key-00045000a', 1, x'', -0.0);
            """)
        r = try runLitectl(["backup", live] + direct)
        #expect(r.status == 0, "\(r.stderr)")
        // Then the live file moves on: a few rows more, not in the repository.
        try makeDatabase(live, """
            UPDATE item SET name = 'renamed' WHERE id IN (3, 20002);
            UPDATE kv SET n = 7 WHERE k = 'key-00020000';
            """)
        let fileA = folder.file("a.db"), fileB = folder.file("b.db")
        for (file, at) in [(fileA, Optional(between)), (fileB, nil)] {
            r = try runLitectl(["restore", "latest", "--db", "app.db", file] + direct + (at.map { ["--at", $0] } ?? []))
            #expect(r.status == 0, "\(r.stderr)")
        }
        let size = try FileManager.default.attributesOfItem(atPath: fileB)[.size] as! Int
        #expect(size > 30_000_000)

        let proxy = try CountingProxy(upstream: server)
        let a = "repo:app.db@\(between)", b = "repo:app.db@latest"
        for (other, otherFile) in [(b, fileB), (live, live)] {
            for summary in [false, true] {
                let extra = summary ? ["--summary"] : []
                try proxy.reset()
                let moments = try runLitectl(["diff", a, other, "--repo", url, "--endpoint", proxy.endpoint] + keyed + extra)
                let fetched = try proxy.counts()
                let files = try runLitectl(["diff", fileA, otherFile] + extra)
                #expect(moments.status == 1 && files.status == 1, "\(moments.stderr) \(files.stderr)")
                var expected = files.stdout.replacingOccurrences(of: fileA, with: a)
                if other == b { expected = expected.replacingOccurrences(of: fileB, with: b) }
                #expect(moments.stdout == expected, "against \(other)")
                if !summary {
                    #expect(moments.stdout.contains("key-00045000a"), "\(moments.stdout)")
                    if other == live { #expect(moments.stdout.contains("renamed"), "\(moments.stdout)") }
                }
                print("diff \(a) \(other == b ? "moment" : "local file") (encrypted \(encrypted)): fetched \(fetched.bytes) bytes in \(fetched.requests) requests of a \(size)-byte database")
                // The states' lists and the index, the changed pages' blobs and
                // those of the interior pages on their paths, each 256 KiB of
                // neighbouring pages: about a fifth of the database (the byte
                // comparison, without the page-id shortcut, fetches it all).
                #expect(fetched.bytes < size / 4, "fetched \(fetched.bytes) bytes in \(fetched.requests) requests, the database is \(size) bytes")
                #expect(fetched.requests > 0)
            }
        }
        // The SQL patch of the moment against the local file, applied to the
        // restored moment, gives the local file as sqldiff sees it.
        let patch = try runLitectl(["diff", a, live, "--format", "sql"] + direct)
        #expect(patch.status == 1, "\(patch.stderr)")
        try sqlite3(["-batch", fileA], input: patch.stdout)
        let left = try runProcess("/usr/bin/sqldiff", [fileA, live])
        #expect(left.status == 0 && left.stdout.isEmpty, "sqldiff after the patch: \(left.stdout)")
    }
}
