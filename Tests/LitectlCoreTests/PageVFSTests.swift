// PageVFS: a database served page by page from a Swift source reads exactly
// as the file does in the sqlite3 shell (every table of the real corpus and
// generated ones, by the quoted text of every value), a page the source
// cannot vouch for fails the read naming it, never rows from zeros, and
// nothing can write through it.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

/// The pages of a file on disk, read with pread; `bad` pages fail, and
/// `reads` counts each page handed out.
final class FilePages: ImagePages, @unchecked Sendable {
    let bytes: [UInt8]
    let pageSize: Int
    var pageCount: Int { bytes.count / pageSize }
    let bad: Set<Int>
    let lock = NSLock()
    var reads: [Int: Int] = [:]

    init(_ path: String, bad: Set<Int> = []) throws {
        bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let raw = Int(bytes[16]) << 8 | Int(bytes[17])
        pageSize = raw == 1 ? 65536 : raw
        self.bad = bad
    }

    struct Mismatch: Error, CustomStringConvertible { var description: String { "its blob does not hash to its page id" } }

    func page(_ number: Int) throws -> [UInt8] {
        lock.lock(); reads[number, default: 0] += 1; lock.unlock()
        if bad.contains(number) { throw Mismatch() }
        return Array(bytes[(number - 1) * pageSize..<number * pageSize])
    }
}

@Suite struct PageVFSTests {
    /// Every value of every table, as `quote()` writes it, one row a line:
    /// through `connection`, and through the sqlite3 shell on `path`.
    func contents(_ connection: Connection) throws -> String {
        var out = ""
        let tables = try connection.rows("SELECT name FROM sqlite_schema WHERE type='table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")
        for table in tables {
            guard case .text(let nameBytes) = table[0] else { continue }
            let name = String(decoding: nameBytes, as: UTF8.self)
            let sql = try selectQuoted(connection, name)
            out += "-- \(name)\n"
            for row in try connection.rows(sql) {
                out += row.map { value -> String in
                    if case .text(let b) = value { return String(decoding: b, as: UTF8.self) }
                    return "?"
                }.joined(separator: "|") + "\n"
            }
        }
        return out
    }

    func selectQuoted(_ connection: Connection, _ table: String) throws -> String {
        let quotedName = "\"" + table.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        let columns = try connection.rows("SELECT name FROM pragma_table_info(?)", [.text(Array(table.utf8))]).compactMap { row -> String? in
            guard case .text(let b) = row[0] else { return nil }
            return "quote(\"" + String(decoding: b, as: UTF8.self).replacingOccurrences(of: "\"", with: "\"\"") + "\")"
        }
        return "SELECT \(columns.isEmpty ? "1" : columns.joined(separator: ",")) FROM \(quotedName) ORDER BY \(columns.isEmpty ? "1" : columns.joined(separator: ","))"
    }

    func shellContents(_ path: String, using connection: Connection) throws -> String {
        var out = ""
        let tables = try connection.rows("SELECT name FROM sqlite_schema WHERE type='table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")
        for table in tables {
            guard case .text(let nameBytes) = table[0] else { continue }
            let name = String(decoding: nameBytes, as: UTF8.self)
            out += "-- \(name)\n"
            out += try sqlite3(["-batch", "-list", "-separator", "|", "-noheader", path, try selectQuoted(connection, name)])
        }
        return out
    }

