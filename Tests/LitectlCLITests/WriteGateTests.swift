// The write gate, tried over every command and every option that takes a path,
// generated from the commands themselves: every subcommand `litectl --help`
// lists and every path option its `--experimental-dump-help` declares is
// pointed at each member of a run's protected set (the source, its -wal, a
// backup, a repository's config and a pack, the key file, the config file),
// and must leave every byte of every member as it was; an output (found by
// running the option once on a new path: a file appears) or key option must
// be refused. A new command needs one template line here (the test fails
// naming it until it has one); a new option is covered without a line.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct WriteGateTests {
    /// The files every run is pointed at, made afresh for each command.
    struct Fixture {
        let folder: TemporaryFolder
        var paths: [String: String] = [:]

        /// The protected members, by name.
        static let members = ["src", "src-wal", "backup", "repo-config", "pack", "key", "toml"]

        init() throws {
            folder = try TemporaryFolder("write-gate")
            let f = folder
            func put(_ name: String, _ path: String) { paths[name] = path }
            // A WAL database whose -wal holds committed frames (its writer
            // was killed before it could checkpoint and remove it).
            let src = f.file("src.db")
            let writer = try runProcess("/usr/bin/python3", ["-c", """
                import sqlite3, os, sys
                c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA wal_autocheckpoint=0')
                c.execute('CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)')
                c.executemany('INSERT INTO t(v) VALUES (?)', [('row %d' % i,) for i in range(200)]); c.commit()
                os._exit(0)
                """, src])
            guard writer.status == 0, FileManager.default.fileExists(atPath: src + "-wal") else {
                throw DatabaseError(code: .error, message: "could not make the WAL fixture: \(writer.stderr)")
            }
            put("src", src); put("src-wal", src + "-wal")
            try makeDatabase(f.file("other.db"), "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'x');")
            put("other", f.file("other.db"))
            put("copy", try f.copy(f.file("other.db"), as: "copy.db"))
            try FileManager.default.createDirectory(atPath: f.file("bk"), withIntermediateDirectories: false)
            try expectOK(litectl("backup", src, f.file("bk")))
            let backup = try #require(try FileManager.default.contentsOfDirectory(atPath: f.file("bk")).first { $0.hasSuffix(".db") })
            put("bkdir", f.file("bk")); put("backup", f.file("bk/" + backup))
            put("key", f.file("repo.key"))
            try expectOK(litectl("repo", "init", f.file("repo"), "--key-file", f.file("repo.key")))
            try expectOK(litectl("backup", src, "--repo", f.file("repo"), "--key-file", f.file("repo.key")))
            put("repo", f.file("repo")); put("repo-config", f.file("repo/config"))
            let packs = try FileManager.default.subpathsOfDirectory(atPath: f.file("repo/packs")).filter { $0.count > 3 }
            put("pack", f.file("repo/packs/" + (try #require(packs.first))))
            let toml = f.file("host.toml")
            try "repository = \"\(f.file("repo"))\"\nkey_file = \"\(f.file("repo.key"))\"\ndatabases = [\"\(src)\"]\n"
                .write(toFile: toml, atomically: false, encoding: .utf8)
            put("toml", toml)
            try "UPDATE t SET v = 'y' WHERE id = 1;\n".write(toFile: f.file("patch.sql"), atomically: false, encoding: .utf8)
            put("patch", f.file("patch.sql"))
            try FileManager.default.createDirectory(atPath: f.file("migrations"), withIntermediateDirectories: false)
            try "ALTER TABLE t ADD COLUMN w TEXT;\n".write(toFile: f.file("migrations/001_w.sql"), atomically: false, encoding: .utf8)
            put("migrations", f.file("migrations"))
            let stats = try litectl("stats", "--json", src)
            try stats.stdout.write(toFile: f.file("stats.json"), atomically: false, encoding: .utf8)
            put("stats", f.file("stats.json"))
            try litectl("dump", f.file("other.db"), "-o", f.file("dump.sql")).status == 0 ? () : ()
            put("dump", f.file("dump.sql"))
            try FileManager.default.createDirectory(atPath: f.file("out"), withIntermediateDirectories: false)
            put("out-folder", f.file("out"))
        }

        func expectOK(_ r: ProcessResult) throws {
            guard r.status == 0 else { throw DatabaseError(code: .error, message: "fixture: \(r.stderr)") }
        }

        /// The bytes of every member (and whether each exists).
        func fingerprints() -> [String: Data?] {
            var out: [String: Data?] = [:]
            for name in Self.members { out[name] = FileManager.default.contents(atPath: paths[name]!) }
            return out
        }

        /// A fresh path under out/ (for outputs that must not exist yet).
        mutating func fresh(_ name: String) -> String {
            folder.file("out/\(name)-\(UUID().uuidString.prefix(8))")
        }
    }

    /// How a command is run when nothing is pointed anywhere odd. `{name}`
    /// is a fixture path, `{new}` a fresh path; a positional written
    /// `out:{...}` is an output, `in-place:{...}` a database changed in place.
    static let templates: [String: [[String]]] = [
        "info": [["{src}"]],
        "query": [["{src}", "SELECT count(*) FROM t"]],
        "tables": [["{src}"]],
        "backup": [["{src}", "out:{bkdir}"], ["{src}", "--repo", "{repo}", "--key-file", "{key}"], ["--config", "{toml}"]],
        "verify": [["{backup}"], ["--repo", "{repo}", "--key-file", "{key}"]],
        "restore": [["{backup}", "out:{new}"], ["--repo", "{repo}", "--key-file", "{key}", "latest", "out:{new}"]],
        "repo init": [["out:{new}", "--key-file", "{new}"]],
        "repo upgrade": [["{repo}", "--key-file", "{key}"]],
        "snapshots": [["--repo", "{repo}", "--key-file", "{key}"]],
        "forget": [["--repo", "{repo}", "--key-file", "{key}", "--keep-last", "5"]],
        "prune": [["--repo", "{repo}", "--key-file", "{key}"]],
        "unlock": [["--repo", "{repo}", "--key-file", "{key}"]],
        "replicate": [["{src}", "--repo", "{repo}", "--key-file", "{key}"]],
        "diff": [["{src}", "{other}"]],
        "patch": [["in-place:{copy}", "{patch}"]],
        "hash": [["{src}"]],
        "check": [["{src}"]],
        "stats": [["{src}"]],
        "analyze": [["in-place:{copy}"]],
        "transform": [["in-place:{copy}", "t", "--type", "v=TEXT"]],
        "migrate apply": [["in-place:{copy}", "{migrations}"]],
        "migrate status": [["{copy}", "{migrations}"]],
        "migrate lint": [["{src}", "{migrations}"]],
        "vacuum": [["in-place:{copy}"], ["{src}", "--into", "{new}"]],
        "dump": [["{src}", "-o", "{new}"]],
        "load": [["in-place:{copy}", "{dump}"]],
        "recover": [["{src}", "out:{new}"]],
        "report": [["{src}", "-o", "{new}"], ["{src}", "{other}", "-o", "{new}"]],
        "demo": [[]],
    ]

    /// Options whose value names a path (from `--experimental-dump-help`).
    static let pathValueNames: Set<String> = ["path", "file", "dir", "folder", "old.json", "alias=path", "glob-or-path"]
    /// Options that name a secret: a key file may not be a database, an
    /// input or inside the repository, whatever the command.
    static let secretOptions: Set<String> = ["--key-file", "--passphrase-file"]

    struct Option { var flag: String; var valueName: String }

    /// Every subcommand path ("repo init") with its path-taking options.
    static func commands() throws -> [(String, [Option])] {
        let dump = try litectl("--experimental-dump-help")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var out: [(String, [Option])] = []
        func walk(_ command: [String: Any], _ prefix: [String]) {
            let name = command["commandName"] as? String ?? ""
            let path = prefix + (prefix.isEmpty && name == "litectl" ? [] : [name])
            let subcommands = command["subcommands"] as? [[String: Any]] ?? []
            if !path.isEmpty && subcommands.isEmpty && name != "help" {
                var options: [Option] = []
                for argument in command["arguments"] as? [[String: Any]] ?? [] {
                    guard argument["kind"] as? String == "option", argument["shouldDisplay"] as? Bool != false,
                          let valueName = argument["valueName"] as? String else { continue }
                    let names = (argument["names"] as? [[String: Any]] ?? []).compactMap { n -> String? in
                        guard let s = n["name"] as? String else { return nil }
                        return (n["kind"] as? String == "short" ? "-" : "--") + s
                    }
                    guard let flag = names.first(where: { $0.hasPrefix("--") }) ?? names.first else { continue }
                    if pathValueNames.contains(valueName) || (valueName == "url" && flag == "--repo") {
                        options.append(Option(flag: flag, valueName: valueName))
                    }
                }
                out.append((path.joined(separator: " "), options))
            }
            for sub in subcommands { walk(sub, path) }
        }
        walk(json["command"] as? [String: Any] ?? [:], [])
        return out
    }

    @Test func everyCommandIsEnumeratedAndHasATemplate() throws {
        let commands = try Self.commands().map(\.0)
        // The command list `litectl --help` prints is the one enumerated.
        let help = try litectl("--help").stdout
        let section = try #require(help.components(separatedBy: "SUBCOMMANDS:").last?.components(separatedBy: "\n\n").first)
        let listed = section.split(separator: "\n").compactMap { line -> String? in
            let word = line.split(separator: " ").first.map(String.init)
            return line.hasPrefix("  ") && !line.hasPrefix("   ") ? word : nil
        }
        #expect(listed.count > 20, "\(listed)")
        for word in listed where word != "help" {
            #expect(commands.contains { $0 == word || $0.hasPrefix(word + " ") }, "\(word) is listed by --help but not enumerated")
        }
        for command in commands {
            #expect(Self.templates[command] != nil, "\(command) has no template in WriteGateTests.templates: add one")
        }
        // Every output and key option of today is among those enumerated.
        let flags = Set(try Self.commands().flatMap { $0.1.map(\.flag) })
        for flag in ["--metrics-file", "--output", "--into", "--backup-dir", "--key-file", "--passphrase-file", "--config", "--compare"] {
            #expect(flags.contains(flag), "\(flag)")
        }
    }

    /// Runs litectl with a deadline (replicate follows until stopped): SIGTERM
    /// at the deadline, and its status then.
    static func run(_ arguments: [String], seconds: Double = 20) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: litectlBinary)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        nonisolated(unsafe) var outData = Data(), errData = Data()
        let group = DispatchGroup()
        group.enter(); DispatchQueue.global().async { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        group.enter(); DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        group.wait()
        process.waitUntilExit()
        return ProcessResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errData, as: UTF8.self), stdoutBytes: Array(outData))
    }

    /// The template with its tokens filled in: positional roles stripped,
    /// `{new}` a fresh path each time. A secret option under test replaces
    /// the template's other secret (they exclude each other).
    static func fill(_ template: [String], _ fixture: inout Fixture, testing flag: String? = nil) -> [String] {
        var template = template
        if let flag, secretOptions.contains(flag) {
            for other in secretOptions where other != flag {
                if let at = template.firstIndex(of: other) { template.removeSubrange(at...at + 1) }
            }
        }
        return template.map { word in
            var w = word
            for prefix in ["out:", "in-place:"] where w.hasPrefix(prefix) { w.removeFirst(prefix.count) }
            if w == "{new}" { return fixture.fresh("new") }
            if w.hasPrefix("{") && w.hasSuffix("}"), let path = fixture.paths[String(w.dropFirst().dropLast())] { return path }
            return w
        }
    }

    /// One run pointed at `member`, and what must hold after it.
    func check(_ command: String, _ arguments: [String], member: String, mustRefuse: Bool, fixture: Fixture,
               sourceLocation: SourceLocation = #_sourceLocation) throws {
        let before = fixture.fingerprints()
        let words = command.split(separator: " ").map(String.init) + arguments
        let seconds = command == "replicate" ? 4.0 : 30
        let result = try Self.run(words, seconds: seconds)
        let after = fixture.fingerprints()
        for name in Fixture.members where before[name]! != after[name]! {
            Issue.record("litectl \(words.joined(separator: " ")) changed \(name) (exit \(result.status): \(result.stderr))",
                         sourceLocation: sourceLocation)
        }
        if mustRefuse {
            #expect(result.status == 2 || result.status == 64,
                    "litectl \(words.joined(separator: " ")) pointed at \(member) was not refused (exit \(result.status)): \(result.stderr)",
                    sourceLocation: sourceLocation)
            // A refusal is one line naming its cause (a usage error is ArgumentParser's).
            let lines = result.stderr.split(separator: "\n")
            #expect(result.status == 64 || (lines.count == 1 && lines[0].hasPrefix("litectl: ")),
                    "litectl \(words.joined(separator: " ")): \(result.stderr)", sourceLocation: sourceLocation)
        }
    }

    /// Commands run one after the other: each gets a fixture of its own.
    @Test(arguments: templates.keys.sorted())
    func everyPathOfACommandLeavesTheProtectedSetAlone(_ command: String) throws {
        let options = try #require(try Self.commands().first { $0.0 == command }?.1)
        for template in try #require(Self.templates[command]) {
            var fixture = try Fixture()
            let uses = Set(template.compactMap { w -> String? in
                guard let open = w.firstIndex(of: "{"), w.hasSuffix("}") else { return nil }
                return String(w[w.index(after: open)..<w.index(before: w.endIndex)])
            })
            // A key or config file is a protected member of the runs that read it.
            func protects(_ member: String) -> Bool {
                switch member {
                case "key": uses.contains("key") || uses.contains("toml")
                case "toml": uses.contains("toml")
                default: true
                }
            }
            // Positionals that are outputs or changed in place.
            for (index, word) in template.enumerated() where word.hasPrefix("out:") || word.hasPrefix("in-place:") {
                for member in Fixture.members {
                    var arguments = Self.fill(template, &fixture)
                    arguments[index] = fixture.paths[member]!
                    // A database changed in place may be any database the user names.
                    let inPlaceDatabase = word.hasPrefix("in-place:") && ["src", "backup"].contains(member)
                    if inPlaceDatabase { continue }
                    try check(command, arguments, member: member, mustRefuse: protects(member), fixture: fixture)
                }
            }
            for option in options {
                let flag = option.flag
                // Its role, found by running it once on a new path.
                var probeArguments = Self.fill(template, &fixture, testing: flag)
                let probe = fixture.fresh("probe")
                let probeValue = option.valueName == "alias=path" ? "p=" + probe : probe
                if let at = probeArguments.firstIndex(of: flag) { probeArguments[at + 1] = probeValue } else { probeArguments += [flag, probeValue] }
                _ = try Self.run(command.split(separator: " ").map(String.init) + probeArguments,
                                 seconds: command == "replicate" ? 4 : 30)
                let isOutput = FileManager.default.fileExists(atPath: probe)
                let isSecret = Self.secretOptions.contains(flag)
                for member in Fixture.members {
                    var arguments = Self.fill(template, &fixture, testing: flag)
                    let value = option.valueName == "alias=path" ? "m=" + fixture.paths[member]! : fixture.paths[member]!
                    if let at = arguments.firstIndex(of: flag) { arguments[at + 1] = value } else { arguments += [flag, value] }
                    // The key file is what a key option is for; the config file what --config is for.
                    let legitimate = (isSecret && member == "key") || (flag == "--config" && member == "toml")
                    let mustRefuse = !legitimate && (isOutput || isSecret) && protects(member)
                    try check(command, arguments, member: member, mustRefuse: mustRefuse, fixture: fixture)
                }
            }
        }
    }
}
