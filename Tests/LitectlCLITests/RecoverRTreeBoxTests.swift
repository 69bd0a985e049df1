// `litectl recover` on an R*Tree entry whose box a flipped bit made invalid
// (a minimum above its maximum): the module refuses such an entry when the
// tree is built again, and the sqlite3 shell's `.recover` copies it into a
// tree rtreecheck() fails. litectl keeps it in lost_and_found with its id and
// every value, and reports it (LITECTL_RECOVER_SEED=505 found it on
// gdal_sample.gpkg); before, it was left out and counted as lost.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RecoverRTreeBoxTests {
    /// An R*Tree `r` of 300 entries (an auxiliary column `label`) on 1 KiB
    /// pages, made by the sqlite3 CLI, whose entry 7 has the sign bit of its
    /// first maximum flipped (in its leaf node's blob): 4.75 becomes -4.75,
    /// below its minimum -3.5 (4 becomes -2,147,483,644 in an rtree_i32).
    static func damagedTree(module: String, in folder: TemporaryFolder) throws -> (original: String, damaged: String) {
        let original = folder.file("original.db"), damaged = folder.file("damaged.db")
        _ = try sqlite3([original, """
            PRAGMA page_size = 1024;
            CREATE VIRTUAL TABLE r USING \(module)(id, minx, maxx, miny, maxy, +label);
            WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 300)
              INSERT INTO r SELECT i, i * 0.5 - 7, i * 0.5 + 1.25, -i * 0.25, -i * 0.25 + 3, 'L' || i FROM s;
            """])
        try FileManager.default.copyItem(atPath: original, toPath: damaged)
        let node = try sqlite3Scalar(original, "SELECT nodeno FROM r_rowid WHERE rowid = 7")
        let hex = Array(try sqlite3Scalar(original, "SELECT hex(data) FROM r_node WHERE nodeno = \(node)").utf8)
        var data: [UInt8] = stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
        let count = Int(data[2]) << 8 | Int(data[3])
        let cell = try #require((0..<count).first { i in
            (0..<8).reduce(Int64(0)) { $0 << 8 | Int64(data[4 + i * 24 + $1]) } == 7
        })
        data[4 + cell * 24 + 8 + 4] ^= 0x80  // maxx's sign bit (big-endian)
        let digits = Array("0123456789ABCDEF".utf8)
        let patched = String(decoding: data.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
        _ = try sqlite3([damaged, "UPDATE r_node SET data = X'\(patched)' WHERE nodeno = \(node)"])
        #expect(try sqlite3Scalar(damaged, "SELECT rtreecheck('r')") != "ok")
        return (original, damaged)
    }

    @Test(arguments: ["rtree", "rtree_i32"])
    func invalidBoxGoesToLostAndFound(module: String) throws {
        let folder = try TemporaryFolder("recover-rtree-box")
        let (original, damaged) = try RecoverRTreeBoxTests.damagedTree(module: module, in: folder)
        let out = folder.file("out.db")
        let run = try runProcess(litectlBinary, ["recover", "--json", damaged, out])
        #expect(run.status == 1, "\(run.stderr)")
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
        #expect(try sqlite3Scalar(out, "SELECT rtreecheck('r')") == "ok")

        // Every other entry in the tree, exactly as the original holds it.
        let entries = "SELECT id, quote(minx), quote(maxx), quote(miny), quote(maxy), quote(label) FROM r WHERE id <> 7 ORDER BY id"
        let expected = try sqlite3([original, entries])
        #expect(expected.split(separator: "\n").count == 299)
        #expect(try sqlite3([out, entries]) == expected)
        #expect(try sqlite3Scalar(out, "SELECT count(*) FROM r WHERE id = 7") == "0")

        // Entry 7 in lost_and_found: its id, its values as the damaged node
        // holds them, the root of r_node, and a reason naming the R*Tree.
        let flipped = module == "rtree" ? "-maxx" : "maxx - 2147483648"
        let want = try sqlite3Scalar(original, """
            SELECT (SELECT rootpage FROM sqlite_schema WHERE name = 'r_node'), 7, 6,
                   quote(id), quote(minx), quote(\(flipped)), quote(miny), quote(maxy), quote(label) FROM r WHERE id = 7
            """)
        let got = try sqlite3Scalar(out, """
            SELECT rootpgno, id, nfield, quote(c0), quote(c1), quote(c2), quote(c3), quote(c4), quote(c5)
            FROM lost_and_found WHERE reason LIKE 'an entry of R*Tree r %'
            """)
        #expect(got == want, "\(run.stdout)")
        #expect(try sqlite3Scalar(out, "SELECT typeof(c1) || typeof(c2) || typeof(c5) FROM lost_and_found WHERE id = 7")
                == (module == "rtree" ? "realrealtext" : "integerintegertext"))

        // The report counts it there, not as lost.
        let report = try #require(try JSONSerialization.jsonObject(with: Data(run.stdoutBytes)) as? [String: Any])
        let rtree = try #require((report["rtrees"] as? [[String: Any]])?.first)
        #expect(rtree["entries"] as? Int == 299)
        #expect(rtree["entries_lost"] as? Int == 0)
        #expect(rtree["entries_in_lost_and_found"] as? Int == 1)
        let text = try runProcess(litectlBinary, ["recover", damaged, folder.file("text.db")])
        #expect(text.stdout.contains("1 entries its module refuses are in lost_and_found"), "\(text.stdout)")

        // The oracle: the shell's .recover keeps the entry (in the tree, as
        // it is); the parity tally counts litectl's as kept too.
        if let shell = recoverShell {
            let script = try runProcess(shell, [damaged, ".recover"])
            let theirs = folder.file("shell.db")
            try runProcess(sqlite3Binary, [theirs], input: script.stdoutBytes)
            #expect(try sqlite3Scalar(theirs, "SELECT count(*) FROM r") == "300")
            let map = try PageMap.read(original)
            let mine = try #require(try SalvageTally.tally(output: out, original: original, map: map)["r"])
            let shells = try #require(try SalvageTally.tally(output: theirs, original: original, map: map)["r"])
            #expect(mine.rows == 300 && mine.present == 300, "\(mine)")
            #expect(mine.rows >= shells.rows && mine.present >= shells.present, "litectl \(mine), the shell \(shells)")
        }
    }
}
