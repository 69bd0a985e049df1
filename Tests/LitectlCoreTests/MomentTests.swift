// Moments (Moments/) against restores: at 20 random moments of a replicated
// run (inserts, updates, deletes, schema changes, a VACUUM), plain and
// encrypted, the moment opened straight from the repository is the file
// `litectl restore --at` of the same WHEN writes: the same state, page for
// page, the same logical hash, rows and dump. A damaged pack, a blob swapped
// for one that decompresses to other bytes and a swapped pack are I/O errors
// naming the pack, never rows; a moment before the first state, in the future,
// or of an unknown database is one line naming the reference.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite(.serialized) struct MomentTests {
    struct Run {
        let folder: TemporaryFolder
        let url: String
        let options: [String]
        let repository: Repository
    }

    func replicated(_ name: String, encrypted: Bool) throws -> Run {
        let folder = try TemporaryFolder(name)
        let url = folder.file("repo")
        let options = encrypted ? ["--key-file", folder.file("key")] : []
        let r = try MomentRun.run(db: folder.file("app.db"), url: url, options: options, env: [:], folder: folder)
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        let repository = try Repository.open(FolderStore(path: url), secret: encrypted ? .keyFile(folder.file("key")) : nil)
        return Run(folder: folder, url: url, options: options, repository: repository)
    }

    /// The span of times the run can be opened at: its first snapshot to its last state.
    func span(_ run: Run) throws -> (from: Double, to: Double) {
        let snapshots = try run.repository.snapshots().snapshots
        var to = snapshots.map(\.time).max()!
        for base in Repository.chainBases(snapshots) { to = max(to, try run.repository.loadChain(base).lastTime) }
        return (snapshots.map(\.time).min()!, to)
    }

    /// The logical hash and the dump of a database open on `connection`.
    func hashAndDump(_ connection: Connection) throws -> (String, [UInt8]) {
        let hash = try connection.readTransaction { try ContentHasher.hash(connection, options: ContentHashOptions()).digest }
        let sink = MemorySink()
        try connection.readTransaction {
            let plan = try DumpPlan.read(connection, options: DumpOptions())
            var writer = ScriptWriter(connection: connection, plan: plan, options: DumpOptions(), sink: sink)
            try writer.writeAll()
        }
        return (hash, sink.bytes)
    }

    /// `count` random WHENs of the run (and latest): each moment is the state
    /// restore lands on, and reads as the restored file does.
    func checkMoments(_ run: Run, count: Int, seed: UInt64) throws {
        let (from, to) = try span(run)
        var rng = SplitMix64(seed: seed)
        let now = Clock.wall()
        var whens = (0..<count).map { _ in String(format: "%.3f", from + Double(rng.next() % 1_000_000) / 1_000_000 * (to - from + 0.5)) }
        whens.append("latest")
        var states = Set<String>()
        for (i, when) in whens.enumerated() {
            let target = run.folder.file("at-\(i).db")
            let restore = try MomentRun.litectl(["restore", "latest", "--db", "app.db"] + (when == "latest" ? [] : ["--at", when])
                                                + [target, "--repo", run.url, "--json"] + run.options, env: [:])
            try #require(restore.status == 0, "\(restore.stderr)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(restore.stdout.utf8)) as? [String: Any])
            let moment = try Moment.open(MomentReference(database: "app.db", when: when), repository: run.repository, now: now)
            #expect(moment.snapshotID == report["snapshot"] as? String, "\(when): the same snapshot")
            #expect(Int(moment.state) == (report["state"] as? Int ?? 0), "\(when): the same state")
            #expect(Timestamp.iso8601(moment.time) == report["time"] as? String, "\(when): the same time")
            states.insert("\(moment.snapshotID) \(moment.state)")
            if let difference = try MomentRun.difference(moment.registration, restored: target) {
                Issue.record("\(when): \(difference)")
            }
            let connection = try Connection(pages: moment.registration)
            let (hash, dump) = try hashAndDump(connection)
            try connection.close()
            let file = try Connection(path: target)
            let (fileHash, fileDump) = try hashAndDump(file)
            try file.close()
            #expect(hash == fileHash, "\(when): the logical hash")
            let sameDump = dump == fileDump
            #expect(sameDump, "\(when): the dump (\(dump.count) bytes, the file's \(fileDump.count))")
            #expect(hash == (try ContentHasher.hash(path: target).digest), "\(when): the hash `litectl hash` prints")
            try FileManager.default.removeItem(atPath: target)
        }
        #expect(states.count >= count / 3, "the moments land on many states: \(states.count)")
    }

    @Test func aMomentIsTheStateRestoreGives() throws {
        let run = try replicated("moments-plain", encrypted: false)
        try checkMoments(run, count: 20, seed: 39)
    }

    @Test func aMomentOfAnEncryptedRepositoryIsTheStateRestoreGives() throws {
        let run = try replicated("moments-encrypted", encrypted: true)
        try checkMoments(run, count: 20, seed: 7)
    }

    /// Reads every page of `reference`'s moment through SQLite; the error, if any.
    func readAll(_ run: Run, _ when: String = "latest") throws -> (any Error)? {
        do {
            let moment = try Moment.open(MomentReference(database: "app.db", when: when), repository: run.repository)
            let connection = try Connection(pages: moment.registration)
            _ = try connection.rows("PRAGMA integrity_check")
            _ = try connection.rows("SELECT * FROM t")
            return nil
        } catch {
            return error
        }
    }

    /// The pack file and blob of page `n` of the latest moment.
    func blob(_ run: Run, page n: Int) throws -> (path: String, location: Repository.BlobLocation) {
        let moment = try Moment.open(MomentReference(database: "app.db", when: "latest"), repository: run.repository)
        let location = try #require(run.repository.blobLocation(of: moment.pageIDs[n - 1], in: try run.repository.loadIndex()))
        return (run.url + "/" + location.pack.name, location)
    }

    func rewrite(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test func damageIsAnErrorNamingThePackNeverRows() throws {
        let run = try replicated("moments-damage", encrypted: false)
        #expect(try readAll(run) == nil)
        // The root page of t: every read of t reads it.
        let latest = try Moment.open(MomentReference(database: "app.db", when: "latest"), repository: run.repository)
        guard case .integer(let root)? = try Connection(pages: latest.registration).scalar("SELECT rootpage FROM sqlite_schema WHERE name = 't'") else {
            Issue.record("no root page"); return
        }
        let n = Int(root)
        let (path, location) = try blob(run, page: n)
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))

        // A byte flipped in the blob.
        try rewrite(path) { $0[Int(location.offset) + location.length / 2] ^= 0x5A }
        let flipped = try #require(try readAll(run), "a flipped byte is found")
        #expect(String(describing: flipped).contains(location.pack.name), "\(flipped)")
        #expect(!String(describing: flipped).contains("\n"), "\(flipped)")

        // The blob swapped for a well-formed one of other pages (page n's
        // slot changed by one byte, compressed again and padded to its
        // length with a skippable frame): only the page-id check finds it.
        try Data(original).write(to: URL(fileURLWithPath: path))
        let repository = run.repository
        let pages = try repository.pages(fromBlob: Array(original[Int(location.offset)..<Int(location.offset) + location.length]),
                                         pages: location.pages, pageSize: location.pageSize, ids: [], decompressor: ZstdDecompressor(),
                                         what: path)
        var changed = pages
        changed[location.slot * location.pageSize + location.pageSize - 1] ^= 0x01
        var forged = ZstdCompressor(level: 19).compress(changed)
        try #require(forged.count + 8 <= location.length, "the forged blob fits in the original's place")
        let padding = location.length - forged.count - 8
        forged += [0x50, 0x2A, 0x4D, 0x18] + withUnsafeBytes(of: UInt32(padding).littleEndian, Array.init) + [UInt8](repeating: 0, count: padding)
        try rewrite(path) { $0.replaceSubrange(Int(location.offset)..<Int(location.offset) + location.length, with: forged) }
        #expect(try repository.pages(fromBlob: forged, pages: location.pages, pageSize: location.pageSize, ids: [],
                                     decompressor: ZstdDecompressor(), what: path) == changed, "the forged blob decompresses")
        let refused = (try? Moment.open(MomentReference(database: "app.db", when: "latest"), repository: run.repository).registration.source.page(n)) == nil
        #expect(refused, "page \(n) is refused")
        let forgedError = try #require(try readAll(run), "the forged page is found")
        let words = String(describing: forgedError)
        #expect(words.contains(location.pack.name) && words.contains("does not match its id") && words.contains("page "), "\(words)")

        // The pack swapped for another pack of the repository.
        let other = try #require(try FileManager.default.subpathsOfDirectory(atPath: run.url + "/packs")
            .map { run.url + "/packs/" + $0 }.filter { $0 != path && !$0.hasSuffix("/") && (try? FileManager.default.attributesOfItem(atPath: $0)[.type] as? FileAttributeType) == .typeRegular }.first)
        try Data(try Data(contentsOf: URL(fileURLWithPath: other))).write(to: URL(fileURLWithPath: path))
        let swapped = try #require(try readAll(run), "a swapped pack is found")
        #expect(String(describing: swapped).contains(location.pack.name), "\(swapped)")
        try Data(original).write(to: URL(fileURLWithPath: path))
        #expect(try readAll(run) == nil, "the pack put back reads again")
    }

    @Test func momentsNoStateHasAreOneClearLine() throws {
        let run = try replicated("moments-errors", encrypted: false)
        let (from, _) = try span(run)
        let now = Clock.wall()
        func failure(_ reference: String) -> String {
            do {
                let parsed = try #require(try MomentReference.parse(reference))
                _ = try Moment.open(parsed, repository: run.repository, now: now)
                return "opened"
            } catch {
                return String(describing: error)
            }
        }
        let before = failure("repo:app.db@\(String(format: "%.3f", from - 60))")
        #expect(before.hasPrefix("repo:app.db@") && before.contains("no state of app.db at or before") && !before.contains("\n"), "\(before)")
        let future = failure("repo:app.db@\(Int(now) + 3600)")
        #expect(future.contains("is in the future") && !future.contains("\n"), "\(future)")
        let unknown = failure("repo:other.db@latest")
        #expect(unknown.hasPrefix("repo:other.db@latest: ") && unknown.contains("no database other.db") && unknown.contains("app.db") && !unknown.contains("\n"), "\(unknown)")
        #expect(failure("repo:app.db@ffff0000") .contains("ffff0000"))
        #expect(failure("repo:app.db@-1s") == "opened")
    }

    /// Reads every page of `moment` in order (as a scan does).
    func readEveryPage(_ moment: Moment) throws {
        for n in 1...moment.pageIDs.count { _ = try moment.registration.source.page(n) }
    }

    /// The blobs (numbers into the index's) that hold `ids`.
    func blobs(_ ids: some Sequence<PageID>, _ repository: Repository) throws -> Set<UInt32> {
        let index = try repository.loadIndex()
        return Set(ids.map { index.entries[index.position(of: $0)!].blob })
    }

    @Test func aRefreshedMomentFetchesOnlyPagesItDoesNotShare() throws {
        let run = try replicated("moments-refresh", encrypted: false)
        let (_, to) = try span(run)
        var options = MomentOptions()
        options.cacheBytes = 256 << 20
        options.readAhead = false  // one read per blob missed: the count says which were missed
        let early = try Moment.open(MomentReference(database: "app.db", when: String(format: "%.3f", to - 0.3)), repository: run.repository,
                                    options: options)
        try readEveryPage(early)
        let before = early.fetched
        let latest = try #require(try early.refreshed(), "a newer state was shipped after it")
        let plain = try Moment.open(MomentReference(database: "app.db", when: "latest"), repository: run.repository)
        #expect(latest.snapshotID == plain.snapshotID && latest.state == plain.state && latest.pageIDs == plain.pageIDs)
        #expect(try latest.refreshed() == nil, "nothing newer than latest")
        // The pages it shares with the moment before come from the cache
        // (counted from after its opening, which read its page 1).
        let opened = latest.fetched
        let shared = Set(early.pageIDs)
        for (n, id) in latest.pageIDs.enumerated() where shared.contains(id) { _ = try latest.registration.source.page(n + 1) }
        #expect(latest.fetched.requests == opened.requests, "no read for a page the moment before holds")
        try readEveryPage(latest)
        let new = Set(latest.pageIDs).subtracting(early.pageIDs)
        let requests = latest.fetched.requests - before.requests
        #expect(requests <= (try blobs(new, run.repository)).count, "\(requests) reads for \(new.count) new pages of \(latest.pageIDs.count)")
        #expect(new.count < latest.pageIDs.count && !new.isEmpty, "the states share pages, and differ: \(new.count) new of \(latest.pageIDs.count)")
    }

    @Test func readAheadReadsNeighbouringBlobsTogetherAndEachOnce() throws {
        let folder = try TemporaryFolder("moments-ahead")
        let db = folder.file("big.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, data BLOB);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
            INSERT INTO t SELECT i, randomblob(1000) FROM n;
            """)
        let url = folder.file("repo")
        #expect(try MomentRun.litectl(["repo", "init", url], env: [:]).status == 0)
        let backup = try MomentRun.litectl(["backup", db, "--repo", url], env: [:])
        try #require(backup.status == 0, "\(backup.stderr)")
        let repository = try Repository.open(FolderStore(path: url), secret: nil)
        var counts: [Bool: Int] = [:]
        for readAhead in [false, true] {
            var options = MomentOptions()
            options.readAhead = readAhead
            let moment = try Moment.open(MomentReference(database: "big.db", when: "latest"), repository: repository, options: options)
            let connection = try Connection(pages: moment.registration)
            let sum = try connection.scalar("SELECT sum(length(data)) FROM t")
            #expect(sum == .integer(6_000_000))
            let touched = try blobs(moment.pageIDs, repository).count
            #expect(moment.fetched.requests <= touched, "each blob read once at most (\(moment.fetched.requests) reads, \(touched) blobs)")
            counts[readAhead] = moment.fetched.requests
        }
        #expect(counts[true]! < counts[false]!, "read-ahead reads neighbouring blobs in one read: \(counts)")
    }

    @Test func connectionsOnSeveralThreadsReadOneMomentAlike() throws {
        let run = try replicated("moments-threads", encrypted: false)
        var options = MomentOptions()
        options.cacheBytes = 96 << 10  // a few dozen pages: evictions and waits for pages under way
        let moment = try Moment.open(MomentReference(database: "app.db", when: "latest"), repository: run.repository, options: options)
        let target = run.folder.file("latest.db")
        #expect(try MomentRun.litectl(["restore", "latest", "--db", "app.db", target, "--repo", run.url], env: [:]).status == 0)
        let sql = "SELECT count(*) || ' ' || sum(length(data)) || ' ' || total(score) || ' ' || group_concat(name, ',') FROM (SELECT * FROM t ORDER BY id)"
        let expected = try sqlite3Scalar(target, sql)
        let results = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            let text: String
            do {
                let connection = try Connection(pages: moment.registration)
                guard case .text(let b)? = try connection.scalar(sql) else { throw POSIXError(.EIO) }
                text = String(decoding: b, as: UTF8.self)
            } catch { text = "\(error)" }
            results.withLock { $0.append(text) }
        }
        for r in results.withLock({ $0 }) { #expect(r == expected) }
    }

    @Test func referencesRead() throws {
        #expect(try MomentReference.parse("app.db") == nil)
        #expect(try MomentReference.parse("./repo:app.db@latest") == nil)
        #expect(try MomentReference.parse("repo:app.db@latest") == MomentReference(database: "app.db", when: "latest"))
        #expect(try MomentReference.parse("repo:/srv/a@b.db@-10m")?.database == "/srv/a@b.db")
        #expect(try MomentReference.parse("repo:a.db@2026-12-07T09:00:00+01:00")?.when == "2026-12-07T09:00:00+01:00")
        for bad in ["repo:", "repo:app.db", "repo:@latest", "repo:app.db@", "repo:app.db@yesterday"] {
            #expect(throws: ValidationErrorText.self, "\(bad)") { try MomentReference.parse(bad) }
        }
    }
}
