// A dump of values over 500 MB (a BLOB and a TEXT), loaded by the sqlite3
// shell and by litectl load with SQLite's default limits: a single literal
// would pass SQLITE_MAX_SQL_LENGTH, so `dump` writes such values in pieces.
// Needs about 4 GB of free disk space (skipped otherwise): the database, two
// copies and the loaders' temporary tables; the script itself goes through pipes.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// Free bytes on the file system of the temporary folder.
func freeDiskSpace(_ path: String = NSTemporaryDirectory()) -> Int64 {
    var info = statvfs()
    guard statvfs(path, &info) == 0 else { return 0 }
    return Int64(info.f_bavail) * Int64(info.f_frsize)
}

@Suite struct DumpLargeValueTests {
    static let enoughSpace = freeDiskSpace() >= 4 << 30

    @Test(.enabled(if: DumpLargeValueTests.enoughSpace, "needs 4 GB of free disk space"))
    func valuesOver500MBLoadIntoTheShellAndLoad() throws {
        let folder = try TemporaryFolder("cli-dump-large")
        let db = folder.file("large.db")
        // 520 MB of random bytes; 520 MB of text, two bytes in each twenty
        // being é, and a NUL and CR LF in it (no single literal could hold it).
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB, s TEXT);
            INSERT INTO t VALUES(1, randomblob(520000000), NULL);
            INSERT INTO t VALUES(2, x'01', 'a' || char(0, 13, 10) || replace(hex(randomblob(260000000)), 'A', 'é') || 'z');
            INSERT INTO t VALUES(3, NULL, 'small');
            """)
        let digest = """
            SELECT group_concat(printf('%d:%s:%d:%s:%s:%d:%s', id, typeof(b), length(b), hex(sha3(b)),
                                       typeof(s), length(CAST(s AS BLOB)), hex(sha3(CAST(s AS BLOB)))), ' ')
            FROM (SELECT * FROM t ORDER BY id)
            """
        let want = try sqlite3Scalar(db, digest)
        #expect(want.hasPrefix("1:blob:520000000:") && want.contains(" 2:blob:1:") && want.contains(":text:552"), "\(want.prefix(300))")
        let wantHash = try litectl("hash", db).stdout.split(separator: " ").first.map(String.init)

        for loader in ["sqlite3", "litectl load"] {
            let copy = folder.file("copy.db")
            let load = loader == "sqlite3" ? "\"$1\" -batch -bail \"$3\"" : "\"$0\" load \"$3\" -"
            let r = try runProcess("/bin/bash", ["-c", "set -o pipefail; \"$0\" dump \"$2\" | " + load,
                                               litectlBinary, sqlite3Binary, db, copy])
            #expect(r.status == 0, "\(loader): \(r.stderr.prefix(400))")
            #expect(try sqlite3Scalar(copy, digest) == want, "\(loader)")
            #expect(try litectl("hash", copy).stdout.split(separator: " ").first.map(String.init) == wantHash, "\(loader)")
            try FileManager.default.removeItem(atPath: copy)
        }
    }
}
