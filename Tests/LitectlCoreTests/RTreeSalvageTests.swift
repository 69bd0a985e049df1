// Tests of how recover treats R*Tree virtual tables (RTreeSalvage,
// RecoveryRun+RTrees). Small R*Trees made by the sqlite3 CLI have rows of
// their shadow tables (_node, _rowid, _parent) damaged, through SQL and by
// zeroing the page of a leaf node; OUT must pass integrity_check and
// SQLite's own rtreecheck(), and hold exactly the entries of the leaf nodes
// that survive (the oracle: the original tree read by the sqlite3 CLI). A
// damaged CREATE VIRTUAL TABLE statement is left out instead of making the
// whole schema of OUT malformed; a sound R*Tree is copied exactly.
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class RTreeSalvageTests: XCTestCase {
    /// A 1024-byte-page database with an R*Tree `r` of 300 entries (an
    /// auxiliary column `label`; over ten nodes, depth 1) and a table `t`.
    func makeTree(_ path: String, module: String = "rtree") throws {
        try makeDatabase(path, """
            PRAGMA page_size = 1024;
            CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT);
            CREATE VIRTUAL TABLE r USING \(module)(id, minx, maxx, miny, maxy, +label);
            WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 300)
              INSERT INTO r SELECT i, i * 0.5 - 7, i * 0.5 + 1.25, -i * 0.25, -i * 0.25 + 3, 'L' || i FROM s;
            INSERT INTO t SELECT id, label FROM r;
            """)
        XCTAssertEqual(try sqlite3Scalar(path, "SELECT count(*) > 10 AND (SELECT hex(substr(data, 1, 2)) FROM r_node WHERE nodeno = 1) = '0001' FROM r_node"),
                       "1", "\(module): over ten nodes, depth 1")
        XCTAssertEqual(try sqlite3Scalar(path, "SELECT rtreecheck('r')"), "ok")
    }

    /// The entries of `r` as the sqlite3 CLI reads them, one line each;
    /// `filter` selects some (over `r_rowid` of the same database).
    func entries(_ path: String, where filter: String = "1") throws -> String {
        try sqlite3Scalar(path, "SELECT id, minx, maxx, miny, maxy, quote(label) FROM r WHERE \(filter) ORDER BY id")
    }

    func assertSound(_ out: String, _ context: String) throws {
        XCTAssertEqual(try sqlite3Scalar(out, "PRAGMA integrity_check"), "ok", context)
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT rtreecheck('r')"), "ok", context)
    }

    func testDamagedShadowRowsAreBuiltAgainFromTheSurvivingLeaves() throws {
        for module in ["rtree", "rtree_i32"] {
            let folder = try TemporaryFolder("recover-rtree")
            let original = folder.file("original.db")
            try makeTree(original, module: module)
            let lostNode = try sqlite3Scalar(original, "SELECT nodeno FROM r_rowid WHERE rowid = 100")
            let unmapped = try sqlite3Scalar(original, "SELECT min(rowid) FROM r_rowid WHERE nodeno <> \(lostNode)")
            let expectedLost = try sqlite3Scalar(original, "SELECT count(*) FROM r_rowid WHERE nodeno = \(lostNode)")
            // A leaf node gone, an entry's _rowid row gone (its label with it),
            // and a _parent row pointing elsewhere: rtreecheck() fails.
            let damaged = folder.file("damaged.db")
            try FileManager.default.copyItem(atPath: original, toPath: damaged)
            try makeDatabase(damaged, """
                DELETE FROM r_node WHERE nodeno = \(lostNode);
                DELETE FROM r_rowid WHERE rowid = \(unmapped);
                UPDATE r_parent SET parentnode = 99 WHERE nodeno = (SELECT max(nodeno) FROM r_parent);
                """)
            XCTAssertNotEqual(try sqlite3Scalar(damaged, "SELECT rtreecheck('r')"), "ok")

            let out = folder.file("out.db")
            let report = try Recovery.run(RecoveryRequest(source: damaged, output: out))
            let context = "\(module):\n\(report.lines.joined(separator: "\n"))"
            try assertSound(out, context)
            // The oracle: the original's entries but those of the lost node,
            // the one whose _rowid row is gone without its label.
            let expected = try entries(original, where: "id IN (SELECT rowid FROM r_rowid WHERE nodeno <> \(lostNode)) AND id <> \(unmapped)")
            let unlabelled = try sqlite3Scalar(original, "SELECT id, minx, maxx, miny, maxy, 'NULL' FROM r WHERE id = \(unmapped)")
            let found = try entries(out)
            XCTAssertEqual(found.split(separator: "\n").count, 300 - Int(expectedLost)!, context)
            XCTAssertEqual(try entries(out, where: "id <> \(unmapped)"), expected, context)
            XCTAssertEqual(try entries(out, where: "id = \(unmapped)"), unlabelled, context)
            XCTAssertEqual(report.rtrees.count, 1, context)
            XCTAssertEqual(report.rtrees.first?.rebuilt, true, context)
            XCTAssertEqual(report.rtrees.first?.entriesLost, Int(expectedLost), context)
            XCTAssertEqual(report.exitCode, 1, context)
            XCTAssertTrue(report.problems.contains { $0.hasPrefix("R*Tree r was damaged") }, context)
            XCTAssertEqual(try sqlite3Scalar(out, "SELECT count(*) FROM t"), "300", context)
        }
    }

    /// The root's first child pointer changed to a node that does not
    /// exist: that leaf is reached by no walk, but `_rowid` names it as its
    /// entries' node, so they are all kept.
    func testALeafTheRootNoLongerReachesIsTakenWhereRowidConfirmsIt() throws {
        let folder = try TemporaryFolder("recover-rtree-unreached")
        let original = folder.file("original.db")
        try makeTree(original)
        let damaged = folder.file("damaged.db")
        try FileManager.default.copyItem(atPath: original, toPath: damaged)
        try makeDatabase(damaged, "UPDATE r_node SET data = substr(data, 1, 4) || x'00000000000003E7' || substr(data, 13) WHERE nodeno = 1;")
        XCTAssertNotEqual(try? sqlite3Scalar(damaged, "SELECT rtreecheck('r')"), "ok", "rtreecheck() fails (or errs) on the source")

        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: damaged, output: out))
        let context = report.lines.joined(separator: "\n")
        try assertSound(out, context)
        XCTAssertEqual(try entries(out), try entries(original), context)
        XCTAssertEqual(report.rtrees.first?.rebuilt, true, context)
        XCTAssertEqual(report.rtrees.first?.entriesLost, 0, context)
    }

    func testAZeroedLeafNodePageLosesOnlyThatNodesEntries() throws {
        let folder = try TemporaryFolder("recover-rtree-page")
        let source = folder.file("source.db")
        try makeTree(source)
        let lostNode = Int64(try sqlite3Scalar(source, "SELECT nodeno FROM r_rowid WHERE rowid = 200"))!
        let map = try PageMap.read(source)
        let page = try XCTUnwrap(map.trees["r_node"]?.rows[.rowid(lostNode)]?.first, "the page of node \(lostNode)")
        let oracle = try entries(source, where: "id IN (SELECT rowid FROM r_rowid WHERE nodeno <> \(lostNode))")
        let lostCount = try sqlite3Scalar(source, "SELECT count(*) FROM r_rowid WHERE nodeno = \(lostNode)")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        for i in (Int(page - 1) * map.pageSize)..<(Int(page) * map.pageSize) { bytes[i] = 0 }
        try Data(bytes).write(to: URL(fileURLWithPath: source))

        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let context = report.lines.joined(separator: "\n")
        try assertSound(out, context)
        XCTAssertEqual(try entries(out), oracle, context)
        XCTAssertEqual(report.rtrees.first?.rebuilt, true, context)
        XCTAssertEqual(report.rtrees.first?.entriesLost, Int(lostCount), context)
    }

    func testADamagedCreateVirtualTableIsLeftOut() throws {
        let folder = try TemporaryFolder("recover-rtree-sql")
        let source = folder.file("source.db")
        try makeTree(source)
        // One byte of the schema row's SQL changed so that it no longer parses.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let text = Array("USING rtree(id, minx".utf8)
        let at = try XCTUnwrap((0...(bytes.count - text.count)).first { Array(bytes[$0..<($0 + text.count)]) == text })
        bytes[at + text.count - 6] = UInt8(ascii: "(")
        try Data(bytes).write(to: URL(fileURLWithPath: source))

        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let context = report.lines.joined(separator: "\n")
        XCTAssertEqual(try sqlite3Scalar(out, "PRAGMA integrity_check"), "ok", context)
        XCTAssertEqual(report.objectsNotRecreated.map(\.name), ["r"], context)
        XCTAssertEqual(report.exitCode, 1, context)
        // Its shadow tables stay, as ordinary tables, with their rows.
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT count(*) FROM r_rowid"), "300", context)
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT count(*) FROM t"), "300", context)
    }

    /// The fuzz's case (gdal_sample.gpkg, seed 1): a byte of the virtual
    /// table's tbl_name changed. SQLite calls a schema with such a row
    /// malformed; OUT writes the name there, as SQLite does, and keeps the tree.
    func testADamagedTblNameOfTheVirtualTableIsWrittenAsItsName() throws {
        let folder = try TemporaryFolder("recover-rtree-tblname")
        let original = folder.file("original.db")
        try makeTree(original)
        let source = folder.file("source.db")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        // The schema record's body: type, name, tbl_name, (rootpage 0 takes no byte), sql.
        let text = Array("tablerrCREATE VIRTUAL TABLE r ".utf8)
        let at = try XCTUnwrap((0...(bytes.count - text.count)).first { Array(bytes[$0..<($0 + text.count)]) == text })
        bytes[at + 6] = UInt8(ascii: "x")
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        XCTAssertNotEqual(try? sqlite3Scalar(source, "PRAGMA integrity_check"), "ok", "SQLite refuses the source's schema")

        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let context = report.lines.joined(separator: "\n")
        try assertSound(out, context)
        XCTAssertEqual(try entries(out), try entries(original), context)
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT tbl_name FROM sqlite_schema WHERE name = 'r'"), "r", context)
        XCTAssertEqual(report.rtrees.first?.rebuilt, false, context)
    }

    func testASoundRTreeIsCopiedExactly() throws {
        for module in ["rtree", "rtree_i32"] {
            let folder = try TemporaryFolder("recover-rtree-sound")
            let source = folder.file("source.db")
            try makeTree(source, module: module)
            let out = folder.file("out.db")
            let report = try Recovery.run(RecoveryRequest(source: source, output: out))
            let context = "\(module):\n\(report.lines.joined(separator: "\n"))"
            XCTAssertTrue(report.sound, context)
            XCTAssertEqual(report.rtrees.first?.rebuilt, false, context)
            XCTAssertEqual(report.rtrees.first?.entries, 300, context)
            try assertSound(out, context)
            for query in ["SELECT nodeno, hex(data) FROM r_node ORDER BY 1", "SELECT rowid, nodeno, quote(a0) FROM r_rowid ORDER BY 1",
                          "SELECT nodeno, parentnode FROM r_parent ORDER BY 1"] {
                XCTAssertEqual(try sqlite3Scalar(out, query), try sqlite3Scalar(source, query), "\(context): \(query)")
            }
            XCTAssertEqual(try ContentHasher.hash(path: out).digest, try ContentHasher.hash(path: source).digest, context)
        }
    }
}
