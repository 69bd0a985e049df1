// Open modes and the defensive settings: read-only never creates or writes,
// read-write never creates, and every connection to a user's file runs with
// trusted_schema=OFF, defensive mode and no extension loading.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct ConnectionTests {
    @Test func readOnlyNeverCreatesAMissingFile() throws {
        let folder = try TemporaryFolder("ro")
        for mode in [OpenMode.readOnly, .readWrite] {
            #expect(throws: DatabaseError.self) { try Connection(path: folder.file("missing.db"), mode: mode) }
        }
        #expect(try folder.listing().isEmpty)
        _ = try Connection(path: folder.file("made.db"), mode: .create)
        #expect(try folder.listing() == ["made.db"])
    }

    /// A second connection to a file this process already reads keeps the
    /// first's locks: the file check before opening once opened and closed
    /// the file, and closing any descriptor drops every POSIX lock the
    /// process holds on it, SQLite's SHARED lock included. The application's
    /// last close then got the file to itself, checkpointed past the first
    /// connection's snapshot and deleted the -wal under it (a backup reading
    /// then, or a check, could see pages of two moments).
    @Test func aSecondConnectionKeepsTheFirstsLocks() throws {
        let folder = try TemporaryFolder("second-connection")
        let path = folder.file("app.db")
        try makeDatabase(path, "PRAGMA journal_mode=wal; CREATE TABLE t(v); INSERT INTO t VALUES (1);")
        let reader = try Connection(path: path, mode: .readOnly)
        try reader.execute("BEGIN")
        _ = try reader.scalar("SELECT count(*) FROM t")
        let second = try Connection(path: path, mode: .readOnly)
        _ = try second.scalar("SELECT count(*) FROM t")
        let script = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('INSERT INTO t VALUES (2)'); c.commit(); c.close()"
        let r = try runProcess("/usr/bin/python3", ["-c", script, path])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: path + "-wal"), "the application's last close found the file still open here")
        #expect(try reader.scalar("SELECT count(*) FROM t") == .integer(1), "the reader's snapshot holds")
        try reader.execute("COMMIT")
        #expect(try reader.scalar("SELECT count(*) FROM t") == .integer(2))
        try second.close()
        try reader.close()
    }

    @Test func readOnlyNeverWrites() throws {
        let folder = try TemporaryFolder("ro-write")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let before = try FileFingerprint(db)
        let connection = try Connection(path: db, mode: .readOnly)
        #expect(connection.isReadOnly)
        let error = #expect(throws: DatabaseError.self) { try connection.execute("INSERT INTO t VALUES (2)") }
        #expect(error?.code.primary == .readonly)
        #expect(throws: DatabaseError.self) { try connection.execute("PRAGMA user_version = 7") }
        try connection.close()
        #expect(try FileFingerprint(db) == before)
        #expect(try folder.listing() == ["a.db"], "no -journal left behind")
    }

    @Test func pathsWithURICharactersOpenLiterally() throws {
        let folder = try TemporaryFolder("uri")
        for name in ["a?mode=rwc.db", "b#frag.db", "c%41.db", "d space.db", "é.db"] {
            let db = folder.file(name)
            try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES ('\(name.replacingOccurrences(of: "'", with: "''"))');")
            let connection = try Connection(path: db)
            #expect(try connection.scalar("SELECT x FROM t") == .text(name))
        }
        #expect(try folder.listing().count == 5)
    }

    @Test func defensiveSettingsAreOn() throws {
        let folder = try TemporaryFolder("defensive")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(x);")
        let connection = try Connection(path: db, mode: .readWrite)
        #expect(try connection.scalar("PRAGMA trusted_schema") == .integer(0))
        // Defensive mode: writable_schema cannot be used to edit sqlite_schema.
        try connection.execute("PRAGMA writable_schema = ON")
        #expect(throws: DatabaseError.self) { try connection.execute("UPDATE sqlite_schema SET sql = 'x' WHERE name = 't'") }
        // Extension loading is off.
        let error = #expect(throws: DatabaseError.self) { try connection.execute("SELECT load_extension('/nonexistent')") }
        #expect(error?.message.contains("not authorized") == true)
    }

    @Test func sorterThreadsAreOnePerCoreBeyondTheFirstAndBuildTheSameIndex() throws {
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))  // the oracle: libc, not Foundation
        #expect(Connection.sorterThreads == Int32(max(0, min(cores - 1, 8))))
        let folder = try TemporaryFolder("threads")
        var digests: [[[Value]]] = []
        for threaded in [false, true] {
            let db = folder.file("t\(threaded).db")
            try makeDatabase(db, """
                CREATE TABLE t(k TEXT, v);
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
                INSERT INTO t SELECT printf('%08x', (i * 2654435761) % 4294967296), i FROM n;
                """)
            let connection = try Connection(path: db, mode: .readWrite)
            if threaded { connection.useSorterThreads() }
            #expect(try connection.scalar("PRAGMA threads") == .integer(threaded ? Int64(Connection.sorterThreads) : 0))
            // A small cache makes the sort spill into runs, which the threads sort.
            try connection.execute("PRAGMA cache_size = 20; CREATE INDEX t_k ON t(k, v)")
            #expect(try connection.rows("PRAGMA integrity_check") == [[.text(Array("ok".utf8))]])
            digests.append(try connection.rows("SELECT count(*), sum(rowid * length(k)) FROM (SELECT rowid, k FROM t INDEXED BY t_k ORDER BY k, v LIMIT 1000)"))
            try connection.close()
        }
        #expect(digests[0] == digests[1])
    }

    @Test func aNonDatabaseFailsAtOpen() throws {
        let folder = try TemporaryFolder("notadb")
        let path = folder.file("text.db")
        try String(repeating: "definitely not SQLite\n", count: 50).write(toFile: path, atomically: false, encoding: .utf8)
        let error = #expect(throws: DatabaseError.self) { try Connection(path: path) }
        #expect(error?.code.primary == .notadb)
        #expect(error?.description == "\(path): not a SQLite database (no \"SQLite format 3\" header)")
    }

    @Test func bindsByIndexAndName() throws {
        let connection = try Connection(inMemory: 1000)
        let statement = try connection.prepare("SELECT ?1, :name, @other, $dollar")
        try statement.bind(.integer(7), at: 1)
        try statement.bind(.text("n"), named: ":name")
        try statement.bind(.real(-0.0), named: "@other")
        try statement.bind(.blob([]), named: "$dollar")
        #expect(try statement.step())
        #expect(statement.values() == [.integer(7), .text("n"), .real(-0.0), .blob([])])
        #expect(statement.parameterName(at: 2) == ":name")
        #expect(throws: DatabaseError.self) { try statement.bind(.null, named: ":missing") }
    }

    @Test func scriptsRunStatementByStatement() throws {
        let connection = try Connection(inMemory: 1000)
        try connection.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1); INSERT INTO t SELECT x + 1 FROM t;")
        #expect(try connection.scalar("SELECT sum(x) FROM t") == .integer(3))
        let error = #expect(throws: DatabaseError.self) { try connection.execute("SELECT 1; SELEC 2;") }
        #expect(error?.message.contains("syntax error") == true)
        #expect(error?.sql == "SELEC 2;")
    }

    @Test func closeReportsStatementsLeftOpen() throws {
        let folder = try TemporaryFolder("close")
        let connection = try Connection(path: folder.file("a.db"), mode: .create)
        let statement = try connection.prepare("SELECT 1")
        let error = #expect(throws: DatabaseError.self) { try connection.close() }
        #expect(error?.message.contains("SELECT 1") == true)
        _ = statement
    }
}
