// PageVFS's names: a path string bound to a page source (a moment reference)
// opens that source wherever the core takes a database path (Connection,
// ATTACH, info, hash, check), reads exactly what the file reads, refuses any
// write, and a `repo:` name nobody bound is one clear error, never a file.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct PageVFSNamesTests {
    /// A database with a rowid table, a WITHOUT ROWID table and an index, in WAL mode.
    func sample(_ folder: TemporaryFolder, _ name: String = "a.db") throws -> String {
        let path = folder.file(name)
        try makeDatabase(path, """
            PRAGMA page_size=1024;
            CREATE TABLE t(a INTEGER PRIMARY KEY, b, c TEXT);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<1500)
            INSERT INTO t SELECT i, CASE i%4 WHEN 0 THEN NULL WHEN 1 THEN i*1.5 WHEN 2 THEN randomblob(i%300) ELSE 'x'||i END,
                                 printf('%.*c', i%900, 'y') FROM n;
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            INSERT INTO w SELECT 'k'||a, b FROM t WHERE a%7=0;
            CREATE INDEX tb ON t(b);
            PRAGMA journal_mode=WAL;
            """)
        return path
    }

    /// A fresh name of the moment form, bound to `path`'s pages.
    func bound(_ path: String) throws -> (name: String, registration: PageVFS.Registration) {
        let name = "repo:a.db@test-\(UUID().uuidString)"
        let registration = PageVFS.register(try FilePages(path), label: name)
        PageVFS.bind(registration, as: name)
        return (name, registration)
    }

    @Test func aBoundNameOpensTheSourceWhereverAPathIsTaken() throws {
        let folder = try TemporaryFolder("pagevfs-names")
        let path = try sample(folder)
        let (name, _) = try bound(path)
        defer { PageVFS.unbind(name) }

        let moment = try Connection(path: name, mode: .readOnly)
        let file = try Connection(path: path, mode: .readOnly)
        let sql = "SELECT a, quote(b), c FROM t ORDER BY a"
        #expect(try moment.rows(sql) == file.rows(sql))
        #expect(moment.path == name)
        #expect(try moment.journalMode() == "wal")
        try moment.close(); try file.close()

        // info: the same report, but for the path.
        var fromMoment = try DatabaseInfo.read(path: name)
        let fromFile = try DatabaseInfo.read(path: path)
        #expect(fromMoment.path == name)
        #expect(fromMoment.walSize == nil)
        fromMoment.path = fromFile.path
        fromMoment.walSize = fromFile.walSize
        #expect(fromMoment.json.compact == fromFile.json.compact)

        // hash and check.
        #expect(try ContentHasher.hash(path: name).digest == ContentHasher.hash(path: path).digest)
        let report = DatabaseCheck.check(path: name)
        #expect(report.failure == nil, "\(String(describing: report.failure))")
        #expect(report.findings.filter { $0.severity == .error }.isEmpty, "\(report.findings)")

        // ATTACH: a moment joined with a live file.
        let session = try AttachedSession(mainPath: path)
        try session.attach(name, as: "old")
        #expect(try session.connection.scalar("SELECT count(*) FROM t JOIN old.t AS o USING (a) WHERE t.c = o.c") == .integer(1500))
        #expect(try session.databases().first { $0.name == "old" }?.givenPath == name)
        #expect(throws: DatabaseError.self) { try session.connection.execute("INSERT INTO old.w VALUES ('z', 1)") }
        // Nothing was made for the moment (the live file's -wal and -shm go with its connection).
        try session.connection.close()
        #expect(try folder.listing() == ["a.db"])
    }

    @Test func writesToANameAreRefused() throws {
        let folder = try TemporaryFolder("pagevfs-names-ro")
        let path = try sample(folder)
        let (name, _) = try bound(path)
        defer { PageVFS.unbind(name) }
        for mode in [OpenMode.readWrite, .create] {
            do {
                _ = try Connection(path: name, mode: mode)
                Issue.record("\(mode): opened for writing")
            } catch let error as DatabaseError {
                #expect(error.code.primary == .readonly)
                #expect(error.description.contains("read-only"), "\(error)")
            }
        }
        let writable = try AttachedSession(mainPath: nil, writable: true)
        try writable.attach(name, as: "old")
        #expect(throws: DatabaseError.self) { try writable.connection.execute("DELETE FROM old.t") }
        #expect(try Connection(path: path).scalar("SELECT count(*) FROM t") == .integer(1500))
    }

    @Test func anUnboundReferenceIsOneClearErrorAndNoFile() throws {
        let name = "repo:never-opened.db@latest"
        #expect(!PageVFS.namesSource("./" + name))
        #expect(PageVFS.namesSource(name))
        for open in [{ _ = try Connection(path: name) }, { _ = try DatabaseInfo.read(path: name) },
                     { _ = try ContentHasher.hash(path: name) },
                     { try AttachedSession(mainPath: nil).attach(name, as: "x") }] {
            do {
                try open()
                Issue.record("opened an unbound moment")
            } catch {
                #expect("\(error)".contains("\(name): a moment of a repository that was not opened"), "\(error)")
            }
        }
        #expect(FileCheck.size(of: name) == nil)
        #expect(FileCheck.size(of: name + "-wal") == nil)
        #expect(!FileManager.default.fileExists(atPath: name))
    }

    @Test func theNameWinsOverTheLabelAndUnbindingForgetsIt() throws {
        let folder = try TemporaryFolder("pagevfs-names-unbind")
        let path = try sample(folder)
        let (name, registration) = try bound(path)
        #expect(FileCheck.size(of: name) == Int64(registration.source.pageSize * registration.source.pageCount))
        #expect(FileCheck.size(of: name + "-wal") == nil)
        #expect(try FileCheck.readPrefix(of: name, count: 16) == FileCheck.magic)
        PageVFS.unbind(name)
        #expect(throws: DatabaseError.self) { _ = try Connection(path: name) }
    }
}