    @Test func readsEveryDatabaseAsTheShellReadsTheFile() throws {
        let folder = try TemporaryFolder("pagevfs")
        let generated = folder.file("gen.db")
        try makeDatabase(generated, """
            PRAGMA page_size=1024;
            CREATE TABLE t(a INTEGER PRIMARY KEY, b, c TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<3000)
            INSERT INTO t SELECT i, CASE i%5 WHEN 0 THEN NULL WHEN 1 THEN i*1.5 WHEN 2 THEN randomblob(i%700) WHEN 3 THEN 'x'||i ELSE -i END,
                                 printf('%.*c', i%3000, 'y') FROM n;
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            INSERT INTO w SELECT 'k'||a, b FROM t WHERE a%7=0;
            CREATE INDEX tb ON t(b);
            PRAGMA journal_mode=WAL;
            """)
        for path in realDatabases + [generated] {
            let source = try FilePages(path)
            let registration = PageVFS.register(source, label: "pages of \(path)")
            let connection = try Connection(pages: registration)
            #expect(try connection.scalar("PRAGMA integrity_check") == .text(Array("ok".utf8)), "\(path)")
            let through = try contents(connection)
            let direct = try shellContents(path, using: connection)
            #expect(through == direct, "\(path): the pages read otherwise than the file")
            #expect(through.count > 100, "\(path)")
        }
    }

    @Test func aPageTheSourceCannotVouchForFailsTheReadNamingIt() throws {
        let folder = try TemporaryFolder("pagevfs-bad")
        let path = folder.file("a.db")
        try makeDatabase(path, """
            PRAGMA page_size=512;
            CREATE TABLE t(a INTEGER PRIMARY KEY, b);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<2000) INSERT INTO t SELECT i, 'row '||i FROM n;
            """)
        let pages = try FilePages(path).pageCount
        let leaf = pages - 1
        let source = try FilePages(path, bad: [leaf])
        let connection = try Connection(pages: PageVFS.register(source, label: "repo:a.db@latest"))
        // Rows before the bad page come back; the scan then fails naming it.
        var caught: (any Error)?
        do { _ = try connection.rows("SELECT sum(length(b)) FROM t") } catch { caught = error }
        let words = "\(caught.map { "\($0)" } ?? "no error")"
        #expect(words.contains("repo:a.db@latest: page \(leaf): its blob does not hash to its page id"), "\(words)")
        // The next read of a good page works.
        #expect(try connection.scalar("SELECT b FROM t WHERE a=1") == .text(Array("row 1".utf8)))
    }

    @Test func nothingWritesThroughIt() throws {
        let folder = try TemporaryFolder("pagevfs-ro")
        let path = folder.file("a.db")
        try makeDatabase(path, "CREATE TABLE t(a); INSERT INTO t VALUES (1);")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let source = try FilePages(path)
        let registration = PageVFS.register(source, label: "moment")
        let connection = try Connection(pages: registration)
        for sql in ["INSERT INTO t VALUES (2)", "DELETE FROM t", "DROP TABLE t", "CREATE TABLE u(b)", "VACUUM", "PRAGMA user_version=3"] {
            #expect(throws: DatabaseError.self, "\(sql)") { try connection.execute(sql) }
        }
        // (Asking for WAL mode answers the mode it is in, and changes nothing.)
        _ = try? connection.execute("PRAGMA journal_mode=WAL")
        #expect(try connection.scalar("SELECT count(*) FROM t") == .integer(1))
        // A sort that spills to a temporary file works (the default VFS's own).
        #expect(try connection.scalar("SELECT count(*) FROM (SELECT a FROM t ORDER BY random())") == .integer(1))
        // Attached by its URI to another connection, read-only there too.
        let memory = try Connection(inMemory: Connection.defaultBusyTimeout)
        memory.keep(registration)
        try memory.execute("ATTACH '\(registration.uri)' AS old")
        #expect(try memory.scalar("SELECT count(*) FROM old.t") == .integer(1))
        #expect(throws: DatabaseError.self) { try memory.execute("INSERT INTO old.t VALUES (9)") }
        // A name no source holds cannot be opened, and nothing appeared on disk.
        #expect(throws: DatabaseError.self) { try memory.execute("ATTACH 'file:/litectl-pages/999999?vfs=litectl-pages&mode=ro' AS nothing") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(!FileManager.default.fileExists(atPath: "/" + PageVFS.name))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["a.db"])
    }
}
