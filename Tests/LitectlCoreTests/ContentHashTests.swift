// The content hash: equal for equal content however it was written (row
// order, page size, VACUUM), different for any exact difference.
import Foundation
import Testing
import LitectlCore
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
}
