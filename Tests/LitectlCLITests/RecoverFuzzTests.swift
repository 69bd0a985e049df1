// A bounded random-mutation fuzzer for `litectl recover`: mutated copies of
// the real databases and of a generated one (flipped bytes anywhere or in
// page headers, zeroed, copied and swapped pages, random page pointers,
// cycles, truncations, a garbage header) must never crash it, hang it or
// make it allocate without bound: each run is watched (time, peak memory,
// signal), ends with status 0, 1 or 2, and leaves either an OUT that passes
// integrity_check or nothing. LITECTL_FUZZ_ITERATIONS sets the runs per file
// (default 10) for longer sessions; LITECTL_FUZZ_SEED the first seed.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct RecoverFuzzTests {
    static let iterations = Int(ProcessInfo.processInfo.environment["LITECTL_FUZZ_ITERATIONS"] ?? "") ?? 10
    static let firstSeed = UInt64(ProcessInfo.processInfo.environment["LITECTL_FUZZ_SEED"] ?? "") ?? 1
    /// Peak memory allowed for one run on these few-megabyte files.
    static let memoryLimitKiB = 400 * 1024

    /// Applies one random mutation (of several kinds) to `bytes`.
    static func mutate(_ bytes: inout [UInt8], pageSize: Int, rng: inout SplitMix64) -> String {
        let pages = max(1, bytes.count / pageSize)
        func page() -> Int { Int(rng.next() % UInt64(pages)) }
        func put32(_ at: Int, _ v: UInt32) {
            guard at + 4 <= bytes.count else { return }
            bytes[at] = UInt8(v >> 24); bytes[at + 1] = UInt8(v >> 16 & 0xFF); bytes[at + 2] = UInt8(v >> 8 & 0xFF); bytes[at + 3] = UInt8(v & 0xFF)
        }
        switch rng.next() % 9 {
        case 0:
            let n = 1 + Int(rng.next() % 32)
            for _ in 0..<n { bytes[Int(rng.next() % UInt64(bytes.count))] ^= UInt8(1 + rng.next() % 255) }
            return "\(n) bytes flipped"
        case 1:
            let p = page()
            let header = p * pageSize + (p == 0 ? 100 : 0)
            for _ in 0..<(1 + Int(rng.next() % 6)) { bytes[min(bytes.count - 1, header + Int(rng.next() % 24))] ^= UInt8(1 + rng.next() % 255) }
            return "page \(p + 1) header flipped"
        case 2:
            let p = page()
            for i in (p * pageSize)..<min(bytes.count, (p + 1) * pageSize) { bytes[i] = 0 }
            return "page \(p + 1) zeroed"
        case 3:
            let a = page(), b = page()
            let copy = Array(bytes[(a * pageSize)..<min(bytes.count, (a + 1) * pageSize)])
            for (i, byte) in copy.enumerated() where b * pageSize + i < bytes.count { bytes[b * pageSize + i] = byte }
            return "page \(a + 1) copied over page \(b + 1)"
        case 4:
            // A child or overflow pointer of some page made to point anywhere (itself, 0, 1, past the end).
            let p = page()
            let base = p * pageSize
            let header = base + (p == 0 ? 100 : 0)
            let targets: [UInt32] = [UInt32(p + 1), 0, 1, UInt32(pages + 5), UInt32.max, UInt32(rng.next() % UInt64(pages + 1))]
            let target = targets[Int(rng.next() % UInt64(targets.count))]
            put32(header + 8, target)                                    // right child
            let cell = Int(bytes[min(bytes.count - 2, header + 12)]) << 8 | Int(bytes[min(bytes.count - 1, header + 13)])
            if cell > 0 && base + cell + 4 <= bytes.count { put32(base + cell, target) }  // first cell's left child
            put32(base, target)                                          // an overflow or freelist page's next
            return "pointers of page \(p + 1) set to \(target)"
        case 5:
            let cut = Int(rng.next() % UInt64(bytes.count))
            bytes.removeLast(bytes.count - cut)
            if bytes.isEmpty { bytes = [0] }
            return "truncated to \(cut) bytes"
        case 6:
            for i in 0..<min(100, bytes.count) { bytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
            return "garbage header"
        case 7:
            let a = page(), b = page()
            for i in 0..<pageSize where (a * pageSize + i) < bytes.count && (b * pageSize + i) < bytes.count {
                bytes.swapAt(a * pageSize + i, b * pageSize + i)
            }
            return "pages \(a + 1) and \(b + 1) swapped"
        default:
            // The freelist's first trunk pointed at a random page, with a huge count.
            put32(32, UInt32(rng.next() % UInt64(pages + 2)))
            put32(36, UInt32.max)
            return "freelist header set at random"
        }
    }

    func fuzz(_ original: String, label: String) throws {
        let folder = try TemporaryFolder("fuzz")
        let pristine = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        let pageSize = try PageMap.read(original).pageSize
        for i in 0..<RecoverFuzzTests.iterations {
            let seed = RecoverFuzzTests.firstSeed &+ UInt64(i) &* 0x9E37_79B9
            var rng = SplitMix64(seed: seed ^ UInt64(pristine.count))
            var bytes = pristine
            var applied: [String] = []
            for _ in 0..<(1 + Int(rng.next() % 3)) { applied.append(RecoverFuzzTests.mutate(&bytes, pageSize: pageSize, rng: &rng)) }
            let damaged = folder.file("fuzzed.db"), out = folder.file("out.db")
            try? FileManager.default.removeItem(atPath: out)
            try Data(bytes).write(to: URL(fileURLWithPath: damaged))
            let context = "\(label) seed \(seed): \(applied.joined(separator: ", "))"
            let run = try runWatched(litectlBinary, ["recover", damaged, out], timeout: 120)
            #expect(run.signal == nil, "no crash: \(context)\n\(run.stderr)")
            #expect(!run.timedOut, "no hang: \(context)")
            #expect([0, 1, 2].contains(run.status), "\(context): status \(run.status)\n\(run.stderr)")
            #expect(run.peakKiB < RecoverFuzzTests.memoryLimitKiB, "\(context): peak \(run.peakKiB) KiB")
            let listing = try folder.listing()
            #expect(!listing.contains { $0.contains(".tmp-") }, "\(context): no temporary file left")
            if run.status == 2 {
                #expect(!listing.contains("out.db"), "\(context): no OUT after an error")
                #expect(run.stderr.split(separator: "\n").count == 1, "\(context): one line: \(run.stderr)")
            } else if run.status <= 1 {
                #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok", "\(context)")
            }
        }
    }

    @Test func mutatedRealDatabases() throws {
        try #require(!realDatabases.isEmpty, "no real databases in ../shared/corpus/real")
        for path in realDatabases { try fuzz(path, label: DurableFolder.baseName(of: path)) }
    }

    @Test func mutatedGeneratedDatabase() throws {
        let folder = try TemporaryFolder("fuzz-gen")
        let path = folder.file("gen.db")
        let made = try runProcess("/usr/bin/python3", [packageRoot + "/scripts/bench/generate.py", path, "--rows", "1500",
                                                       "--blob-every", "10", "--page-size", "1024"])
        try #require(made.status == 0, "\(made.stderr)")
        try fuzz(path, label: "generated")
    }

    /// Hand-made hostile shapes: a b-tree whose child is itself, an overflow
    /// chain that loops, a freelist trunk that names itself.
    @Test func cyclesEndCleanly() throws {
        let folder = try TemporaryFolder("fuzz-cycles")
        let path = folder.file("c.db")
        try makeDatabase(path, """
            PRAGMA page_size = 1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 40) INSERT INTO t SELECT i, randomblob(3000) FROM r;
            CREATE TABLE f(x); INSERT INTO f SELECT zeroblob(900) FROM t; DROP TABLE f;
            """)
        let map = try PageMap.read(path)
        let tree = try #require(map.trees["t"])
        let root = tree.root
        let overflow = try #require(tree.overflow.first)
        let trunk = try #require(map.freelistTrunks.first)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func put32(_ at: Int, _ v: UInt32) {
            bytes[at] = UInt8(v >> 24); bytes[at + 1] = UInt8(v >> 16 & 0xFF); bytes[at + 2] = UInt8(v >> 8 & 0xFF); bytes[at + 3] = UInt8(v & 0xFF)
        }
        put32(Int(root - 1) * 1024 + 8, root)            // the root's right child is the root
        put32(Int(overflow - 1) * 1024, overflow)        // an overflow page is its own next page
        put32(Int(trunk - 1) * 1024, trunk)              // the freelist trunk is its own next trunk
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let run = try runWatched(litectlBinary, ["recover", path, folder.file("out.db")], timeout: 60)
        #expect(run.signal == nil && !run.timedOut)
        #expect(run.status == 1, "\(run.stderr)")
        #expect(try sqlite3Scalar(folder.file("out.db"), "PRAGMA integrity_check") == "ok")
        #expect(Int(try sqlite3Scalar(folder.file("out.db"), "SELECT count(*) FROM t")) ?? 0 > 20)
    }
}
