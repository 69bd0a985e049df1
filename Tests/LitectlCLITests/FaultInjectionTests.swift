// Fault injection for the writes into a user's database (issue 37, item 3):
// restore --force (a backup file, --in-place, --repo), vacuum (and
// --in-place), patch, load, transform and migrate, each stopped by SIGINT,
// SIGTERM, SIGHUP and SIGKILL after random delays (a fresh seed each run, printed with
// every failure; LITECTL_FAULT_SEED=N repeats a run), and each run on a file
// system too small for its new content (a tmpfs mount; skipped where this
// process may not mount). Afterwards the target holds exactly one of its
// states (the logical hash of a copy, against hashes of files the command never
// touched or the sqlite3 shell made), no hot journal unless SIGKILL stopped
// SQLite inside a transaction, and the next litectl command on it works.
import Foundation
import Testing
import TestSupport

@Suite struct FaultInjectionTests {
    /// The commands under test (a command and the way it writes).
    enum Command: String, CaseIterable, Sendable {
        case restore, restoreInPlace, restoreRepo, vacuum, vacuumInPlace, patch, load, transform, migrate
    }

    /// One command's files, its command line, and the states its target may hold.
    struct Fixture {
        var folder: TemporaryFolder
        /// The folder the target is in (a tmpfs mount for the full-disk case).
        var targetFolder: String
        var target: String
        var arguments: [String]
        /// The logical hashes the target may hold: the old content first,
        /// the new last (a migration's versions between).
        var states: [String]
        /// The old content, copied over the target before each run.
        var pristine: String
        /// True when SQLite may be stopped inside a transaction on the target
        /// itself (SIGKILL may then leave its journal, as for any writer).
        var writesInPlace: Bool
        /// True when running the command again after it succeeded is fine.
        var repeatable: Bool
        /// Tables whose content counts (nil: every one; migrate leaves out its ledger).
        var ledger: Bool
    }

    /// Rows of the tables the fixtures start from (about 1.1 KB each).
    static let rows = 4000

    /// The base database: t(id, v, b), `rows` rows, 4.5 MB.
    static func makeBase(_ path: String, salt: String = "") throws {
        try makeDatabase(path, """
            CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL, b BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < \(rows))
              INSERT INTO t SELECT i, printf('%s-row-%08d', '\(salt)', i), zeroblob(1000) FROM r;
            CREATE INDEX t_v ON t(v);
            """)
    }

    /// The logical hash of what `target` holds as SQLite would read it: a
    /// copy of it and its journal, rolled back by the sqlite3 shell (a
    /// read-write open rolls a hot journal back), its ledger left out for a
    /// migration, hashed by `litectl hash`. The target itself is not opened.
    static func contentHash(_ target: String, ledger: Bool) throws -> String {
        let scratch = try TemporaryFolder("fault-hash")
        let copy = scratch.file("copy.db")
        try FileManager.default.copyItem(atPath: target, toPath: copy)
        if FileManager.default.fileExists(atPath: target + "-journal") {
            try FileManager.default.copyItem(atPath: target + "-journal", toPath: copy + "-journal")
        }
        _ = try sqlite3(["-batch", copy, ledger ? "DROP TABLE IF EXISTS _litectl_migrations" : "SELECT count(*) FROM sqlite_schema"])
        let result = try runProcess(litectlBinary, ["hash", copy])
        guard result.status == 0 else { throw POSIXError(.EIO) }
        return String(result.stdout.prefix(64))
    }

