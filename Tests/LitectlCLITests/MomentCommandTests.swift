// Moments of a repository (`repo:NAME@WHEN`, docs/moments.md) as the
// database of every read command, through the built binary, over a folder
// repository and moto's S3 server. The oracle is the same command run on
// `restore --at` of the same moment (and the sqlite3 shell on that file):
// the outputs must be equal but for the path. Writers refuse a moment (64),
// a reference that cannot be opened is one line (64 for its syntax, 2 for
// what the repository says), a read writes no file anywhere (the folder is
// listed before and after, with hostile files named like the moment and its
// -journal/-wal in it), and `query --follow` prints a new result once a new
// commit is replicated.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// A repository holding two states of app.db (two snapshots a second and
/// more apart), each also restored to a file: the oracle.
struct MomentFixture {
    let folder: TemporaryFolder
    let repo: TestRepo
    /// The app's live file (the second state, and more changes after it: see `init`).
    let live: String
    /// Moments and the file `restore --at` wrote for each.
    let first: (reference: String, file: String)
    let second: (reference: String, file: String)

    var options: [String] { ["--repo", repo.url] + repo.options }

    init?(_ place: RepoPlace, _ label: String) throws {
        folder = try TemporaryFolder(label)
        guard let repo = try TestRepo.make(place, in: folder) else { return nil }
        self.repo = repo
        live = folder.file("app.db")
        try makeDatabase(live, """
            PRAGMA journal_mode=wal;
            CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
            CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER REFERENCES customer(id), status TEXT, amount REAL, data BLOB);
            CREATE INDEX orders_status ON orders(status);
            CREATE TABLE tag(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<200) INSERT INTO customer SELECT i, 'customer ' || i FROM r;
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<3000)
            INSERT INTO orders SELECT i, 1 + i % 200, CASE i % 3 WHEN 0 THEN 'new' WHEN 1 THEN 'paid' ELSE 'sent' END, i * 0.1, randomblob(i % 200) FROM r;
            INSERT INTO tag VALUES ('a', 1), ('b', 2.5), ('c', NULL), ('d', x'00ff');
            INSERT INTO orders VALUES (9999, 4242, 'orphan', 1.0, NULL);
            """)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        #expect(try runLitectl(["backup", live] + ["--repo", repo.url] + repo.options).status == 0)
        let between = Date().timeIntervalSince1970 + 0.5
        Thread.sleep(forTimeInterval: 1.2)
        try makeDatabase(live, """
            UPDATE orders SET status = 'refunded', amount = -amount WHERE id % 97 = 0;
            DELETE FROM orders WHERE id BETWEEN 100 AND 180;
            INSERT INTO orders VALUES (5000, 7, 'new', 3.25, x'0102');
            UPDATE tag SET v = 'changed' WHERE k = 'a';
            CREATE TABLE note(id INTEGER PRIMARY KEY, body TEXT);
            INSERT INTO note VALUES (1, 'second state');
            """)
        #expect(try runLitectl(["backup", live] + ["--repo", repo.url] + repo.options).status == 0)
        first = ("repo:app.db@\(String(format: "%.3f", between))", folder.file("first.db"))
        second = ("repo:app.db@latest", folder.file("second.db"))
        for (when, file) in [(String(format: "%.3f", between), first.file), ("latest", second.file)] {
            var arguments = ["restore", "latest", "--db", "app.db", file] + ["--repo", repo.url] + repo.options
            if when != "latest" { arguments += ["--at", when] }
            let r = try runLitectl(arguments)
            #expect(r.status == 0, "\(r.stderr)")
        }
        // The live file moves on: a moment is not the file.
        try makeDatabase(live, "UPDATE orders SET status = 'live' WHERE id = 1;")
    }

    /// Runs litectl in `folder` (the fixture's, by default) with the repository options.
    func run(_ arguments: [String], in cwd: String? = nil) throws -> ProcessResult {
        try runLitectlIn(cwd ?? folder.path, arguments + options)
    }
}

/// Runs litectl with S3 test credentials in `cwd`.
func runLitectlIn(_ cwd: String, _ arguments: [String]) throws -> ProcessResult {
    let env = ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"]
    return try runProcess("/usr/bin/env", env.map { "\($0)=\($1)" } + [litectlBinary] + arguments, currentDirectory: cwd)
}

