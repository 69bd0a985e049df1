// `info` against the sqlite3 shell: every field that a pragma also reports
// must agree, on the real databases in ../shared/corpus/real and on generated
// ones (page sizes 512 and 65536, WAL with pages not yet checkpointed,
// auto_vacuum full and incremental, an empty file).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DatabaseInfoTests {
    /// Asks the sqlite3 shell for the pragmas and counts `info` reports.
    func expectAgreesWithShell(_ db: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let info = try DatabaseInfo.read(path: db)
        let shell = try sqlite3(["-batch", "-separator", "|", db, """
            SELECT (SELECT page_size FROM pragma_page_size), (SELECT page_count FROM pragma_page_count),
                   (SELECT freelist_count FROM pragma_freelist_count), (SELECT schema_version FROM pragma_schema_version),
                   (SELECT user_version FROM pragma_user_version), (SELECT application_id FROM pragma_application_id),
                   (SELECT journal_mode FROM pragma_journal_mode), (SELECT auto_vacuum FROM pragma_auto_vacuum),
                   (SELECT encoding FROM pragma_encoding),
                   (SELECT count(*) FROM sqlite_schema WHERE type = 'table'),
                   (SELECT count(*) FROM sqlite_schema WHERE type = 'index'),
                   (SELECT count(*) FROM sqlite_schema WHERE type = 'view'),
                   (SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'),
                   (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'),
                   (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'sqlite\\_%' ESCAPE '\\'),
                   (SELECT coalesce(sum(length(CAST(sql AS BLOB))), 0) FROM sqlite_schema),
                   (SELECT count(*) FROM pragma_table_list WHERE schema = 'main' AND type = 'shadow'),
                   (SELECT count(*) FROM pragma_table_list WHERE schema = 'main' AND type = 'table'
                      AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\');
            """]).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").map(String.init)
        let autoVacuum = ["none", "full", "incremental"][Int(shell[7])!]
        let counts = info.objects
        let ours = ["\(info.pageSize)", "\(info.pageCount)", "\(info.freelistCount)", "\(info.schemaVersion)",
                    "\(info.userVersion)", "\(info.applicationID)", info.journalMode, info.autoVacuumName, info.encoding,
                    "\(counts.tables + counts.virtualTables + counts.shadowTables + counts.internalTables)",
                    "\(counts.indexes)", "\(counts.views)", "\(counts.triggers)", "\(counts.virtualTables)",
                    "\(counts.internalTables)", "\(info.schemaSQLBytes)", "\(counts.shadowTables)", "\(counts.tables)"]
        var expected = shell
        expected[7] = autoVacuum
        #expect(ours == expected, "\(db)", sourceLocation: sourceLocation)
        #expect(info.fileSize == Int64(try FileManager.default.attributesOfItem(atPath: db)[.size] as! Int))
        if let header = info.header, !info.headerLagsBehind {
            #expect(Int64(header.pageSize) == info.pageSize, sourceLocation: sourceLocation)
            #expect(Int64(header.freelistPageCount) == info.freelistCount, sourceLocation: sourceLocation)
            #expect(Int64(header.schemaCookie) == info.schemaVersion, sourceLocation: sourceLocation)
            #expect(Int64(header.userVersion) == info.userVersion, sourceLocation: sourceLocation)
            #expect(Int64(header.applicationID) == info.applicationID, sourceLocation: sourceLocation)
            #expect(header.autoVacuum == Int(shell[7])!, sourceLocation: sourceLocation)
            #expect(header.textEncodingName == info.encoding, sourceLocation: sourceLocation)
            if header.isPageCountValid { #expect(Int64(header.pageCount) == info.pageCount, sourceLocation: sourceLocation) }
        }
    }

    @Test(.enabled(if: !realDatabases.isEmpty, "../shared/corpus/real is absent"), arguments: realDatabases)
    func agreesWithTheShellOnRealDatabases(source: String) throws {
        let folder = try TemporaryFolder("info-real")
        let db = try folder.copy(source)
        try expectAgreesWithShell(db)
    }

    @Test(arguments: [
        "PRAGMA page_size = 512; CREATE TABLE t(x); INSERT INTO t SELECT randomblob(600) FROM generate_series(1, 50);",
        "PRAGMA page_size = 65536; CREATE TABLE t(x PRIMARY KEY, y) WITHOUT ROWID; INSERT INTO t VALUES (1, 2);",
        "PRAGMA auto_vacuum = FULL; PRAGMA user_version = -5; CREATE TABLE t(x); CREATE VIEW v AS SELECT * FROM t;",
        "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA application_id = 1196444487; CREATE TABLE t(x);",
        "PRAGMA journal_mode = WAL; CREATE TABLE t(x UNIQUE); CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;",
        "PRAGMA encoding = 'UTF-16le'; CREATE TABLE t(x); INSERT INTO t VALUES ('é');",
        "CREATE TABLE t(x); INSERT INTO t SELECT randomblob(5000) FROM generate_series(1, 20); DELETE FROM t WHERE rowid % 2;",
        "CREATE VIRTUAL TABLE f USING fts5(a); CREATE TABLE s(id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO s DEFAULT VALUES;",
    ])
    func agreesWithTheShellOnGeneratedDatabases(script: String) throws {
        let folder = try TemporaryFolder("info-gen")
        let db = folder.file("g.db")
        try makeDatabase(db, script)
        try expectAgreesWithShell(db)
    }

    @Test func anEmptyFileIsAnEmptyDatabase() throws {
        let folder = try TemporaryFolder("info-empty")
        let db = folder.file("empty.db")
        FileManager.default.createFile(atPath: db, contents: Data())
        let info = try DatabaseInfo.read(path: db)
        #expect(info.header == nil)
        #expect(info.pageCount == 0)
        #expect(info.objects == .init())
        #expect(try folder.listing() == ["empty.db"])
    }

    @Test func walPagesNotYetCheckpointedAreCounted() throws {
        let folder = try TemporaryFolder("info-wal")
        let db = folder.file("w.db")
        // A writer that stays open keeps its commits in the -wal.
        let writer = try Connection(path: db, mode: .create)
        try writer.execute("""
            PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
            CREATE TABLE t(x);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30) INSERT INTO t SELECT randomblob(3000) FROM n;
            PRAGMA user_version = 9;
            """)
        // Read from another process, as users do (a second descriptor in this
        // process would drop the writer's POSIX locks).
        let result = try litectl("info", "--json", db)
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["user_version"] as? Int == 9)
        #expect(json["journal_mode"] as? String == "wal")
        #expect((json["wal_size"] as? Int ?? 0) > 30 * 3000)
        #expect(json["header_behind_wal"] as? Bool == true)
        let header = try #require(json["header"] as? [String: Any])
        #expect(header["user_version"] as? Int == 0)
        #expect(json["page_count"] as? Int == Int(try sqlite3Scalar(db, "PRAGMA page_count")))
        try writer.close()
    }

    /// The header fields no pragma reports, judged by what the shell did to the file.
    @Test func headerFieldsWithoutAPragmaFollowTheShellsWrites() throws {
        let folder = try TemporaryFolder("info-header")
        let db = folder.file("h.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t SELECT randomblob(2000) FROM (SELECT 1 UNION SELECT 2 UNION SELECT 3);")
        let first = try #require(try DatabaseInfo.read(path: db).header)
        #expect(first.writeVersion == 1 && first.readVersion == 1, "rollback journal")
        #expect(first.reservedBytes == 0)
        #expect(first.schemaFormat == 4)
        #expect(first.versionValidFor == first.changeCounter)
        #expect(first.sqliteVersion == (try sqlite3(["-version"]).split(separator: " ").first.map(String.init)))
        #expect(first.firstFreelistTrunkPage == 0 && first.freelistPageCount == 0)
        #expect(first.defaultCacheSize == 0)

        try sqlite3(["-batch", db, "INSERT INTO t VALUES (1)"])
        let second = try #require(try DatabaseInfo.read(path: db).header)
        #expect(second.changeCounter == first.changeCounter + 1, "one commit, one increment")

        try sqlite3(["-batch", db, "DELETE FROM t; PRAGMA default_cache_size = 77;"])
        let third = try #require(try DatabaseInfo.read(path: db).header)
        #expect(third.freelistPageCount > 0)
        #expect(third.firstFreelistTrunkPage > 0)
        #expect(third.defaultCacheSize == 77)
        #expect(try sqlite3Scalar(db, "PRAGMA default_cache_size") == "77")

        try sqlite3(["-batch", db, "PRAGMA journal_mode = WAL"])
        let wal = try #require(try DatabaseInfo.read(path: db).header)
        #expect(wal.writeVersion == 2 && wal.readVersion == 2)
    }

    @Test func headerFieldsParseFromBytes() throws {
        var bytes = Array("SQLite format 3\0".utf8) + [UInt8](repeating: 0, count: 84)
        bytes[16] = 0; bytes[17] = 1  // 65536
        bytes[18] = 2; bytes[19] = 2
        bytes[21] = 64; bytes[22] = 32; bytes[23] = 32
        bytes[60...63] = [0xFF, 0xFF, 0xFF, 0xFE]  // user_version -2
        bytes[68...71] = [0x47, 0x50, 0x31, 0x30]  // "GP10"
        bytes[96...99] = [0x00, 0x2E, 0x63, 0x01]  // 3040001
        let header = try DatabaseHeader(bytes: bytes)
        #expect(header.pageSize == 65536)
        #expect(header.userVersion == -2)
        #expect(header.applicationID == 0x47503130)
        #expect(header.sqliteVersion == "3.40.1")
        bytes[16] = 0; bytes[17] = 3
        #expect(throws: DatabaseError.self) { try DatabaseHeader(bytes: bytes) }
        #expect(throws: DatabaseError.self) { try DatabaseHeader(bytes: Array(bytes.prefix(50))) }
    }
}
