// `litectl replicate` through the built binary, against a folder repository
// and moto's S3 server on loopback, beside an application (walwriter.py in
// TestSupport) that commits every few milliseconds and runs its own
// checkpoints, TRUNCATE included. The oracle is the application's own log:
// for every commit, a digest of the rows it wrote, kept from its own
// bookkeeping; a database restored at a moment T must be exactly one of those
// commits' states (never half a transaction), committed by T, and moments
// must never go back. The follower is killed with SIGKILL at random moments
// and started again; S3 fails under it through the fault proxy; the
// application's checkpoints must all succeed within their busy timeout.
// LITECTL_REPLICATE_SOAK=N makes the runs N times longer (and the kills N times more).
import Foundation
import Testing
import LitectlCore
import TestSupport

/// The application's log: each commit's time and digest, its checkpoints.
struct WriterLog {
    /// Each commit: when COMMIT returned, the digest, when COMMIT was issued
    /// (it became visible to readers in between).
    var commits: [Int: (time: Double, digest: String, before: Double)] = [:]
    var checkpoints: [(mode: String, busy: Int, log: Int)] = []
    var errors: [String] = []
    var last = 0
    /// The -wal's largest size after a commit, and after the last (the writer's `wal` line).
    var walPeak: Int?
    var walLast: Int?

    init(_ path: String) throws {
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let p = line.split(separator: " ").map(String.init)
            switch p.first {
            case "commit": commits[Int(p[1])!] = (Double(p[2])!, p[3], Double(p[4])!); last = max(last, Int(p[1])!)
            case "checkpoint": checkpoints.append((p[1], Int(p[2])!, Int(p[3])!))
            case "error": errors.append(String(line))
            case "wal": walPeak = max(walPeak ?? 0, Int(p[1]) ?? 0); walLast = Int(p[2])
            default: break
            }
        }
    }

    var firstTime: Double { commits.values.map(\.time).min() ?? 0 }
    var lastTime: Double { commits.values.map(\.time).max() ?? 0 }
}

/// A child process started with posix_spawn: an empty signal mask and the
/// default action for the signals a test sends (the test runner may block or
/// ignore them, and a child inherits that), stdout and stderr appended to a
/// file, no other descriptor of the test process; ended and reaped with
/// kill and waitpid (Foundation's Process can wait forever for a child it
/// did not see end).
final class Child {
    let pid: pid_t
    private var status: Int32?

    init(_ executable: String, _ arguments: [String], env: [String: String] = [:], output: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), defaults = sigset_t()
        sigemptyset(&none)
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, SIGUSR1, SIGPIPE] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let environment = ProcessInfo.processInfo.environment.merging(env) { $1 }.map { "\($0)=\($1)" }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        self.pid = pid
    }

    func signal(_ s: Int32) { if status == nil { kill(pid, s) } }

    /// Waits for the end: the exit status, or 128 + the signal that ended it.
    @discardableResult
    func wait() -> Int32 {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        let signaled = raw & 0x7F != 0 && raw & 0x7F != 0x7F
        status = signaled ? 128 + (raw & 0x7F) : (raw >> 8) & 0xFF
        return status!
    }

    var isRunning: Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        let r = waitpid(pid, &raw, WNOHANG)
        if r == pid {
            let signaled = raw & 0x7F != 0 && raw & 0x7F != 0x7F
            status = signaled ? 128 + (raw & 0x7F) : (raw >> 8) & 0xFF
            return false
        }
        return true
    }

    deinit { if status == nil { kill(pid, SIGKILL); wait() } }
}

/// A running `litectl replicate`, its events (--json) appended to a file.
final class FollowerProcess {
    let child: Child

    /// Segments are gathered every `gatherEvery` segments (4, not 60: within a test's run).
    init(_ arguments: [String], events: String, env: [String: String] = [:], gatherEvery: Int = 4) throws {
        var all = ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"]
        all.merge(env) { $1 }
        child = try Child(litectlBinary, ["replicate"] + arguments + ["--json", "--gather-every", String(gatherEvery)], env: all, output: events)
    }

    func kill9() { child.signal(SIGKILL); child.wait() }

    /// SIGTERM, then its exit status.
    func stop() -> Int32 {
        child.signal(SIGTERM)
        return child.wait()
    }

    func signal(_ s: Int32) { child.signal(s) }
}