@Suite(.serialized) struct MomentCommandTests {
    /// `command` on a moment and on its restored file give the same output
    /// (the path replaced) and the same exit status. `build` makes the
    /// arguments from the database argument(s).
    func expectSame(_ fixture: MomentFixture, _ build: ([String]) -> [String], moments: [(reference: String, file: String)],
                    expectStatus: Int32 = 0, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let onMoment = try fixture.run(build(moments.map(\.reference)))
        let onFile = try runLitectlIn(fixture.folder.path, build(moments.map(\.file)))
        #expect(onMoment.status == expectStatus, "\(onMoment.stderr)", sourceLocation: sourceLocation)
        #expect(onFile.status == expectStatus, "\(onFile.stderr)", sourceLocation: sourceLocation)
        var expected = onFile.stdout
        for moment in moments { expected = expected.replacingOccurrences(of: moment.file, with: moment.reference) }
        #expect(onMoment.stdout == expected, sourceLocation: sourceLocation)
        #expect(onMoment.stdout.count > 10, "\(onMoment.stdout)", sourceLocation: sourceLocation)
        return onMoment.stdout
    }

    static let rowsSQL = "SELECT id, customer, status, quote(amount), hex(data) FROM orders ORDER BY id"

    @Test(arguments: RepoPlace.allCases)
    func queryReadsTheMomentAsTheRestoredFile(_ place: RepoPlace) throws {
        guard let f = try MomentFixture(place, "moment-query") else { return }
        for moment in [f.first, f.second] {
            let out = try expectSame(f, { ["query", $0[0], Self.rowsSQL, "--format", "tsv", "--no-headers"] }, moments: [moment])
            // The sqlite3 shell on the restored file, the independent oracle.
            #expect(out == (try sqlite3(["-batch", "-tabs", moment.file, Self.rowsSQL])))
        }
        // The two moments differ, as the states did; the live file is neither.
        let a = try f.run(["query", f.first.reference, "SELECT count(*) FROM orders", "--format", "tsv", "--no-headers"])
        let b = try f.run(["query", f.second.reference, "SELECT count(*) FROM orders", "--format", "tsv", "--no-headers"])
        #expect(a.stdout == "3001\n" && b.stdout == "2921\n", "\(a.stdout) \(b.stdout) \(a.stderr) \(b.stderr)")
        let live = try f.run(["query", f.second.reference, "SELECT status FROM orders WHERE id = 1", "--format", "tsv", "--no-headers"])
        #expect(live.stdout == "paid\n")
    }

    @Test(arguments: RepoPlace.allCases)
    func diffTakesAMomentOnEitherOrBothSides(_ place: RepoPlace) throws {
        guard let f = try MomentFixture(place, "moment-diff") else { return }
        // Both sides moments: exit 1 (they differ), the same report as the restored files'.
        let both = try expectSame(f, { ["diff", $0[0], $0[1]] }, moments: [f.first, f.second], expectStatus: 1)
        #expect(both.contains("refunded"))
        _ = try expectSame(f, { ["diff", "--format", "sql", $0[0], $0[1]] }, moments: [f.first, f.second], expectStatus: 1)
        // A moment against a file, each way.
        _ = try expectSame(f, { ["diff", "--summary", $0[0], f.live] }, moments: [f.first], expectStatus: 1)
        _ = try expectSame(f, { ["diff", "--json", f.live, $0[0]] }, moments: [f.second], expectStatus: 1)
        // A moment against the file restored from it: identical.
        let same = try f.run(["diff", f.second.reference, f.second.file])
        #expect(same.status == 0 && same.stdout.isEmpty, "\(same.stdout) \(same.stderr)")
        // The SQL patch from moment to moment, applied by sqlite3 to the first restored file, gives the second.
        let patch = try f.run(["diff", "--format", "sql", f.first.reference, f.second.reference])
        let copy = try f.folder.copy(f.first.file, as: "patched.db")
        _ = try sqlite3(["-batch", copy], input: patch.stdout)
        #expect(try runLitectl(["diff", copy, f.second.file]).status == 0)
    }

    @Test(arguments: RepoPlace.allCases)
    func checkFindsWhatTheRestoredFileHas(_ place: RepoPlace) throws {
        guard let f = try MomentFixture(place, "moment-check") else { return }
        // The orphan order fails foreign_key_check, in the moment as in the file.
        let out = try expectSame(f, { ["check", "--format", "csv", $0[0]] }, moments: [f.second], expectStatus: 1)
        #expect(out.contains("foreign"), "\(out)")
        #expect(try sqlite3Scalar(f.second.file, "PRAGMA integrity_check") == "ok")
        _ = try expectSame(f, { ["check", "--format", "csv", "--skip", "foreign-key", "--quick", $0[0]] }, moments: [f.first], expectStatus: 0)
    }

