// Tables without a primary key compared through the rowid-order residue
// against SQLite sorting every row of both sides (the merge it replaces): on
// random tables with duplicate rows, mixed storage classes (1, 1.0, '1',
// x'31', NULL), rows moved to other rowids and rowids reused, both must
// report the same rows in the same order with the same counts. With -0.0
// the sorted merge is no oracle (SQLite sorts 0.0 and -0.0 as equal, the
// engine does not, so it reports equal rows as changed): there the residue
// must never report a row as both deleted and inserted.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct KeylessResidueTests {
    static let values = ["NULL", "1", "1.0", "'1'", "x'31'", "0.0", "2", "'a'", "'A'", "x''", "''", "0.1"]

    /// A random row of `k(x, y, z)` as SQL values (-0.0 among them with `negativeZero`).
    static func row(_ rng: inout SplitMix64, negativeZero: Bool) -> String {
        let pool = negativeZero ? values + ["-0.0"] : values
        return (0..<3).map { _ in pool[Int(rng.next() % UInt64(pool.count))] }.joined(separator: ", ")
    }

    @Test(arguments: 0..<4)
    func residueMatchesSortedMerge(batch: Int) throws {
        let folder = try TemporaryFolder("keyless-residue")
        var spilledInRuns = 0
        defer { #expect(spilledInRuns > 0, "no residue outgrew 120 bytes") }
        for k in 0..<10 {
            var rng = SplitMix64(seed: UInt64(90_000 + batch * 100 + k))
            let negativeZero = k % 3 == 2
            var script = "CREATE TABLE k(x, y, z);\n"
            let count = 5 + Int(rng.next() % 60)
            for _ in 0..<count { script += "INSERT INTO k VALUES (\(Self.row(&rng, negativeZero: negativeZero)));\n" }
            let a = folder.file("a\(batch)-\(k).db"), b = folder.file("b\(batch)-\(k).db")
            try makeDatabase(a, script)
            var changes = ""
            for _ in 0..<(1 + Int(rng.next() % 12)) {
                let rowid = 1 + Int(rng.next() % UInt64(count + 3))
                switch rng.next() % 5 {
                case 0: changes += "DELETE FROM k WHERE rowid = \(rowid);\n"
                case 1: changes += "INSERT INTO k VALUES (\(Self.row(&rng, negativeZero: negativeZero)));\n"
                case 2: changes += "UPDATE k SET y = \(Self.values[Int(rng.next() % UInt64(Self.values.count))]) WHERE rowid = \(rowid);\n"
                case 3: // the same row again, under a new rowid
                    changes += "INSERT INTO k SELECT x, y, z FROM k WHERE rowid = \(rowid);\n"
                default: // moved to another rowid: equal as a multiset
                    changes += "INSERT INTO k SELECT x, y, z FROM k WHERE rowid = \(rowid); DELETE FROM k WHERE rowid = \(rowid);\n"
                }
            }
            try makeDatabase(b, script + changes)
            let ca = try Connection(path: a, mode: .readOnly), cb = try Connection(path: b, mode: .readOnly)
            let ta = try #require(try ca.readSchema().table(named: "k")), tb = try #require(try cb.readSchema().table(named: "k"))
            let multiset = try DiffEngine.plan(ta, tb, options: DiffOptions())
            let byRowid = try DiffEngine.plan(ta, tb, options: DiffOptions(), keylessMode: .rowid)
            #expect(multiset.mode == .multiset && byRowid.mode == .rowid)

            let sorted = RecordingConsumer()
            let expected = try DiffEngine.merge(ca, cb, plan: multiset, consumer: sorted)
            let residue = try #require(try KeylessResidue.collect(ca, cb, byRowid: byRowid, shortcut: nil, sources: nil))
            let fromResidue = RecordingConsumer()
            let counts = try residue.compareAsMultisets(multiset, consumer: fromResidue)
            if negativeZero {
                let deleted = Set(fromResidue.events.filter { $0.hasPrefix("-") }.map { $0.dropFirst() })
                #expect(!fromResidue.events.contains { $0.hasPrefix("+") && deleted.contains($0.dropFirst()) },
                        "\(fromResidue.events)")
            } else {
                #expect(counts == expected, "\(script)\(changes)")
                #expect(fromResidue.events == sorted.events, "\(script)\(changes)")
            }

            // The replay by rowid reports what a merge by rowid reports.
            let byRowidMerge = RecordingConsumer()
            _ = try DiffEngine.merge(ca, cb, plan: byRowid, consumer: byRowidMerge)
            let replay = RecordingConsumer()
            try residue.replayByRowid(byRowid, consumer: replay)
            #expect(replay.events == byRowidMerge.events)

            // Past its memory limit the residue goes on in a temporary file:
            // sorted there in runs (of a row or a few at limit 0, where they
            // are a 32nd of the file; of a few at 120 bytes) merged with the
            // rows in memory, it reports the same rows in the same order, and
            // so does its replay by rowid.
            for limit in [0, 120] {
                let spilled = try #require(try KeylessResidue.collect(ca, cb, byRowid: byRowid, shortcut: nil, sources: nil, limit: limit))
                if limit == 0 { #expect(spilled.isSpilled == (residue.a.rows + residue.b.rows > 0)) }
                if limit == 120 && spilled.isSpilled { spilledInRuns += 1 }
                let fromSpill = RecordingConsumer()
                #expect(try spilled.compareAsMultisets(multiset, consumer: fromSpill) == counts)
                #expect(fromSpill.events == fromResidue.events, "limit \(limit): \(script)\(changes)")
                let spilledReplay = RecordingConsumer()
                try spilled.replayByRowid(byRowid, consumer: spilledReplay)
                #expect(spilledReplay.events == replay.events, "limit \(limit)")
            }
            // Past the temporary file's limit too, it gives up (the caller has SQLite sort).
            if residue.a.rows + residue.b.rows > 0 {
                #expect(try KeylessResidue.collect(ca, cb, byRowid: byRowid, shortcut: nil, sources: nil, limit: 0, spill: 0) == nil)
            }
        }
    }
}
