// `litectl recover` on a leaf where a flipped bit in one cell's rowid puts
// two neighbours out of order in a way the page cannot settle (rowids 200,
// 300, 272, 500: either 300 or 272 is the damaged one). Neither row goes to
// the table under a rowid that may be wrong: both are kept in lost_and_found
// with every value and the rowid they read (LITECTL_RECOVER_SEED=404 found
// it on sql-murder-mystery.db, where litectl put the damaged one in the table
// and the sound one in lost_and_found; the shell's `.recover` puts both in
// the table).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RecoverRowidOrderTests {
    @Test func ambiguousPairGoesToLostAndFound() throws {
        let folder = try TemporaryFolder("recover-rowid-order")
        let original = folder.file("original.db")
        // Rows 100, 200, ..., 3000 of about 110 bytes on 1 KiB pages: 200 to 500 share a leaf.
        _ = try sqlite3([original, """
            PRAGMA page_size = 1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, n INTEGER);
            WITH RECURSIVE q(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM q WHERE i < 30)
            INSERT INTO t SELECT i * 100, printf('%d:%.*c', i, 100, char(65 + i % 26)), i * 7 FROM q;
            """])
        let map = try PageMap.read(original)
        let rows = try #require(map.trees["t"]?.rows)
        let leaf = try #require(rows[.rowid(400)]?.first)
        try #require([200, 300, 500].allSatisfy { rows[.rowid($0)]?.first == leaf }, "200 to 500 on one leaf")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        var at = try #require(RecoverPayloadSizeTests.cellStart(bytes, page: leaf, pageSize: map.pageSize, rowid: 400))
        while bytes[at] & 0x80 != 0 { at += 1 }
        at += 1  // past the payload size: the rowid, 400 = 0x83 0x10
        try #require(bytes[at] == 0x83 && bytes[at + 1] == 0x10)
        bytes[at] ^= 0x01  // 272 = 0x82 0x10, between 200 and 300
        let damaged = folder.file("damaged.db"), out = folder.file("out.db")
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))

        let run = try runProcess(litectlBinary, ["recover", damaged, out])
        #expect(run.status == 1, "\(run.stderr)")
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
        // The table: every other row exactly; neither 300 nor 272 (400's row under a damaged rowid).
        let others = "SELECT id, quote(v), n FROM t WHERE id NOT IN (300, 400) ORDER BY id"
        #expect(try sqlite3([out, others]) == (try sqlite3([original, others])), "\(run.stdout)")
        #expect(try sqlite3Scalar(out, "SELECT group_concat(id) FROM t WHERE id BETWEEN 201 AND 499") == "", "\(run.stdout)")
        // Both in lost_and_found, with the rowid each read and every value.
        let kept = try sqlite3Scalar(out, """
            SELECT group_concat(id || ',' || quote(c0) || ',' || c1 || ',' || c2 || ',' || reason, '|')
            FROM (SELECT * FROM lost_and_found ORDER BY id)
            """)
        let want = try sqlite3Scalar(original, """
            SELECT group_concat(k || ',NULL,' || v || ',' || n || ',out of key order or range on a damaged page', '|')
            FROM (SELECT CASE id WHEN 400 THEN 272 ELSE id END AS k, v, n FROM t WHERE id IN (300, 400) ORDER BY k)
            """)
        #expect(kept == want)
        let exact = try KeptRows.exact(output: out, original: original, map: map)
        #expect(exact.contains("t|300") && !exact.contains("t|400"))

        // The oracle: the shell keeps both in the table, 400's row under 272.
        if let shell = recoverShell {
            let script = try runProcess(shell, [damaged, ".recover"])
            let theirs = folder.file("shell.db")
            try runProcess(sqlite3Binary, [theirs], input: script.stdoutBytes)
            #expect(try sqlite3Scalar(theirs, "SELECT group_concat(id) FROM t WHERE id BETWEEN 201 AND 499") == "272,300")
            let mine = try #require(try SalvageTally.tally(output: out, original: original, map: map)["t"])
            let shells = try #require(try SalvageTally.tally(output: theirs, original: original, map: map)["t"])
            #expect(mine.rows >= shells.rows && mine.present >= shells.present && mine.exact >= shells.exact,
                    "litectl \(mine), the shell \(shells)")
            #expect(try KeptRows.exact(output: theirs, original: original, map: map).subtracting(exact).isEmpty)
        }
    }
}