    @Test func tablesInfoHashStatsDumpAnalyzeTakeAMoment() throws {
        guard let f = try MomentFixture(.folder, "moment-read") else { return }
        for moment in [f.first, f.second] {
            _ = try expectSame(f, { ["tables", "--counts", "--columns", "--format", "csv", $0[0]] }, moments: [moment])
            _ = try expectSame(f, { ["hash", "--per-table", $0[0]] }, moments: [moment])
            _ = try expectSame(f, { ["stats", "--format", "csv", $0[0]] }, moments: [moment])
            _ = try expectSame(f, { ["dump", $0[0]] }, moments: [moment])
            _ = try expectSame(f, { ["dump", "--table", "tag", "--data-only", $0[0]] }, moments: [moment])
            _ = try expectSame(f, { ["analyze", "--dry-run", "--format", "csv", $0[0]] }, moments: [moment])
            // info: the same facts; no -wal for a moment (the restored file has none either before it is opened).
            _ = try expectSame(f, { ["info", "--json", $0[0]] }, moments: [moment])
        }
        // hash agrees with the restored file's sqlite3-independent oracle: dump | sqlite3 rebuilds it.
        let dump = try f.run(["dump", f.first.reference])
        let rebuilt = f.folder.file("rebuilt.db")
        _ = try sqlite3(["-batch", rebuilt], input: dump.stdout)
        #expect(try runLitectl(["diff", rebuilt, f.first.file]).status == 0)
        // tables with an --attach of a moment.
        let attached = try f.run(["tables", f.live, "--attach", "old=" + f.first.reference, "--format", "tsv", "--no-headers"])
        #expect(attached.status == 0, "\(attached.stderr)")
        #expect(attached.stdout.contains("\(f.first.reference)\told\torders\ttable"), "\(attached.stdout)")
    }

    @Test func reportTakesAMomentOnEitherOrBothSides() throws {
        guard let f = try MomentFixture(.folder, "moment-report") else { return }
        for (arguments, status) in [([f.second.reference], Int32(1)), ([f.first.reference, f.second.reference], 1),
                                    ([f.second.reference, f.second.file], 0)] {
            let out = f.folder.file("report-\(UUID().uuidString).html")
            let r = try f.run(["report"] + arguments + ["-o", out])
            #expect(r.status == status, "\(arguments): \(r.stderr)")
            let html = try String(contentsOfFile: out, encoding: .utf8)
            #expect(html.contains(arguments[0]))
            // The same page as of the restored files, but for the names and the time it was made.
            guard !arguments.contains(f.second.file) else { continue }
            let files = arguments.map { $0 == f.second.reference ? f.second.file : f.first.file }
            let oracle = f.folder.file("oracle-\(UUID().uuidString).html")
            #expect(try runLitectlIn(f.folder.path, ["report"] + files + ["-o", oracle]).status == status)
            var expected = try String(contentsOfFile: oracle, encoding: .utf8)
            for (file, reference) in zip(files, arguments) {
                expected = expected.replacingOccurrences(of: file, with: reference)
                    .replacingOccurrences(of: (file as NSString).lastPathComponent, with: reference)
            }
            #expect(Self.withoutTimes(html) == Self.withoutTimes(expected))
        }
    }

