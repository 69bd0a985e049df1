// The pieces of replicate against the real thing: the -wal's commits as the
// follower reads them, compared with the pages SQLite's own reader sees; a
// damaged frame refused; the segment format read back, and a damaged or
// misfiled segment refused; the state digest kept up to date page by page
// equal to the digest of the whole list.
import Crypto
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class ReplicateTests: XCTestCase {
    /// A WAL database whose frames stay in the -wal (no automatic
    /// checkpoint), written by a connection of this process; `commits` transactions after the schema.
    func walDatabase(_ folder: TemporaryFolder, commits: Int) throws -> (path: String, writer: Connection) {
        let path = folder.file("app.db")
        let writer = try Connection(path: path, mode: .create)
        try writer.execute("PRAGMA journal_mode=wal; PRAGMA wal_autocheckpoint=0; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        for i in 0..<commits {
            try writer.execute("BEGIN; INSERT INTO t(v) SELECT randomblob(700) FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3); UPDATE t SET v = randomblob(50) WHERE id = \(i + 1); COMMIT")
        }
        return (path, writer)
    }

    /// While the follower holds a mark, the application's last close must
    /// find the database open elsewhere (the SHARED lock every connection
    /// of a WAL database holds): else it checkpoints in exclusive mode, past
    /// every read mark in the -shm, and deletes the -wal under the follower.
    /// Opening the second connection once closed a descriptor of the file
    /// and with it the first's lock (the "resync" seen under load).
    func testReadMarksKeepTheApplicationsLastCloseFromCheckpointing() throws {
        let folder = try TemporaryFolder("replicate-shared-lock")
        let (path, writer) = try walDatabase(folder, commits: 3)
        try writer.close()
        let marks = try ReadMarks(path: path)
        defer { marks.close() }
        let mark = try XCTUnwrap(try marks.beginNext())
        marks.hold(mark)
        _ = marks.restartCheckpoint { false }  // (opens the checkpointer's connection too)
        let script = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('INSERT INTO t(v) VALUES (1)'); c.commit(); c.close()"
        let r = try runProcess("/usr/bin/python3", ["-c", script, path])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-wal"), "the application's close left the -wal to the follower")
        let next = try XCTUnwrap(try marks.beginNext())
        XCTAssertTrue(next.header.maxFrame > 0 && !next.lockZero, "the commit is in the -wal, not checkpointed away under the mark")
        marks.drop(next)
    }

    func testCommitsReadFromTheWALAreThePagesSQLiteSees() throws {
        let folder = try TemporaryFolder("replicate-wal")
        let (path, writer) = try walDatabase(folder, commits: 25)
        let marks = try ReadMarks(path: path)
        defer { marks.close() }
        let mark = try XCTUnwrap(try marks.beginNext())
        marks.hold(mark)
        let connection = marks.connection(of: mark)
        let pageSize = try marks.pageSize()
        let wal = try XCTUnwrap(WALFile(connection, pageSize: pageSize))
        let h = mark.header
        let start = WALPosition(salt1: h.salt1, salt2: h.salt2, frame: 0, checksum1: 0, checksum2: 0)
        let commits = try wal.commits(after: start, newGeneration: false, index: h)
        XCTAssertEqual(commits.transactions, 26, "the schema and 25 transactions")
        XCTAssertEqual(commits.end.frame, h.maxFrame)
        guard case .integer(let count)? = try connection.scalar("PRAGMA page_count") else { return XCTFail() }
        XCTAssertEqual(Int(commits.pageCount), Int(count))
        // Every page's newest frame holds what SQLite's reader of the snapshot reads.
        let file = try XCTUnwrap(try PageFile(connection, walIndex: h))
        var buffer = [UInt8](repeating: 0, count: pageSize)
        XCTAssertEqual(commits.newest.count, Int(count), "every page of a database made in WAL mode has a frame")
        for (page, offset) in commits.newest {
            XCTAssertTrue(buffer.withUnsafeMutableBytes { wal.read(into: $0.baseAddress!, count: pageSize, offset: offset) })
            let seen = try XCTUnwrap(file.page(page))
            XCTAssertEqual(buffer, Array(UnsafeRawBufferPointer(start: seen, count: pageSize)), "page \(page)")
        }
        // Then 15 more: read from where the first reading ended, with the
        // first mark held while the next one is taken, as the follower does.
        for i in 0..<15 { try writer.execute("UPDATE t SET v = randomblob(90) WHERE id % 7 = \(i % 7)") }
        let next = try XCTUnwrap(try marks.beginNext())
        XCTAssertNotEqual(next.connection, mark.connection)
        let more = try wal.commits(after: commits.end, newGeneration: false, index: next.header)
        XCTAssertEqual(more.transactions, 15)
        XCTAssertEqual(more.end.frame, next.header.maxFrame)
        marks.hold(next)
        let nextFile = try XCTUnwrap(try PageFile(marks.connection(of: next), walIndex: next.header))
        for (page, offset) in more.newest {
            XCTAssertTrue(buffer.withUnsafeMutableBytes { wal.read(into: $0.baseAddress!, count: pageSize, offset: offset) })
            XCTAssertEqual(buffer, Array(UnsafeRawBufferPointer(start: try XCTUnwrap(nextFile.page(page)), count: pageSize)), "page \(page)")
        }
        // Nothing after the last commit.
        XCTAssertEqual(try wal.commits(after: more.end, newGeneration: false, index: next.header).transactions, 0)
    }

    func testADamagedFrameIsNeverTaken() throws {
        let folder = try TemporaryFolder("replicate-damage")
        let (path, writer) = try walDatabase(folder, commits: 6)
        let marks = try ReadMarks(path: path)
        defer { marks.close(); _ = writer }
        let mark = try XCTUnwrap(try marks.beginNext())
        marks.hold(mark)
        let pageSize = try marks.pageSize()
        let h = mark.header
        // One byte of the page of frame 5 changed, as a disk might.
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path + "-wal"))
        let offset = UInt64(32 + 4 * (24 + pageSize) + 24 + 100)
        try handle.seek(toOffset: offset)
        let byte = try XCTUnwrap(try handle.read(upToCount: 1))
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data([byte[0] ^ 0x5A]))
        try handle.close()
        let wal = try XCTUnwrap(WALFile(marks.connection(of: mark), pageSize: pageSize))
        let start = WALPosition(salt1: h.salt1, salt2: h.salt2, frame: 0, checksum1: 0, checksum2: 0)
        XCTAssertThrowsError(try wal.commits(after: start, newGeneration: false, index: h)) { error in
            XCTAssertTrue(error is WALMismatch, "\(error)")
            XCTAssertTrue("\(error)".contains("frame 5"), "\(error)")
        }
        // A position of another generation is not continued.
        let other = WALPosition(salt1: h.salt1 &+ 1, salt2: h.salt2, frame: 3, checksum1: 0, checksum2: 0)
        XCTAssertThrowsError(try wal.commits(after: other, newGeneration: false, index: h)) { XCTAssertTrue($0 is WALMismatch) }
    }

    func testStateDigestKeptPageByPageIsTheWholeListsDigest() {
        var rng = SplitMix64(seed: 7)
        func id() -> PageID { PageID(a: rng.next(), b: rng.next(), c: rng.next(), d: rng.next()) }
        var ids = (0..<300).map { _ in id() }
        var digest = StateDigest.of(ids)
        for round in 0..<50 {
            let newCount = max(1, ids.count + Int(rng.next() % 41) - 20)
            var changes: [(page: UInt32, id: PageID)] = []
            for p in 1...newCount where p > ids.count || rng.next() % 10 == 0 { changes.append((UInt32(p), id())) }
            let state = ReplicaState(number: UInt64(round + 1), observedMicros: 0, position: WALPosition(salt1: 0, salt2: 0, frame: 0, checksum1: 0, checksum2: 0),
                                     transactions: 1, kind: .frames, pageCount: UInt32(newCount), changes: changes, digest: StateDigest())
            for p in min(newCount, ids.count)..<ids.count { digest.remove(UInt32(p + 1), ids[p]) }
            for c in changes where Int(c.page) <= ids.count { digest.remove(c.page, ids[Int(c.page) - 1]) }
            XCTAssertNoThrow(try state.apply(to: &ids))
            for c in changes { digest.add(c.page, c.id) }
            XCTAssertEqual(digest, StateDigest.of(ids), "round \(round)")
        }
        // A state that grows the database without naming its new pages is refused.
        let short = ReplicaState(number: 1, observedMicros: 0, position: WALPosition(salt1: 0, salt2: 0, frame: 0, checksum1: 0, checksum2: 0),
                                 transactions: 1, kind: .frames, pageCount: UInt32(ids.count + 2), changes: [(UInt32(ids.count + 1), id())], digest: StateDigest())
        XCTAssertThrowsError(try short.apply(to: &ids))
    }

    func testSegmentsReadBackAndDamageIsRefused() throws {
        let folder = try TemporaryFolder("replicate-segment")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil)
        XCTAssertEqual(repository.version, 4)
        var rng = SplitMix64(seed: 3)
        func id() -> PageID { PageID(a: rng.next(), b: rng.next(), c: rng.next(), d: rng.next()) }
        let chain = id().hex
        var states: [ReplicaState] = []
        for n in 1...5 {
            let position = WALPosition(salt1: 7, salt2: 9, frame: UInt32(n * 3), checksum1: UInt32(n), checksum2: 1)
            var changes: [(page: UInt32, id: PageID)] = []
            if n != 2 { changes.append((page: UInt32(n), id: id())); changes.append((page: UInt32(10), id: id())) }
            let digest = StateDigest.of((0..<n).map { _ in id() })
            let observed: UInt64 = 1_800_000_000_000_000 + UInt64(n) * 100_000
            states.append(ReplicaState(number: UInt64(n), observedMicros: observed, position: position, transactions: UInt32(n),
                                       kind: n == 3 ? .resync : .frames, pageCount: 10, changes: changes, digest: digest))
        }
        let segment = Segment(chain: chain, hostname: "host", path: "/srv/app.db", pageSize: 4096, states: states)
        let (key, _) = try repository.putSegment(segment)
        let back = try repository.loadSegment(key)
        XCTAssertEqual(back.chain, chain)
        XCTAssertEqual(back.path, "/srv/app.db")
        XCTAssertEqual(back.states.map { $0.number }, [1, 2, 3, 4, 5])
        for (a, b) in zip(back.states, states) {
            XCTAssertEqual(a.position, b.position)
            XCTAssertEqual(a.digest, b.digest)
            XCTAssertEqual(a.kind, b.kind)
            XCTAssertEqual(a.observedMicros, b.observedMicros)
            XCTAssertEqual(a.changes.map { $0.page }, b.changes.map { $0.page })
            XCTAssertEqual(a.changes.map { $0.id }, b.changes.map { $0.id })
        }
        // One byte changed: the content no longer matches its name.
        var bytes = try store.get(key)
        bytes[bytes.count / 2] ^= 1
        try store.put(key, bytes)
        XCTAssertThrowsError(try repository.loadSegment(key)) { XCTAssertTrue("\($0)".contains("does not match its name"), "\($0)") }
        // A whole segment filed under another chain.
        let (good, _) = try repository.putSegment(segment)
        let misfiled = "segments/\(id().hex)/" + good.split(separator: "/").last!
        try store.put(misfiled, try store.get(good))
        XCTAssertThrowsError(try repository.loadSegment(misfiled)) { XCTAssertTrue("\($0)".contains("not the one it is filed under"), "\($0)") }
    }

    /// Forget lists the snapshots before segments/: a chain whose base was
    /// written in between must not lose its segments as orphans.
    func testForgetRemovesOnlySegmentsWhoseBaseIsReallyGone() throws {
        let folder = try TemporaryFolder("replicate-orphans")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil)
        let chain = PageID(a: 1, b: 2, c: 3, d: 4).hex
        let state = ReplicaState(number: 1, observedMicros: 1_800_000_000_000_000, position: WALPosition(salt1: 1, salt2: 2, frame: 3, checksum1: 4, checksum2: 5),
                                 transactions: 1, kind: .frames, pageCount: 1, changes: [], digest: StateDigest())
        _ = try repository.putSegment(Segment(chain: chain, hostname: "host", path: "/srv/app.db", pageSize: 4096, states: [state]))
        // The base, written after forget listed the snapshots (its bytes do not matter here).
        try store.put("snapshots/" + chain, [1, 2, 3])
        var (_, removed) = try RepoForget.decide([], policy: RetentionPolicy(last: 1), within: nil, repository: repository) { _ in }
        XCTAssertTrue(removed.isEmpty, "a base that exists keeps its segments: \(removed.map(\.chain))")
        try store.delete("snapshots/" + chain)
        (_, removed) = try RepoForget.decide([], policy: RetentionPolicy(last: 1), within: nil, repository: repository) { _ in }
        XCTAssertEqual(removed.map(\.chain), [chain], "segments whose base is gone are orphans")
    }

    /// Hostile segments: a page count that would need a huge page list, state
    /// numbers past UInt64.max, times that are not numbers; refused or
    /// bounded, never a trap or an allocation of the size they claim.
    /// A gathering stores each page's newest versions in front of every
    /// older one: a restore of the period's last state reads the front
    /// only. Page 1 changes at every state (100 versions, more than a blob
    /// holds), page 2 at every third, page 3 once; every version is
    /// stored once, each page's newest in a blob before any blob of older
    /// versions only, and the blobs give back the very bytes.
    /// A spool file buffers what is appended: every read gives back the
    /// bytes appended there, whether they were written to the file yet or
    /// still wait in the buffer, for pieces smaller and larger than it.
    func testASpoolFileReadsBackWhatWasAppended() throws {
        let spool = try SpoolFile()
        var rng = SplitMix64(seed: 5)
        var all: [UInt8] = []
        var pieces: [(offset: Int64, bytes: [UInt8])] = []
        for size in [1, 4096, 100, SpoolFile.bufferSize - 3, 7, SpoolFile.bufferSize, 3 * SpoolFile.bufferSize + 5, 4096, 12] {
            let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let offset = try bytes.withUnsafeBytes { try spool.append($0) }
            XCTAssertEqual(offset, Int64(all.count), "appended at the end")
            all += bytes
            pieces.append((offset, bytes))
            XCTAssertEqual(spool.size, Int64(all.count))
            // The newest piece (perhaps still in the buffer) and the first.
            XCTAssertEqual(try spool.read(offset: offset, count: size), bytes)
            XCTAssertEqual(try spool.read(offset: 0, count: 1), [all[0]])
        }
        for piece in pieces.reversed() { XCTAssertEqual(try spool.read(offset: piece.offset, count: piece.bytes.count), piece.bytes) }
        XCTAssertEqual(try spool.read(offset: 0, count: all.count), all, "the whole file")
        XCTAssertThrowsError(try spool.read(offset: Int64(all.count) - 2, count: 4), "past the end")
    }

    func testAGatheringPutsEachPagesNewestVersionInFront() throws {
        let folder = try TemporaryFolder("replicate-gather-front")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil)
        let pageSize = 4096
        let spool = try PageSpool(pageSize: pageSize)
        var rng = SplitMix64(seed: 11)
        var pages: [UInt32: [UInt8]] = [:]
        for p in UInt32(1)...3 { pages[p] = (0..<pageSize).map { _ in UInt8(truncatingIfNeeded: rng.next()) } }
        var versions: [PageID: [UInt8]] = [:], newest: [UInt32: PageID] = [:]
        for n in UInt64(1)...100 {
            for p in UInt32(1)...3 where p == 1 || (p == 2 && n % 3 == 0) || (p == 3 && n == 50) {
                for k in 0..<40 { pages[p]![Int(rng.next() % UInt64(pageSize))] = UInt8(truncatingIfNeeded: n &+ UInt64(k)) }
                let bytes = pages[p]!
                let id = bytes.withUnsafeBytes { repository.pageID($0) }
                try bytes.withUnsafeBytes { try spool.append(page: p, number: n, id: id, bytes: $0) }
                versions[id] = bytes
                newest[p] = id
            }
        }
        let items = try Gathering.run(Gathering.Job(repository: repository, spool: spool, chain: String(repeating: "ab", count: 32),
                                                    hostname: "h", path: "/app.db", states: [],
                                                    replaced: Replacement(segments: [], indexes: [], packs: [])))
        var index = RepoIndex()
        var packs: [String: [UInt8]] = [:]
        for item in items {
            switch item {
            case .put(let object, _):
                let key = object.key.name, bytes = object.bytes
                // (Every object is named by its SHA-256: the shipper hands it to S3 as the payload's hash.)
                XCTAssertEqual(String(key.split(separator: "/").last!), Hex.encode(Array(SHA256.hash(data: bytes))), key)
                if key.hasPrefix("index/") {
                    try IndexObject.decode(try repository.keys.open(bytes, what: key), what: key, into: &index, source: 0)
                }
            case .putSpooled(let objectKey, let file, let offset, let count):
                let key = objectKey.name
                packs[key] = try file.read(offset: offset, count: count)
                XCTAssertEqual(String(key.split(separator: "/").last!), Hex.encode(Array(SHA256.hash(data: packs[key]!))), key)
            default: break
            }
        }
        XCTAssertEqual(index.entries.count, versions.count, "every version once")
        XCTAssertEqual(Set(index.entries.map(\.id)), Set(versions.keys))
        let newestIDs = Set(newest.values)
        let lastFront = try XCTUnwrap(index.entries.filter { newestIDs.contains($0.id) }.map(\.blob).max())
        let blobsWithNewest = Set(index.entries.filter { newestIDs.contains($0.id) }.map(\.blob))
        let olderOnly = index.entries.map(\.blob).filter { !blobsWithNewest.contains($0) }
        XCTAssertFalse(olderOnly.isEmpty, "page 1's oldest versions are behind")
        XCTAssertLessThan(lastFront, try XCTUnwrap(olderOnly.min()), "every page's newest is in front of the blobs of older versions")
        // The blobs hold the very bytes.
        let decompressor = ZstdDecompressor()
        for (b, blob) in index.blobs.enumerated() {
            let pack = try XCTUnwrap(packs[Repository.packKey(index.packs[Int(blob.pack)])])
            var out: [UInt8] = []
            try pack.withUnsafeBytes { raw in
                try repository.pages(fromBlob: UnsafeRawBufferPointer(rebasing: raw[Int(blob.offset)..<Int(blob.offset + blob.length)]),
                                     pages: Int(blob.pages), pageSize: pageSize, ids: [], decompressor: decompressor, what: "pack", into: &out)
            }
            for entry in index.entries where entry.blob == UInt32(b) {
                XCTAssertEqual(Array(out[Int(entry.slot) * pageSize..<(Int(entry.slot) + 1) * pageSize]), versions[entry.id])
            }
        }
    }

    func testHostileSegmentsAreRefusedWithoutATrap() throws {
        let zero = WALPosition(salt1: 0, salt2: 0, frame: 0, checksum1: 0, checksum2: 0)
        let huge = ReplicaState(number: 1, observedMicros: 0, position: zero, transactions: 1, kind: .frames,
                                pageCount: .max, changes: [], digest: StateDigest())
        var ids: [PageID] = []
        XCTAssertThrowsError(try huge.apply(to: &ids), "4 billion pages, none named")
        XCTAssertTrue(ids.isEmpty, "refused before the list grew")
        let folder = try TemporaryFolder("replicate-hostile")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil)
        func state(_ n: UInt64) -> ReplicaState {
            ReplicaState(number: n, observedMicros: 5, position: zero, transactions: 1, kind: .frames, pageCount: 1, changes: [], digest: StateDigest())
        }
        let (key, _) = try repository.putSegment(Segment(chain: PageID(a: 1, b: 1, c: 1, d: 1).hex, hostname: "h", path: "/a.db", pageSize: 4096,
                                                         states: [state(.max), state(0)]))
        XCTAssertThrowsError(try repository.loadSegment(key)) { XCTAssertTrue("\($0)".contains("not consecutive"), "\($0)") }
        XCTAssertEqual(ReplicaState.micros(-1), 0)
        XCTAssertEqual(ReplicaState.micros(.nan), 0)
        XCTAssertEqual(ReplicaState.micros(.infinity), 0)
        XCTAssertEqual(ReplicaState.micros(1e300), UInt64.max / 2)
        XCTAssertEqual(ReplicaState.micros(1.5), 1_500_000)
    }

    /// `replicate a.db ./a.db` follows the file once: two sets of read marks
    /// on one -shm in one process would drop each other's locks.
    func testReplicatorFollowsEachFileOnce() throws {
        let folder = try TemporaryFolder("replicate-dedupe")
        let (path, writer) = try walDatabase(folder, commits: 1)
        try writer.close()
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil)
        let replicator = Replicator(sources: [path, folder.path + "/./app.db", path], repository: repository, options: ReplicateOptions(), events: { _ in })
        XCTAssertEqual(replicator.sources, [path])
        XCTAssertEqual(replicator.statuses.count, 1)
    }

    /// A follower that starts again records its unshipped states anew: the lag does not count from the old ones.
    func testARestartedFollowerLagsFromItsNewStates() {
        let status = FollowerStatus(database: "a.db")
        status.recorded(ReplicaState(number: 1, observedMicros: 1_000_000, position: WALPosition(salt1: 0, salt2: 0, frame: 0, checksum1: 0, checksum2: 0),
                                     transactions: 1, kind: .frames, pageCount: 1, changes: [], digest: StateDigest()))
        XCTAssertGreaterThan(status.lag, 1_000_000, "a state of 1970, unshipped")
        status.restarted()
        XCTAssertEqual(status.lag, 0)
    }

    /// A store that is down: every write fails as a connection failure would.
    final class DownStore: ObjectStore, @unchecked Sendable {
        let inner: FolderStore
        init(_ inner: FolderStore) { self.inner = inner }
        var location: String { inner.location }
        func put(_ key: String, _ bytes: [UInt8]) throws { throw StoreError(.unavailable, location: key, message: "connection refused") }
        func get(_ key: String) throws -> [UInt8] { try inner.get(key) }
        func get(_ key: String, offset: Int64, length: Int) throws -> [UInt8] { try inner.get(key, offset: offset, length: length) }
        func list(prefix: String) throws -> [StoredObject] { try inner.list(prefix: prefix) }
        func delete(_ key: String) throws { throw StoreError(.unavailable, location: key, message: "connection refused") }
    }

    /// A stop during an outage, with the queue over its limit, ends by the
    /// stop timeout: the finish neither waits for room nor comes before the deadline.
    func testAStopDuringAnOutageEndsByItsDeadline() throws {
        let folder = try TemporaryFolder("replicate-outage")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        _ = try Repository.initialize(store, secret: nil)
        let repository = try Repository.open(DownStore(store), secret: nil)
        let shipper = Shipper(repository: repository, database: "a.db", limit: 1000, shipped: { _, _ in }, problem: { _, _ in })
        let ended = DispatchSemaphore(value: 0)
        let result = Locked(true)
        Thread { result.withLock { $0 = shipper.run() }; ended.signal() }.start()
        shipper.enqueue(.begin)
        shipper.enqueue(.put(SealedObject(key: ObjectKey("packs/00/00"), bytes: [UInt8](repeating: 1, count: 5000), sha256: []), role: .pack))
        let started = Date()
        let finished = DispatchSemaphore(value: 0)
        Thread { shipper.finish(giveUpAt: Clock.now() + 1); finished.signal() }.start()
        XCTAssertEqual(finished.wait(timeout: .now() + 5), .success, "the finish was queued")
        XCTAssertEqual(ended.wait(timeout: .now() + 10), .success, "the shipper gave up at its deadline")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertFalse(result.withLock { $0 }, "nothing was written")
    }

    func testDurations() throws {
        XCTAssertEqual(try RepoForget.parseDuration("7d"), 7 * 86400)
        XCTAssertEqual(try RepoForget.parseDuration("1d12h"), 36 * 3600)
        XCTAssertEqual(try RepoForget.parseDuration("90m"), 5400)
        XCTAssertThrowsError(try RepoForget.parseDuration("7"))
        XCTAssertThrowsError(try RepoForget.parseDuration("week"))
    }

    /// One follower per database: of two that claim one database's lease at
    /// once, one holds it and the other is refused naming it (another
    /// database is no conflict); a holder whose lease was removed (taken for
    /// stale by another) and taken by another is lost, and says so at its
    /// next renewal; in an encrypted repository too.
    func testOneLeasePerDatabase() throws {
        for encrypted in [false, true] {
            let folder = try TemporaryFolder("replicate-lease")
            let store = FolderStore(path: folder.file("repo"))
            try store.createRoot()
            let repository = try Repository.initialize(store, secret: encrypted ? .keyFile(folder.file("key")) : nil)
            let results = Locked([Result<FollowerLease?, any Error>]())
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                let r = Result { try FollowerLease.acquire(repository, path: "/srv/app.db", timeout: 3) }
                results.withLock { $0.append(r) }
            }
            let all = results.withLock { $0 }
            let held = all.compactMap { try? $0.get() }.compactMap { $0 }
            XCTAssertEqual(held.count, 1, "one holds the lease")
            for case .failure(let error) in all {
                XCTAssertTrue("\(error)".contains("/srv/app.db is already followed into this repository by replicate (pid \(getpid()) on "), "\(error)")
            }
            let holder = try XCTUnwrap(held.first)
            XCTAssertTrue(holder.isHeld)
            let listed = try FollowerLease.list(repository)
            XCTAssertEqual(listed.map(\.path), ["/srv/app.db"])
            XCTAssertNil(listed[0].staleReason, "a live process's lease holds")
            let other = try XCTUnwrap(try FollowerLease.acquire(repository, path: "/srv/other.db", timeout: 0))
            try holder.renew(force: true)
            // Removed under its holder, and claimed by another.
            try store.delete(holder.key)
            let taker = try XCTUnwrap(try FollowerLease.acquire(repository, path: "/srv/app.db", timeout: 0))
            XCTAssertThrowsError(try holder.renew(force: true)) { XCTAssertTrue($0 is FollowerLeaseLost, "\($0)") }
            XCTAssertNotNil(holder.lost)
            XCTAssertFalse(holder.isHeld)
            XCTAssertTrue(taker.isHeld)
            holder.release()
            XCTAssertEqual(try FollowerLease.list(repository).count, 2, "a lost holder removes nothing")
            taker.release()
            other.release()
            XCTAssertTrue(try store.list(prefix: "followers/").isEmpty)
        }
    }
}
