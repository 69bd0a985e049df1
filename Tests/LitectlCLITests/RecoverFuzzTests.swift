// A bounded random-mutation fuzzer for `litectl recover`: mutated copies of
// the real databases and of a generated one (flipped bytes anywhere or in
// page headers, zeroed, copied and swapped pages, random page pointers,
// cycles, truncations, a garbage header) must never crash it, hang it or
// make it allocate without bound: each run is watched (time, peak memory,
// signal), ends with status 0, 1 or 2, and leaves either an OUT that passes
// integrity_check (and rtreecheck() for each R*Tree) or nothing. The same for a -wal: WAL-mode copies whose
// frames are not checkpointed, the -wal mutated (flipped bytes, frames given
// other page numbers, pages or commit sizes, the checksums computed again so
// that the reader believes them). LITECTL_FUZZ_ITERATIONS sets the runs per
// file (default 10) for longer sessions; LITECTL_FUZZ_SEED the first seed.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct RecoverFuzzTests {
    static let iterations = Int(ProcessInfo.processInfo.environment["LITECTL_FUZZ_ITERATIONS"] ?? "") ?? 10
    static let firstSeed = UInt64(ProcessInfo.processInfo.environment["LITECTL_FUZZ_SEED"] ?? "") ?? 1
    /// Peak memory allowed for one run on these few-megabyte files.
    static let memoryLimitKiB = 400 * 1024

    /// The watched child keeps no descriptor of the test runner beyond stdio:
    /// another test's held lock or pipe must not live on in it.
    @Test func theWatchedChildHasOnlyStdio() throws {
        let held = open("/dev/null", O_RDONLY)  // without O_CLOEXEC, as a careless test would
        defer { close(held) }
        let run = try runWatched("/bin/sh", ["-c", "ls /proc/self/fd >&2"], timeout: 30)
        #expect(run.status == 0)
        // The shell's `ls` lists 0, 1, 2 and the descriptor it reads /proc/self/fd with.
        let fds = run.stderr.split(separator: "\n").compactMap { Int($0) }
        #expect(!fds.contains(Int(held)), "\(fds)")
        #expect(fds.filter { $0 > 2 }.count <= 1, "\(fds)")
    }

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

    // MARK: -wal

    static func get32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    static func put32(_ bytes: inout [UInt8], _ at: Int, _ v: UInt32) {
        bytes[at] = UInt8(v >> 24); bytes[at + 1] = UInt8(v >> 16 & 0xFF); bytes[at + 2] = UInt8(v >> 8 & 0xFF); bytes[at + 3] = UInt8(v & 0xFF)
    }

    /// A WAL-mode copy of `original` at `path` whose -wal holds committed
    /// frames no checkpoint has copied back: a new table of 300 rows (pages
    /// past the main file's end), rows deleted from it, and a new user_version
    /// (page 1). Both files are copied while the writer still holds them open,
    /// as a copy taken from a live database would be.
    static func makeWALCopy(of original: String, at path: String) throws {
        let work = path + ".work"
        try Data(contentsOf: URL(fileURLWithPath: original)).write(to: URL(fileURLWithPath: work))
        let writer = try Connection(path: work, mode: .readWrite)
        try writer.execute("""
            PRAGMA journal_mode = WAL;
            PRAGMA wal_autocheckpoint = 0;
            CREATE TABLE litectl_wal_rows(id INTEGER PRIMARY KEY, v);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 300)
              INSERT INTO litectl_wal_rows SELECT i, printf('row %d ', i) || hex(randomblob(40)) FROM r;
            DELETE FROM litectl_wal_rows WHERE id % 7 = 0;
            PRAGMA user_version = 4242;
            """)
        try Data(contentsOf: URL(fileURLWithPath: work)).write(to: URL(fileURLWithPath: path))
        try Data(contentsOf: URL(fileURLWithPath: work + "-wal")).write(to: URL(fileURLWithPath: path + "-wal"))
        try writer.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: work + suffix) }
    }

    /// The offsets of a -wal's frames (whole frames only) and its page size.
    static func walFrames(_ wal: [UInt8]) -> (pageSize: Int, offsets: [Int]) {
        guard wal.count >= 32 else { return (0, []) }
        let pageSize = Int(get32(wal, 8))
        guard pageSize >= 512, pageSize <= 65536 else { return (pageSize, []) }
        return (pageSize, Array(stride(from: 32, through: wal.count - 24 - pageSize, by: 24 + pageSize)))
    }

    /// Computes every checksum of a -wal again (header, then each frame's,
    /// running on from the one before), so that a reader believes the frames
    /// as they now are (https://www.sqlite.org/fileformat2.html, "WAL File Format").
    static func resealWAL(_ wal: inout [UInt8]) {
        guard wal.count >= 32 else { return }
        let bigEndian = get32(wal, 0) & 1 == 1
        var s1: UInt32 = 0, s2: UInt32 = 0
        func sum(_ start: Int, _ count: Int) {
            var i = start
            while i + 8 <= start + count {
                let x0 = bigEndian ? get32(wal, i) : UInt32(wal[i]) | UInt32(wal[i + 1]) << 8 | UInt32(wal[i + 2]) << 16 | UInt32(wal[i + 3]) << 24
                let x1 = bigEndian ? get32(wal, i + 4) : UInt32(wal[i + 4]) | UInt32(wal[i + 5]) << 8 | UInt32(wal[i + 6]) << 16 | UInt32(wal[i + 7]) << 24
                s1 = s1 &+ x0 &+ s2
                s2 = s2 &+ x1 &+ s1
                i += 8
            }
        }
        sum(0, 24)
        put32(&wal, 24, s1); put32(&wal, 28, s2)
        let (pageSize, offsets) = walFrames(wal)
        for offset in offsets {
            sum(offset, 8)
            sum(offset + 24, pageSize)
            put32(&wal, offset + 16, s1); put32(&wal, offset + 20, s2)
        }
    }

    /// The offset of the last frame that ends a transaction (nil when none does).
    static func lastCommitFrame(_ wal: [UInt8]) -> Int? {
        walFrames(wal).offsets.last { get32(wal, $0 + 4) != 0 }
    }

    /// Applies one random mutation to a -wal; most reseal it, so that the
    /// damage is believed rather than cut off at a bad checksum.
    static func mutateWAL(_ wal: inout [UInt8], filePages: Int, rng: inout SplitMix64) -> String {
        let (pageSize, offsets) = walFrames(wal)
        guard !offsets.isEmpty else { return "no frames" }
        let frame = offsets[Int(rng.next() % UInt64(offsets.count))]
        let number = (frame - 32) / (24 + pageSize) + 1
        let pageNumbers: [UInt32] = [0, 1, 2, UInt32(filePages), UInt32(filePages + 1), UInt32(filePages + 1000),
                                     0x7FFF_FFFF, UInt32.max, UInt32(rng.next() % UInt64(filePages + 50))]
        switch rng.next() % 6 {
        case 0:
            let n = 1 + Int(rng.next() % 16)
            for _ in 0..<n { wal[Int(rng.next() % UInt64(wal.count))] ^= UInt8(1 + rng.next() % 255) }
            return "-wal: \(n) bytes flipped"
        case 1:
            let page = pageNumbers[Int(rng.next() % UInt64(pageNumbers.count))]
            put32(&wal, frame, page)
            resealWAL(&wal)
            return "-wal: frame \(number) writes page \(page), resealed"
        case 2:
            let target = lastCommitFrame(wal) ?? frame
            let size = pageNumbers[Int(rng.next() % UInt64(pageNumbers.count))]
            put32(&wal, target + 4, size)
            resealWAL(&wal)
            return "-wal: commit size \(size) at offset \(target), resealed"
        case 3:
            let size = pageNumbers[Int(rng.next() % UInt64(pageNumbers.count))]
            put32(&wal, frame + 4, size)
            resealWAL(&wal)
            return "-wal: frame \(number) commit size \(size), resealed"
        case 4:
            let n = 1 + Int(rng.next() % 32)
            for _ in 0..<n { wal[frame + 24 + Int(rng.next() % UInt64(pageSize))] ^= UInt8(1 + rng.next() % 255) }
            resealWAL(&wal)
            return "-wal: \(n) bytes of frame \(number)'s page flipped, resealed"
        default:
            let cut = 32 + Int(rng.next() % UInt64(wal.count - 32))
            wal.removeLast(wal.count - cut)
            return "-wal: truncated to \(cut) bytes"
        }
    }

    /// Fuzzes a WAL-mode copy of `original`: its -wal mutated (and, one run
    /// in three, its main file too).
    func fuzzWAL(_ original: String, label: String) throws {
        let folder = try TemporaryFolder("fuzz-wal")
        let base = folder.file("base.db")
        try RecoverFuzzTests.makeWALCopy(of: original, at: base)
        let pristineDB = [UInt8](try Data(contentsOf: URL(fileURLWithPath: base)))
        let pristineWAL = [UInt8](try Data(contentsOf: URL(fileURLWithPath: base + "-wal")))
        try #require(RecoverFuzzTests.lastCommitFrame(pristineWAL) != nil, "\(label): the -wal holds a commit")
        let pageSize = try PageMap.read(original).pageSize
        for i in 0..<RecoverFuzzTests.iterations {
            let seed = RecoverFuzzTests.firstSeed &+ UInt64(i) &* 0x9E37_79B9
            var rng = SplitMix64(seed: seed ^ UInt64(pristineWAL.count))
            var db = pristineDB, wal = pristineWAL
            var applied: [String] = []
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                applied.append(RecoverFuzzTests.mutateWAL(&wal, filePages: db.count / pageSize, rng: &rng))
            }
            if rng.next() % 3 == 0 { applied.append(RecoverFuzzTests.mutate(&db, pageSize: pageSize, rng: &rng)) }
            let damaged = folder.file("fuzzed.db"), out = folder.file("out.db")
            for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: out + suffix) }
            try Data(db).write(to: URL(fileURLWithPath: damaged))
            try Data(wal).write(to: URL(fileURLWithPath: damaged + "-wal"))
            let context = "\(label) (WAL) seed \(seed): \(applied.joined(separator: ", "))"
            try check(try runWatched(litectlBinary, ["recover", damaged, out], timeout: 120), out: out, folder: folder, context: context)
        }
    }

    /// What every fuzzed run must show: no crash, hang or unbounded memory,
    /// an exit status of 0, 1 or 2, no temporary file, and either a sound OUT
    /// or (status 2) none and one line on stderr.
    func check(_ run: WatchedResult, out: String, folder: TemporaryFolder, context: String) throws {
        #expect(run.signal == nil, "no crash: \(context)\n\(run.stderr)")
        #expect(!run.timedOut, "no hang: \(context)")
        #expect([0, 1, 2].contains(run.status), "\(context): status \(run.status)\n\(run.stderr)")
        #expect(run.peakKiB < RecoverFuzzTests.memoryLimitKiB, "\(context): peak \(run.peakKiB) KiB")
        let listing = try folder.listing()
        #expect(!listing.contains { $0.contains(".tmp-") }, "\(context): no temporary file left")
        #expect(!listing.contains { $0.hasPrefix(DurableFolder.baseName(of: out) + "-") }, "\(context): nothing beside OUT")
        if run.status == 2 {
            #expect(!listing.contains(DurableFolder.baseName(of: out)), "\(context): no OUT after an error")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(context): one line: \(run.stderr)")
        } else if run.status <= 1 {
            let integrity: String
            do { integrity = try sqlite3Scalar(out, "PRAGMA integrity_check") } catch { integrity = "\(error)" }
            #expect(integrity == "ok", "\(context)")
            // SQLite 3.44 and later check R*Trees in integrity_check; this
            // SQLite's rtreecheck() checks the same for every one in OUT.
            let rtrees: String
            do {
                rtrees = try sqlite3Scalar(out, """
                    SELECT group_concat(name || ': ' || rtreecheck(name), char(10)) FROM sqlite_schema
                    WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING rtree%' AND rtreecheck(name) <> 'ok'
                    """)
            } catch { rtrees = "\(error)" }
            #expect(rtrees.isEmpty, "\(context): \(rtrees)")
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
            for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: out + suffix) }
            try Data(bytes).write(to: URL(fileURLWithPath: damaged))
            let context = "\(label) seed \(seed): \(applied.joined(separator: ", "))"
            try check(try runWatched(litectlBinary, ["recover", damaged, out], timeout: 120), out: out, folder: folder, context: context)
        }
    }

    /// Skipped when ../shared/corpus/real is absent.
    @Test(.enabled(if: !realDatabases.isEmpty)) func mutatedRealDatabases() throws {
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

    /// Skipped when ../shared/corpus/real is absent.
    @Test(.enabled(if: !realDatabases.isEmpty)) func mutatedWALsOfRealDatabases() throws {
        for path in realDatabases { try fuzzWAL(path, label: DurableFolder.baseName(of: path)) }
    }

    @Test func mutatedWALOfGeneratedDatabase() throws {
        let folder = try TemporaryFolder("fuzz-wal-gen")
        let path = folder.file("gen.db")
        let made = try runProcess("/usr/bin/python3", [packageRoot + "/scripts/bench/generate.py", path, "--rows", "1500",
                                                       "--blob-every", "10", "--page-size", "1024"])
        try #require(made.status == 0, "\(made.stderr)")
        try fuzzWAL(path, label: "generated")
    }

    /// A -wal whose commit frame says the database has 0xFFFFFFFF pages (its
    /// checksums computed, so the reader believes it), once with the frame's
    /// own page number 0xFFFFFFFF too: recover sizes nothing by that number,
    /// says so in the report, and recovers every row the -wal committed.
    @Test func hostileWALPageCountIsBounded() throws {
        let folder = try TemporaryFolder("fuzz-wal-size")
        let base = folder.file("base.db")
        try makeDatabase(base, """
            PRAGMA page_size = 1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100) INSERT INTO t SELECT i, 'old ' || i FROM r;
            """)
        let walCopy = folder.file("wal.db")
        try RecoverFuzzTests.makeWALCopy(of: base, at: walCopy)
        // The oracle: SQLite reading the untouched WAL copy (on a copy of it, as reading may checkpoint).
        let oracle = folder.file("oracle.db")
        try Data(contentsOf: URL(fileURLWithPath: walCopy)).write(to: URL(fileURLWithPath: oracle))
        try Data(contentsOf: URL(fileURLWithPath: walCopy + "-wal")).write(to: URL(fileURLWithPath: oracle + "-wal"))
        let walRows = try sqlite3Scalar(oracle, "SELECT count(*) FROM litectl_wal_rows")
        #expect(walRows == "258")
        let pristine = [UInt8](try Data(contentsOf: URL(fileURLWithPath: walCopy + "-wal")))
        let commit = try #require(RecoverFuzzTests.lastCommitFrame(pristine))
        for hostilePage in [false, true] {
            var wal = pristine
            RecoverFuzzTests.put32(&wal, commit + 4, UInt32.max)
            if hostilePage { RecoverFuzzTests.put32(&wal, commit, UInt32.max) }
            RecoverFuzzTests.resealWAL(&wal)
            let damaged = folder.file("hostile.db"), out = folder.file("out.db")
            for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: out + suffix) }
            try Data(contentsOf: URL(fileURLWithPath: walCopy)).write(to: URL(fileURLWithPath: damaged))
            try Data(wal).write(to: URL(fileURLWithPath: damaged + "-wal"))
            let run = try runWatched(litectlBinary, ["recover", damaged, out], timeout: 120)
            let context = hostilePage ? "commit frame of page 0xFFFFFFFF" : "commit size 0xFFFFFFFF"
            #expect(run.signal == nil && !run.timedOut, "\(context): \(run.stderr)")
            #expect(run.peakKiB < RecoverFuzzTests.memoryLimitKiB, "\(context): peak \(run.peakKiB) KiB")
            #expect(run.status == 1, "\(context): \(run.stderr)")
            #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok", "\(context)")
            let json = try litectl("recover", "--json", "--force", damaged, out)
            #expect(json.stdout.contains("the -wal's last commit says the database has 4294967295 pages"), "\(context): \(json.stdout)")
            if !hostilePage {
                // Only the size field lied: every committed row is there.
                #expect(try sqlite3Scalar(out, "SELECT count(*) FROM litectl_wal_rows") == walRows, "\(context)")
                #expect(try sqlite3Scalar(out, "PRAGMA user_version") == "4242", "\(context)")
            }
            #expect(try sqlite3Scalar(out, "SELECT count(*) FROM t") == "100", "\(context)")
        }
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