    /// `text` with its ISO 8601 times and durations in seconds blanked.
    static func withoutTimes(_ text: String) -> String {
        var out = text.replacingOccurrences(of: #"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?( UTC|Z)"#, with: "T", options: .regularExpression)
        out = out.replacingOccurrences(of: #"\d+(\.\d+)? ?(s|ms)\b"#, with: "D", options: .regularExpression)
        return out
    }

    @Test(arguments: RepoPlace.allCases)
    func attachJoinsAMomentWithALiveFile(_ place: RepoPlace) throws {
        guard let f = try MomentFixture(place, "moment-attach") else { return }
        let sql = "SELECT t.id, y.status, t.status FROM orders AS t JOIN old.orders AS y USING (id) WHERE y.status IS NOT t.status ORDER BY t.id"
        let r = try f.run(["query", f.live, "--attach", "old=" + f.first.reference, sql, "--format", "tsv", "--no-headers"])
        #expect(r.status == 0, "\(r.stderr)")
        // The oracle: the sqlite3 shell with the restored file attached.
        let oracle = try sqlite3(["-batch", "-tabs", f.live, "-cmd", "ATTACH '\(f.first.file)' AS old", sql])
        #expect(r.stdout == oracle)
        #expect(r.stdout.contains("1\tpaid\tlive") && r.stdout.contains("refunded"), "\(r.stdout)")
        // Two moments attached to an empty main, and a write to one refused (2) with --write on main.
        let two = try f.run(["query", "--attach", "a=" + f.first.reference, "--attach", "b=" + f.second.reference,
                             "SELECT (SELECT count(*) FROM a.orders), (SELECT count(*) FROM b.orders)", "--format", "tsv", "--no-headers"])
        #expect(two.stdout == "3001\t2921\n", "\(two.stderr)")
        let write = try f.run(["query", "--write", f.live, "--attach", "old=" + f.first.reference, "DELETE FROM old.orders"])
        #expect(write.status == 2 && write.stderr.split(separator: "\n").count == 1, "\(write.stderr)")
        #expect(try sqlite3Scalar(f.first.file, "SELECT count(*) FROM orders") == "3001")
    }

    @Test func writersRefuseAMoment() throws {
        guard let f = try MomentFixture(.folder, "moment-writers") else { return }
        let m = f.second.reference
        try "UPDATE orders SET status = 'x';\n".write(toFile: f.folder.file("p.sql"), atomically: false, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: f.folder.file("migrations"), withIntermediateDirectories: false)
        let before = try f.folder.listing()
        let cases: [[String]] = [
            ["vacuum", m], ["vacuum", f.live, "--into", m], ["patch", m, "p.sql"], ["load", m, "p.sql"],
            ["transform", m, "orders", "--drop", "data"], ["migrate", m, "migrations"], ["migrate", "status", m, "migrations"],
            ["migrate", "lint", m, "migrations"], ["restore", "latest", "--db", "app.db", m], ["recover", m, "out.db"],
            ["recover", f.live, m], ["backup", m, "bk"], ["analyze", m], ["query", "--write", m, "SELECT 1"],
            ["replicate", m, "--repo", f.repo.url],
        ]
        for arguments in cases {
            // As a user types them: writers take no repository options.
            let r = try runLitectlIn(f.folder.path, arguments)
            #expect(r.status == 64, "\(arguments): \(r.status) \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("\(m): a moment of a repository is read-only"),
                    "\(arguments): \(r.stderr)")
        }
        // Output options go through the write gate, which never takes a moment's name for a file.
        for arguments in [["check", "--write-baseline", m, f.live], ["report", f.live, "--output", m]] {
            let r = try runLitectlIn(f.folder.path, arguments)
            #expect(r.status == 2 || r.status == 64, "\(arguments): \(r.status) \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("names a moment of a repository"),
                    "\(arguments): \(r.stderr)")
        }
        #expect(try f.folder.listing() == before)
    }

    @Test func aReferenceThatCannotBeOpenedIsOneLine() throws {
        guard let f = try MomentFixture(.folder, "moment-errors") else { return }
        let cases: [(String, Int32, String)] = [
            ("repo:app.db", 64, "no @WHEN"),
            ("repo:app.db@yesterday-ish", 64, "repo:app.db@yesterday-ish"),
            ("repo:@latest", 64, "no database NAME"),
            ("repo:nope.db@latest", 2, "nope.db"),
            ("repo:app.db@2000-01-01T00:00:00Z", 2, "app.db"),
            ("repo:app.db@2100-01-01T00:00:00Z", 2, "app.db"),
        ]
        for (reference, status, words) in cases {
            for command in [["query", reference, "SELECT 1"], ["info", reference], ["diff", reference, f.live]] {
                let r = try f.run(command)
                #expect(r.status == status, "\(command): \(r.status) \(r.stderr)")
                #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(words), "\(command): \(r.stderr)")
                #expect(r.stdout.isEmpty)
            }
        }
        // No repository: a usage error naming the reference.
        let none = try runLitectlIn(f.folder.path, ["info", f.second.reference])
        #expect(none.status == 64 && none.stderr.contains("give --repo"), "\(none.stderr)")
        // Repository options without a moment: refused, never silently ignored.
        let unused = try runLitectlIn(f.folder.path, ["info", f.live, "--key-file", f.folder.file("k")])
        #expect(unused.status == 64 && unused.stderr.contains("--key-file applies to a moment"), "\(unused.stderr)")
    }

