// `diff` of two moments of an S3 repository fetches what changed, not the
// database (issue 39: "a test counts requests through the counting proxy"):
// the built binary reads moto through the benchmarks' counting proxy
// (scripts/bench/s3proxy.py), which counts every request and the bytes it
// answered, so the bytes are measured outside litectl. The oracle for the
// output is `diff` of the two files `restore --at` writes for the moments.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// scripts/bench/s3proxy.py in front of moto: "count" on its input answers
/// "REQUESTS RESPONSE_BYTES REQUEST_BYTES", "reset" zeroes them.
final class CountingProxy {
    let endpoint: String
    private let process = Process()
    private let input = Pipe(), output = Pipe()
    private var pending: [UInt8] = []

    init(upstream: MotoServer) throws {
        let port = try MotoServer.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/bench/s3proxy.py").path
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script, String(port), String(upstream.endpoint.split(separator: ":").last!)]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard try line() == "ready" else { throw POSIXError(.EIO) }
    }

    private func line() throws -> String {
        while !pending.contains(UInt8(ascii: "\n")) {
            let more = output.fileHandleForReading.availableData
            guard !more.isEmpty else { throw POSIXError(.EPIPE) }
            pending += more
        }
        let end = pending.firstIndex(of: UInt8(ascii: "\n"))!
        defer { pending.removeSubrange(...end) }
        return String(decoding: pending[..<end], as: UTF8.self)
    }

    /// Requests and response bytes relayed since the last reset.
    func counts() throws -> (requests: Int, bytes: Int) {
        input.fileHandleForWriting.write(Data("count\n".utf8))
        let fields = try line().split(separator: " ").compactMap { Int($0) }
        guard fields.count == 3 else { throw POSIXError(.EIO) }
        return (fields[0], fields[1])
    }

    func reset() throws {
        input.fileHandleForWriting.write(Data("reset\n".utf8))
        _ = try line()
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}

@Suite(.serialized) struct MomentDiffRequestsTests {
    @Test func diffOfTwoMomentsFetchesOnlyWhatChanged() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("moment-diff-requests")
        let url = "s3://\(try server.makeBucket())/repo"
        let direct = ["--repo", url, "--endpoint", server.endpoint]
        let live = folder.file("app.db")
        // About 28 MB: 60,000 rows of 400-byte blobs, an index on name.
        try makeDatabase(live, """
            PRAGMA journal_mode=wal;
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, data BLOB);
            CREATE INDEX item_name ON item(name);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 60000)
            INSERT INTO item SELECT i, 'item-' || i, i * 0.25, randomblob(400) FROM r;
            """)
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint]).status == 0)
        var r = try runLitectl(["backup", live] + direct)
        #expect(r.status == 0, "\(r.stderr)")
        let between = String(format: "%.3f", Date().timeIntervalSince1970 + 0.5)
        Thread.sleep(forTimeInterval: 1.2)
        // Five rows changed, spread over the table (five leaves).
        try makeDatabase(live, """
            UPDATE item SET price = -price, data = x'00ff' WHERE id IN (7, 12001, 30000, 45555, 59999);
            PRAGMA wal_checkpoint(TRUNCATE);
            """)
        r = try runLitectl(["backup", live] + direct)
        #expect(r.status == 0, "\(r.stderr)")
        let fileA = folder.file("a.db"), fileB = folder.file("b.db")
        for (file, at) in [(fileA, Optional(between)), (fileB, nil)] {
            r = try runLitectl(["restore", "latest", "--db", "app.db", file] + direct + (at.map { ["--at", $0] } ?? []))
            #expect(r.status == 0, "\(r.stderr)")
        }
        let size = try FileManager.default.attributesOfItem(atPath: fileB)[.size] as! Int
        #expect(size > 25_000_000)

        let proxy = try CountingProxy(upstream: server)
        let a = "repo:app.db@\(between)", b = "repo:app.db@latest"
        for summary in [false, true] {
            let extra = summary ? ["--summary"] : []
            try proxy.reset()
            let moments = try runLitectl(["diff", a, b, "--repo", url, "--endpoint", proxy.endpoint] + extra)
            let fetched = try proxy.counts()
            let files = try runLitectl(["diff", fileA, fileB] + extra)
            #expect(moments.status == 1 && files.status == 1, "\(moments.stderr) \(files.stderr)")
            let expected = files.stdout.replacingOccurrences(of: fileA, with: a).replacingOccurrences(of: fileB, with: b)
            #expect(moments.stdout == expected)
            if !summary { #expect(moments.stdout.contains("12001"), "\(moments.stdout)") }
            // The two states' lists and index, the changed leaves' blobs, the
            // table's interior pages (each in its own 256 KiB blob, fetched once
            // for both moments: they share a cache): about 18 % of the database
            // (36 % when each moment fetched the interior pages for itself; the
            // byte comparison, without the page-id shortcut, reads all of it).
            #expect(fetched.bytes < size / 5, "fetched \(fetched.bytes) bytes in \(fetched.requests) requests, the database is \(size) bytes")
            #expect(fetched.requests > 0)
        }
    }
}
