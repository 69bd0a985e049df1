// The diff of two content-addressed images (two moments of a repository)
// compares rowid tables by page id: it must give exactly what a full scan of
// the same two files gives, in every output, on random pairs (updates,
// deletes, inserts, rows with overflow, a row changed only in its overflow
// pages), and read only the pages that changed plus the tables' interior
// pages when little changed.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

/// A file's pages, known by their content: two pages are the same when
/// their bytes are (the repository's page ids stand for the bytes).
final class AddressedFilePages: IdentifiedPages, @unchecked Sendable {
    let file: FilePages
    var pageSize: Int { file.pageSize }
    var pageCount: Int { file.pageCount }
    init(_ path: String) throws { file = try FilePages(path) }
    func page(_ number: Int) throws -> [UInt8] { try file.page(number) }
    func samePage(_ number: Int, in other: any ImagePages) -> Bool {
        guard let other = other as? AddressedFilePages, number >= 1, number <= pageCount, number <= other.pageCount else { return false }
        let range = (number - 1) * pageSize..<number * pageSize
        return file.bytes[range] == other.file.bytes[range]
    }
    /// Pages handed out so far (each read of a page counts).
    var reads: Int { file.lock.lock(); defer { file.lock.unlock() }; return file.reads.values.reduce(0, +) }
}

@Suite struct DiffIdentifiedPagesTests {
    /// The diff of `a` and `b` served as content-addressed images, in JSON
    /// Lines and as SQL, with the pages each side handed out.
    static func identifiedOutput(_ a: String, _ b: String, sql: Bool) throws -> (text: String, summary: DiffSummary, reads: Int) {
        let pa = try AddressedFilePages(a), pb = try AddressedFilePages(b)
        let ra = PageVFS.register(pa, label: "A"), rb = PageVFS.register(pb, label: "B")
        let ca = try Connection(pages: ra), cb = try Connection(pages: rb)
        defer { try? ca.close(); try? cb.close() }
        let sink = MemorySink()
        let consumer: DiffConsumer = sql ? SQLPatchWriter(sink: sink) : DiffReportWriter(sink: sink, style: .jsonl)
        var options = DiffOptions()
        options.readPages = false
        let summary = try DiffEngine.run(ca, cb, options: options, consumer: consumer)
        return (String(decoding: sink.bytes, as: UTF8.self), summary, pa.reads + pb.reads)
    }

    @Test(arguments: 0..<4)
    func sameAsFullScanOnRandomPairs(batch: Int) throws {
        let folder = try TemporaryFolder("diff-identified")
        for k in 0..<8 {
            let seed = UInt64(91_000 + batch * 100 + k)
            var rng = SplitMix64(seed: seed)
            let settings = RandomDatabase.Settings.random(&rng)
            let a = try RandomDatabase.make(at: folder.file("a\(seed).db"), seed: seed, tableCount: 1 + k % 4, settings: settings)
            try a.writer?.close()
            let b = folder.file("b\(seed).db")
            try FileManager.default.copyItem(atPath: a.path, toPath: b)
            try DiffPagesTests.change(b, tables: a.tables, seed: seed)
            for sql in [false, true] {
                let full: (text: String, summary: DiffSummary)
                do {
                    full = try DiffPagesTests.output(a.path, b, sql: sql, readPages: false, fullScan: true)
                } catch {
                    #expect(throws: (any Error).self) { try Self.identifiedOutput(a.path, b, sql: sql) }
                    continue
                }
                let identified = try Self.identifiedOutput(a.path, b, sql: sql)
                #expect(identified.text == full.text, "seed \(seed) sql \(sql)")
            }
        }
    }

    /// A large table with a few rows changed: only the changed leaves and
    /// the interior pages are read, and the result is the full scan's. A row
    /// changed only in its overflow pages (the leaf's bytes stay) is found.
    @Test func readsOnlyWhatChanged() throws {
        let folder = try TemporaryFolder("diff-identified-few")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try sqlite3([a, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, n REAL);
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 60000)
            INSERT INTO t SELECT i, printf('row %d %s', i, hex(randomblob(20))), i * 0.5 FROM c;
            CREATE TABLE big(id INTEGER PRIMARY KEY, data BLOB);
            WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 20)
            INSERT INTO big SELECT i, randomblob(12000) FROM c;
            CREATE INDEX t_v ON t(v);
            """])
        try FileManager.default.copyItem(atPath: a, toPath: b)
        try sqlite3([b, """
            UPDATE t SET v = 'changed' WHERE id IN (17, 30001, 59999);
            DELETE FROM t WHERE id = 45000;
            INSERT INTO t VALUES (70000, 'new', -0.0);
            """])
        let pages = Int(try FilePages(a).pageCount)
        let full = try DiffPagesTests.output(a, b, sql: false, readPages: false, fullScan: true)
        let identified = try Self.identifiedOutput(a, b, sql: false)
        #expect(identified.text == full.text)
        #expect(identified.summary.tables.first { $0.name == "t" }?.counts.total == 5)
        // Both images have `pages` pages: a full read is 2 * pages.
        #expect(identified.reads * 10 < pages, "read \(identified.reads) pages of 2 x \(pages)")

        // Only the last bytes of a row's blob: its overflow pages change, its leaf does not.
        let c = folder.file("c.db")
        try FileManager.default.copyItem(atPath: a, toPath: c)
        try sqlite3([c, "UPDATE big SET data = substr(data, 1, 11999) || x'5a' WHERE id = 7"])
        let fullC = try DiffPagesTests.output(a, c, sql: true, readPages: false, fullScan: true)
        let identifiedC = try Self.identifiedOutput(a, c, sql: true)
        #expect(identifiedC.text == fullC.text)
        #expect(identifiedC.summary.tables.first { $0.name == "big" }?.counts.total == 1)
    }
}
