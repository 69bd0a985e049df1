// Retention and space reclamation for the chains of `litectl replicate`
// (repository version 4). A chain (its base snapshot and its segments) is
// history by time: `forget --keep-within D` keeps every chain with a moment
// in the last D, and the newest chain of each database whatever its age;
// the other rules (--keep-last, --keep-daily ...) apply to the other
// snapshots only. Prune counts every page a segment names as live.
import Foundation

/// A chain forget removes: its segments first, then its base.
public struct RemovedChain: Sendable {
    public var base: Snapshot?
    public var chain: String
    public var segments: [SegmentRef]
    /// The last moment it covered (its base's time when unknown).
    public var lastTime: Double
}

extension RepoForget {
    /// `decide` for a repository that may hold chains: snapshots by the
    /// rules (and, with `within`, every snapshot of the last `within`
    /// seconds), chains by `within` (all kept without it). Segments whose
    /// base is gone are removed too. A chain that cannot be read back is
    /// handed to `damaged`: it is judged by the newest moment of its
    /// segments when every one of them reads back (states that clash), and
    /// kept when one does not (its last moment is unknown); the other
    /// chains and databases are decided as ever.
    public static func decide(_ snapshots: [Snapshot], policy: RetentionPolicy, within: Double?, database: String? = nil,
                              repository: Repository, now: Double? = nil,
                              damaged: (DamagedChain) -> Void) throws -> (ForgetDecision, [RemovedChain]) {
        let now = now ?? Clock.wall()
        var decision = decide(snapshots, policy: policy, database: database)
        if let within {
            // Every snapshot of the window stays too (restic's --keep-within).
            let kept = decision.remove.filter { $0.time >= now - within }
            decision.keep = (decision.keep + kept).sorted { $0.time < $1.time }
            decision.remove = decision.remove.filter { $0.time < now - within }
        }
        guard repository.holdsSegments else { return (decision, []) }
        let listed = try repository.segmentKeys()
        let bases = Repository.chainBases(snapshots)
        let baseIDs = Set(bases.map(\.id))
        var removed: [RemovedChain] = []
        // Segments whose base is gone name no restorable state. The
        // snapshots were listed before segments/, so a base a follower wrote
        // in between (a new chain) looks gone: only a base that is really
        // absent when asked for makes its segments orphans.
        for (chain, refs) in listed where !baseIDs.contains(chain) {
            do {
                _ = try repository.store.get("snapshots/" + chain)
                continue
            } catch let error as StoreError where error.kind == .notFound {}
            removed.append(RemovedChain(base: nil, chain: chain, segments: refs, lastTime: 0))
        }
        guard let within else { return (decision, removed.sorted { $0.chain < $1.chain }) }
        var successors: [String: ReplicaInfo.Follows] = [:]
        for base in bases { if let f = base.replica?.follows { successors[f.chain] = f } }
        let groups = Dictionary(grouping: bases.filter { database == nil || sameBytes($0.database, database!) || sameBytes($0.path, database!) }) {
            seriesKey(hostname: $0.hostname, path: $0.path)
        }
        for key in groups.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let chains = groups[key]!.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
            for base in chains.dropLast() {
                // The last moment: from the chain that continues it, else from its own segments.
                let last: Double
                if let f = successors[base.id] { last = f.lastTime }
                else if listed[base.id] == nil { last = base.time }
                else {
                    do { last = try repository.loadChain(base).lastTime } catch where DamagedChain.isDamage(error) {
                        damaged(DamagedChain(chain: base.id, base: base, cause: (error as! StoreError).description))
                        guard let newest = try repository.newestMoment(of: base, segments: listed[base.id]!) else { continue }
                        last = newest
                    }
                }
                guard last < now - within else { continue }
                removed.append(RemovedChain(base: base, chain: base.id, segments: listed[base.id] ?? [], lastTime: last))
            }
        }
        return (decision, removed)
    }

    /// Removes chains: each one's segments, then its base.
    public static func remove(_ chains: [RemovedChain], from repository: Repository) throws {
        for chain in chains {
            for segment in chain.segments { try repository.store.delete(segment.key) }
            if let base = chain.base { try repository.store.delete("snapshots/" + base.id) }
        }
    }

    /// `7d`, `36h`, `90m`, `45s`, `2w`, and sums of them (`1d12h`): seconds
    /// (`DurationText`; a number alone is refused: forget deletes).
    public static func parseDuration(_ text: String) throws -> Double {
        try DurationText.seconds(text, bareNumbers: false)
    }
}

extension Repository {
    /// The newest moment the segments of a chain that cannot be read as a
    /// whole hold (its base's time when they hold none); nil when one of
    /// them does not read back (the chain's last moment is then unknown).
    func newestMoment(of base: Snapshot, segments: [SegmentRef]) throws -> Double? {
        var newest = base.time
        for ref in segments {
            do {
                for state in try loadSegment(ref.key).states { newest = max(newest, state.observed) }
            } catch where DamagedChain.isDamage(error) {
                return nil
            }
        }
        return newest
    }

    /// Every segment, read a batch at a time (several at once from a server),
    /// handed to `body` with its key. A segment that does not read back
    /// (damaged, gone since the listing) goes to `damaged` instead; a store
    /// that cannot be reached or refuses throws.
    public func forEachSegment(_ body: (SegmentRef, Segment) throws -> Void,
                               damaged: (SegmentRef, StoreError) throws -> Void) throws {
        let all = try segmentKeys().values.flatMap { $0 }.sorted { $0.key < $1.key }
        var start = 0
        while start < all.count {
            let refs = Array(all[start..<min(all.count, start + 64)])
            var segments: [Segment?]
            do { segments = try loadSegments(refs) } catch where DamagedChain.isDamage(error) {
                // One of the batch is damaged: each read alone, to tell which.
                segments = []
                for ref in refs {
                    do { segments.append(try loadSegment(ref.key)) } catch let error as StoreError where DamagedChain.isDamage(error) {
                        try damaged(ref, error)
                        segments.append(nil)
                    }
                }
            }
            for (ref, segment) in zip(refs, segments) { if let segment { try body(ref, segment) } }
            start += refs.count
        }
    }
}
