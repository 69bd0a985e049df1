// The page-id shortcut on WITHOUT ROWID tables (whose interior pages hold
// rows too) and on a content-addressed image against a plain file hashed as
// it names pages (a moment against a local file): the diff must print what
// the full comparison prints, its SQL patch must turn A into B as `sqldiff`
// sees it, and a few changed rows in a large table must read a small share
// of the pages.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

extension AddressedFilePages {
    /// A plain file's page against this one's: the same when the bytes are.
    func samePage(_ number: Int, asBytes bytes: UnsafeRawBufferPointer) -> Bool {
        guard number >= 1, number <= pageCount, bytes.count == pageSize else { return false }
        return file.bytes[(number - 1) * pageSize..<number * pageSize].elementsEqual(bytes)
    }
}

@Suite struct DiffIdentifiedWithoutRowidTests {
    /// The diff of `a` (served as a content-addressed image) and `b` (one
    /// too, or a plain file when `plainB`), with the distinct pages A handed out.
    static func output(_ a: String, _ b: String, sql: Bool, plainB: Bool) throws -> (text: String, reads: Int) {
        let pa = try AddressedFilePages(a)
        let ra = PageVFS.register(pa, label: "A")
        let ca = try Connection(pages: ra)
        let pb = try AddressedFilePages(b)
        let rb = PageVFS.register(pb, label: "B")
        let cb = plainB ? try Connection(path: b) : try Connection(pages: rb)
        defer { try? ca.close(); try? cb.close() }
        let sink = MemorySink()
        let consumer: DiffConsumer = sql ? SQLPatchWriter(sink: sink) : DiffReportWriter(sink: sink, style: .jsonl)
        var options = DiffOptions()
        options.readPages = false
        _ = try DiffEngine.run(ca, cb, options: options, consumer: consumer)
        // Distinct pages: a moment keeps the pages it fetched.
        pa.file.lock.lock()
        defer { pa.file.lock.unlock() }
        return (String(decoding: sink.bytes, as: UTF8.self), pa.file.reads.count)
    }

    /// A random SQL literal of any class, now and then one that overflows its page.
    static func literal(_ rng: inout SplitMix64, big: Bool = true) -> String {
        switch rng.next() % 9 {
        case 0: return "NULL"
        case 1: return String(Int64(bitPattern: rng.next()) >> Int64(rng.next() % 60))
        case 2: return String(format: "%.17g", Double(Int64(bitPattern: rng.next()) >> 20) / 1024)
        case 3: return "-0.0"
        case 4: return "'t\(rng.next() % 1000)é'"
        case 5: return "x'\(String(format: "%016llx", rng.next()))'"
        case 6: return big ? "zeroblob(\(3000 + rng.next() % 6000))" : "x'00'"
        case 7: return big ? "printf('%.*c', \(2000 + rng.next() % 5000), 'w')" : "''"
        default: return "'\(rng.next() % 100)'"
        }
    }

    /// Three WITHOUT ROWID tables (TEXT/BLOB, REAL and INTEGER keys) and a
    /// rowid table, then a copy with inserts, deletes, updates of values
    /// and keys, and rows with overflow.
    static func pair(_ folder: TemporaryFolder, seed: UInt64) throws -> (a: String, b: String) {
        var rng = SplitMix64(seed: seed)
        let a = folder.file("a\(seed).db"), b = folder.file("b\(seed).db")
        var script = "PRAGMA page_size=\([1024, 4096, 512][Int(seed % 3)]);\nBEGIN;\n"
        script += """
            CREATE TABLE kb(k TEXT, b BLOB, v, w, PRIMARY KEY(k, b)) WITHOUT ROWID;
            CREATE TABLE kr(r REAL PRIMARY KEY, v, w) WITHOUT ROWID;
            CREATE TABLE ki(i INTEGER PRIMARY KEY, v) WITHOUT ROWID;
            CREATE TABLE plain(id INTEGER PRIMARY KEY, v);
            CREATE INDEX kb_v ON kb(v);

            """
        let rows = 800 + Int(rng.next() % 1500)
        for n in 0..<rows {
            let key = "k\(String(format: "%06d", (n * 7919) % 1_000_003))"
            script += "INSERT INTO kb VALUES ('\(key)', x'\(String(n % 5, radix: 16, uppercase: false))0', \(literal(&rng)), \(literal(&rng, big: false)));\n"
            script += "INSERT OR IGNORE INTO kr VALUES (\(Double(n) * 0.37 - 100), \(literal(&rng)), \(literal(&rng, big: false)));\n"
            script += "INSERT INTO ki VALUES (\(n * 3 - 500), \(literal(&rng)));\n"
            if n % 4 == 0 { script += "INSERT INTO plain VALUES (\(n), \(literal(&rng)));\n" }
        }
        script += "COMMIT;\n"
        try makeDatabase(a, script)
        try FileManager.default.copyItem(atPath: a, toPath: b)
        var change = "BEGIN;\n"
        for _ in 0..<(1 + Int(rng.next() % 12)) {
            let n = Int(rng.next() % UInt64(rows)), key = "k\(String(format: "%06d", (n * 7919) % 1_000_003))"
            switch rng.next() % 8 {
            case 0: change += "UPDATE kb SET v = \(literal(&rng)) WHERE k = '\(key)';\n"
            case 1: change += "DELETE FROM kb WHERE k = '\(key)';\n"
            case 2: change += "INSERT OR REPLACE INTO kb VALUES ('\(key)x', x'ff', \(literal(&rng)), \(literal(&rng)));\n"
            case 3: change += "UPDATE kb SET k = k || 'moved' WHERE k = '\(key)';\n"
            case 4: change += "UPDATE kr SET v = \(literal(&rng)) WHERE r = \(Double(n) * 0.37 - 100);\n"
            case 5: change += "DELETE FROM kr WHERE r > \(Double(n) * 0.37 - 100) AND r < \(Double(n) * 0.37 - 90);\n"
            case 6: change += "INSERT OR REPLACE INTO ki VALUES (\(n * 3 - 499), \(literal(&rng)));\n"
            default: change += "UPDATE ki SET v = \(literal(&rng)) WHERE i = \(n * 3 - 500); UPDATE plain SET v = \(literal(&rng)) WHERE id = \(n - n % 4);\n"
            }
        }
        change += "COMMIT;\n"
        try makeDatabase(b, change)
        return (a, b)
    }

