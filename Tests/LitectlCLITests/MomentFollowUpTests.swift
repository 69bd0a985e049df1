// The finishing touches of moments (docs/moments.md): `restore repo:x out.db`
// is a usage error saying how a moment is restored; info, check and hash
// report an unknown moment among several databases in its turn, as they do a
// missing file, and exit 2 at the end; a moment whose chain lost a segment
// says the note restore says; `query --follow --every N` runs every N with
// or without a newer state; and --follow survives a prune that moved the
// pages of its moment (it reads the index again and runs once more).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct MomentFollowUpTests {
    @Test func restoreOfAMomentIsAUsageErrorSayingHow() throws {
        guard let f = try MomentFixture(.folder, "moment-restore-arg") else { return }
        let out = f.folder.file("out.db")
        for (moment, says) in [("repo:app.db@-1h", "litectl restore --repo URL latest --db app.db --at -1h \(out)"),
                               ("repo:app.db@latest", "litectl restore --repo URL latest --db app.db \(out)"),
                               ("repo:nonsense", "--at WHEN")] {
            for arguments in [["restore", moment, out] + f.options, ["restore", moment, out]] {
                let r = try runLitectlIn(f.folder.path, arguments)
                #expect(r.status == 64, "\(arguments): \(r.stderr)")
                #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(says), "\(r.stderr)")
                #expect(!FileManager.default.fileExists(atPath: out))
            }
        }
    }

    /// `command` over [moment, missing, restored file] reports the two that
    /// open, in order, and exits 2 at the end, alike for a missing file and
    /// for a moment of a database the repository does not hold.
    func reportsTheOthers(_ f: MomentFixture, _ command: [String], lines: (String) -> [Substring]) throws {
        let unknown = "repo:nosuch.db@latest", missing = f.folder.file("missing.db")
        let withMissing = try f.run(command + [f.second.reference, missing, f.first.file])
        let withUnknown = try f.run(command + [f.second.reference, unknown, f.first.file])
        #expect(withMissing.status == 2 && withUnknown.status == 2, "\(withMissing.stderr) \(withUnknown.stderr)")
        #expect(lines(withUnknown.stdout).count == lines(withMissing.stdout).count, "\(withUnknown.stdout)")
        #expect(withUnknown.stdout.contains(f.second.reference) && withUnknown.stdout.contains(f.first.file), "\(withUnknown.stdout)")
        #expect(withUnknown.stdout.replacingOccurrences(of: unknown, with: missing) == withMissing.stdout.replacingOccurrences(of: unknown, with: missing)
                || command[0] == "check", "\(withUnknown.stdout)\n---\n\(withMissing.stdout)")
        let complaint = withUnknown.stderr.split(separator: "\n")
        #expect(complaint.count == 1 && complaint[0].contains(unknown) && complaint[0].contains("holds no database nosuch.db"), "\(withUnknown.stderr)")
    }

    @Test func infoCheckAndHashReportTheOthersWhenAMomentIsUnknown() throws {
        guard let f = try MomentFixture(.folder, "moment-several") else { return }
        try reportsTheOthers(f, ["hash"]) { $0.split(separator: "\n") }
        try reportsTheOthers(f, ["info", "--json"]) { $0.split(separator: "\n") }
        try reportsTheOthers(f, ["check", "--json"]) { $0.split(separator: "\n") }
    }

    @Test func aMomentWhoseChainLostASegmentSaysTheNoteRestoreSays() throws {
        let folder = try TemporaryFolder("moment-note")
        let repo = folder.file("repo")
        let r = try MomentRun.run(db: folder.file("app.db"), url: repo, options: [], env: [:], folder: folder)
        #expect(r.status == 0, "\(r.stderr)")
        // The oldest segment of the chain gone: a gap before its last state.
        let chains = try FileManager.default.contentsOfDirectory(atPath: repo + "/segments")
        let chain = try #require(chains.sorted().last)
        let segments = try FileManager.default.contentsOfDirectory(atPath: repo + "/segments/" + chain).map { repo + "/segments/" + chain + "/" + $0 }
        #expect(segments.count >= 2, "\(segments)")
        func modified(_ path: String) -> Date { ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date) ?? .distantPast }
        let oldest = try #require(segments.min { modified($0) < modified($1) })
        try FileManager.default.removeItem(atPath: oldest)
        let restored = try runLitectl(["restore", "latest", "--db", "app.db", folder.file("fallback.db"), "--repo", repo])
        #expect(restored.status == 0, "\(restored.stderr)")
        let note = try #require(restored.stderr.split(separator: "\n").first { $0.contains("instead") }.map(String.init), "\(restored.stderr)")
        let said = try #require(note.range(of: "warning: ").map { String(note[$0.upperBound...]) })
        let sql = "SELECT count(*), total(score) FROM t"
        let query = try runLitectl(["query", "repo:app.db@latest", sql, "--format", "tsv", "--no-headers", "--repo", repo])
        #expect(query.status == 0, "\(query.stderr)")
        #expect(query.stdout == (try sqlite3(["-batch", "-tabs", folder.file("fallback.db"), sql])))
        let lines = query.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0] == "litectl: warning: repo:app.db@latest: \(said)", "\(query.stderr)")
        let quiet = try runLitectl(["query", "-q", "repo:app.db@latest", sql, "--repo", repo])
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
        // Named twice, the moment is opened, and noted, once.
        let hashed = try runLitectl(["hash", "repo:app.db@latest", "repo:app.db@latest", "--repo", repo])
        #expect(hashed.stderr.split(separator: "\n").count == 1, "once for the run: \(hashed.stderr)")
    }

    @Test func followEveryRunsWithoutANewState() throws {
        guard let f = try MomentFixture(.folder, "moment-every") else { return }
        // A fixed moment and a local file: no newer state ever comes, and every N runs anyway.
        let r = try f.run(["query", "--follow", "--every", "0.2", "--count", "3", f.first.reference,
                           "SELECT count(*) FROM orders", "--format", "tsv", "--no-headers"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "3001\n3001\n3001\n", "\(r.stdout)")
        let local = try runLitectlIn(f.folder.path, ["query", "--follow", "--every", "0.2", "--count", "2", f.live,
                                                      "SELECT status FROM orders WHERE id = 1", "--format", "tsv", "--no-headers"])
        #expect(local.status == 0 && local.stdout == "live\nlive\n", "\(local.stdout) \(local.stderr)")
        // --interval still needs a moment at latest; the two are not given together.
        let interval = try f.run(["query", "--follow", "--interval", "0.2", "--count", "1", f.first.reference, "SELECT 1"])
        #expect(interval.status == 64, "\(interval.stderr)")
        let both = try f.run(["query", "--follow", "--every", "1", "--interval", "1", f.second.reference, "SELECT 1"])
        #expect(both.status == 64, "\(both.stderr)")
        let without = try f.run(["query", "--every", "1", f.second.reference, "SELECT 1"])
        #expect(without.status == 64, "\(without.stderr)")
    }

    @Test func followReadsTheIndexAgainAfterAPrune() throws {
        let folder = try TemporaryFolder("moment-follow-prune")
        let repo = folder.file("repo"), db = folder.file("app.db")
        // A first state mostly of one table that the second drops: its pack,
        // mostly dead once the first is forgotten, is rewritten by prune, and
        // the second state's pages in it move to a new pack.
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<300) INSERT INTO t SELECT i, 'row ' || i FROM r;
            CREATE TABLE big(id INTEGER PRIMARY KEY, b BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<3000) INSERT INTO big SELECT i, randomblob(1000) FROM r;
            """)
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        #expect(try runLitectl(["backup", db, "--repo", repo]).status == 0)
        Thread.sleep(forTimeInterval: 1.1)
        try makeDatabase(db, "DELETE FROM big; INSERT INTO t VALUES (1000, 'second');")
        #expect(try runLitectl(["backup", db, "--repo", repo]).status == 0)
        let packsBefore = try FileManager.default.subpathsOfDirectory(atPath: repo + "/packs").filter { $0.count > 3 }
        let output = folder.file("follow.out")
        // No page kept in memory between runs: each run reads its pages from the packs.
        let query = try Child(litectlBinary, ["query", "--follow", "repo:app.db@latest", "--every", "0.5", "--count", "4", "--cache-size", "0",
                                              "SELECT count(*), max(id) FROM t", "--format", "tsv", "--no-headers", "--repo", repo], output: output)
        func printed() -> String { (try? String(contentsOfFile: output, encoding: .utf8)) ?? "" }
        let deadline = Date().addingTimeInterval(60)
        while printed().isEmpty && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let forget = try runLitectl(["forget", "--keep-last", "1", "--prune", "--repo", repo])
        #expect(forget.status == 0, "\(forget.stderr)")
        let packsAfter = try FileManager.default.subpathsOfDirectory(atPath: repo + "/packs").filter { $0.count > 3 }
        #expect(!Set(packsBefore).isSubset(of: Set(packsAfter)), "prune rewrote or removed a pack")
        while query.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        if query.isRunning { query.signal(SIGKILL) }
        #expect(query.wait() == 0, "\(printed())")
        #expect(printed() == String(repeating: "301\t1000\n", count: 4), "\(printed())")
    }
}
