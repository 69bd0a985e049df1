// `litectl check` as a release gate in CI, through the built binary:
// --write-baseline then --strict --baseline passes on every real corpus file
// and fails on a defect introduced after; accepted, changed, new and stale
// findings; fingerprints that unrelated changes leave alone; the baseline
// written only over a baseline; --skip; --format junit and sarif validated
// against the JUnit XSD and the SARIF 2.1.0 schema (python3); --expect-schema
// against `sqlite3 .schema`; an empty database failing unless --allow-empty.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct CheckGateTests {
    /// A database with one finding of several checks: an orphan row (error),
    /// a table without a primary key and an unindexed foreign key (warnings).
    static let script = """
        CREATE TABLE parent(id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id), v);
        CREATE TABLE log(at, message);
        INSERT INTO parent VALUES (1, 'a');
        INSERT INTO child VALUES (1, 1, 'x'), (2, 9, 'orphan');
        """

    func json(_ stdout: String) throws -> [[String: Any]] {
        try stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    /// The first report of --json output (a test failure, not a crash, when there is none).
    func firstReport(_ stdout: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        try #require(try json(stdout).first, sourceLocation: sourceLocation)
    }

    func findings(_ report: [String: Any]) -> [[String: Any]] { report["findings"] as? [[String: Any]] ?? [] }

    /// Runs the schema validator; its output when the document is not valid.
    func validate(_ kind: String, _ document: String, in folder: TemporaryFolder,
                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        let file = folder.file("document.\(kind)")
        try Data(document.utf8).write(to: URL(fileURLWithPath: file))
        let result = try runProcess("/usr/bin/env", ["python3", packageRoot + "/Tests/Fixtures/schemas/validate.py", kind, file])
        #expect(result.status == 0 && result.stdout == "valid\n", "\(kind) not valid: \(result.stdout)\(result.stderr)", sourceLocation: sourceLocation)
    }

    // MARK: Baselines

    @Test func aBaselineAcceptsWhatItRecordedAndFailsOnWhatIsNew() throws {
        let folder = try TemporaryFolder("gate-baseline")
        try makeDatabase(folder.file("app.db"), Self.script)
        #expect(try litectl("check", "app.db", in: folder.path).status == 1, "the orphan row fails")
        let written = try litectl("check", "--strict", "--write-baseline", "base.json", "app.db", in: folder.path)
        #expect(written.status == 0 && written.stdout.isEmpty && written.stderr.isEmpty, "\(written.stderr)")
        #expect(try folder.listing() == ["app.db", "base.json"], "no temporary file left")
        // The file is the documented format.
        let file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: folder.file("base.json")))) as? [String: Any])
        #expect(file["format"] as? String == "litectl-check-baseline" && file["version"] as? Int == 1)
        let databases = try #require(file["databases"] as? [[String: Any]])
        #expect(databases.count == 1 && databases[0]["path"] as? String == "app.db")
        let entries = try #require(databases[0]["findings"] as? [[String: Any]])
        #expect(entries.map { "\($0["check"] as? String ?? "?"):\($0["object"] as? String ?? "-")" }
                == ["foreign-key:child", "no-primary-key:log", "unindexed-foreign-key:child"])
        // The fingerprint is the documented SHA-256 (computed here by python3's hashlib).
        let logEntry = try #require(entries.first { $0["check"] as? String == "no-primary-key" })
        let oracle = try runProcess("/usr/bin/env", ["python3", "-c",
            "import hashlib; print(hashlib.sha256(b'litectl-check/1\\0no-primary-key\\0log\\0').digest()[:16].hex())"])
        #expect(logEntry["fingerprint"] as? String == oracle.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        // A foreign key's: parent table, child columns and orphan count, as docs/check.md lists them.
        let fkEntry = try #require(entries.first { $0["check"] as? String == "foreign-key" })
        let fkOracle = try runProcess("/usr/bin/env", ["python3", "-c",
            "import hashlib; print(hashlib.sha256(b'litectl-check/1\\0foreign-key\\0child\\0parent\\0parent_id\\0' + b'1\\0').digest()[:16].hex())"])
        #expect(fkEntry["fingerprint"] as? String == fkOracle.stdout.trimmingCharacters(in: .whitespacesAndNewlines))

        // Against it: silent, exit 0, even with --strict.
        let gate = try litectl("check", "--strict", "--baseline", "base.json", "app.db", in: folder.path)
        #expect(gate.status == 0 && gate.stdout.isEmpty && gate.stderr.isEmpty, "\(gate.stdout)\(gate.stderr)")
        let verbose = try litectl("check", "-v", "--strict", "--baseline", "base.json", "app.db", in: folder.path)
        #expect(verbose.stdout.contains("app.db: warning [no-primary-key] log: table log has no PRIMARY KEY (accepted by the baseline)\n"))
        #expect(verbose.stdout.hasSuffix("app.db: ok\n"), "\(verbose.stdout)")
        var report = try firstReport(try litectl("check", "--json", "--strict", "--baseline", "base.json", "app.db", in: folder.path).stdout)
        #expect(report["status"] as? String == "ok")
        #expect(findings(report).allSatisfy { $0["baseline"] as? String == "accepted" })

        // A new table without a primary key: new, and it fails.
        try sqlite3(["-batch", folder.file("app.db"), "CREATE TABLE audit(at, what);"])
        let failed = try litectl("check", "--strict", "--baseline", "base.json", "app.db", in: folder.path)
        #expect(failed.status == 1)
        #expect(failed.stdout == "app.db: warning [no-primary-key] audit: table audit has no PRIMARY KEY (new: not in the baseline)\n")
        // Without --strict the new warning passes, as it would without a baseline.
        #expect(try litectl("check", "--baseline", "base.json", "app.db", in: folder.path).status == 0)

        // One more orphan row: the foreign-key finding changed, and fails.
        try sqlite3(["-batch", folder.file("app.db"), "DROP TABLE audit; INSERT INTO child VALUES (3, 8, 'orphan too');"])
        let changed = try litectl("check", "--baseline", "base.json", "app.db", in: folder.path)
        #expect(changed.status == 1)
        #expect(changed.stdout.hasPrefix("app.db: error [foreign-key] child: 2 rows of child refer to a missing row of parent (rowid 2, 3) (changed since the baseline, which recorded: 1 row of child refers to a missing row of parent (rowid 2))"),
                "\(changed.stdout)")
        report = try firstReport(try litectl("check", "--json", "--baseline", "base.json", "app.db", in: folder.path).stdout)
        #expect(findings(report).first { $0["check"] as? String == "foreign-key" }?["baseline"] as? String == "changed")

        // Both orphans gone and the log table keyed: the entries that match
        // nothing are notes, and said on stderr when stdout is a pipe.
        try sqlite3(["-batch", folder.file("app.db"), """
            DELETE FROM child WHERE id > 1; DROP TABLE log; CREATE TABLE log(id INTEGER PRIMARY KEY, at, message);
            """])
        let stale = try litectl("check", "--strict", "--baseline", "base.json", "app.db", in: folder.path)
        #expect(stale.status == 0 && stale.stdout.isEmpty)
        #expect(stale.stderr == "litectl: note: base.json: 2 accepted findings no longer occur (in app.db); check --write-baseline rewrites it\n")
        let staleVerbose = try litectl("check", "-v", "--baseline", "base.json", "app.db", in: folder.path)
        #expect(staleVerbose.stdout.contains("app.db: note [baseline] log: the baseline accepts a finding that no longer occurs: [no-primary-key] log: table log has no PRIMARY KEY\n"),
                "\(staleVerbose.stdout)")
        #expect(staleVerbose.stderr.isEmpty)
        report = try firstReport(try litectl("check", "--json", "--baseline", "base.json", "app.db", in: folder.path).stdout)
        #expect(findings(report).filter { $0["baseline"] as? String == "absent" }.map { $0["check"] as? String } == ["baseline", "baseline"])
        #expect(try litectl("check", "-q", "--baseline", "base.json", "app.db", in: folder.path).stderr.isEmpty)
    }

    @Test func fingerprintsStayWhenUnrelatedPartsChange() throws {
        let folder = try TemporaryFolder("gate-stable")
        let db = folder.file("s.db")
        try makeDatabase(db, Self.script + """
            CREATE TABLE big(id INTEGER PRIMARY KEY, v);
            CREATE INDEX big_v ON big(v); CREATE INDEX big_v2 ON big(v);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) INSERT INTO big SELECT i, i % 7 FROM n;
            ANALYZE; DELETE FROM big WHERE id > 800;
            """)
        func prints() throws -> [String] {
            let report = try firstReport(try litectl("check", "--json", "--max-free-percent", "1", db).stdout)
            return findings(report).map { "\($0["check"] as? String ?? "?"):\($0["object"] as? String ?? "-"):\($0["fingerprint"] as? String ?? "none")" }.sorted()
        }
        let before = try prints()
        #expect(before.count >= 6, "\(before)")  // foreign-key, unindexed, no-pk, redundant, statistics drift, freelist
        #expect(before.allSatisfy { $0.split(separator: ":").last?.utf8.count == 32 }, "a fingerprint each: \(before)")
        // Rows elsewhere, a new keyed table, more free pages, a VACUUM: the same fingerprints.
        try sqlite3(["-batch", db, """
            INSERT INTO parent VALUES (2, 'b'), (3, 'c'); INSERT INTO log VALUES ('now', 'hello');
            CREATE TABLE other(id INTEGER PRIMARY KEY, w); INSERT INTO other VALUES (1, randomblob(5000));
            DELETE FROM big WHERE id > 700;
            """])
        #expect(try prints() == before)
        try sqlite3(["-batch", db, """
            VACUUM; DELETE FROM big WHERE id > 600;
            INSERT INTO other VALUES (2, randomblob(40000)); DELETE FROM other WHERE id = 2;
            """])
        #expect(try prints() == before)
    }

    @Test(.enabled(if: !realDatabaseFiles.isEmpty), arguments: realDatabaseFiles)
    func eachRealFilePassesStrictAgainstItsBaselineAndFailsOnANewDefect(_ source: String) throws {
        let folder = try TemporaryFolder("gate-real")
        let db = try folder.copy(source, as: "copy" + (source as NSString).lastPathComponent)
        let name = (db as NSString).lastPathComponent
        #expect(try litectl("check", "--strict", "--write-baseline", "base.json", name, in: folder.path).status == 0)
        let gate = try litectl("check", "--strict", "--baseline", "base.json", name, in: folder.path)
        #expect(gate.status == 0 && gate.stdout.isEmpty && gate.stderr.isEmpty, "\(source): \(gate.stdout)\(gate.stderr)")
        for format in ["junit", "sarif"] {
            let document = try litectl("check", "--strict", "--baseline", "base.json", "--format", format, name, in: folder.path)
            #expect(document.status == 0)
            try validate(format, document.stdout, in: folder)
        }
        // Its own schema, as the sqlite3 CLI prints it, is what --expect-schema expects.
        try sqlite3(["-batch", db, ".schema"]).write(toFile: folder.file("schema.sql"), atomically: false, encoding: .utf8)
        let schema = try litectl("check", "--strict", "--baseline", "base.json", "--expect-schema", "schema.sql", name, in: folder.path)
        #expect(schema.status == 0 && schema.stdout.isEmpty, "\(source): \(schema.stdout)\(schema.stderr)")
        // A table without a primary key, added after the baseline: fails --strict.
        let broken = try folder.copy(db, as: "broken-" + name)
        try sqlite3(["-batch", broken, "CREATE TABLE zz_added(a, b);"])
        var result = try litectl("check", "--strict", "--baseline", "base.json", (broken as NSString).lastPathComponent, in: folder.path)
        #expect(result.status == 1)
        #expect(result.stdout.contains("warning [no-primary-key] zz_added: table zz_added has no PRIMARY KEY (new: not in the baseline)"), "\(result.stdout)")
        // An index out of step with its table (its definition changed under it): an integrity error.
        let index = try folder.copy(db, as: "index-" + name)
        try sqlite3(["-batch", index, """
            CREATE TABLE zz_keyed(id INTEGER PRIMARY KEY, a, b); CREATE INDEX zz_keyed_a ON zz_keyed(a);
            INSERT INTO zz_keyed VALUES (1, 'x', 'p'), (2, 'y', 'q'), (3, 'z', 'r');
            PRAGMA writable_schema=ON;
            UPDATE sqlite_schema SET sql = 'CREATE INDEX zz_keyed_a ON zz_keyed(b)' WHERE name = 'zz_keyed_a';
            """])
        result = try litectl("check", "--baseline", "base.json", (index as NSString).lastPathComponent, in: folder.path)
        #expect(result.status == 1, "\(result.stdout)")
        #expect(result.stdout.contains("error [integrity] zz_keyed_a: ") && result.stdout.contains("(new: not in the baseline)"), "\(result.stdout)")
    }

    @Test func theBaselineReplacesOnlyABaseline() throws {
        let folder = try TemporaryFolder("gate-write")
        try makeDatabase(folder.file("app.db"), Self.script)
        try makeDatabase(folder.file("other.db"), "CREATE TABLE t(id INTEGER PRIMARY KEY);")
        let otherBefore = try FileFingerprint(folder.file("other.db"))
        // A database (even one this run does not check) is not replaced.
        var r = try litectl("check", "--write-baseline", "other.db", "app.db", in: folder.path)
        #expect(r.status == 2)
        #expect(r.stderr == "litectl: other.db: already exists and is not a litectl check baseline (as the baseline file it would be replaced); remove it or choose another file\n", "\(r.stderr)")
        #expect(try FileFingerprint(folder.file("other.db")) == otherBefore)
        // Nor the database being checked.
        let appBefore = try FileFingerprint(folder.file("app.db"))
        r = try litectl("check", "--write-baseline", "app.db", "app.db", in: folder.path)
        #expect(r.status == 2 && r.stderr.contains("litectl: app.db: is a database this run reads"), "\(r.stderr)")
        #expect(try FileFingerprint(folder.file("app.db")) == appBefore)
        // Nor the reference schema the run reads.
        try "CREATE TABLE parent(id INTEGER PRIMARY KEY, name TEXT);".write(toFile: folder.file("ref.sql"), atomically: false, encoding: .utf8)
        r = try litectl("check", "--expect-schema", "ref.sql", "--write-baseline", "ref.sql", "app.db", in: folder.path)
        #expect(r.status == 2 && r.stderr.contains("ref.sql: is the reference schema of --expect-schema"), "\(r.stderr)")
        // Any other file neither.
        try "notes\n".write(toFile: folder.file("notes.txt"), atomically: false, encoding: .utf8)
        #expect(try litectl("check", "--write-baseline", "notes.txt", "app.db", in: folder.path).status == 2)
        #expect(try String(contentsOfFile: folder.file("notes.txt"), encoding: .utf8) == "notes\n")
        // An empty file and an earlier baseline are replaced.
        FileManager.default.createFile(atPath: folder.file("b.json"), contents: Data())
        #expect(try litectl("check", "--write-baseline", "b.json", "app.db", in: folder.path).status == 0)
        try sqlite3(["-batch", folder.file("app.db"), "DROP TABLE log;"])
        #expect(try litectl("check", "--write-baseline", "b.json", "app.db", in: folder.path).status == 0)
        #expect(try !String(contentsOfFile: folder.file("b.json"), encoding: .utf8).contains("no-primary-key"))
        // A database that cannot be checked: nothing written.
        r = try litectl("check", "--write-baseline", "new.json", "app.db", "missing.db", in: folder.path)
        #expect(r.status == 2 && r.stderr.contains("new.json: not written"), "\(r.stderr)")
        #expect(try folder.listing() == ["app.db", "b.json", "notes.txt", "other.db", "ref.sql"])
        // Bad baselines are errors naming the file.
        try #"{"format":"litectl-check-baseline","version":7,"databases":[]}"#.write(toFile: folder.file("v7.json"), atomically: false, encoding: .utf8)
        r = try litectl("check", "--baseline", "v7.json", "app.db", in: folder.path)
        #expect(r.status == 2 && r.stderr == "litectl: v7.json: baseline format version 7; this litectl reads version 1\n", "\(r.stderr)")
        r = try litectl("check", "--baseline", "notes.txt", "app.db", in: folder.path)
        #expect(r.status == 2 && r.stderr == "litectl: notes.txt: not a litectl check baseline: not a JSON object\n", "\(r.stderr)")
        #expect(try litectl("check", "--baseline", "b.json", "--write-baseline", "c.json", "app.db", in: folder.path).status == 64)
    }

    @Test func oneBaselineServesOneDatabaseWhateverItsPath() throws {
        let folder = try TemporaryFolder("gate-paths")
        try makeDatabase(folder.file("build-1.db"), Self.script)
        try makeDatabase(folder.file("build-2.db"), Self.script)
        #expect(try litectl("check", "--write-baseline", "base.json", "build-1.db", in: folder.path).status == 0)
        #expect(try litectl("check", "--strict", "--baseline", "base.json", "build-2.db", in: folder.path).status == 0)
        // With two databases, entries go by path: build-2.db has none.
        let both = try litectl("check", "--strict", "--baseline", "base.json", "build-1.db", "build-2.db", in: folder.path)
        #expect(both.status == 1)
        #expect(!both.stdout.contains("build-1.db") && both.stdout.contains("build-2.db: error [foreign-key]"), "\(both.stdout)")
    }

    // MARK: --skip

    @Test func skipLeavesOutACheckOrItsFindingsOnOneObject() throws {
        let folder = try TemporaryFolder("gate-skip")
        try makeDatabase(folder.file("s.db"), Self.script + "CREATE TABLE \"Log:2\"(a);")
        var r = try litectl("check", "--strict", "--skip", "foreign-key", "--skip", "unindexed-foreign-key", "s.db", in: folder.path)
        #expect(r.status == 1)
        #expect(r.stdout == "s.db: warning [no-primary-key] Log:2: table Log:2 has no PRIMARY KEY\ns.db: warning [no-primary-key] log: table log has no PRIMARY KEY\n", "\(r.stdout)")
        // The object: everything after the first colon, names folded as SQLite folds them.
        r = try litectl("check", "--strict", "--skip", "foreign-key", "--skip", "unindexed-foreign-key:CHILD",
                        "--skip", "no-primary-key:LOG", "--skip", "no-primary-key:log:2", "s.db", in: folder.path)
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stdout)")
        #expect(try litectl("check", "--skip", "nonsense", "s.db", in: folder.path).status == 64)
        r = try litectl("check", "--skip", "open", "s.db", in: folder.path)
        #expect(r.status == 64 && r.stderr.contains("the open check cannot be skipped"), "\(r.stderr)")
        // A skipped check is not recorded in a baseline either.
        #expect(try litectl("check", "--skip", "no-primary-key", "--write-baseline", "b.json", "s.db", in: folder.path).status == 0)
        #expect(try !String(contentsOfFile: folder.file("b.json"), encoding: .utf8).contains("no-primary-key"))
    }

    // MARK: JUnit and SARIF

    /// Databases that give every kind of testcase: sound, failing with an
    /// error, warnings (failing with --strict), hostile names, one that
    /// cannot be checked.
    func ciFolder() throws -> TemporaryFolder {
        let folder = try TemporaryFolder("gate-ci")
        try makeDatabase(folder.file("sound.db"), "CREATE TABLE t(id INTEGER PRIMARY KEY); ")
        try makeDatabase(folder.file("app.db"), Self.script)
        try makeDatabase(folder.file("odd <&\"'> name.db"), "CREATE TABLE \"a\u{1}b <x> & \"\"q\"\"\"(v); CREATE TABLE \"tab\there\nnewline\"(w);")
        return folder
    }

    @Test func junitValidatesAndHasATestcasePerCheck() throws {
        let folder = try ciFolder()
        let r = try litectl("check", "--strict", "--skip", "freelist", "--format", "junit",
                            "sound.db", "app.db", "odd <&\"'> name.db", "missing.db", in: folder.path)
        #expect(r.status == 2)
        #expect(r.stderr == "litectl: missing.db: no such file\n")
        try validate("junit", r.stdout, in: folder)
        // The structure, read back by python's XML parser.
        let file = folder.file("out.xml")
        try Data(r.stdout.utf8).write(to: URL(fileURLWithPath: file))
        let summary = try runProcess("/usr/bin/env", ["python3", "-c", """
            import sys, xml.etree.ElementTree as ET
            for s in ET.parse(sys.argv[1]).getroot():
                cases = ["%s=%s" % (c.get("name"), ",".join(ch.tag + (":" + ch.get("type") if ch.get("type") else "") for ch in c) or "pass") for c in s.findall("testcase")]
                print(s.get("name"), s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped"), " ".join(cases))
            """, file])
        let lines = summary.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 4, "\(summary.stdout)\(summary.stderr)")
        let checks = "open=pass integrity=pass empty=pass foreign-key=pass unindexed-foreign-key=pass no-primary-key=pass redundant-index=pass statistics=pass wal-size=pass hot-journal=pass freelist=skipped"
        #expect(lines[0] == "sound.db 11 0 0 1 " + checks)
        #expect(lines[1] == "app.db 11 3 0 1 " + checks
            .replacingOccurrences(of: "foreign-key=pass unindexed-foreign-key=pass no-primary-key=pass",
                                  with: "foreign-key=failure:error unindexed-foreign-key=failure:warning no-primary-key=failure:warning"))
        #expect(lines[2].hasPrefix("odd <&\"'> name.db 11 1 0 1 "), "\(lines[2])")
        #expect(lines[3] == "missing.db 1 0 1 0 open=error:could-not-check")
        // Warnings that do not fail (no --strict) are no failures, but are in system-out.
        let lenient = try litectl("check", "--format", "junit", "app.db", in: folder.path)
        #expect(lenient.status == 1)
        #expect(lenient.stdout.contains("<testcase name=\"no-primary-key\" classname=\"app.db\" time=\""))
        #expect(lenient.stdout.contains("warning [no-primary-key] log: table log has no PRIMARY KEY\n"))
        #expect(!lenient.stdout.contains("type=\"warning\""))
        try validate("junit", lenient.stdout, in: folder)
    }

    @Test func sarifValidatesWithFingerprintsAndBaselineStates() throws {
        let folder = try ciFolder()
        #expect(try litectl("check", "--write-baseline", "b.json", "app.db", in: folder.path).status == 0)
        try sqlite3(["-batch", folder.file("app.db"), "CREATE TABLE audit(x);"])
        let r = try litectl("check", "--strict", "--baseline", "b.json", "--format", "sarif", "app.db", in: folder.path)
        #expect(r.status == 1)
        try validate("sarif", r.stdout, in: folder)
        let log = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(log["version"] as? String == "2.1.0")
        let run = try #require((log["runs"] as? [[String: Any]])?.first)
        let driver = try #require((run["tool"] as? [String: Any])?["driver"] as? [String: Any])
        let rules = try #require(driver["rules"] as? [[String: Any]])
        #expect(rules.map { $0["id"] as? String } == CheckKind.allCases.map(\.rawValue))
        let results = try #require(run["results"] as? [[String: Any]])
        // The same findings and fingerprints as --json.
        let report = try firstReport(try litectl("check", "--json", "--strict", "--baseline", "b.json", "app.db", in: folder.path).stdout)
        #expect(results.count == findings(report).count)
        for (result, finding) in zip(results, findings(report)) {
            #expect(result["ruleId"] as? String == finding["check"] as? String)
            let index = try #require(result["ruleIndex"] as? Int)
            #expect(rules[index]["id"] as? String == finding["check"] as? String)
            #expect((result["partialFingerprints"] as? [String: String])?["litectlCheck/v1"] == finding["fingerprint"] as? String)
            let location = try #require((result["locations"] as? [[String: Any]])?.first)
            #expect(((location["physicalLocation"] as? [String: Any])?["artifactLocation"] as? [String: Any])?["uri"] as? String == "app.db")
            #expect(((location["logicalLocations"] as? [[String: Any]])?.first?["name"] as? String) == finding["object"] as? String)
            let state = result["baselineState"] as? String
            #expect(state == ["accepted": "unchanged", "new": "new"][finding["baseline"] as? String ?? ""])
            #expect((result["suppressions"] != nil) == (state == "unchanged"))
        }
        #expect(results.contains { $0["ruleId"] as? String == "no-primary-key" && $0["baselineState"] as? String == "new" })
        // Hostile names and paths, and a database that cannot be checked.
        let odd = try litectl("check", "--format", "sarif", "odd <&\"'> name.db", "missing:x.db", folder.file("app.db"), in: folder.path)
        #expect(odd.status == 2)
        try validate("sarif", odd.stdout, in: folder)
        #expect(odd.stdout.contains("\"uri\": \"odd%20%3C%26%22%27%3E%20name.db\""))
        #expect(odd.stdout.contains("\"uri\": \"missing%3Ax.db\""))
        #expect(odd.stdout.contains("\"uri\": \"file://\(folder.path)/app.db\""))
        #expect(odd.stdout.contains("\"executionSuccessful\": false"))
    }

    // MARK: --expect-schema

    @Test func theSchemaMatchesItsOwnDotSchemaAndEachDriftIsOneFinding() throws {
        let folder = try TemporaryFolder("gate-schema")
        let db = folder.file("app.db")
        try makeDatabase(db, """
            CREATE TABLE artist(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL);
            CREATE TABLE album(id INTEGER PRIMARY KEY, artist_id INTEGER REFERENCES artist(id), title TEXT);
            CREATE INDEX album_artist ON album(artist_id);
            CREATE VIEW titles AS SELECT title FROM album;
            CREATE TRIGGER album_touch AFTER UPDATE ON album BEGIN SELECT 1; END;
            CREATE VIRTUAL TABLE search USING fts5(title);
            INSERT INTO artist(name) VALUES ('x'); ANALYZE;
            """)
        // The sqlite3 CLI's own .schema (with sqlite_sequence, sqlite_stat1 and FTS5's shadow tables) matches.
        let dotSchema = try sqlite3(["-batch", db, ".schema"])
        #expect(dotSchema.contains("sqlite_sequence") && dotSchema.contains("search_data"))
        try dotSchema.write(toFile: folder.file("dot.sql"), atomically: false, encoding: .utf8)
        var r = try litectl("check", "--expect-schema", "dot.sql", "app.db", in: folder.path)
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stdout)\(r.stderr)")
        // Written otherwise: order, case, quoting, whitespace, comments, IF NOT EXISTS.
        try """
            -- the reference
            CREATE VIRTUAL TABLE "search" USING FTS5 ( title ) ;
            create trigger [album_touch] after update on "ALBUM" begin select 1; end;
            create view Titles as   select TITLE from album;
            CREATE INDEX IF NOT EXISTS `album_artist` ON "album" ("artist_id");
            CREATE TABLE "album" ( id integer primary key, artist_id integer references "artist" ( id ) , title text ) ;
            /* keyed */ CREATE TABLE IF NOT EXISTS Artist(ID Integer Primary Key Autoincrement, NAME text not null);
            """.write(toFile: folder.file("same.sql"), atomically: false, encoding: .utf8)
        r = try litectl("check", "--expect-schema", "same.sql", "app.db", in: folder.path)
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stdout)\(r.stderr)")
        // Drift: a column added and one retyped, an index gone, a view changed, a table only in the reference.
        try sqlite3(["-batch", db, """
            ALTER TABLE artist ADD COLUMN country TEXT;
            DROP INDEX album_artist; CREATE INDEX album_title ON album(title);
            DROP VIEW titles; CREATE VIEW titles AS SELECT title, id FROM album;
            """])
        try (dotSchema.replacingOccurrences(of: "title TEXT)", with: "title VARCHAR(80))") + "\nCREATE TABLE genre(id INTEGER PRIMARY KEY);\n")
            .write(toFile: folder.file("ref.sql"), atomically: false, encoding: .utf8)
        r = try litectl("check", "--expect-schema", "ref.sql", "app.db", in: folder.path)
        #expect(r.status == 1)
        #expect(r.stdout.split(separator: "\n").map(String.init) == [
            "app.db: error [schema] album: table album differs from the reference schema: column title: type TEXT here, VARCHAR(80) in the reference",
            "app.db: error [schema] album_artist: index album_artist is in the reference schema but not in the database",
            "app.db: error [schema] album_title: index album_title is in the database but not in the reference schema",
            "app.db: error [schema] artist: table artist differs from the reference schema: column country TEXT is not in the reference",
            "app.db: error [schema] genre: table genre is in the reference schema but not in the database",
            "app.db: error [schema] titles: view titles differs from the reference schema: here `… as select title, id from album`, in the reference `… as select title from album`",
        ], "\(r.stdout)")
        // A baseline accepts the drift; another drift still fails.
        #expect(try litectl("check", "--expect-schema", "ref.sql", "--write-baseline", "b.json", "app.db", in: folder.path).status == 0)
        #expect(try litectl("check", "--expect-schema", "ref.sql", "--baseline", "b.json", "app.db", in: folder.path).status == 0)
        try sqlite3(["-batch", db, "ALTER TABLE artist ADD COLUMN born INTEGER;"])
        r = try litectl("check", "--expect-schema", "ref.sql", "--baseline", "b.json", "app.db", in: folder.path)
        #expect(r.status == 1 && r.stdout.contains("column born INTEGER is not in the reference") && r.stdout.contains("(changed since the baseline"), "\(r.stdout)")
        // A file that is not a schema is an error before any check.
        try "CREATE TABLE a(x);\nINSERT INTO a VALUES (1);\n".write(toFile: folder.file("dump.sql"), atomically: false, encoding: .utf8)
        r = try litectl("check", "--expect-schema", "dump.sql", "app.db", in: folder.path)
        #expect(r.status == 2 && r.stdout.isEmpty)
        #expect(r.stderr == "litectl: dump.sql: statement 2 (INSERT INTO a VALUES (1)) is not a CREATE statement: a reference schema holds the CREATE statements of the schema (as `sqlite3 DB .schema` prints them)\n", "\(r.stderr)")
        #expect(try litectl("check", "--expect-schema", "none.sql", "app.db", in: folder.path).stderr == "litectl: none.sql: no such file\n")
    }

    // MARK: Empty databases

    @Test func anEmptyDatabaseFailsUnlessAllowed() throws {
        let folder = try TemporaryFolder("gate-empty")
        FileManager.default.createFile(atPath: folder.file("zero.db"), contents: Data())
        try makeDatabase(folder.file("bare.db"), "PRAGMA user_version = 4; CREATE VIEW v AS SELECT 1;")
        var r = try litectl("check", "zero.db", "bare.db", in: folder.path)
        #expect(r.status == 1, "an error without --strict: \(r.stderr)")
        #expect(r.stdout == """
            zero.db: error [empty] the file is empty (0 bytes): SQLite reads it as a database without tables (--allow-empty if that is meant)
            bare.db: error [empty] the database holds no tables (--allow-empty if that is meant)

            """)
        r = try litectl("check", "--strict", "--allow-empty", "zero.db", "bare.db", in: folder.path)
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stdout)")
        r = try litectl("check", "-v", "--allow-empty", "zero.db", in: folder.path)
        #expect(r.stdout == "zero.db: note [empty] the file is empty (0 bytes): SQLite reads it as a database without tables (allowed by --allow-empty)\nzero.db: ok\n")
        #expect(try folder.listing() == ["bare.db", "zero.db"], "read-only: no -wal, no journal")
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.file("zero.db"))).isEmpty)
    }

    // MARK: Specification tables

    @Test(.enabled(if: realDatabaseFiles.contains { $0.hasSuffix(".gpkg") }))
    func aGeoPackagePassesStrictAndItsDefinedTablesGiveNotes() throws {
        let source = try #require(realDatabaseFiles.first { $0.hasSuffix(".gpkg") })
        let r = try litectl("check", "--strict", "--json", source)
        #expect(r.status == 0, "\(r.stdout)")
        let report = try firstReport(r.stdout)
        let notes = findings(report).filter { $0["severity"] as? String == "note" }
        #expect(notes.contains { $0["check"] as? String == "no-primary-key" && $0["object"] as? String == "gpkg_extensions" })
        #expect(findings(report).allSatisfy { $0["severity"] as? String == "note" }, "\(findings(report))")
        // The same tables in a file that is no GeoPackage (no application_id, no gpkg_contents) warn.
        let folder = try TemporaryFolder("gate-gpkg")
        try makeDatabase(folder.file("n.db"), "CREATE TABLE gpkg_extensions(table_name TEXT, extension_name TEXT NOT NULL);")
        #expect(try litectl("check", "--strict", "n.db", in: folder.path).status == 1)
    }

    @Test(.enabled(if: realDatabaseFiles.contains { $0.hasSuffix(".mbtiles") }))
    func anMBTilesFileWarnsOnlyOfItsOwnTables() throws {
        let source = try #require(realDatabaseFiles.first { $0.hasSuffix(".mbtiles") })
        let r = try litectl("check", "--strict", "--json", source)
        let report = try firstReport(r.stdout)
        let warnings = findings(report).filter { $0["severity"] as? String != "note" }.map { "\($0["check"] as? String ?? "?"):\($0["object"] as? String ?? "-")" }
        // geocoder_data is carmen's table, not the specification's.
        #expect(warnings == ["no-primary-key:geocoder_data", "redundant-index:geocoder_type_index", "statistics:-"], "\(warnings)")
        let noted = findings(report).filter { $0["severity"] as? String == "note" }.compactMap { $0["object"] as? String }.sorted()
        #expect(noted == ["grid_key", "grid_utfgrid", "images", "keymap", "map", "metadata"])
    }
}