    @Test(arguments: 0..<3)
    func sameAsFullComparisonAndSqldiff(batch: Int) throws {
        let folder = try TemporaryFolder("diff-identified-wr")
        for k in 0..<4 {
            let seed = UInt64(93_000 + batch * 100 + k)
            let (a, b) = try Self.pair(folder, seed: seed)
            for sql in [false, true] {
                let full = try DiffPagesTests.output(a, b, sql: sql, readPages: false, fullScan: true)
                for plainB in [false, true] {
                    let identified = try Self.output(a, b, sql: sql, plainB: plainB)
                    #expect(identified.text == full.text, "seed \(seed) sql \(sql) plain B \(plainB)")
                    guard sql, !plainB else { continue }
                    // The patch applied to a copy of A gives B, as sqldiff sees it.
                    let patched = folder.file("p\(seed).db")
                    try FileManager.default.copyItem(atPath: a, toPath: patched)
                    try sqlite3(["-batch", patched], input: identified.text)
                    let left = try runProcess("/usr/bin/sqldiff", [patched, b])
                    #expect(left.status == 0 && left.stdout.isEmpty, "seed \(seed): sqldiff after the patch: \(left.stdout)")
                    try FileManager.default.removeItem(atPath: patched)
                }
            }
        }
    }

    /// A large WITHOUT ROWID table with a few rows changed (no overflow
    /// changed): A hands out a small share of its pages, against an image
    /// or a plain file, and the rows are the full comparison's.
    @Test func readsOnlyWhatChanged() throws {
        let folder = try TemporaryFolder("diff-identified-wr-few")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, """
            CREATE TABLE t(k TEXT, n INTEGER, v TEXT, r REAL, PRIMARY KEY(k, n)) WITHOUT ROWID;
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 60000)
            INSERT INTO t SELECT printf('key-%08d', i * 7 % 60013), i % 3, printf('row %d %s', i, hex(randomblob(30))), i * 0.5 FROM c;
            """)
        try FileManager.default.copyItem(atPath: a, toPath: b)
        try makeDatabase(b, """
            UPDATE t SET v = 'changed' WHERE k IN ('key-00000007', 'key-00030001', 'key-00059999');
            DELETE FROM t WHERE k = 'key-00045000';
            INSERT INTO t VALUES ('key-00045000a', 1, 'new', -0.0);
            -- A run of rows over several leaves: the rows between them, in an interior page, change too.
            UPDATE t SET r = -r WHERE k BETWEEN 'key-00010000' AND 'key-00010400';
            """)
        let pages = try AddressedFilePages(a).pageCount
        for plainB in [false, true] {
            let full = try DiffPagesTests.output(a, b, sql: false, readPages: false, fullScan: true)
            let identified = try Self.output(a, b, sql: false, plainB: plainB)
            print("A read \(identified.reads) pages of \(pages) (plain B \(plainB))")
            #expect(identified.text == full.text)
            #expect(full.text.contains("key-00045000a"))
            // A full read of A is `pages` pages.
            #expect(identified.reads * 20 < pages, "A read \(identified.reads) pages of \(pages) (plain B \(plainB))")
        }
    }
}
