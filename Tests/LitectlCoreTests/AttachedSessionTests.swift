// AttachedSession and FanOutQuery: attaching by bound URI (read-only, never
// creating), alias rules, listing and detaching after queries, the attach
// limit, refused writes, parameters, and fan-out in path order.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct AttachedSessionTests {
    func makeShard(_ folder: TemporaryFolder, _ name: String, _ value: Int) throws -> String {
        let path = folder.file(name)
        try makeDatabase(path, "CREATE TABLE t(x); INSERT INTO t VALUES (\(value));")
        return path
    }

    @Test func attachListQueryDetach() throws {
        let folder = try TemporaryFolder("session")
        let a = try makeShard(folder, "a.db", 1)
        let b = try makeShard(folder, "b?x=1#y%20.db", 2)
        let session = try AttachedSession(mainPath: a)
        try session.attach(b, as: "other")
        let list = try session.databases()
        #expect(list.map(\.name) == ["main", "other"])
        // The paths as given, and SQLite's absolute file name with ?, # and % kept literally.
        #expect(list.map(\.givenPath) == [a, b])
        #expect(list[1].file.hasSuffix("b?x=1#y%20.db"))
        var sums: [Value] = []
        try session.run("SELECT (SELECT x FROM main.t) + (SELECT x FROM other.t) AS s") { result in
            #expect(result.columns == ["s"])
            try result.forEachRow { sums.append($0.value(at: 0)) }
        }
        #expect(sums == [.integer(3)])
        // Detach after a query (its statement is finalized), then the alias is gone.
        try session.detach("other")
        #expect(try session.databases().map(\.name) == ["main"])
        let error = #expect(throws: DatabaseError.self) { try session.run("SELECT * FROM other.t") { _ in } }
        #expect(error?.message.contains("no such table: other.t") == true)
        // And it can be attached again under another alias.
        try session.attach(b, as: "again")
        #expect(try session.databases().map(\.name) == ["main", "again"])
    }

    @Test func inMemoryMainAttachesReadOnly() throws {
        let folder = try TemporaryFolder("session-mem")
        let a = try makeShard(folder, "a.db", 5)
        let before = try FileFingerprint(a)
        let session = try AttachedSession(mainPath: nil)
        try session.attach(a, as: "a")
        let error = #expect(throws: DatabaseError.self) { try session.run("INSERT INTO a.t VALUES (6)") { _ in } }
        #expect(error?.message.contains("--write") == true)
        // The mode=ro backstop: even a statement SQLite calls read-only cannot write the file.
        #expect(throws: DatabaseError.self) { try session.connection.execute("INSERT INTO a.t VALUES (6)") }
        #expect(try FileFingerprint(a) == before)
        #expect(try folder.listing() == ["a.db"])
    }

    @Test func aliasRulesAndMissingFiles() throws {
        let folder = try TemporaryFolder("session-alias")
        let a = try makeShard(folder, "a.db", 1)
        let session = try AttachedSession(mainPath: nil)
        for bad in ["", "main", "MAIN", "temp", "Temp", "1a", "a-b", "a b", "a.b", "\"x\""] {
            #expect(throws: DatabaseError.self, "\(bad)") { try session.attach(a, as: bad) }
        }
        for good in ["_", "a1", "Staging_2"] { try session.attach(a, as: good) }
        #expect(throws: DatabaseError.self) { try session.attach(a, as: "STAGING_2") }
        let missing = #expect(throws: DatabaseError.self) { try session.attach(folder.file("nope.db"), as: "n") }
        #expect(missing?.description == "\(folder.file("nope.db")): no such file")
        #expect(try folder.listing() == ["a.db"], "nothing created")
    }

    @Test func attachLimitMatchesTheLibrary() throws {
        let folder = try TemporaryFolder("session-limit")
        let a = try makeShard(folder, "a.db", 1)
        let session = try AttachedSession(mainPath: nil)
        let oracle = try sqlite3([":memory:"], input: ".limit attached\n")
        #expect(oracle.contains(" \(session.attachLimit)"))
        for i in 0..<session.attachLimit { try session.attach(a, as: "s\(i)") }
        let error = #expect(throws: DatabaseError.self) { try session.attach(a, as: "past") }
        #expect(error?.message.contains("at most \(session.attachLimit)") == true)
        try session.detach("s0")
        try session.attach(a, as: "past")
    }

    @Test func parameterTyping() {
        #expect(QueryParameters.parse("42") == .integer(42))
        #expect(QueryParameters.parse("-9223372036854775808") == .integer(.min))
        #expect(QueryParameters.parse("0.1") == .real(0.1))
        #expect(QueryParameters.parse("1e3") == .real(1000))
        #expect(QueryParameters.parse("42", forceText: true) == .text("42"))
        for text in ["inf", "nan", "0x10", "", " 1", "1,5", "abc", "1e999"] {
            #expect(QueryParameters.parse(text) == .text(text), "\(text)")
        }
    }

    @Test func fanOutInPathOrderWithFailures() throws {
        let folder = try TemporaryFolder("fanout")
        var paths: [String] = []
        for i in [3, 1, 2] { paths.append(try makeShard(folder, "s\(i).db", i * 10)) }
        try makeDatabase(folder.file("odd.db"), "CREATE TABLE t(x, y);")
        let expanded = FanOutQuery.expand([folder.file("s*.db"), folder.file("s1.db"), folder.file("odd.db"), folder.file("z*.db")])
        #expect(expanded.paths == ["odd.db", "s1.db", "s2.db", "s3.db"].map(folder.file))
        #expect(expanded.unmatched == [folder.file("z*.db")])
        let sink = MemorySink()
        var failed: [String] = []
        let failures = try FanOutQuery.run(paths: expanded.paths + [folder.file("missing.db")],
                                           script: "SELECT x * :m AS v FROM t; SELECT 'two' AS w",
                                           parameters: QueryParameters(["m": .integer(2)]), jobs: 2,
                                           into: RowWriter(format: .csv, sink: sink),
                                           onFailure: { path, _ in failed.append(path) })
        #expect(failures == 1 && failed == [folder.file("missing.db")])
        let s = ["s1.db", "s2.db", "s3.db"].map(folder.file)
        #expect(sink.text == "db,v\r\n\(s[0]),20\r\n\(s[1]),40\r\n\(s[2]),60\r\n"
                + "db,w\r\n\(folder.file("odd.db")),two\r\n\(s[0]),two\r\n\(s[1]),two\r\n\(s[2]),two\r\n")
    }
}
