// `litectl info` through the built binary: output for scripts and people, and
// every error a newcomer will hit — one line naming the file and the cause,
// exit status 2, and nothing created or changed on disk.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct InfoCommandTests {
    /// Runs `litectl info ARGS` in `folder` and checks the error contract.
    func expectError(_ arguments: [String], in folder: TemporaryFolder, naming path: String, cause: String,
                     sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = try folder.listing()
        let result = try runProcess(litectlBinary, ["info"] + arguments, currentDirectory: folder.path)
        #expect(result.status == 2, "exit status", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one line: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.hasPrefix("litectl: \(path): "), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(cause), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(try folder.listing() == before, "nothing created", sourceLocation: sourceLocation)
    }

    @Test func missingFile() throws {
        let folder = try TemporaryFolder("cli-missing")
        try expectError(["nope.db"], in: folder, naming: "nope.db", cause: "no such file")
        try expectError(["sub/nope.db"], in: folder, naming: "sub/nope.db", cause: "no such file")
    }

    @Test func directory() throws {
        let folder = try TemporaryFolder("cli-dir")
        try FileManager.default.createDirectory(atPath: folder.file("d.db"), withIntermediateDirectories: false)
        try expectError(["d.db"], in: folder, naming: "d.db", cause: "is a directory")
    }

    @Test func textFileIsNotADatabase() throws {
        let folder = try TemporaryFolder("cli-text")
        try "hello, I am a text file\n".write(toFile: folder.file("notes.txt"), atomically: false, encoding: .utf8)
        let before = try FileFingerprint(folder.file("notes.txt"))
        try expectError(["notes.txt"], in: folder, naming: "notes.txt", cause: "not a SQLite database")
        #expect(try FileFingerprint(folder.file("notes.txt")) == before)
        // Long enough for a header, but not one.
        try String(repeating: "not sqlite ", count: 100).write(toFile: folder.file("long.txt"), atomically: false, encoding: .utf8)
        try expectError(["long.txt"], in: folder, naming: "long.txt", cause: "not a SQLite database")
    }

    @Test func corruptHeader() throws {
        let folder = try TemporaryFolder("cli-corrupt")
        let db = folder.file("c.db")
        try makeDatabase(db, "CREATE TABLE t(x);")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: db))
        bytes[16] = 0; bytes[17] = 3  // page size 3
        try bytes.write(to: URL(fileURLWithPath: db))
        let before = try FileFingerprint(db)
        try expectError(["c.db"], in: folder, naming: "c.db", cause: "corrupt database header")
        #expect(try FileFingerprint(db) == before)

        // A header whose b-tree page 1 is garbage: SQLite's own verdict, still one line.
        let db2 = folder.file("c2.db")
        try makeDatabase(db2, "CREATE TABLE t(x);")
        var bytes2 = try Data(contentsOf: URL(fileURLWithPath: db2))
        for i in 100..<200 { bytes2[i] = 0xFF }
        try bytes2.write(to: URL(fileURLWithPath: db2))
        try expectError(["c2.db"], in: folder, naming: "c2.db", cause: "malformed")
    }

    @Test func unreadableFile() throws {
        let folder = try TemporaryFolder("cli-unreadable")
        chmod(folder.path, 0o755)
        let db = folder.file("secret.db")
        try makeDatabase(db, "CREATE TABLE t(x);")
        chmod(db, 0o000)
        let before = try folder.listing()
        // root reads anything: run the binary as nobody when we are root.
        let result = getuid() == 0
            ? try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", litectlBinary, "info", db])
            : try runProcess(litectlBinary, ["info", db])
        #expect(result.status == 2)
        #expect(result.stderr == "litectl: \(db): permission denied (file is not readable)\n")
        #expect(try folder.listing() == before)
    }

    @Test func lockedByAnotherProcess() throws {
        let folder = try TemporaryFolder("cli-locked")
        let db = folder.file("busy.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        // Another process takes an EXCLUSIVE lock and holds it while its stdin is open.
        let holder = try ShellSession(db)
        #expect(holder.run("BEGIN EXCLUSIVE; INSERT INTO t VALUES (2); SELECT 'locked';").contains("locked"))
        defer { holder.close() }

        let started = Date()
        try expectError(["--busy-timeout", "300", "busy.db"], in: folder, naming: "busy.db",
                        cause: "database is locked by another process (gave up after waiting ")
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= 0.3 && waited < 4, "waited for the busy timeout, not the default 5 s: \(waited)")
    }

    @Test func walDatabaseInAReadOnlyFolder() throws {
        let folder = try TemporaryFolder("cli-wal-ro")
        let db = folder.file("w.db")
        try makeDatabase(db, "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        #expect(try folder.listing() == ["w.db"], "the shell removed its -wal on close")
        let before = try FileFingerprint(db)
        // A folder this process may not write: as nobody when we are root, else mode 555.
        let result: ProcessResult
        if getuid() == 0 {
            chmod(folder.path, 0o755)
            result = try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups",
                                                         litectlBinary, "info", "--json", db])
        } else {
            chmod(folder.path, 0o555)
            result = try litectl("info", "--json", db)
            chmod(folder.path, 0o755)
        }
        #expect(result.status == 0, "\(result.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(json["journal_mode"] as? String == "wal")
        #expect((json["objects"] as? [String: Any])?["tables"] as? Int == 1)
        #expect(try folder.listing() == ["w.db"])
        #expect(try FileFingerprint(db) == before)
    }

    @Test func walDatabaseIsNeverWritten() throws {
        let folder = try TemporaryFolder("cli-wal")
        let db = folder.file("w.db")
        try makeDatabase(db, "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let before = try FileFingerprint(db)
        let result = try litectl("info", db)
        #expect(result.status == 0)
        #expect(try FileFingerprint(db) == before)
        // SQLite makes a -wal and -shm to read; litectl removes them again.
        #expect(try folder.listing() == ["w.db"])
    }

    @Test func oneBadFileDoesNotHideTheOthers() throws {
        let folder = try TemporaryFolder("cli-mixed")
        try makeDatabase(folder.file("a.db"), "CREATE TABLE t(x);")
        let result = try litectl("info", "--json", "a.db", "missing.db", "a.db", in: folder.path)
        #expect(result.status == 2)
        #expect(result.stdout.split(separator: "\n").count == 2)
        #expect(result.stderr == "litectl: missing.db: no such file\n")
    }

    @Test func jsonHasStableKeysInOrder() throws {
        let folder = try TemporaryFolder("cli-json")
        try makeDatabase(folder.file("a.db"), "PRAGMA user_version = 42; CREATE TABLE t(x);")
        let result = try litectl("info", "--json", "a.db", in: folder.path)
        #expect(result.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["user_version"] as? Int == 42)
        let keys = ["path", "file_size", "wal_size", "page_size", "page_count", "freelist_count", "schema_version",
                    "user_version", "application_id", "journal_mode", "auto_vacuum", "encoding", "objects",
                    "schema_sql_bytes", "header", "header_behind_wal", "sqlite_library_version"]
        var cursor = result.stdout.startIndex
        for key in keys {
            let range = try #require(result.stdout.range(of: "\"\(key)\":", range: cursor..<result.stdout.endIndex), "\(key) in order")
            cursor = range.upperBound
        }
    }

    @Test func textReportMatchesTheGoldenFile() throws {
        let folder = try TemporaryFolder("cli-golden")
        let paths = try SampleDatabases.create(in: folder.path)
        _ = paths
        let result = try litectl("info", "archive.db", in: folder.path)
        #expect(result.status == 0)
        let golden = try String(contentsOfFile: packageRoot + "/Tests/LitectlCLITests/Golden/info-archive.txt", encoding: .utf8)
        #expect(result.stdout == golden)
    }

    @Test func usageErrorsAreArgumentParsers() throws {
        let result = try litectl("info")
        #expect(result.status == 64)
        #expect(result.stderr.contains("Missing expected argument"))
    }
}
