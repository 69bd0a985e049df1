// The content hash: equal for equal content however it was written (row
// order, page size, VACUUM), different for any exact difference; and the
// same digest, bit for bit, whether rows are read from the pages or with
// statements (snapshots in repositories record it).
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct ContentHashTests {
    func hash(_ script: String, options: ContentHashOptions = ContentHashOptions()) throws -> ContentHash {
        let folder = try TemporaryFolder("content-hash")
        try makeDatabase(folder.file("x.db"), script)
        return try ContentHasher.hash(path: folder.file("x.db"), options: options)
    }

    @Test func equalContentEqualHash() throws {
        let a = try hash("CREATE TABLE t(id INTEGER PRIMARY KEY, v); CREATE TABLE k(x); INSERT INTO t VALUES (1, 'a'), (2, 2.5); INSERT INTO k VALUES (1), (1), (2);")
        let b = try hash("""
            PRAGMA page_size = 512;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v); CREATE TABLE k(x);
            INSERT INTO k VALUES (2), (1), (9); DELETE FROM k WHERE x = 9; INSERT INTO k VALUES (1);
            INSERT INTO t VALUES (2, 2.5), (1, 'a'); VACUUM;
            """)
        #expect(a.digest == b.digest)
        #expect(a.tables.map(\.rows) == [3, 2])
    }

    /// The multiset sum against schoolbook addition, byte by byte, of the
    /// same 32-byte little-endian numbers modulo 2^256: carries across every
    /// limb (all-0xFF digests), and sums of sums.
    @Test func rowSumsAddAsNumbersModulo2To256() {
        func schoolbook(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32), carry = 0
            for i in 0..<32 { let s = Int(a[i]) + Int(b[i]) + carry; out[i] = UInt8(s & 0xFF); carry = s >> 8 }
            return out
        }
        var generator = SystemRandomNumberGenerator()
        var digests: [[UInt8]] = [[UInt8](repeating: 0xFF, count: 32), [1] + [UInt8](repeating: 0, count: 31),
                                  [UInt8](repeating: 0xFF, count: 32)]
        digests += (0..<200).map { _ in (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        var sum = UInt256(), half = UInt256(), expected = [UInt8](repeating: 0, count: 32)
        for (i, digest) in digests.enumerated() {
            if i % 2 == 0 { sum.add(digest) } else { half.add(digest) }
            expected = schoolbook(expected, digest)
        }
        sum.add(half)
        #expect(sum.bytes == expected)
        var wrapped = UInt256()
        wrapped.add([UInt8](repeating: 0xFF, count: 32))
        wrapped.add([1] + [UInt8](repeating: 0, count: 31))
        #expect(wrapped.bytes == [UInt8](repeating: 0, count: 32))
    }

    @Test func everyExactDifferenceCounts() throws {
        let base = "CREATE TABLE t(v); INSERT INTO t VALUES "
        let digests = try ["1", "1.0", "'1'", "x'31'", "NULL", "0.0", "'a'", "'A'", "'e' || char(769)", "char(233)"]
            .map { try hash(base + "(\($0));").digest }
        #expect(Set(digests).count == digests.count, "all distinct")
        let dup = try hash(base + "(1), (1);"), single = try hash(base + "(1);")
        #expect(dup.digest != single.digest)
        var dataOnly = ContentHashOptions()
        dataOnly.includeSchema = false
        #expect(try hash("CREATE TABLE t(v INTEGER); INSERT INTO t VALUES (1);", options: dataOnly).digest
                != hash("CREATE TABLE t(v); INSERT INTO t VALUES (1);", options: dataOnly).digest, "declared types count")
    }

    /// Both ways of reading rows, and the first with 1 to 4 threads.
    func bothWays(_ path: String, threads: Int) throws -> (statements: ContentHash, pages: ContentHash) {
        var statements = ContentHashOptions()
        statements.readPages = false
        var pages = ContentHashOptions()
        pages.threads = threads
        return (try ContentHasher.hash(path: path, options: statements), try ContentHasher.hash(path: path, options: pages))
    }

    func same(_ x: ContentHash, _ y: ContentHash) -> Bool {
        x.digest == y.digest && x.tables.map(\.name) == y.tables.map(\.name)
            && x.tables.map(\.digest) == y.tables.map(\.digest) && x.tables.map(\.rows) == y.tables.map(\.rows)
    }

    @Test(arguments: 0..<4)
    func pagesAndStatementsHashAlike(batch: Int) throws {
        let folder = try TemporaryFolder("hash-pages")
        for k in 0..<25 {
            let seed = UInt64(50_000 + batch * 100 + k)
            let database = try RandomDatabase.make(at: folder.file("h\(seed).db"), seed: seed, tableCount: 1 + k % 6)
            defer { try? database.writer?.close() }
            let (statements, pages) = try bothWays(database.path, threads: 1 + k % 4)
            let alike = same(statements, pages)
            #expect(alike, "\(database.summary)")
            #expect(pages.notes.isEmpty, "\(database.summary)\n\(pages.notes)")
        }
    }

    @Test func realDatabasesHashAlikeBothWays() throws {
        for path in realDatabases {
            let (statements, pages) = try bothWays(path, threads: 2)
            let alike = same(statements, pages)
            #expect(alike, "\(path)")
            // Only virtual tables are left to statements.
            for note in pages.notes { #expect(note.contains("virtual table"), "\(path): \(note)") }
        }
    }

    /// A table the page reader cannot read is hashed with statements, with a
    /// note, and the digest does not change.
    @Test func virtualTablesAndUnseenWALFramesFallBack() throws {
        let folder = try TemporaryFolder("hash-fallback")
        let path = folder.file("v.db")
        try makeDatabase(path, """
            CREATE VIRTUAL TABLE docs USING fts5(body); INSERT INTO docs VALUES ('one'), ('two');
            CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'a'), (2, 2.5);
            """)
        let (statements, pages) = try bothWays(path, threads: 2)
        #expect(same(statements, pages))
        #expect(pages.notes == ["table docs read with statements: virtual table"])

        // A -wal whose snapshot cannot be pinned down: its pages are left to statements.
        let wal = folder.file("w.db")
        try makeDatabase(wal, "PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v);")
        let writer = try Connection(path: wal, mode: .readWrite)
        try writer.execute("PRAGMA wal_autocheckpoint = 0; INSERT INTO t VALUES (1, 'in the wal')")
        let reader = try Connection(path: wal)
        let unpinned = try reader.readTransaction { try ContentHasher.hash(reader, options: ContentHashOptions(), walIndex: nil) }
        let pinned = try ContentHasher.hash(path: wal)
        #expect(unpinned.digest == pinned.digest)
        #expect(pinned.notes.isEmpty)
        #expect(unpinned.notes.count == 1 && unpinned.notes[0].contains("-wal"), "\(unpinned.notes)")
        try writer.close()
    }

    /// Damaged pages: when statements can read the table, the digest is theirs
    /// (the page reader reads the same rows or steps aside).
    @Test(arguments: 0..<2)
    func damagedDatabasesHashAsStatementsDo(batch: Int) throws {
        let folder = try TemporaryFolder("hash-damage")
        var rng = SplitMix64(seed: UInt64(7100 + batch))
        var compared = 0
        for k in 0..<25 {
            var settings = RandomDatabase.Settings.random(&rng)
            settings.wal = false
            let database = try RandomDatabase.make(at: folder.file("d\(k).db"), seed: rng.next(), tableCount: 3,
                                                   settings: settings, maxRows: 300)
            let tablePages = try sqlite3Scalar(database.path, "SELECT group_concat(pageno) FROM dbstat WHERE name LIKE 't%'")
                .split(separator: ",").compactMap { Int($0) }
            guard !tablePages.isEmpty else { continue }
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: database.path)))
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let page = tablePages.randomElement(using: &rng)!
                bytes[(page - 1) * settings.pageSize + Int.random(in: 0..<settings.pageSize, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: database.path))
            var byStatements = ContentHashOptions()
            byStatements.readPages = false
            guard let statements = try? ContentHasher.hash(path: database.path, options: byStatements) else { continue }
            let pages = try ContentHasher.hash(path: database.path)
            compared += 1
            let alike = same(statements, pages)
            #expect(alike, "\(database.summary)\n\(pages.notes)")
        }
        #expect(compared > 5)
    }
}