    /// True when `path-journal` has a journal header (SQLite deletes,
    /// truncates or zeroes it when a transaction ends).
    static func hotJournal(_ path: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: path + "-journal"), data.count >= 8 else { return false }
        return data.prefix(8).contains { $0 != 0 }
    }

    static func leftovers(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".tmp-") }.sorted()
    }

    /// Builds `command`'s fixture with the target in `targetFolder` (nil: the fixture's own folder).
    static func fixture(_ command: Command, targetFolder: String? = nil) throws -> Fixture {
        let folder = try TemporaryFolder("fault-\(command.rawValue)")
        let pristine = folder.file("pristine.db")
        try makeBase(pristine)
        let where_ = targetFolder ?? folder.path
        let target = where_ + "/target.db"
        let old = try contentHash(pristine, ledger: false)
        /// The new content made by the sqlite3 shell running `script` on a copy of the old.
        func bySQLite(_ name: String, _ script: String) throws -> String {
            let copy = folder.file(name)
            try FileManager.default.copyItem(atPath: pristine, toPath: copy)
            _ = try sqlite3(["-batch", "-bail", copy], input: script)
            return try contentHash(copy, ledger: false)
        }
        var fixture = Fixture(folder: folder, targetFolder: where_, target: target, arguments: [], states: [old], pristine: pristine,
                              writesInPlace: true, repeatable: false, ledger: false)
        switch command {
        case .restore, .restoreInPlace, .restoreRepo:
            let source = folder.file("source.db")
            try makeBase(source, salt: "new")
            try makeDatabase(source, "CREATE TABLE extra AS SELECT id, v FROM t;")
            fixture.states.append(try contentHash(source, ledger: false))
            fixture.repeatable = true
            if command == .restoreRepo {
                #expect(try litectl("repo", "init", folder.file("repo")).status == 0)
                let backup = try litectl("backup", source, "--repo", folder.file("repo"))
                #expect(backup.status == 0, "\(backup.stderr)")
                fixture.arguments = ["restore", "--repo", folder.file("repo"), "latest", "--force", target]
                fixture.writesInPlace = false
            } else {
                let backup = try litectl("backup", source, folder.file("backup.db"))
                #expect(backup.status == 0, "\(backup.stderr)")
                fixture.arguments = ["restore", "--force", "--no-keep"] + (command == .restoreInPlace ? ["--in-place"] : [])
                    + [folder.file("backup.db"), target]
                fixture.writesInPlace = command == .restoreInPlace
            }
        case .vacuum, .vacuumInPlace:
            // Half the rows gone: free pages to give back; the logical content stays.
            _ = try sqlite3(["-batch", pristine, "DELETE FROM t WHERE id % 2 = 0"])
            fixture.states = [try contentHash(pristine, ledger: false)]
            fixture.arguments = ["vacuum", "-q"] + (command == .vacuumInPlace ? ["--in-place"] : []) + [target]
            fixture.writesInPlace = command == .vacuumInPlace
            fixture.repeatable = true
        case .patch:
            // Many short statements (the signal is seen between them), each growing a row.
            var patch = "BEGIN;\n"
            for id in stride(from: 1, through: rows, by: 1) {
                patch += "UPDATE t SET v = 'patched-\(id)', b = zeroblob(\(1000 + id % 7 * 100)) WHERE id = \(id);\n"
            }
            patch += "COMMIT;\n"
            try patch.write(toFile: folder.file("patch.sql"), atomically: true, encoding: .utf8)
            fixture.states.append(try bySQLite("patched.db", patch))
            fixture.arguments = ["patch", target, folder.file("patch.sql")]
        case .load:
            // 3.6 MB in 400 statements (load reads long literals slowly in a debug build).
            var dump = "BEGIN;\nCREATE TABLE loaded (id INTEGER PRIMARY KEY, body BLOB, n INTEGER);\n"
            for id in 1...400 {
                dump += "INSERT INTO loaded VALUES (\(id), zeroblob(9000), \(id * 7));\n"
            }
            dump += "CREATE INDEX loaded_n ON loaded(n);\nCOMMIT;\n"
            try dump.write(toFile: folder.file("dump.sql"), atomically: true, encoding: .utf8)
            fixture.states.append(try bySQLite("loaded.db", dump))
            fixture.arguments = ["load", target, folder.file("dump.sql")]
        case .transform:
            // A rename keeps every value: the whole table is copied (the 12-step rebuild).
            let plan = try runProcess(litectlBinary, ["transform", pristine, "t", "--rename", "v=w", "--sql"])
            #expect(plan.status == 0, "\(plan.stderr)")
            fixture.states.append(try bySQLite("transformed.db", plan.stdout))
            fixture.arguments = ["transform", target, "t", "--rename", "v=w"]
        case .migrate:
            let migrations = folder.file("migrations")
            try FileManager.default.createDirectory(atPath: migrations, withIntermediateDirectories: false)
            let first = "CREATE TABLE m AS SELECT * FROM t;\nCREATE INDEX m_v ON m(v);\n"
            let second = "UPDATE m SET v = upper(v), b = zeroblob(1200);\n"
            try first.write(toFile: migrations + "/0001_copy.sql", atomically: true, encoding: .utf8)
            try second.write(toFile: migrations + "/0002_grow.sql", atomically: true, encoding: .utf8)
            fixture.states.append(try bySQLite("v1.db", first + "PRAGMA user_version = 1;\n"))
            fixture.states.append(try bySQLite("v2.db", first + second + "PRAGMA user_version = 2;\n"))
            fixture.arguments = ["migrate", target, migrations, "--backup-dir", folder.path]
            fixture.ledger = true
            fixture.repeatable = true
        }
        return fixture
    }

    /// Puts the old content at the target, and nothing beside it.
    static func reset(_ fixture: Fixture) throws {
        let manager = FileManager.default
        for suffix in ["", "-journal", "-wal", "-shm"] { try? manager.removeItem(atPath: fixture.target + suffix) }
        for name in try leftovers(fixture.targetFolder) { try? manager.removeItem(atPath: fixture.targetFolder + "/" + name) }
        try manager.copyItem(atPath: fixture.pristine, toPath: fixture.target)
    }

    /// The seed of this run's delays: LITECTL_FAULT_SEED, else the clock.
    static let seed: UInt64 = {
        if let given = ProcessInfo.processInfo.environment["LITECTL_FAULT_SEED"], let seed = UInt64(given) { return seed }
        return UInt64(Date().timeIntervalSince1970 * 1_000_000)
    }()

    /// Runs litectl with `arguments` and sends `signal` after `delay` seconds
    /// (when it is still running), counted from its start or, with
    /// `writing`, from when it begins to write the target (its journal or a
    /// temporary file beside it appears). Returns its status (or the signal
    /// that ended it) and stderr.
    static func run(_ arguments: [String], signal: Int32, after delay: Double,
                    writing target: String? = nil) throws -> (status: Int32, killedBy: Int32?, stderr: String) {
        let (pid, errors) = try spawn([litectlBinary] + arguments)
        nonisolated(unsafe) var errData = [UInt8]()
        let reader = DispatchGroup()
        reader.enter()
        DispatchQueue.global().async {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(errors, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                errData += buffer[0..<n]
            }
            close(errors)
            reader.leave()
        }
        var status: Int32 = 0
        var done = false
        func running() -> Bool {
            if done { return false }
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { done = true }
            return !done
        }
        if let target {
            let folder = (target as NSString).deletingLastPathComponent, stem = "." + (target as NSString).lastPathComponent + ".tmp-"
            let deadline = Date().addingTimeInterval(30)
            while running() && Date() < deadline {
                if FileManager.default.fileExists(atPath: target + "-journal") { break }
                if let names = try? FileManager.default.contentsOfDirectory(atPath: folder), names.contains(where: { $0.hasPrefix(stem) }) { break }
                usleep(500)
            }
        }
        let until = Date().addingTimeInterval(delay)
        while running() && Date() < until { usleep(500) }
        if running() { kill(pid, signal) }
        if !done { while waitpid(pid, &status, 0) < 0 && errno == EINTR {} }
        reader.wait()
        // WIFSIGNALED / WTERMSIG / WEXITSTATUS, which Swift cannot import.
        let killed = status & 0x7F != 0 && status & 0x7F != 0x7F ? status & 0x7F : nil
        return ((status >> 8) & 0xFF, killed, String(decoding: errData, as: UTF8.self))
    }

    /// Starts `command` with no signal blocked or ignored (a child inherits
    /// its parent thread's mask, and test threads block SIGINT and SIGTERM):
    /// its pid and the read end of its stderr.
    static func spawn(_ command: [String]) throws -> (pid_t, Int32) {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw POSIXError(.EIO) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        posix_spawn_file_actions_addclose(&actions, pipeEnds[1])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, command[0], &actions, &attributes, argv, environ)
        close(pipeEnds[1])
        guard rc == 0 else { close(pipeEnds[0]); throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        return (pid, pipeEnds[0])
    }

    static func signalName(_ signal: Int32) -> String {
        signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : signal == SIGHUP ? "SIGHUP" : signal == SIGKILL ? "SIGKILL" : "signal \(signal)"
    }

    @Test(arguments: Command.allCases)
    func signalsAtRandomPointsLeaveAWholeState(_ command: Command) throws {
        let fixture = try Self.fixture(command)
        let old = fixture.states.first!, new = fixture.states.last!
        // One run to the end: the new state, and how long a run takes.
        try Self.reset(fixture)
        let started = Date()
        let whole = try runProcess(litectlBinary, fixture.arguments)
        let duration = Date().timeIntervalSince(started)
        #expect(whole.status == 0, "\(command): \(whole.stderr)")
        #expect(try Self.contentHash(fixture.target, ledger: fixture.ledger) == new, "\(command): a whole run gives the new content")

        var random = SplitMix64(seed: Self.seed &+ UInt64(Command.allCases.firstIndex(of: command)!) &* 0x9E37_79B9)
        // Delays counted from the start and from the first write to the target
        // (SIGHUP, handled as SIGINT and SIGTERM are, from the write only).
        for (signal, starts) in [(SIGINT, [false, true]), (SIGTERM, [false, true]), (SIGHUP, [true]), (SIGKILL, [false, true])] {
            for fromWrite in starts {
                try Self.reset(fixture)
                let delay = Double(random.next() % 1000) / 1000 * duration * (fromWrite ? 0.5 : 1.1)
                let context = "\(command) \(fixture.arguments.joined(separator: " ")), \(Self.signalName(signal)) \(Int(delay * 1000)) ms after \(fromWrite ? "it began to write" : "its start") (seed \(Self.seed); LITECTL_FAULT_SEED=\(Self.seed) repeats it)"
                let outcome = try Self.run(fixture.arguments, signal: signal, after: delay, writing: fromWrite ? fixture.target : nil)
                if ProcessInfo.processInfo.environment["LITECTL_FAULT_TRACE"] != nil {
                    print("fault \(command) \(Self.signalName(signal)) \(fromWrite ? "write+" : "start+")\(Int(delay * 1000))ms/\(Int(duration * 1000)): exit \(outcome.status) killed \(outcome.killedBy ?? 0) \(outcome.stderr.prefix(120))")
                }
                let hot = Self.hotJournal(fixture.target)
                let state = try Self.contentHash(fixture.target, ledger: fixture.ledger)
                #expect(fixture.states.contains(state), "\(context): the target holds none of its states; stderr: \(outcome.stderr)")
                if signal == SIGKILL {
                    #expect(!hot || fixture.writesInPlace, "\(context): a hot journal, though SQLite never wrote the target in place")
                } else {
                    #expect(!hot, "\(context): a hot journal is left; stderr: \(outcome.stderr)")
                    if let killed = outcome.killedBy {
                        // Only before the handlers are installed, when nothing was written.
                        #expect(state == old, "\(context): killed by signal \(killed) after it wrote")
                    } else if outcome.status == 0 {
                        #expect(state == new, "\(context): exit 0 without the new content")
                    } else {
                        #expect(outcome.status == 2 && outcome.stderr.contains("interrupted by \(Self.signalName(signal))"),
                                "\(context): exit \(outcome.status), stderr: \(outcome.stderr)")
                    }
                }
                // The next command works: a retry (which rolls back a journal
                // SIGKILL left, and removes what a killed run left beside the
                // target), then check.
                if state != new || fixture.repeatable {
                    let retry = try runProcess(litectlBinary, fixture.arguments)
                    #expect(retry.status == 0, "\(context): the retry fails: \(retry.stderr)")
                    #expect(try Self.contentHash(fixture.target, ledger: fixture.ledger) == new, "\(context): the retry does not give the new content")
                    #expect(!Self.hotJournal(fixture.target), "\(context): a hot journal after the retry")
                    #expect(try Self.leftovers(fixture.targetFolder).isEmpty, "\(context): left beside the target after the retry")
                }
                let check = try runProcess(litectlBinary, ["check", fixture.target])
                #expect(check.status == 0, "\(context): check fails afterwards: \(check.stdout) \(check.stderr)")
            }
        }
    }

    /// True when this process may mount a tmpfs (root, and mounts permitted).
    static let canMount: Bool = {
        guard let folder = try? TemporaryFolder("fault-mount") else { return false }
        guard (try? runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", folder.path]))?.status == 0 else { return false }
        _ = try? runProcess("/bin/umount", [folder.path])
        return true
    }()

    @Test(.enabled(if: FaultInjectionTests.canMount, "mounting a tmpfs is not permitted here"), arguments: Command.allCases)
    func aFullDiskLeavesTheOldContentAndSaysSo(_ command: Command) throws {
        let mount = try TemporaryFolder("fault-disk")
        let fixture = try Self.fixture(command, targetFolder: mount.path)
        let size = Int(try FileManager.default.attributesOfItem(atPath: fixture.pristine)[.size] as! UInt64)
        // Room for the old content and 1 MiB more: the new content needs more than 3 MiB more.
        let mounted = try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=\(size + (1 << 20))", "tmpfs", mount.path])
        try #require(mounted.status == 0, "\(mounted.stderr)")
        defer { _ = try? runProcess("/bin/umount", ["-l", mount.path]) }
        try Self.reset(fixture)
        let old = fixture.states.first!, new = fixture.states.last!

        let full = try runProcess(litectlBinary, fixture.arguments)
        #expect(full.status == 2, "\(command): \(full.stderr)")
        let said = full.stderr.contains("disk full") || (command.rawValue.hasPrefix("vacuum") && full.stderr.contains("not enough free disk space"))
        #expect(said && full.stderr.hasPrefix("litectl: ") && full.stderr.filter { $0 == "\n" }.count == 1,
                "\(command): one line naming the full disk: \(full.stderr)")
        #expect(!full.stderr.contains("not an error"), "\(command): \(full.stderr)")
        #expect(try Self.contentHash(fixture.target, ledger: fixture.ledger) == old, "\(command): the old content stays")
        #expect(!Self.hotJournal(fixture.target), "\(command): a hot journal is left")
        #expect(try Self.leftovers(mount.path).isEmpty, "\(command): left beside the target")
        let check = try runProcess(litectlBinary, ["check", fixture.target])
        #expect(check.status == 0, "\(command): \(check.stdout) \(check.stderr)")

        // With room, the same command succeeds.
        let grown = try runProcess("/bin/mount", ["-o", "remount,size=64m", mount.path])
        try #require(grown.status == 0, "\(grown.stderr)")
        let retry = try runProcess(litectlBinary, fixture.arguments)
        #expect(retry.status == 0, "\(command): \(retry.stderr)")
        #expect(try Self.contentHash(fixture.target, ledger: fixture.ledger) == new, "\(command): the retry gives the new content")
    }
}
