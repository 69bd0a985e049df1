// `verify --repo` for the chains of `litectl replicate` (repository version
// 4): every segment reads back (its bytes are the SHA-256 its name says) and
// belongs to an existing base; each chain's states follow one another from 1
// with no gap; every page they name is in the index (and, with --read-data,
// in a sound pack); and the states replayed from the base's list give, state
// after state, the digest each one recorded. Problems name the chains (by
// their bases' ids) that they damage. Then each database's history
// (ChainHealth.swift): every gap, a moment a restore no longer lands on, is a
// problem that names its first moment, chains that continue one another joined.
import Foundation

extension RepoVerify {
    /// Adds the chains' problems to `report`. `damage(position)` names the
    /// problem object (a pack) of an index position found bad, or nil.
    static func checkChains(_ repository: Repository, snapshots: [Snapshot], index: RepoIndex,
                            report: inout RepoVerifyReport, damage: (Int) -> String?) throws {
        let listed = try repository.segmentKeys()
        let bases = Dictionary(Repository.chainBases(snapshots).map { ($0.id, $0) }) { a, _ in a }
        var problemOf: [String: Int] = [:]
        for (i, p) in report.problems.enumerated() where p.object.hasPrefix("packs/") { problemOf[p.object] = i }
        for chain in listed.keys.sorted() {
            let refs = listed[chain]!.sorted { $0.key < $1.key }
            report.segments += refs.count
            guard let base = bases[chain] else {
                report.problems.append(RepoProblem(object: Repository.segmentPrefix(chain: chain), message: "\(refs.count) segment(s) of chain \(chain.prefix(8)), whose base snapshot is missing: their states cannot be restored (forget removes them)", snapshots: [chain]))
                continue
            }
            report.chains += 1
            var segments: [Segment] = []
            var unreadable = false
            for ref in refs {
                do { segments.append(try repository.loadSegment(ref.key)) } catch let error as StoreError where error.kind != .unavailable && error.kind != .denied {
                    report.problems.append(RepoProblem(object: ref.key, message: error.message, snapshots: [chain]))
                    unreadable = true
                }
            }
            if unreadable { continue }
            let loaded: ReplicaChain
            do { loaded = try repository.chain(base, segments: segments, refs: refs) } catch let error as StoreError {
                report.problems.append(RepoProblem(object: Repository.segmentPrefix(chain: chain), message: error.message, snapshots: [chain]))
                continue
            }
            // Every page named, in the index and not damaged.
            var missing = 0
            var hit = Set<String>()
            for state in loaded.states {
                for change in state.changes {
                    guard let p = index.position(of: change.id) else { missing += 1; continue }
                    if let object = damage(p) { hit.insert(object) }
                }
            }
            for object in hit { if let i = problemOf[object] { report.problems[i].snapshots.append(chain) } }
            if missing > 0 {
                report.problems.append(RepoProblem(object: Repository.segmentPrefix(chain: chain), message: "\(missing) page(s) its states name are not in the index", snapshots: [chain]))
                continue
            }
            // The states replayed from the base's list, each digest checked.
            var ids: [PageID]
            do { ids = try repository.pageIDs(of: base) } catch let error as StoreError where error.kind != .unavailable && error.kind != .denied {
                continue  // the base's own problem is reported with the snapshots
            }
            var digest = StateDigest.of(ids)
            for state in loaded.states {
                // The terms that go (pages past the new end, pages replaced), then those that come.
                let n = Int(state.pageCount)
                for p in min(n, ids.count)..<ids.count { digest.remove(UInt32(p + 1), ids[p]) }
                for change in state.changes where Int(change.page) <= ids.count { digest.remove(change.page, ids[Int(change.page) - 1]) }
                do { try state.apply(to: &ids) } catch {
                    report.problems.append(RepoProblem(object: Repository.segmentPrefix(chain: chain), message: "state \(state.number) names pages outside the database, or leaves new pages unnamed", snapshots: [chain]))
                    break
                }
                for change in state.changes { digest.add(change.page, change.id) }
                guard digest == state.digest else {
                    report.problems.append(RepoProblem(object: Repository.segmentPrefix(chain: chain), message: "state \(state.number), replayed from the base's page list, does not give the digest it recorded: a segment or the base's list is damaged", snapshots: [chain]))
                    break
                }
            }
        }
    }

    /// Adds each database's history to `report`, and a problem for each gap:
    /// its first moment a restore no longer rebuilds, the last before it that
    /// it does, and why.
    static func checkWindows(_ repository: Repository, snapshots: [Snapshot], report: inout RepoVerifyReport,
                             unresolvable: (PageID) -> String?) throws {
        let health = try repository.chainHealth(snapshots, unresolvable: unresolvable)
        report.histories = health.databases
        for h in health.databases {
            for (i, gap) in h.spans.enumerated() where !gap.restorable {
                let before = i > 0 ? h.spans[i - 1].to.map { "; restorable to the microsecond up to \(Timestamp.iso8601Micros($0))" } ?? "" : ""
                let until = gap.to.map { " until \(Timestamp.iso8601Micros($0))" } ?? " on (no later moment is restorable)"
                report.problems.append(RepoProblem(object: gap.object,
                    message: "\(h.database) (\(h.path) on \(h.hostname)) cannot be restored from \(Timestamp.iso8601Micros(gap.from))\(until)\(before): \(gap.cause)",
                    snapshots: gap.chains))
            }
        }
    }
}
