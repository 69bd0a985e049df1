// Every command speaks alike (issue #29): -q, -v and --json on every command,
// one lock-wait option (--timeout DURATION, --busy-timeout MS kept hidden), one
// size unit family (IEC), warnings on a non-terminal only with -v or in
// --json, compact JSON that parses for any statement count, and messages that
// say what is wrong. Through the built binary, with stdout a pipe as cron has it.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct VoiceTests {
    /// Every command and subcommand, as `litectl help` lists them.
    static let commands: [[String]] = [
        ["info"], ["query"], ["tables"], ["backup"], ["verify"], ["restore"], ["repo", "init"], ["repo", "upgrade"], ["snapshots"], ["forget"],
        ["prune"], ["unlock"], ["diff"], ["patch"], ["hash"], ["check"], ["stats"], ["analyze"], ["transform"],
        ["migrate", "apply"], ["migrate", "status"], ["vacuum"], ["dump"], ["load"], ["recover"], ["report"], ["replicate"], ["demo"],
    ]

    /// Positional arguments that let each command parse (the files need not exist:
    /// -q with -v is refused before anything is read).
    static let positionals: [String: [String]] = [
        "info": ["a.db"], "backup": ["a.db", "out"], "verify": ["b.db"], "restore": ["b.db", "a.db"], "init": ["repo"],
        "diff": ["a.db", "b.db"], "patch": ["a.db", "p.sql"], "hash": ["a.db"], "check": ["a.db"], "stats": ["a.db"],
        "analyze": ["a.db"], "transform": ["a.db", "t"], "apply": ["a.db", "dir"], "status": ["a.db", "dir"],
        "vacuum": ["a.db"], "dump": ["a.db"], "load": ["a.db", "in.sql"], "recover": ["a.db", "out.db"], "tables": ["a.db"],
        "query": ["a.db", "SELECT 1"], "forget": ["--keep-last", "1"], "report": ["a.db", "-o", "r.html"],
        "upgrade": ["repo"], "replicate": ["a.db", "--repo", "repo"],
    ]

    @Test func theCommandListIsComplete() throws {
        let help = try litectl("--help").stdout
        // "  name   abstract" lines (continuations are indented further), up to the blank line.
        let listed = help.split(separator: "\n", omittingEmptySubsequences: false).drop { !$0.hasPrefix("SUBCOMMANDS:") }.dropFirst()
            .prefix { !$0.isEmpty }
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }.filter { $0 != "help" }
        #expect(Set(listed) == Set(Self.commands.map { $0[0] }), "\(listed)")
    }

    /// -q, -v and --json parse on every command: giving -q with -v (or with
    /// --json) is the one usage error every command reports, before it
    /// looks at anything else.
    @Test(arguments: commands)
    func everyCommandAcceptsQuietVerboseAndJSON(_ command: [String]) throws {
        for (flags, words) in [(["-q", "-v"], "-q and -v contradict each other"), (["--json", "-q"], "-q prints nothing, --json prints JSON")] {
            let r = try runProcess(litectlBinary, command + (Self.positionals[command.last!] ?? []) + flags)
            #expect(r.status == 64, "\(command) \(flags): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains(words), "\(command) \(flags): \(r.stderr)")
        }
        let help = try runProcess(litectlBinary, command + ["--help"]).stdout
        for option in ["-q, --quiet", "-v, --verbose", "--json"] {
            #expect(help.contains(option), "\(command) --help lists \(option)")
        }
    }

    /// The commands that wait for locks take --timeout DURATION; the old
    /// --busy-timeout MS still works but is hidden; a negative wait is said
    /// as such, with the forms a duration takes (not "Missing value").
    @Test(arguments: [["info", "a.db"], ["check", "a.db"], ["backup", "a.db", "out"], ["restore", "b.db", "a.db"],
                      ["forget", "--keep-last", "1"], ["prune"], ["migrate", "a.db", "dir"], ["patch", "a.db", "p.sql"],
                      ["dump", "a.db"], ["vacuum", "a.db"], ["query", "a.db", "SELECT 1"], ["stats", "a.db"],
                      ["replicate", "a.db", "--repo", "repo"]])
    func oneTimeoutOption(_ command: [String]) throws {
        let help = try runProcess(litectlBinary, (command[0] == "migrate" ? ["migrate", "apply"] : [command[0]]) + ["--help"]).stdout
        #expect(help.contains("--timeout <duration>"), "\(command)")
        #expect(!help.contains("--busy-timeout"), "\(command): the old spelling is hidden")
        let r = try runProcess(litectlBinary, command + ["--timeout", "-5"])
        #expect(r.status == 64 && r.stderr.contains("--timeout") && r.stderr.contains("give a duration like"), "\(command): \(r.stderr)")
    }

    @Test func theOldBusyTimeoutStillWorksAndTimeoutIsSeconds() throws {
        let folder = try TemporaryFolder("voice-timeout")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let holder = try ShellSession(db)
        defer { holder.close() }
        holder.run("BEGIN EXCLUSIVE; INSERT INTO t VALUES (2);")
        for (flags, least) in [(["--timeout", "0.4"], 0.4), (["--busy-timeout", "400"], 0.4)] {
            let started = Date()
            let r = try runProcess(litectlBinary, ["info"] + flags + [db])
            #expect(r.status == 2 && r.stderr.contains("gave up after waiting"), "\(flags): \(r.stderr)")
            #expect(Date().timeIntervalSince(started) >= least, "\(flags)")
        }
    }

    /// One size unit family: IEC (KiB, MiB) everywhere, as docs/output.md says.
    @Test func sizesAreIEC() throws {
        let folder = try TemporaryFolder("voice-sizes")
        let db = folder.file("a.db"), out = folder.file("out"), repo = folder.file("repo")
        try makeDatabase(db, "CREATE TABLE t(x); WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<3000) INSERT INTO t SELECT randomblob(1000) FROM r;")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        var texts: [String] = []
        texts.append(try litectl("backup", "-v", db, out).stdout)
        #expect(try litectl("repo", "init", repo).status == 0)
        texts.append(try litectl("backup", "-v", db, "--repo", repo).stdout)
        texts.append(try litectl("snapshots", "--repo", repo).stdout)
        texts.append(try litectl("info", db).stdout)
        texts.append(try litectl("stats", "--format", "table", db).stdout)
        for text in texts {
            #expect(text.contains("KiB") || text.contains("MiB"), "\(text)")
            #expect(!text.contains(" MB") && !text.contains(" KB"), "\(text)")
        }
    }

    /// check on a non-terminal (cron, CI) prints only what fails the check;
    /// -v prints every finding; --json always carries them; -q nothing.
    @Test func checkWarningsOnANonTerminal() throws {
        let folder = try TemporaryFolder("voice-check")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE nokey(x); INSERT INTO nokey VALUES (1);")
        var r = try litectl("check", db)
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "a warning, exit 0: cron mails nothing: \(r.stdout)")
        r = try litectl("check", "-v", db)
        #expect(r.status == 0 && r.stdout.contains("warning [no-primary-key]"), "\(r.stdout)")
        r = try litectl("check", "--strict", db)
        #expect(r.status == 1 && r.stdout.contains("warning [no-primary-key]"), "with --strict it fails, and says why: \(r.stdout)")
        r = try litectl("check", "--json", db)
        #expect(r.stdout.contains("\"no-primary-key\""), "\(r.stdout)")
        r = try litectl("check", "-q", "--strict", db)
        #expect(r.status == 1 && r.stdout.isEmpty)
    }

    /// --json output is compact and parses, for any statement count.
    @Test func jsonIsCompactAndValid() throws {
        let folder = try TemporaryFolder("voice-json")
        let db = folder.file("a.db"), damaged = folder.file("d.db"), repo = folder.file("repo")
        try makeDatabase(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'a'), (2, 'b');")
        try FileManager.default.copyItem(atPath: db, toPath: damaged)
        #expect(try litectl("repo", "init", repo).status == 0)
        #expect(try litectl("backup", db, "--repo", repo).status == 0)
        // Commands whose --json is one document (rows one per line inside it).
        let documents: [[String]] = [
            ["query", "--write", db, "SELECT * FROM t; SELECT count(*) AS n FROM t; CREATE TEMP TABLE x(y); SELECT 1 AS one", "--json"],
            ["query", db, "SELECT * FROM t", "--json"], ["query", db, "SELECT * FROM t WHERE 0", "--json"],
            ["query", "--write", db, "UPDATE t SET v = v", "--json"],
            ["tables", "--json", db], ["analyze", "--dry-run", "--json", db], ["diff", "--json", db, damaged],
        ]
        for arguments in documents {
            let r = try runProcess(litectlBinary, arguments)
            #expect(r.status == 0, "\(arguments): \(r.stderr)")
            #expect((try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) != nil, "\(arguments): one JSON document: \(r.stdout.prefix(300))")
        }
        // Commands whose --json is one compact object per line (per database, backup, item).
        let lines: [[String]] = [
            ["stats", db, "--json"], ["recover", "--json", damaged, folder.file("r.db")], ["info", "--json", db],
            ["hash", "--json", "--per-table", db], ["check", "--json", db], ["snapshots", "--json", "--repo", repo],
            ["verify", "--json", "--repo", repo], ["restore", "--json", "--repo", repo, "latest", folder.file("r2.db")],
        ]
        for arguments in lines {
            let r = try runProcess(litectlBinary, arguments)
            #expect(r.status == 0, "\(arguments): \(r.stderr)")
            let objects = r.stdout.split(separator: "\n")
            #expect(!objects.isEmpty, "\(arguments) printed nothing")
            for line in objects {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "\(arguments): \(line.prefix(200))")
            }
        }
        let several = try litectl("query", "--write", db, "SELECT * FROM t; SELECT count(*) AS n FROM t; CREATE TEMP TABLE x(y); SELECT 1 AS one", "--json")
        let value = try JSONSerialization.jsonObject(with: Data(several.stdout.utf8)) as? [[[String: Any]]]
        #expect(value?.count == 3 && value?[0].count == 2 && value?[1].first?["n"] as? Int == 2, "\(several.stdout)")
        // A file backup restored with --json (not only --repo).
        let backup = folder.file("b.db")
        #expect(try litectl("backup", db, backup).status == 0)
        let restored = try litectl("restore", "--json", backup, folder.file("r3.db"))
        #expect(restored.status == 0 && (try? JSONSerialization.jsonObject(with: Data(restored.stdout.utf8))) != nil, "\(restored.stderr)")
    }

    /// verify is silent on success off a terminal, file backups and
    /// repositories alike; -v prints the ok lines; a bad backup always prints.
    @Test func verifyIsSilentOnSuccessAndSaysOkWithVerbose() throws {
        let folder = try TemporaryFolder("voice-verify")
        let db = folder.file("a.db"), backup = folder.file("b.db"), repo = folder.file("repo")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        #expect(try litectl("backup", db, backup).status == 0)
        #expect(try litectl("repo", "init", repo).status == 0)
        #expect(try litectl("backup", db, "--repo", repo).status == 0)
        var r = try litectl("verify", backup)
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stdout)")
        r = try litectl("verify", "--repo", repo, "--read-data")
        #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stdout)")
        r = try litectl("verify", "-v", backup)
        #expect(r.status == 0 && r.stdout.hasPrefix("ok \(backup)"), "\(r.stdout)")
        r = try litectl("verify", "-v", "--repo", repo, "--read-data")
        #expect(r.status == 0 && r.stdout.hasPrefix("ok \(repo): 1 snapshots"), "\(r.stdout)")
        try Data("junk".utf8).write(to: URL(fileURLWithPath: backup))
        r = try litectl("verify", backup)
        #expect(r.status == 1 && r.stdout.hasPrefix("BAD \(backup)"), "\(r.stdout)")
        r = try litectl("verify", "-q", backup)
        #expect(r.status == 1 && r.stdout.isEmpty)
    }

    @Test func messagesSayWhatIsWrong() throws {
        let folder = try TemporaryFolder("voice-messages")
        let db = folder.file("a.db"), repo = folder.file("repo"), config = folder.file("host.toml")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        var r = try litectl("repo", "init", "")
        #expect(r.status == 64 && r.stderr.contains("The repository location is empty"), "\(r.stderr)")
        #expect(try litectl("repo", "init", repo).status == 0)
        #expect(try litectl("backup", db, "--repo", repo).status == 0)
        try "repository = \"\(repo)\"\ndatabases = []\n".write(toFile: config, atomically: true, encoding: .utf8)
        r = try litectl("backup", "--config", config)
        #expect(r.status == 2 && r.stderr.contains("databases is empty"), "\(r.stderr)")
        r = try litectl("restore", "--repo", repo, "latest", folder.path)
        #expect(r.status == 2 && r.stderr.contains("is a folder; give the path of the database file") && !r.stderr.contains("--force"), "\(r.stderr)")
        let snapshot = try #require((try JSONSerialization.jsonObject(with: Data(try litectl("snapshots", "--json", "--repo", repo).stdout.utf8)) as? [String: Any])?["id"] as? String)
        r = try litectl("restore", "--repo", repo, String(snapshot.prefix(1)), folder.file("x.db"))
        #expect(r.status == 2 && r.stderr.contains("too short to name a snapshot"), "\(r.stderr)")
        r = try litectl("restore", "--repo", repo, String(snapshot.prefix(4)), folder.file("x.db"))
        #expect(r.status == 0, "four digits name it: \(r.stderr)")
        r = try litectl("snapshots", "--repo", repo, "--key-file", folder.file("no.key"))
        #expect(r.status == 0 && r.stderr.contains("warning: \(repo): the repository is not encrypted, so --key-file"), "\(r.stderr)")
    }

    @Test func demoIsQuietAndSpeaksJSON() throws {
        var r = try litectl("demo", "-q")
        #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.stdout) \(r.stderr)")
        r = try litectl("demo", "--json")
        let lines = r.stdout.split(separator: "\n")
        #expect(r.status == 0 && lines.count > 10, "\(r.stderr)")
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["command"] is String && object?["exit_status"] is Int, "\(line)")
        }
    }
}

extension VoiceTests {
    func litectl(_ arguments: String...) throws -> ProcessResult { try runProcess(litectlBinary, arguments) }
}