@Suite(.serialized) struct ReplicateCommandTests {
    static let writer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("TestSupport/walwriter.py").path
    static let soak = max(1, Int(ProcessInfo.processInfo.environment["LITECTL_REPLICATE_SOAK"] ?? "") ?? 1)

    /// The application: `walwriter.py write DB LOG ARGS...`, started (not waited for).
    func startWriter(_ db: String, log: String, _ arguments: [String]) throws -> Child {
        try Child("/usr/bin/python3", [Self.writer, "write", db, log] + arguments, output: log + ".out")
    }

    /// What `followedRun` leaves: its folder, the folder repository, the
    /// writer's log and the follower's events.
    struct FollowedRun {
        let folder: TemporaryFolder
        let repo: TestRepo
        let log: String
        let events: String
    }

    /// The application's database followed into a new folder repository
    /// while the writer runs with `arguments` (it must succeed), then for
    /// `settle` seconds; then the follower is stopped (it must exit 0).
    func followedRun(_ name: String, writer arguments: [String], settle: Double = 1.5, gatherEvery: Int = 4,
                     env: (TemporaryFolder) -> [String: String] = { _ in [:] }) throws -> FollowedRun? {
        let folder = try TemporaryFolder(name)
        guard let repo = try TestRepo.make(.folder, in: folder) else { return nil }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", repo.url], events: events, env: env(folder), gatherEvery: gatherEvery)
        #expect(try startWriter(db, log: logPath, arguments).wait() == 0)
        Thread.sleep(forTimeInterval: settle)
        #expect(follower.stop() == 0)
        return FollowedRun(folder: folder, repo: repo, log: logPath, events: events)
    }

    /// A database the application made (schema and 300 rows, one commit).
    func makeApp(_ folder: TemporaryFolder) throws -> (db: String, log: String) {
        let db = folder.file("app.db"), log = folder.file("writer.log")
        let p = try startWriter(db, log: log, ["--commits", "1", "--initial-rows", "300"])
        #expect(p.wait() == 0)
        return (db, log)
    }

    /// The counter and digest of a database, as the application computes them.
    func digest(_ db: String) throws -> (counter: Int, digest: String) {
        let r = try runProcess("/usr/bin/python3", [Self.writer, "digest", db])
        let p = r.stdout.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        guard r.status == 0, p.count == 2, let c = Int(p[0]) else { throw POSIXError(.EIO) }
        return (c, p[1])
    }

    /// Restores the newest state at or before `time` (a whole millisecond) and
    /// checks it against the application's log: exactly one commit's state,
    /// committed by then. Returns its counter (nil when nothing was restorable).
    func restoreAndCheck(_ repo: TestRepo, at time: Double, log: WriterLog, into target: String,
                         sourceLocation: SourceLocation = #_sourceLocation) throws -> Int? {
        let r = try repo.run(["restore", "latest", "--db", "app.db", "--at", Timestamp.iso8601(time), target])
        if r.status != 0 {
            #expect(r.stderr.contains("no snapshot of app.db at or before"), "\(r.stderr)", sourceLocation: sourceLocation)
            return nil
        }
        let (counter, digest) = try digest(target)
        let commit = try #require(log.commits[counter], "restored counter \(counter) is a commit", sourceLocation: sourceLocation)
        #expect(commit.digest == digest, "the state at \(Timestamp.iso8601(time)) is commit \(counter)'s, whole", sourceLocation: sourceLocation)
        #expect(commit.before <= time + 0.001, "commit \(counter) was made by \(Timestamp.iso8601(time))", sourceLocation: sourceLocation)
        #expect(try sqlite3Scalar(target, "PRAGMA integrity_check") == "ok", sourceLocation: sourceLocation)
        try? FileManager.default.removeItem(atPath: target)
        return counter
    }

