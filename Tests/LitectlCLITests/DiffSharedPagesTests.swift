// The shared-pages shortcut of `litectl diff` (b-tree subtrees and cells that
// are byte-identical in A and B are not read row by row) must never change a
// result: on pairs that share history, every format gives the same bytes with
// the shortcut as with --full-scan, and the SQL patch passes the round-trip
// oracles (sqlite3 applies it; litectl hash, sqldiff and integrity_check agree).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DiffSharedPagesTests {
    static let schema = """
        CREATE TABLE p(id INTEGER PRIMARY KEY, a, b TEXT COLLATE NOCASE, c REAL);
        CREATE TABLE w(k1, k2 TEXT, v, PRIMARY KEY(k1, k2)) WITHOUT ROWID;
        CREATE TABLE m(x, y);
        CREATE TABLE t(code TEXT PRIMARY KEY, v);
        CREATE TABLE d(k INTEGER, v, PRIMARY KEY(k DESC)) WITHOUT ROWID;
        CREATE TABLE n(k TEXT COLLATE NOCASE PRIMARY KEY, v) WITHOUT ROWID;
        CREATE TABLE big(id INTEGER PRIMARY KEY, data BLOB);
        CREATE TABLE wbig(k TEXT PRIMARY KEY, data BLOB) WITHOUT ROWID;
        """

    /// Every format, with and without the shortcut, byte for byte.
    func expectSameWithFullScan(_ a: String, _ b: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for format in [["--format", "sql"], ["--format", "jsonl"], ["--summary"], ["--format", "changeset"], ["--rowid", "--format", "jsonl"]] {
            let fast = try runProcess(litectlBinary, ["diff"] + format + [a, b])
            let full = try runProcess(litectlBinary, ["diff", "--full-scan"] + format + [a, b])
            #expect(fast.status == full.status && fast.stdoutBytes == full.stdoutBytes && fast.stderr == full.stderr,
                    "\(format): shortcut and full scan disagree:\n\(fast.stdout.prefix(1500))\n---\n\(full.stdout.prefix(1500))",
                    sourceLocation: sourceLocation)
        }
    }

    /// A with a few thousand rows in small pages (deep trees, overflow
    /// chains), B a copy of its file changed at random places.
    @Test(arguments: 0..<6) func pairsThatShareHistory(seed: Int) throws {
        var rng = SplitMix64(seed: UInt64(seed) &* 0x51_7CC1 &+ 5)
        let folder = try TemporaryFolder("diff-shared")
        let a = folder.file("a.db")
        let pageSize = [512, 1024, 4096][seed % 3]
        var script = "PRAGMA page_size = \(pageSize);" + Self.schema + """
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 3000)
            INSERT INTO p SELECT n, n % 7, 'text ' || n, n * 0.25 FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 2000)
            INSERT INTO w SELECT n % 50, 'k' || n, randomblob(n % 40) FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 2000)
            INSERT INTO m SELECT n % 300, 'row ' || (n % 600) FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 1500)
            INSERT INTO t SELECT printf('c%05d', n), n FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 1500)
            INSERT INTO d SELECT n, 'v' || n FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 1500)
            INSERT INTO n SELECT printf('Key%05d', n), n FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 60)
            INSERT INTO big SELECT n, randomblob(500 + n * 97) FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 60)
            INSERT INTO wbig SELECT printf('%0*d', 40 + n * 30, n), randomblob(300 + n * 53) FROM i;
            """
        try makeDatabase(a, script)
        let b = try folder.copy(a, as: "b.db")
        script = ""
        func pick(_ n: UInt64) -> UInt64 { rng.next() % n + 1 }
        for _ in 0..<Int(pick(30)) {
            switch rng.next() % 14 {
            case 0: script += "UPDATE p SET a = \(["1.0", "'1'", "x'01'", "NULL", "a + 1"][Int(rng.next() % 5)]) WHERE id = \(pick(3000));"
            case 1: script += "UPDATE p SET b = upper(b) WHERE id = \(pick(3000));"
            case 2: script += "DELETE FROM p WHERE id BETWEEN \(pick(3000)) AND \(pick(3000));"
            case 3: script += "INSERT OR REPLACE INTO p VALUES (\(pick(4000)), 'new', 'NEW', -0.0);"
            case 4: script += "UPDATE w SET v = 'changed' WHERE k1 = \(pick(50)) AND k2 = 'k\(pick(2000))';"
            case 5: script += "DELETE FROM w WHERE k1 = \(pick(50));"
            case 6: script += "INSERT INTO m VALUES (\(pick(300)), 'row \(pick(600))'); DELETE FROM m WHERE rowid = \(pick(2000));"
            case 7: script += "UPDATE t SET v = v || '!' WHERE code = 'c\(String(format: "%05d", pick(1500)))';"
            case 8: script += "UPDATE d SET v = NULL WHERE k = \(pick(1500)); DELETE FROM d WHERE k = \(pick(1500));"
            case 9: script += "UPDATE n SET k = lower(k) WHERE k = 'Key\(String(format: "%05d", pick(1500)))';"
            case 10:
                // One byte changed near the end of a blob: the cell on the leaf
                // may stay byte-identical while an overflow page differs.
                let id = pick(60)
                script += """
                    UPDATE big SET data = substr(data, 1, length(data) - 3) || x'\(String(format: "%02x", rng.next() % 256))' || substr(data, -2)
                    WHERE id = \(id);
                    """
            case 11:
                script += """
                    UPDATE wbig SET data = substr(data, 1, length(data) - 1) || x'\(String(format: "%02x", rng.next() % 256))'
                    WHERE k = printf('%0*d', 40 + \(pick(60)) * 30, \(pick(60)));
                    """
            case 12: script += "UPDATE wbig SET data = data WHERE k > '\(pick(9))';"
            default: script += "INSERT INTO w VALUES (\(pick(60)), 'z\(pick(99))', 1) ON CONFLICT DO NOTHING;"
            }
        }
        _ = try sqlite3([b], input: script)
        try expectSameWithFullScan(a, b)
        try roundTrip(a, b, in: folder, expectDifferent: try litectl("diff", "--summary", a, b).status == 1)
    }

    /// Cases where skipping shared rows would change the pairing or miss a
    /// row (found in review): each must give what a full scan gives.
    @Test(arguments: [
        // The key column's collation (NOCASE) is not the key's (BINARY): a gap
        // compared under NOCASE would be empty.
        ("PRAGMA page_size=512; CREATE TABLE t(a TEXT COLLATE NOCASE, b, PRIMARY KEY(a COLLATE BINARY)) WITHOUT ROWID;"
         + "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i<999) INSERT INTO t SELECT printf('K%04d',i),'v'||i FROM c;"
         + "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i<999) INSERT INTO t SELECT printf('k%04d',i),'w'||i FROM c;",
         "INSERT INTO t VALUES('K0998a','new');"),
        // Columns take all three names of the rowid.
        ("PRAGMA page_size=512; CREATE TABLE t(rowid INT, _rowid_ INT, oid INT, v);"
         + "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<400) INSERT INTO t SELECT 401-i,0,0,'v'||i FROM c;",
         "UPDATE t SET v='changed' WHERE v='v1';"),
        // A key that is not the rowid may repeat NULL.
        ("CREATE TABLE t(k TEXT PRIMARY KEY, v); INSERT INTO t(rowid,k,v) VALUES(1,NULL,'a'),(2,NULL,'s');",
         "DELETE FROM t WHERE rowid=1; INSERT INTO t(rowid,k,v) VALUES(3,NULL,'c');"),
        // A keyless table whose rows tie on the compared columns (see --ignore-column below).
        ("CREATE TABLE t(k, note); INSERT INTO t(rowid,k,note) VALUES(1,1,'y'),(2,1,'x');",
         "DELETE FROM t WHERE rowid=1;"),
    ]) func rowsThatCannotBeSkipped(script: String, change: String) throws {
        let folder = try TemporaryFolder("diff-shared-cases")
        let a = folder.file("a.db")
        try makeDatabase(a, script)
        let b = try folder.copy(a, as: "b.db")
        _ = try sqlite3([b], input: change)
        try expectSameWithFullScan(a, b)
        for extra in [["--ignore-column", "t.note"], ["--rowid"]] {
            let fast = try runProcess(litectlBinary, ["diff", "--format", "jsonl"] + extra + [a, b])
            let full = try runProcess(litectlBinary, ["diff", "--full-scan", "--format", "jsonl"] + extra + [a, b])
            #expect(fast.status == full.status && fast.stdoutBytes == full.stdoutBytes, "\(extra): \(fast.stdout) vs \(full.stdout)")
        }
        #expect(try litectl("diff", "--summary", a, b).status == 1)
    }

    /// A copy of a file is identical at once, by every format.
    @Test func aCopyIsIdentical() throws {
        let folder = try TemporaryFolder("diff-shared-copy")
        let a = folder.file("a.db")
        try makeDatabase(a, "PRAGMA page_size = 512;" + Self.schema + """
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 5000)
            INSERT INTO p SELECT n, n, 'x' || n, n / 3.0 FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 40)
            INSERT INTO big SELECT n, randomblob(3000) FROM i;
            """)
        let b = try folder.copy(a, as: "b.db")
        try expectSameWithFullScan(a, b)
        #expect(try litectl("diff", a, b).status == 0)
    }

    /// Pages with a frame in a -wal are never read from the main file: B is
    /// changed by a process that keeps it open, so its changes sit in the -wal
    /// (the main file still holds A's pages, byte for byte).
    @Test func pagesInTheWALAreNeverTrusted() throws {
        let folder = try TemporaryFolder("diff-shared-wal")
        let a = folder.file("a.db")
        try makeDatabase(a, "PRAGMA journal_mode = WAL; PRAGMA page_size = 1024;" + Self.schema + """
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 3000)
            INSERT INTO p SELECT n, n, 'x' || n, n / 3.0 FROM i;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 2000)
            INSERT INTO w SELECT n % 50, 'k' || n, n FROM i;
            INSERT INTO m SELECT x, y FROM (SELECT id AS x, b AS y FROM p);
            """)
        let b = try folder.copy(a, as: "b.db")
        let writer = try ShellSession(b)
        defer { writer.close() }
        writer.run("""
            PRAGMA wal_autocheckpoint = 0;
            UPDATE p SET a = -a WHERE id % 97 = 0;
            DELETE FROM w WHERE k1 = 7;
            UPDATE m SET y = 'changed' WHERE x % 101 = 0;
            """)
        #expect(((try? FileManager.default.attributesOfItem(atPath: b + "-wal")[.size] as? Int) ?? 0) > 32 * 1024,
                "the changes are in B's -wal")
        try expectSameWithFullScan(a, b)
        let summary = try litectl("diff", "--summary", a, b)
        #expect(summary.status == 1)
        #expect(summary.stdout.contains("m: +29 -29 ~0"), "\(summary.stdout)")
        #expect(summary.stdout.contains("p: +0 -0 ~30"), "\(summary.stdout)")
        #expect(summary.stdout.contains("w: +0 -40 ~0"), "\(summary.stdout)")
        // The same from the other side: A's pages in the -wal, B on disk.
        try expectSameWithFullScan(b, a)
    }
}