    @Test func aFolderWithFilesNamedLikeTheMomentIsNeverTouched() throws {
        guard let f = try MomentFixture(.folder, "moment-hostile") else { return }
        let cwd = try TemporaryFolder("moment-cwd")
        let m = f.second.reference
        // A database named like the moment, a hot-looking journal and a -wal beside it.
        try makeDatabase(cwd.file(m), "CREATE TABLE orders(id INTEGER PRIMARY KEY, status TEXT); INSERT INTO orders VALUES (1, 'impostor');")
        try Data(repeating: 0xd9, count: 4096).write(to: URL(fileURLWithPath: cwd.file(m + "-journal")))
        try Data(repeating: 0x37, count: 4096).write(to: URL(fileURLWithPath: cwd.file(m + "-wal")))
        func snapshot() throws -> [String: Data] {
            Dictionary(uniqueKeysWithValues: try cwd.listing().map { ($0, try Data(contentsOf: URL(fileURLWithPath: cwd.file($0)))) })
        }
        let before = try snapshot()
        let sql = "SELECT status FROM orders WHERE id = 1"
        let r = try f.run(["query", m, sql, "--format", "tsv", "--no-headers"], in: cwd.path)
        #expect(r.status == 0 && r.stdout == "paid\n", "\(r.stdout) \(r.stderr)")
        for command in [["info", m], ["check", m], ["hash", m], ["stats", m], ["dump", m], ["tables", m], ["analyze", "--dry-run", m],
                        ["diff", m, f.first.reference], ["query", "--attach", "x=" + m, "SELECT count(*) FROM x.orders"]] {
            let r = try f.run(command, in: cwd.path)
            #expect([0, 1].contains(r.status), "\(command): \(r.stderr)")
            #expect(!r.stdout.contains("impostor"))
        }
        let info = try f.run(["info", "--json", m], in: cwd.path)
        #expect(info.stdout.contains("\"wal_size\":null"), "\(info.stdout)")
        #expect(try snapshot() == before, "nothing in the folder was created, changed or removed")
        // The local file is reached as ./repo:...: the impostor, read without a repository.
        let local = try runLitectlIn(cwd.path, ["query", "./" + m, sql, "--format", "tsv", "--no-headers"])
        #expect(local.status == 2 || local.stdout == "impostor\n", "\(local.stdout) \(local.stderr)")
        try FileManager.default.removeItem(atPath: cwd.file(m + "-journal"))
        try FileManager.default.removeItem(atPath: cwd.file(m + "-wal"))
        let plain = try runLitectlIn(cwd.path, ["query", "./" + m, sql, "--format", "tsv", "--no-headers"])
        #expect(plain.status == 0 && plain.stdout == "impostor\n", "\(plain.stdout) \(plain.stderr)")
        let malformed = try runLitectlIn(cwd.path, ["query", "repo:x", "SELECT 1"])
        #expect(malformed.status == 64 && malformed.stderr.contains("./repo:x"), "\(malformed.stderr)")
    }

    @Test func followPrintsANewResultWhenANewCommitIsReplicated() throws {
        let folder = try TemporaryFolder("moment-follow")
        let repo = folder.file("repo")
        let db = folder.file("app.db")
        try makeDatabase(db, "PRAGMA journal_mode=wal; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'one');")
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let follower = try FollowerProcess([db, "--repo", repo, "--interval", "0.2"], events: folder.file("events.log"))
        defer { _ = follower.stop() }
        // The first state is in the repository once restore finds it.
        let deadline = Date().addingTimeInterval(30)
        while try runLitectl(["query", "repo:app.db@latest", "SELECT 1", "--repo", repo]).status != 0 && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.2)
        }
        let output = folder.file("follow.out")
        let query = try Child(litectlBinary, ["query", "--follow", "repo:app.db@latest", "--interval", "0.2", "--count", "2",
                                              "SELECT max(id), group_concat(v, '+') FROM t", "--format", "tsv", "--no-headers", "--repo", repo],
                              output: output)
        func printed() -> String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
        while printed().isEmpty && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(printed() == "1\tone\n")
        try makeDatabase(db, "INSERT INTO t VALUES (2, 'two');")
        while query.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        if query.isRunning { query.signal(SIGKILL) }
        #expect(query.wait() == 0)
        #expect(printed() == "1\tone\n2\tone+two\n", "\(printed())")
    }
}