    /// Restores at `count` moments spread over the log's time (and latest) and checks each; moments never go back.
    func checkMoments(_ repo: TestRepo, log: WriterLog, count: Int, folder: TemporaryFolder, seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let span = log.lastTime - log.firstTime
        let times = (0..<count).map { _ in ((log.firstTime + Double(rng.next() % 1_000_000) / 1_000_000 * (span + 1)) * 1000).rounded(.down) / 1000 }.sorted()
        var previous = 0
        for (i, t) in times.enumerated() {
            guard let counter = try restoreAndCheck(repo, at: t, log: log, into: folder.file("at-\(i).db")) else { continue }
            #expect(counter >= previous, "moments never go back: \(counter) after \(previous)")
            previous = counter
        }
        // Latest: the application's last commit.
        let r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("latest.db")])
        #expect(r.status == 0, "\(r.stderr)")
        let (counter, digest) = try digest(folder.file("latest.db"))
        #expect(counter == log.last && digest == log.commits[log.last]?.digest, "the last commit is the latest state: \(counter) of \(log.last)")
    }

    /// The application's checkpoints all completed (the follower's read mark never kept one past its busy timeout), its commits too.
    func checkApplication(_ log: WriterLog) {
        #expect(log.errors.isEmpty, "\(log.errors)")
        #expect(log.checkpoints.contains { $0.mode == "TRUNCATE" })
        for c in log.checkpoints { #expect(c.busy == 0, "checkpoint \(c.mode) completed") }
        for c in log.checkpoints where c.mode == "TRUNCATE" { #expect(c.log == 0, "TRUNCATE emptied the -wal") }
    }

    /// `verify --read-data --json` of the repository, which must pass
    /// (every pack an index object names is there, whole): the count of
    /// packs no index object names.
    func unreferencedPacks(_ repo: TestRepo, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int? {
        let verify = try repo.run(["verify", "--read-data", "--json"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)", sourceLocation: sourceLocation)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [String: Any], sourceLocation: sourceLocation)
        return report["unreferenced_packs"] as? Int
    }

    func events(_ path: String) throws -> [[String: Any]] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// The chain's states, read back through the library: consecutive
    /// states read from the same -wal generation follow one another (no
    /// commit shipped twice), and their times increase.
    func checkChains(_ repo: TestRepo) throws -> (states: Int, chains: Int) {
        let store: ObjectStore
        if repo.url.hasPrefix("s3://") { return (0, 0) } else { store = FolderStore(path: repo.url) }
        let repository = try Repository.open(store, secret: nil)
        let bases = Repository.chainBases(try repository.snapshots().snapshots)
        var states = 0
        for base in bases {
            let chain = try repository.loadChain(base)
            states += chain.states.count
            for (a, b) in zip(chain.states, chain.states.dropFirst()) {
                #expect(b.observedMicros > a.observedMicros)
                if b.kind == .frames, a.position.salt1 == b.position.salt1, a.position.salt2 == b.position.salt2 {
                    #expect(b.position.frame > a.position.frame, "state \(b.number) follows state \(a.number) in the -wal")
                }
            }
        }
        return (states, bases.count)
    }

    @Test(arguments: RepoPlace.allCases)
    func followsAndRestoresAnyMoment(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("replicate-follow")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", repo.url] + repo.options, events: events)
        let writer = try startWriter(db, log: logPath, ["--seconds", String(6 * Self.soak), "--checkpoint-every", "10", "--truncate-every", "30",
                                                        "--big-every", "97", "--vacuum-every", "211"])
        #expect(writer.wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        let status = follower.stop()
        let tail = String((try String(contentsOfFile: events, encoding: .utf8)).suffix(500))
        #expect(status == 0, "SIGTERM ships what is committed and exits 0: \(tail)")
        let log = try WriterLog(logPath)
        checkApplication(log)
        let seen = try self.events(events)
        #expect(!seen.contains { $0["event"] as? String == "resync" },
                "no frame was missed while it ran: \(seen.filter { $0["event"] as? String == "resync" }.map { $0["reason"] ?? "" })")
        #expect(seen.contains { $0["event"] as? String == "stopped" && $0["complete"] as? Bool == true })
        // Prune keeps every page a segment names (pages only states use included).
        let prune = try repo.run(["prune"])
        #expect(prune.status == 0, "\(prune.stderr)")
        try checkMoments(repo, log: log, count: 8, folder: folder, seed: 1)
        let verify = try repo.run(["verify", "--read-data", "--json"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        let ranges = try repo.run(["snapshots", "--ranges", "--json"])
        #expect(ranges.status == 0 && ranges.stdout.split(separator: "\n").count == 1, "one range: \(ranges.stdout)")
        _ = try checkChains(repo)
    }

    @Test(arguments: RepoPlace.allCases)
    func resumesAfterSIGKILLAtRandomMoments(_ place: RepoPlace) throws {
        let folder = try TemporaryFolder("replicate-kill")
        guard let repo = try TestRepo.make(place, in: folder) else { return }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url] + repo.options).status == 0)
        let events = folder.file("events.log")
        // At least 20 kills into a folder; fewer into S3 (each costs the S3 round trips of a start).
        let kills = (place == .folder ? 22 : 12) * Self.soak
        let writer = try startWriter(db, log: logPath, ["--seconds", "600", "--every-ms", "5", "--checkpoint-every", "25",
                                                        "--truncate-every", "75", "--big-every", "211", "--vacuum-every", "401"])
        defer { writer.signal(SIGKILL) }
        let seed = UInt64(ProcessInfo.processInfo.environment["LITECTL_REPLICATE_SEED"] ?? "") ?? UInt64.random(in: 1...1_000_000)
        var rng = SplitMix64(seed: seed)
        // Killed at random moments (some before its first segment, some
        // mid-upload), started again at once or after a pause during which
        // the application checkpoints on its own.
        for _ in 0..<kills {
            let follower = try FollowerProcess([db, "--repo", repo.url] + repo.options + ["--interval", "0.5"], events: events)
            Thread.sleep(forTimeInterval: 0.2 + Double(rng.next() % 1000) / 1000 * 1.3)
            follower.kill9()
            if rng.next() % 3 == 0 { Thread.sleep(forTimeInterval: Double(rng.next() % 400) / 1000) }
        }
        writer.signal(SIGTERM)  // the application stops between two commits
        writer.wait()
        let last = try FollowerProcess([db, "--repo", repo.url] + repo.options, events: events)
        Thread.sleep(forTimeInterval: 3)
        #expect(last.stop() == 0)
        let log = try WriterLog(logPath)
        #expect(log.errors.isEmpty, "\(log.errors)")
        for c in log.checkpoints { #expect(c.busy == 0, "checkpoint \(c.mode) completed (seed \(seed))") }
        try checkMoments(repo, log: log, count: 20, folder: folder, seed: seed)
        let verify = try repo.run(["verify", "--read-data"])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr) (seed \(seed))")
        let (states, chains) = try checkChains(repo)
        if place == .folder { #expect(states > kills / 2 && chains >= 1, "\(states) states in \(chains) chain(s)") }
    }

    @Test func keepsItsReadMarkThroughS3Faults() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("replicate-faults")
        let bucket = try server.makeBucket()
        let url = "s3://\(bucket)/repo"
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", url, "--endpoint", server.endpoint]).status == 0)
        // Errors, dropped answers and stalls; then 5 s of nothing but errors; then stalls and errors.
        var proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "4", "--drop-every", "5", "--stall-every", "9", "--stall", "0.3"])
        let port = proxy.port
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", url, "--endpoint", proxy.endpoint], events: events)
        // (Its first copy, which holds its mark as a backup's read would, done before the outage.)
        #expect(waitUntil(60) { started(events) })
        let writer = try startWriter(db, log: logPath, ["--seconds", String(9 * Self.soak), "--checkpoint-every", "10", "--truncate-every", "30"])
        Thread.sleep(forTimeInterval: 3)
        proxy.stop()
        // Every request fails for longer than the S3 client's own retries
        // (5 attempts over about 3 s): the follower retries, keeping its mark.
        proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "1"], port: port)
        Thread.sleep(forTimeInterval: 5)
        proxy.stop()
        proxy = try FaultProxy(upstream: server, arguments: ["--stall-every", "7", "--stall", "0.5", "--fail-every", "6"], port: port)
        writer.wait()
        Thread.sleep(forTimeInterval: 2)
        #expect(follower.stop() == 0, "everything shipped once the store came back")
        let log = try WriterLog(logPath)
        checkApplication(log)
        let seen = try self.events(events)
        #expect(seen.contains { $0["event"] as? String == "problem" && $0["retrying"] as? Bool == true }, "the outage was retried")
        #expect(!seen.contains { $0["event"] as? String == "resync" }, "the read mark was kept: no frame missed")
        let repo = TestRepo(url: url, options: ["--endpoint", server.endpoint])
        try checkMoments(repo, log: log, count: 10, folder: folder, seed: 5)
        #expect(try repo.run(["verify", "--read-data"]).status == 0)
        _ = proxy
    }

    @Test func resyncsWhenFramesWereMissed() throws {
        let folder = try TemporaryFolder("replicate-resync")
        guard let repo = try TestRepo.make(.folder, in: folder) else { return }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let events = folder.file("events.log")
        var follower = try FollowerProcess([db, "--repo", repo.url], events: events)
        var writer = try startWriter(db, log: logPath, ["--commits", "100"])
        writer.wait()
        Thread.sleep(forTimeInterval: 1.5)
        follower.kill9()
        // While it is down: commits, TRUNCATE checkpoints (the -wal restarts), more
        // commits (the new generation's frames are there when it starts again: a
        // connection held open keeps the writer's close from removing the -wal).
        let holder = try ShellSession(db)
        holder.run("SELECT count(*) FROM sqlite_schema;")
        writer = try startWriter(db, log: logPath, ["--commits", "120", "--checkpoint-every", "50", "--truncate-every", "50"])
        writer.wait()
        #expect(FileManager.default.fileExists(atPath: db + "-wal"))
        follower = try FollowerProcess([db, "--repo", repo.url], events: events)
        Thread.sleep(forTimeInterval: 2)
        #expect(follower.stop() == 0)
        holder.close()
        let seen = try self.events(events)
        #expect(seen.filter { $0["event"] as? String == "resync" }.count == 1, "one resync: \(seen.filter { $0["event"] as? String == "resync" })")
        let log = try WriterLog(logPath)
        try checkMoments(repo, log: log, count: 8, folder: folder, seed: 2)
        #expect(try repo.run(["verify"]).status == 0)
    }

    @Test func foldsForgetsAndPrunes() throws {
        let folder = try TemporaryFolder("replicate-fold")
        guard let repo = try TestRepo.make(.folder, in: folder) else { return }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", repo.url, "--fold-interval", "1.5"], events: events)
        let writer = try startWriter(db, log: logPath, ["--seconds", "5", "--big-every", "50"])
        Thread.sleep(forTimeInterval: 2)
        follower.signal(SIGUSR1)  // a fold on demand too
        writer.wait()
        Thread.sleep(forTimeInterval: 1.5)
        #expect(follower.stop() == 0)
        let log = try WriterLog(logPath)
        let seen = try self.events(events)
        let folds = seen.filter { $0["event"] as? String == "shipped" && $0["kind"] as? String == "fold" }.count
        #expect(folds >= 3, "folds: \(folds)")
        // One continuous range over every chain.
        let ranges = try repo.run(["snapshots", "--ranges", "--json"])
        let range = try #require(try JSONSerialization.jsonObject(with: Data(ranges.stdout.split(separator: "\n").first.map { Data($0.utf8) } ?? Data())) as? [String: Any])
        #expect((range["chains"] as? [String])?.count ?? 0 >= 3, "\(ranges.stdout)")
        let (_, chains) = try checkChains(repo)
        #expect(chains >= 3)
        // A closed chain is one segment.
        try checkMoments(repo, log: log, count: 10, folder: folder, seed: 3)
        // Forget every chain but the newest; prune frees their pages.
        let forget = try repo.run(["forget", "--keep-within", "1s", "--json"])
        #expect(forget.status == 0, "\(forget.stderr)")
        let removed = (try JSONSerialization.jsonObject(with: Data(forget.stdout.utf8)) as? [String: Any])?["removed_chains"] as? [String] ?? []
        #expect(removed.count == chains - 1, "\(forget.stdout)")
        let prune = try repo.run(["prune", "--json"])
        #expect(prune.status == 0, "\(prune.stderr)")
        #expect(((try JSONSerialization.jsonObject(with: Data(prune.stdout.utf8)) as? [String: Any])?["bytes_freed"] as? Int ?? 0) > 0, "\(prune.stdout)")
        #expect(try repo.run(["verify", "--read-data"]).status == 0)
        let r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("after.db")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try digest(folder.file("after.db")).counter == log.last)
        // The forgotten moments are no longer restorable.
        let early = try repo.run(["restore", "latest", "--db", "app.db", "--at", Timestamp.iso8601(log.firstTime + 0.5), folder.file("early.db")])
        #expect(early.status == 2 && early.stderr.contains("no snapshot"), "\(early.stderr)")
    }

    /// A gathering (every 4 segments here) replaces its period's segments and
    /// index objects at once and their packs one gathering later, except
    /// packs another index object names: a prune run beside the follower
    /// gathers the follower's index objects into its own, and those must keep
    /// their packs. Verify reads every pack back; restores land on the log.
    @Test func gatheringsRemoveWhatTheyReplaceAndNothingElse() throws {
        let folder = try TemporaryFolder("replicate-gather")
        guard let repo = try TestRepo.make(.folder, in: folder) else { return }
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo.url]).status == 0)
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", repo.url], events: events)
        let writer = try startWriter(db, log: logPath, ["--seconds", "120", "--big-every", "60"])
        // Once a gathering has left packs to remove, a prune has work: it
        // gathers every index object, those of the period under way too,
        // whose packs the next gathering replaces.
        #expect(try waitUntil(20, every: 0.2) { try self.events(events).contains(where: { $0["kind"] as? String == "merge" }) }, "a gathering came")
        let prune = try repo.run(["prune", "--timeout", "60", "--json"])
        #expect(prune.status == 0, "\(prune.stderr)")
        let pruned = (try JSONSerialization.jsonObject(with: Data(prune.stdout.utf8)) as? [String: Any])?["index_objects_replaced"] as? Int ?? 0
        #expect(pruned > 0, "prune gathered the index objects: \(prune.stdout)")
        // Two gatherings more (every 4 s): the packs of the period the prune
        // saw are replaced at the first and removed (or not) at the second.
        Thread.sleep(forTimeInterval: 10)
        writer.signal(SIGTERM)
        #expect(writer.wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(follower.stop() == 0)
        let seen = try self.events(events)
        let merges = seen.filter { $0["event"] as? String == "shipped" && $0["kind"] as? String == "merge" }.count
        let segments = seen.filter { $0["event"] as? String == "shipped" && $0["kind"] as? String == "segment" }.count
        #expect(merges >= 4, "gatherings: \(merges) of \(segments) segments")
        // Every pack an index object names is there, and none is left
        // unnamed (the stop removed the packs of the last gathering's
        // period, or of the stop's own gathering).
        let unnamed = try unreferencedPacks(repo)
        #expect(unnamed == 0, "packs no index object names: \(unnamed ?? -1) after \(merges) gatherings")
        try checkMoments(repo, log: try WriterLog(logPath), count: 8, folder: folder, seed: 7)
        // What is left, prune removes; the moments stay restorable.
        #expect(try repo.run(["prune"]).status == 0)
        #expect(try repo.run(["verify", "--read-data"]).status == 0)
        try FileManager.default.removeItem(atPath: folder.file("latest.db"))
        try checkMoments(repo, log: try WriterLog(logPath), count: 4, folder: folder, seed: 8)

        // A chain with a segment gone (the first gathering's, states 1-4):
        // restore falls back to the newest snapshot (here the chain's base),
        // says so, and lands on a commit.
        let log = try WriterLog(logPath)
        let first = try #require(seen.first { $0["kind"] as? String == "merge" }?["segment"] as? String)
        try FileManager.default.removeItem(atPath: repo.url + "/" + first)
        let fallback = try repo.run(["restore", "latest", "--db", "app.db", folder.file("fallback.db")])
        #expect(fallback.status == 0 && fallback.stderr.contains("cannot be read") && fallback.stderr.contains("instead"), "\(fallback.stderr)")
        let (counter, digest) = try digest(folder.file("fallback.db"))
        #expect(log.commits[counter]?.digest == digest && counter < log.last, "the base's state: commit \(counter)")
    }

    /// A stop gathers the segments of the period under way (a gathering
    /// reads no object, so it is quick) and removes the packs it replaced:
    /// the chain it leaves is one segment for a restore to read, not one a
    /// second, no pack is left unnamed, and every moment stays restorable.
    @Test func aStopGathersThePeriodUnderWay() throws {
        guard let run = try followedRun("replicate-stop-gather", writer: ["--seconds", "5"], gatherEvery: 1000) else { return }
        let (folder, repo) = (run.folder, run.repo)
        let shipped = try self.events(run.events).filter { $0["event"] as? String == "shipped" }
        let segments = shipped.filter { $0["kind"] as? String == "segment" }
        #expect(segments.count >= 4, "a segment a second: \(segments.count)")
        #expect(shipped.filter { $0["kind"] as? String == "merge" }.count == 1 && shipped.last?["kind"] as? String == "merge",
                "the stop gathered the period: \(shipped.map { $0["kind"] ?? "" })")
        let chain = try #require(segments.first?["chain"] as? String)
        let left = try FileManager.default.contentsOfDirectory(atPath: repo.url + "/segments/" + chain)
        #expect(left.count == 1, "one segment left in the chain: \(left)")
        // The packs the stop's gathering replaced are gone with it: no later gathering would remove them.
        #expect(try unreferencedPacks(repo) == 0)
        try checkMoments(repo, log: try WriterLog(run.log), count: 6, folder: folder, seed: 10)
    }

    /// A stop with at most one segment since the last gathering (every 2
    /// here, and nothing written for the last seconds) makes no gathering,
    /// yet removes the packs the last one replaced: none is left unnamed.
    @Test func aStopWithNothingToGatherRemovesWhatTheLastGatheringReplaced() throws {
        guard let run = try followedRun("replicate-stop-tidy", writer: ["--seconds", "4"], settle: 2.5, gatherEvery: 2) else { return }
        let (folder, repo) = (run.folder, run.repo)
        let merges = try self.events(run.events).filter { $0["event"] as? String == "shipped" && $0["kind"] as? String == "merge" }
        #expect(merges.count >= 1)
        #expect(try unreferencedPacks(repo) == 0)
        try checkMoments(repo, log: try WriterLog(run.log), count: 4, folder: folder, seed: 12)
    }

    /// With no spool (TMPDIR cannot be written), no gathering is made: a
    /// problem event says so, and the segments stay as they are, restorable.
    @Test func withoutASpoolTheSegmentsStayAsTheyAre() throws {
        guard let run = try followedRun("replicate-nospool", writer: ["--seconds", "6"], env: { ["TMPDIR": $0.file("no-such-folder")] }) else { return }
        let (folder, repo) = (run.folder, run.repo)
        let seen = try self.events(run.events)
        #expect(!seen.contains { $0["kind"] as? String == "merge" })
        #expect(seen.contains { $0["event"] as? String == "problem" && ($0["message"] as? String ?? "").contains("spool") },
                "\(seen.filter { $0["event"] as? String == "problem" })")
        #expect(seen.filter { $0["kind"] as? String == "segment" }.count >= 4)
        #expect(try repo.run(["verify", "--read-data"]).status == 0)
        try checkMoments(repo, log: try WriterLog(run.log), count: 4, folder: folder, seed: 9)
    }

    @Test func verifyFindsADamagedSegmentAndRestoreRefusesIt() throws {
        guard let run = try followedRun("replicate-damaged", writer: ["--commits", "150"]) else { return }
        let (folder, repo) = (run.folder, run.repo)
        let segments = try FileManager.default.subpathsOfDirectory(atPath: repo.url + "/segments").filter { $0.split(separator: "/").count == 2 }.sorted()
        let victim = repo.url + "/segments/" + segments[0]
        var bytes = try Data(contentsOf: URL(fileURLWithPath: victim))
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: victim))
        let verify = try repo.run(["verify"])
        #expect(verify.status == 1 && verify.stdout.contains("BAD") && verify.stdout.contains(String(segments[0].split(separator: "/")[1])), "\(verify.stdout)")
        #expect(verify.stdout.contains("damages snapshot(s) \(segments[0].prefix(8))"), "the chain is named: \(verify.stdout)")
        let r = try repo.run(["restore", "latest", "--db", "app.db", folder.file("out.db")])
        #expect(r.status == 2 && r.stderr.contains("damaged segment"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.file("out.db")))
    }

    @Test func refusesRollbackJournalsAndOldRepositoriesAndNeverWritesTheDatabase() throws {
        let folder = try TemporaryFolder("replicate-refuse")
        let rollback = folder.file("rollback.db")
        try makeDatabase(rollback, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let repoPath = folder.file("repo")
        #expect(try runLitectl(["repo", "init", repoPath]).status == 0)
        var r = try runLitectl(["replicate", rollback, "--repo", repoPath])
        #expect(r.status == 2 && r.stderr.contains("not in WAL mode (journal_mode=delete)") && r.stderr.contains(rollback), "\(r.stderr)")
        // A version-3 repository: refused until upgraded.
        let v3 = folder.file("repo3")
        let store = FolderStore(path: v3)
        try store.createRoot()
        _ = try Repository.initialize(store, secret: nil, version: 3)
        let (db, _) = try makeApp(folder)
        r = try runLitectl(["replicate", db, "--repo", v3])
        #expect(r.status == 2 && r.stderr.contains("litectl repo upgrade"), "\(r.stderr)")
        r = try runLitectl(["repo", "upgrade", v3, "-v"])
        #expect(r.status == 0 && r.stdout.contains("upgraded from version 3 to version 4"), "\(r.stdout) \(r.stderr)")
        #expect(try Repository.open(FolderStore(path: v3), secret: nil).version == 4)
        // An idle database is only read: its file, its -wal and its schema stay as they were.
        let before = try FileFingerprint(db)
        // Its metrics file is never the database (the same-file rule), refused before anything.
        r = try runLitectl(["replicate", db, "--repo", v3, "--metrics-file", db])
        #expect(r.status == 2 && r.stderr.contains("is a database being backed up itself"), "\(r.stderr)")
        #expect(try FileFingerprint(db) == before)
        let schema = try sqlite3Scalar(db, "SELECT group_concat(name) FROM sqlite_schema")
        let follower = try FollowerProcess([db, "--repo", v3], events: folder.file("events.log"))
        Thread.sleep(forTimeInterval: 2)
        #expect(follower.stop() == 0)
        #expect(try FileFingerprint(db) == before, "the database file is untouched")
        #expect(try sqlite3Scalar(db, "SELECT group_concat(name) FROM sqlite_schema") == schema)
        let restored = try runLitectl(["restore", "--repo", v3, "latest", "--db", "app.db", folder.file("copy.db")])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try digest(folder.file("copy.db")) == digest(db))
    }

    @Test func followsAHostConfigWritesMetricsAndCheckpointsWhenAsked() throws {
        let folder = try TemporaryFolder("replicate-config")
        let (db, logPath) = try makeApp(folder)
        #expect(try runLitectl(["repo", "init", folder.file("repo")]).status == 0)
        // The TOML of backup --config: settings that only backups use are accepted.
        try """
            repository = "repo"
            databases = ["*.db", "missing-*.sqlite"]
            tags = ["web-1"]
            jobs = 2
            verify = "quick"
            metrics_file = "metrics.prom"
            [keep]
            daily = 7
            """.write(toFile: folder.file("host.toml"), atomically: true, encoding: .utf8)
        let events = folder.file("events.log")
        let follower = try FollowerProcess(["--config", folder.file("host.toml"), "--checkpoint-frames", "150"], events: events)
        // The application runs no checkpoint of its own (SQLite's automatic ones only).
        #expect(try startWriter(db, log: logPath, ["--seconds", "4", "--big-every", "60"]).wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        #expect(follower.stop() == 0)
        #expect(try String(contentsOfFile: events, encoding: .utf8).contains("missing-*.sqlite: no database matches"))
        let metrics = try String(contentsOfFile: folder.file("metrics.prom"), encoding: .utf8)
        let series = "{database=\"\(BackupJob.resolvedPath(db))\"}"
        #expect(metrics.contains("litectl_replicate_lag_seconds\(series) 0\n"), "caught up when stopped: \(metrics)")
        #expect(metrics.contains("litectl_replicate_errors_total\(series) 0\n"))
        let shipped = metrics.split(separator: "\n").first { $0.hasPrefix("litectl_replicate_shipped_bytes_total\(series)") }
        #expect((shipped?.split(separator: " ").last).flatMap { Int($0) } ?? 0 > 0, "\(metrics)")
        #expect(metrics.contains("litectl_replicate_last_shipped_commit_timestamp_seconds\(series)"))
        // --checkpoint-frames let the -wal restart: the states span several generations.
        let repository = try Repository.open(FolderStore(path: folder.file("repo")), secret: nil)
        let snapshots = try repository.snapshots().snapshots
        #expect(snapshots.allSatisfy { $0.tags == ["web-1"] })
        let chain = try repository.loadChain(try #require(Repository.chainBases(snapshots).first))
        let generations = Set(chain.states.map { "\($0.position.salt1) \($0.position.salt2)" })
        #expect(generations.count > 1, "the -wal restarted")
        let repo = TestRepo(url: folder.file("repo"), options: [])
        try checkMoments(repo, log: try WriterLog(logPath), count: 5, folder: folder, seed: 4)
    }
}
