// Chain health, tried as an unlucky or hostile user would: a chain made by a
// real follower (two chains, the first folded into the second), then copies
// of its folder repository damaged one way each (a middle segment deleted,
// one truncated, two swapped, a pack a state needs removed, the closed
// chain's segments gone). `snapshots --ranges` (text and --json) must show
// the gap with the right times, `verify --repo` exit 1 naming its first
// moment, and `restore --at` must do what the window says: at its last
// moment the database the undamaged copy restores, just past it not.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite(.serialized) struct ChainHealthTests {
    let replicate = ReplicateCommandTests()

    /// The repository (a folder), the writer's log, and where to put copies.
    struct Made {
        let folder: TemporaryFolder
        let repo: String
        let log: WriterLog
    }

    /// Two chains of app.db: a few seconds of commits, a fold (SIGUSR1), a
    /// few more, then the follower killed (SIGKILL: its last segments stay
    /// as they are, one a second, not gathered).
    func makeChains() throws -> Made {
        let folder = try TemporaryFolder("chain-health")
        let repo = folder.file("repo")
        let (db, logPath) = try replicate.makeApp(folder)
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let events = folder.file("events.log")
        let follower = try FollowerProcess([db, "--repo", repo], events: events, gatherEvery: 1000)
        #expect(waitUntil(60) { replicate.started(events) })
        #expect(try replicate.startWriter(db, log: logPath, ["--seconds", "3", "--every-ms", "20"]).wait() == 0)
        Thread.sleep(forTimeInterval: 1.5)
        follower.signal(SIGUSR1)
        #expect(waitUntil(30) { ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").contains("\"kind\":\"fold\"") }, "folded")
        #expect(try replicate.startWriter(db, log: logPath, ["--seconds", "5", "--every-ms", "20", "--seed", "2"]).wait() == 0)
        Thread.sleep(forTimeInterval: 2.5)
        follower.kill9()
        return Made(folder: folder, repo: repo, log: try WriterLog(logPath))
    }

    /// A copy of the repository to damage.
    func copy(_ made: Made, _ name: String) throws -> String {
        let target = made.folder.file(name)
        #expect(try runProcess("/bin/cp", ["-R", made.repo, target]).status == 0)
        return target
    }

    /// The chains, oldest first, each with its segment files ordered by their first state.
    func chains(_ repo: String) throws -> [(base: Snapshot, segments: [(file: String, segment: Segment)])] {
        let repository = try Repository.open(FolderStore(path: repo), secret: nil)
        return try Repository.chainBases(try repository.snapshots().snapshots).sorted { $0.time < $1.time }.map { base in
            let refs = try repository.segmentKeys(chain: base.id)
            let segments = try refs.map { (repo + "/" + $0.key, try repository.loadSegment($0.key)) }.sorted { $0.1.first < $1.1.first }
            return (base, segments.map { (file: $0.0, segment: $0.1) })
        }
    }

    /// `snapshots --ranges --json`: its exit status and spans.
    func spans(_ repo: String) throws -> (status: Int32, spans: [[String: Any]], text: String) {
        let r = try runLitectl(["snapshots", "--ranges", "--json", "--repo", repo])
        let text = try runLitectl(["snapshots", "--ranges", "--repo", repo])
        let objects = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return (r.status, objects, text.stdout + text.stderr)
    }

    func micros(_ t: Double) -> String { String(format: "%.6f", t) }
    /// Seconds to whole microseconds (the nearest: times are whole microseconds held as doubles).
    func us(_ t: Double) -> UInt64 { UInt64((t * 1e6).rounded()) }

    /// Restores app.db at `t` (epoch seconds to the microsecond): exit status, stderr, and the application's digest of it.
    func restore(_ repo: String, at t: Double, into target: String) throws -> (status: Int32, stderr: String, digest: String?) {
        try? FileManager.default.removeItem(atPath: target)
        let r = try runLitectl(["restore", "--repo", repo, "latest", "--db", "app.db", "--at", micros(t), target])
        let digest = r.status == 0 ? try replicate.digest(target).digest : nil
        return (r.status, r.stderr, digest)
    }

    /// The damaged copy and the whole one restore the same database at `t`.
    func sameAsWhole(_ made: Made, _ damaged: String, at t: Double, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let a = try restore(damaged, at: t, into: made.folder.file("damaged.db"))
        let b = try restore(made.repo, at: t, into: made.folder.file("whole.db"))
        #expect(a.status == 0 && b.status == 0 && a.digest != nil && a.digest == b.digest && !a.stderr.contains("instead"),
                "at \(micros(t)) the damaged copy restores what the whole one does: \(a) \(b)", sourceLocation: sourceLocation)
    }

    /// Past the window: not the database the whole copy restores (refused, or an older snapshot with a note).
    func notAsWhole(_ made: Made, _ damaged: String, at t: Double, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let a = try restore(damaged, at: t, into: made.folder.file("damaged.db"))
        let b = try restore(made.repo, at: t, into: made.folder.file("whole.db"))
        #expect(b.status == 0, sourceLocation: sourceLocation)
        #expect(a.status == 2 || (a.status == 0 && a.stderr.contains("instead") && a.digest != b.digest),
                "at \(micros(t)) the damaged copy does not pass an older moment for this one: \(a)", sourceLocation: sourceLocation)
    }

    /// One gap after one range, starting right after `lastGood` (seconds),
    /// shown in text and JSON; verify exits 1 naming its first moment.
    func expectGapAfter(_ made: Made, _ repo: String, lastGood: Double, sourceLocation: SourceLocation = #_sourceLocation) throws -> (range: [String: Any], gap: [String: Any]) {
        let (status, spans, text) = try spans(repo)
        #expect(status == 1, "a damaged chain: exit 1: \(text)", sourceLocation: sourceLocation)
        let gaps = spans.filter { $0["restorable"] as? Bool == false }
        let gap = try #require(gaps.first, "a gap: \(spans)", sourceLocation: sourceLocation)
        let range = try #require(spans.last { ($0["restorable"] as? Bool) == true && ($0["to_unix"] as? Double ?? .infinity) < gap["from_unix"] as? Double ?? 0 },
                                 "a range before it: \(spans)", sourceLocation: sourceLocation)
        let to = range["to_unix"] as? Double ?? 0, from = gap["from_unix"] as? Double ?? 0
        #expect(us(to) == us(lastGood), "the range ends at the last good state: \(micros(to)) vs \(micros(lastGood))", sourceLocation: sourceLocation)
        #expect(us(from) == us(lastGood) + 1, "the gap starts right after: \(micros(from))", sourceLocation: sourceLocation)
        #expect(text.contains("GAP app.db") && text.contains("cannot be restored from \(Timestamp.iso8601Micros(from))"), "\(text)", sourceLocation: sourceLocation)
        let verify = try runLitectl(["verify", "--repo", repo])
        #expect(verify.status == 1 && verify.stdout.contains("cannot be restored from \(Timestamp.iso8601Micros(from))"),
                "verify names the first moment: \(verify.stdout) \(verify.stderr)", sourceLocation: sourceLocation)
        return (range, gap)
    }

    @Test func aWholeChainIsOneRangeToItsLastCommitAndVerifies() throws {
        let made = try makeChains()
        let all = try chains(made.repo)
        #expect(all.count == 2 && all[1].segments.count >= 4, "two chains, the second in segments: \(all.map { ($0.base.shortID, $0.segments.count) })")
        let (status, spans, text) = try spans(made.repo)
        #expect(status == 0 && spans.count == 1 && spans[0]["restorable"] as? Bool == true, "\(spans) \(text)")
        let last = try #require(all.last?.segments.last?.segment.states.last)
        #expect(us(spans[0]["to_unix"] as? Double ?? 0) == last.observedMicros)
        #expect(us(spans[0]["last_commit_unix"] as? Double ?? 0) == last.observedMicros)
        #expect(us(spans[0]["from_unix"] as? Double ?? 0) == us(all[0].base.time))
        #expect(text.contains("last commit shipped of app.db") && text.contains(Timestamp.iso8601Micros(last.observed)) && !text.contains("GAP"), "\(text)")
        let verify = try runLitectl(["verify", "--repo", made.repo])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        // The window's ends restore.
        try sameAsWhole(made, made.repo, at: last.observed)
    }

    @Test func aMissingTruncatedOrSwappedSegmentIsAGapFromItsFirstState() throws {
        let made = try makeChains()
        let whole = try chains(made.repo)
        let b = try #require(whole.last)
        try #require(b.segments.count >= 4, "segments: \(b.segments.count)")
        let middle = b.segments.count / 2
        // The state before the segment: the last moment restorable.
        func before(_ i: Int) -> Double { b.segments[i - 1].segment.states.last!.observed }

        // A middle segment deleted.
        let deleted = try copy(made, "deleted")
        try FileManager.default.removeItem(atPath: b.segments[middle].file.replacingOccurrences(of: made.repo, with: deleted))
        var (range, gap) = try expectGapAfter(made, deleted, lastGood: before(middle))
        #expect(gap["to"] is NSNull && (gap["cause"] as? String ?? "").contains("lacks states"), "\(gap)")
        try sameAsWhole(made, deleted, at: range["to_unix"] as? Double ?? 0)
        try sameAsWhole(made, deleted, at: before(middle) - 0.2)
        try notAsWhole(made, deleted, at: gap["from_unix"] as? Double ?? 0)
        try notAsWhole(made, deleted, at: b.segments[middle].segment.states.last!.observed)

        // One truncated.
        let truncated = try copy(made, "truncated")
        let victim = b.segments[middle].file.replacingOccurrences(of: made.repo, with: truncated)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: victim))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: victim))
        (range, gap) = try expectGapAfter(made, truncated, lastGood: before(middle))
        try sameAsWhole(made, truncated, at: range["to_unix"] as? Double ?? 0)
        try notAsWhole(made, truncated, at: gap["from_unix"] as? Double ?? 0)

        // Two swapped (each under the other's name).
        let swapped = try copy(made, "swapped")
        let x = b.segments[middle].file.replacingOccurrences(of: made.repo, with: swapped)
        let y = b.segments[middle + 1].file.replacingOccurrences(of: made.repo, with: swapped)
        let bx = try Data(contentsOf: URL(fileURLWithPath: x)), by = try Data(contentsOf: URL(fileURLWithPath: y))
        try by.write(to: URL(fileURLWithPath: x)); try bx.write(to: URL(fileURLWithPath: y))
        (range, gap) = try expectGapAfter(made, swapped, lastGood: before(middle))
        try sameAsWhole(made, swapped, at: range["to_unix"] as? Double ?? 0)
        try notAsWhole(made, swapped, at: gap["from_unix"] as? Double ?? 0)
    }

    @Test func aClosedChainWhoseSegmentsAreGoneIsAGapUntilTheNext() throws {
        let made = try makeChains()
        let whole = try chains(made.repo)
        try #require(whole.count == 2)
        let (a, b) = (whole[0], whole[1])
        try #require(!a.segments.isEmpty && b.base.replica?.follows?.chain == a.base.id)
        let gone = try copy(made, "gone")
        for s in a.segments { try FileManager.default.removeItem(atPath: s.file.replacingOccurrences(of: made.repo, with: gone)) }
        let (_, gap) = try expectGapAfter(made, gone, lastGood: a.base.time)
        #expect(us(gap["to_unix"] as? Double ?? 0) == us(b.base.time), "restorable again from the next chain's base: \(gap)")
        #expect((gap["cause"] as? String ?? "").contains("recorded"), "\(gap)")
        try sameAsWhole(made, gone, at: b.base.time)
        try notAsWhole(made, gone, at: (a.base.time + b.base.time) / 2)
    }

    @Test func aPackAStateNeedsRemovedIsAGapFromThatState() throws {
        let made = try makeChains()
        let b = try #require(try chains(made.repo).last)
        // The newest pack: the last segment's new pages.
        let packs = try FileManager.default.subpathsOfDirectory(atPath: made.repo + "/packs").filter { $0.split(separator: "/").count == 2 }
        let newest = try #require(packs.max { a, b in
            let ma = (try? FileManager.default.attributesOfItem(atPath: made.repo + "/packs/" + a)[.modificationDate] as? Date) ?? .distantPast
            let mb = (try? FileManager.default.attributesOfItem(atPath: made.repo + "/packs/" + b)[.modificationDate] as? Date) ?? .distantPast
            return ma < mb
        })
        let damaged = try copy(made, "nopack")
        try FileManager.default.removeItem(atPath: damaged + "/packs/" + newest)
        let (status, spans, text) = try spans(damaged)
        #expect(status == 1, "\(text)")
        let gap = try #require(spans.first { $0["restorable"] as? Bool == false }, "\(spans)")
        #expect((gap["cause"] as? String ?? "").contains(String(newest.split(separator: "/").last!)), "the pack is named: \(gap)")
        let from = gap["from_unix"] as? Double ?? 0
        let last = b.segments.last!.segment
        #expect(last.states.contains { us(from) == $0.observedMicros }, "the gap starts at a state of the last segment: \(micros(from))")
        let verify = try runLitectl(["verify", "--repo", damaged])
        #expect(verify.status == 1 && verify.stdout.contains("cannot be restored from \(Timestamp.iso8601Micros(from))"), "\(verify.stdout)")
        try sameAsWhole(made, damaged, at: from - 0.000001)
        let at = try restore(damaged, at: from, into: made.folder.file("damaged.db"))
        #expect(at.status == 2, "the state whose page is gone cannot be restored: \(at)")
    }
}
