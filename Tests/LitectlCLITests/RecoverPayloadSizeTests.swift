// `litectl recover` on cells whose payload size a flipped bit made too large
// for their page: such a size calls for an overflow chain, whose "pointer" is
// then the record's own next bytes or the next cell's. The record's header
// still describes it, and the page proves that size (the cell ends where the
// next one begins): the row is kept exactly, as the sqlite3 shell's
// `.recover` keeps it (LITECTL_RECOVER_SEED=303 found both cases).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RecoverPayloadSizeTests {
    static let geoPackage = realDatabases.first { DurableFolder.baseName(of: $0) == "gdal_sample.gpkg" }

    /// Where the cell holding `rowid` starts on table leaf `page` of `bytes`.
    static func cellStart(_ bytes: [UInt8], page: UInt32, pageSize: Int, rowid: Int64) -> Int? {
        let base = Int(page - 1) * pageSize
        let header = base + (page == 1 ? 100 : 0)
        guard bytes[header] == 13 else { return nil }
        func varint(_ at: inout Int) -> Int64 {
            var value: Int64 = 0
            for i in 0..<9 {
                let byte = bytes[at]
                at += 1
                if i == 8 { return value << 8 | Int64(byte) }
                value = value << 7 | Int64(byte & 0x7F)
                if byte < 0x80 { break }
            }
            return value
        }
        let count = Int(bytes[header + 3]) << 8 | Int(bytes[header + 4])
        for i in 0..<count {
            let pointer = header + 8 + 2 * i
            let start = base + (Int(bytes[pointer]) << 8 | Int(bytes[pointer + 1]))
            var at = start
            _ = varint(&at)
            if varint(&at) == rowid { return start }
        }
        return nil
    }

    /// Adds 2,048 to the two-byte payload size of the cell at `start` (a
    /// flipped bit): the size then calls for an overflow page.
    static func enlargePayloadSize(_ bytes: inout [UInt8], at start: Int) throws {
        try #require(bytes[start] & 0x80 != 0 && bytes[start + 1] & 0x80 == 0 && bytes[start] & 0x10 == 0,
                     "a two-byte payload size below 2,048")
        bytes[start] ^= 0x10
    }

    /// The schema row of a GeoPackage's R*Tree (its CREATE VIRTUAL TABLE)
    /// with a damaged payload size: the R*Tree is made again with every
    /// entry, as the shell's `.recover` keeps them. (Before, the schema row
    /// was dropped as "no schema row", and the R*Tree's entries with it.)
    @Test(.enabled(if: RecoverPayloadSizeTests.geoPackage != nil))
    func schemaRowOfAnRTree() throws {
        let folder = try TemporaryFolder("recover-payload-size")
        let original = try folder.copy(try #require(RecoverPayloadSizeTests.geoPackage), as: "original.gpkg")
        let map = try PageMap.read(original)
        let name = "rtree_linestring3d_geom"
        let rowid = try #require(Int64(try sqlite3Scalar(original, "SELECT rowid FROM sqlite_schema WHERE name = '\(name)'")))
        let page = try #require(map.trees["sqlite_schema"]?.rows[.rowid(rowid)]?.first)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        let start = try #require(RecoverPayloadSizeTests.cellStart(bytes, page: page, pageSize: map.pageSize, rowid: rowid))
        try RecoverPayloadSizeTests.enlargePayloadSize(&bytes, at: start)
        let damaged = folder.file("damaged.gpkg"), out = folder.file("out.gpkg")
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))

        let run = try runProcess(litectlBinary, ["recover", damaged, out])
        #expect(run.status == 1, "\(run.stderr)")
        let entries = "SELECT * FROM \(name) ORDER BY id"
        let expected = try sqlite3([original, entries])
        #expect(!expected.isEmpty)
        #expect(try sqlite3([out, entries]) == expected, "\(run.stdout)")
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
        if let shell = recoverShell {
            // The oracle: the shell keeps these entries too.
            let script = try runProcess(shell, [damaged, ".recover"])
            let theirs = folder.file("shell.gpkg")
            try runProcess(sqlite3Binary, [theirs], input: script.stdoutBytes)
            #expect(try sqlite3([theirs, entries]) == expected)
        }
    }

    /// Rows of an ordinary table whose payload sizes are damaged so: each
    /// is kept in its table with every value exact (before, each went to
    /// lost_and_found, cut short), and the table keeps all its rows.
    @Test func tableRows() throws {
        let folder = try TemporaryFolder("recover-payload-size")
        let original = folder.file("original.db")
        // Rows of about 200 bytes on 1 KiB pages: four to a leaf, each payload size two bytes long.
        _ = try sqlite3([original, """
            PRAGMA page_size = 1024;
            CREATE TABLE r(id INTEGER PRIMARY KEY, s TEXT, n INTEGER, x REAL);
            WITH RECURSIVE q(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM q WHERE i < 400)
            INSERT INTO r SELECT i, printf('%d:%.*c', i, 150 + i % 40, char(65 + i % 26)), i * 7919, i / 3.0 FROM q;
            """])
        let map = try PageMap.read(original)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
        let usable = map.usable, minLocal = (usable - 12) * 32 / 255 - 23
        // One row on each of the first leaves of r whose cell the larger
        // size leaves inside the page (a cell that runs past it is no cell
        // at all: the shell's reader skips the rest of its page there).
        var damagedKeys: [String] = []
        for leaf in try #require(map.trees["r"]?.leaves) where damagedKeys.count < 8 {
            let header = Int(leaf - 1) * map.pageSize
            let count = Int(bytes[header + 3]) << 8 | Int(bytes[header + 4])
            for i in 0..<count {
                let start = header + (Int(bytes[header + 8 + 2 * i]) << 8 | Int(bytes[header + 9 + 2 * i]))
                guard bytes[start] & 0x80 != 0, bytes[start + 1] & 0x80 == 0, bytes[start] & 0x10 == 0 else { continue }
                let size = (Int(bytes[start] & 0x7F) << 7 | Int(bytes[start + 1])) + 2048
                let k = minLocal + (size - minLocal) % (usable - 4)
                let local = k <= usable - 35 ? k : minLocal
                var rowidLength = 1
                while bytes[start + 1 + rowidLength] & 0x80 != 0 { rowidLength += 1 }
                guard start - header + 2 + rowidLength + local + 4 <= usable else { continue }
                var at = start + 2
                var rowid: Int64 = 0
                while true {
                    rowid = rowid << 7 | Int64(bytes[at] & 0x7F)
                    at += 1
                    if bytes[at - 1] & 0x80 == 0 { break }
                }
                try RecoverPayloadSizeTests.enlargePayloadSize(&bytes, at: start)
                damagedKeys.append("r|\(rowid)")
                break
            }
        }
        try #require(damagedKeys.count == 8)
        let damaged = folder.file("damaged.db"), out = folder.file("out.db")
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        let run = try runProcess(litectlBinary, ["recover", damaged, out])
        #expect(run.status == 1, "\(run.stderr)")
        let kept = try KeptRows.exact(output: out, original: original, map: map)
        for key in damagedKeys { #expect(kept.contains(key), "\(key) is not kept exactly: \(run.stdout)") }
        #expect(kept.count == 400)
        #expect(try sqlite3Scalar(out, "SELECT count(*) FROM r") == "400", "\(run.stdout)")
        #expect(try sqlite3Scalar(out, "PRAGMA integrity_check") == "ok")
    }
}
