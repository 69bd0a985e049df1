// Every command that only reads leaves a WAL database's folder as it found
// it: SQLite creates -wal and -shm files to read one, and litectl removes them
// when it is the last to close the file — but never while another process has
// the database open.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct ReadOnlyCommandsTests {
    static let commands: [[String]] = [
        ["info", "w.db"], ["query", "w.db", "SELECT * FROM t"], ["query", "--attach", "a=w.db", "SELECT * FROM a.t"],
        ["query", "--each", "w.db", "SELECT count(*) FROM t"], ["tables", "w.db", "--counts"], ["check", "w.db"],
        ["stats", "--format", "csv", "w.db"], ["verify", "w.db"], ["hash", "w.db"], ["diff", "w.db", "w.db"],
    ]

    @Test(arguments: commands)
    func leavesNothingBesideAWALDatabase(arguments: [String]) throws {
        let folder = try TemporaryFolder("ro-wal")
        let db = folder.file("w.db")
        try makeDatabase(db, "PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, x); INSERT INTO t VALUES (1, 'a');")
        #expect(try folder.listing() == ["w.db"])
        let before = try FileFingerprint(db)
        let result = try runProcess(litectlBinary, arguments, currentDirectory: folder.path)
        #expect(result.status != 2 || arguments[0] == "verify", "\(result.stderr)")
        #expect(try folder.listing() == ["w.db"], "\(arguments)")
        #expect(try FileFingerprint(db) == before)
    }

    @Test func neverRemovesFilesAnotherProcessUses() throws {
        let folder = try TemporaryFolder("ro-wal-busy")
        let db = folder.file("w.db")
        try makeDatabase(db, "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        // Another process opens the database after litectl's first read and keeps it open.
        let holder = try ShellSession(db)
        #expect(holder.run("SELECT 'open', count(*) FROM t;").contains("open|1"))
        #expect(try folder.listing() == ["w.db", "w.db-shm", "w.db-wal"])

        let result = try litectl("info", "w.db", in: folder.path)
        #expect(result.status == 0)
        #expect(try folder.listing() == ["w.db", "w.db-shm", "w.db-wal"], "the holder's files stay")

        // The holder still works, and its write is seen.
        #expect(holder.run("INSERT INTO t VALUES (2); SELECT 'n', count(*) FROM t;").contains("n|2"))
        holder.close()
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM t") == "2")
    }

    @Test func theLastConnectionOfTheProcessCleansUp() throws {
        let folder = try TemporaryFolder("ro-wal-two")
        let db = folder.file("w.db")
        try makeDatabase(db, "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let first = try Connection(path: db)
        let second = try Connection(path: db)
        #expect(try first.scalar("SELECT count(*) FROM t") == .integer(1))
        #expect(try second.scalar("SELECT count(*) FROM t") == .integer(1))
        try first.close()
        #expect(try folder.listing() == ["w.db", "w.db-shm", "w.db-wal"], "second still reads")
        #expect(try second.scalar("SELECT count(*) FROM t") == .integer(1))
        try second.close()
        #expect(try folder.listing() == ["w.db"])
    }
}
