// The chains `litectl replicate` writes (repository version 4), read back:
// a base snapshot and the states its segments hold, in order from 1 with no
// gap; the page ids of any state, checked; the moment a restore lands on (the
// newest state or snapshot at or before a time); and the time range each
// database can be restored to. A chain that cannot be read back is reported
// as a `DamagedChain` by the commands that read every chain (snapshots,
// forget, prune), which go on with the others. Segment.swift is the object format.
import Foundation

/// A chain that could not be read back (a segment unreadable or missing,
/// states that clash, a page the index lacks): the commands that go through
/// every database's chains report it, one line each, and go on with the others.
public struct DamagedChain: Sendable {
    /// Its base snapshot's id (the segments' folder).
    public var chain: String
    /// The database, as its base snapshot (or, when the base is gone, a segment) names it; empty when unknown.
    public var database: String
    public var path: String
    public var hostname: String
    /// Why it cannot be read, as one line.
    public var cause: String

    public init(chain: String, base: Snapshot?, cause: String) {
        self.chain = chain
        database = base?.database ?? ""
        path = base?.path ?? ""
        hostname = base?.hostname ?? ""
        self.cause = cause
    }

    /// `chain 0991075e of app.db (/srv/app.db on web-1)`.
    public var name: String {
        let short = String(chain.prefix(8))
        return database.isEmpty ? "chain \(short)" : "chain \(short) of \(database) (\(path) on \(hostname))"
    }

    /// Whether `error` is damage of the chain being read (a segment that
    /// does not read back, clashing states, a gap, a missing object), as
    /// opposed to a store that cannot be reached or refuses (which stops
    /// the command, as for any other object).
    public static func isDamage(_ error: any Error) -> Bool {
        guard let error = error as? StoreError else { return false }
        return error.kind != .unavailable && error.kind != .denied
    }
}

/// A chain: its base snapshot (state 0) and every state after it.
public struct ReplicaChain: Sendable {
    public var base: Snapshot
    /// States 1...n, in order.
    public var states: [ReplicaState]
    /// The segment objects read (those that overlap others included).
    public var segments: [SegmentRef]
    public var lastTime: Double { states.last?.observed ?? base.time }
    public var last: UInt64 { states.last?.number ?? 0 }
}

extension Repository {
    /// The snapshots that are bases of chains.
    public static func chainBases(_ snapshots: [Snapshot]) -> [Snapshot] { snapshots.filter { $0.replica != nil } }

    /// Segments read on every core (several at a time from a server), in the order given.
    func loadSegments(_ refs: [SegmentRef]) throws -> [Segment] {
        // (The first damaged one in `refs`' order is the error.)
        try loadSegmentsEach(refs).map { try $0.get() }
    }

    /// A chain's states in order from 1, from its segments. The listing is
    /// read again when a segment went between it and its reading (merged
    /// into a larger one, which is written first). Throws on a gap, a
    /// segment that cannot be read or belongs to another database, and
    /// segments that disagree where they overlap.
    public func loadChain(_ base: Snapshot) throws -> ReplicaChain {
        for attempt in 1...3 {
            do {
                let refs = try segmentKeys(chain: base.id)
                return try chain(base, segments: try loadSegments(refs), refs: refs)
            } catch let error as StoreError where error.kind == .notFound && attempt < 3 {}
        }
        let refs = try segmentKeys(chain: base.id)
        return try chain(base, segments: try loadSegments(refs), refs: refs)
    }

    /// The states the segments cover from 1, in order.
    func chain(_ base: Snapshot, segments: [Segment], refs: [SegmentRef]) throws -> ReplicaChain {
        for (segment, ref) in zip(segments, refs) where !sameBytes(segment.path, base.path) || !sameBytes(segment.hostname, base.hostname) || segment.pageSize != base.pageSize {
            throw StoreError(.other, location: objectName(ref.key), message: "damaged segment: it is of \(segment.path) on \(segment.hostname) (\(segment.pageSize)-byte pages), its chain's base of \(base.path) on \(base.hostname) (\(base.pageSize))")
        }
        let order = segments.indices.sorted { (segments[$0].first, segments[$1].last) < (segments[$1].first, segments[$0].last) }
        var states: [ReplicaState] = []
        for i in order {
            let segment = segments[i]
            let next = UInt64(states.count) + 1
            guard segment.first <= next else {
                throw StoreError(.other, location: objectName(refs[i].key),
                                 message: "chain \(base.shortID) lacks states \(next)...\(segment.first - 1): no segment holds them (its states \(segment.first)...\(segment.last) cannot be restored)")
            }
            for state in segment.states {
                if state.number < next {
                    // Overlapping segments (a merge in progress) must agree.
                    guard states[Int(state.number) - 1].digest == state.digest else {
                        throw StoreError(.other, location: objectName(refs[i].key), message: "damaged segment: its state \(state.number) differs from another segment's")
                    }
                } else {
                    guard state.observedMicros >= (states.last?.observedMicros ?? 0) else {
                        throw StoreError(.other, location: objectName(refs[i].key), message: "damaged segment: state \(state.number) is older than state \(state.number - 1)")
                    }
                    states.append(state)
                }
            }
        }
        return ReplicaChain(base: base, states: states, segments: refs)
    }

    /// The page ids of state `number` of `chain` (0: its base), checked: the
    /// base's list against its `pages_sha256`, the ids after the states
    /// against the digest state `number` recorded.
    public func stateIDs(_ chain: ReplicaChain, upTo number: UInt64) throws -> [PageID] {
        var ids = try pageIDs(of: chain.base)
        guard let recorded = chain.base.pagesSHA256, Array(PagesDigest.of(ids).utf8) == Array(recorded.utf8) else {
            throw StoreError(.other, location: objectName("lists/" + chain.base.list), message: RepoRestore.listMismatch(chain.base, repository: self, rebuilt: false))
        }
        guard number > 0 else { return ids }
        guard number <= chain.last else {
            throw StoreError(.notFound, location: location, message: "chain \(chain.base.shortID) has no state \(number) (its last is \(chain.last))")
        }
        for state in chain.states.prefix(Int(number)) {
            do { try state.apply(to: &ids) } catch {
                throw StoreError(.other, location: location, message: "damaged segment of chain \(chain.base.shortID): state \(state.number) names pages outside the database or leaves new pages unnamed")
            }
        }
        let state = chain.states[Int(number) - 1]
        guard StateDigest.of(ids) == state.digest else {
            throw StoreError(.other, location: location, message: "the page ids of state \(number) of chain \(chain.base.shortID), rebuilt from its base and segments, do not match the digest the state recorded: a segment or the base's list is damaged")
        }
        return ids
    }
}

/// What a restore lands on: a snapshot, or a state of a chain.
public enum RestorePoint: Sendable {
    case snapshot(Snapshot)
    case state(chain: ReplicaChain, state: ReplicaState)

    public var time: Double {
        switch self {
        case .snapshot(let s): s.time
        case .state(_, let state): state.observed
        }
    }

    /// The snapshot the restore is described by (for a state, one made up
    /// from its chain's base, with the state's time, size and ids' digest).
    public func request(target: String, repository: Repository) throws -> RepoRestoreRequest {
        switch self {
        case .snapshot(let s):
            return RepoRestoreRequest(snapshot: s, target: target)
        case .state(let chain, let state):
            let ids = try repository.stateIDs(chain, upTo: state.number)
            var s = chain.base
            s.time = state.observed
            s.pageCount = ids.count
            s.pagesSHA256 = PagesDigest.of(ids)
            s.databaseSHA256 = nil
            s.logicalHash = ""
            // The follower does not check the database: the restore runs quick_check.
            s.verification = "skipped"
            var request = RepoRestoreRequest(snapshot: s, target: target)
            request.pageIDs = ids
            return request
        }
    }
}

public enum ReplicaSelector {
    /// `latest` of a database at or before `at` (all time when nil), among
    /// its snapshots and the states of its newest chain that began by then;
    /// or a snapshot by id prefix. Ties go to the state. When the chain's
    /// segments are gone (a forget removed them, or they were never all
    /// written), the newest snapshot is restored instead and `note` says so;
    /// a damaged segment, or a store that fails, is an error.
    public static func select(_ name: String, from snapshots: [Snapshot], database: String?, at: Double?,
                              repository: Repository, note: (String) -> Void = { _ in }) throws -> RestorePoint {
        let newest = try SnapshotSelector.select(name, from: snapshots, database: database, at: at, location: repository.location)
        guard name == "latest", repository.holdsSegments else { return .snapshot(newest) }
        let bases = Repository.chainBases(snapshots).filter { sameBytes($0.path, newest.path) && sameBytes($0.hostname, newest.hostname) && $0.time <= (at ?? .infinity) }
        guard let base = bases.max(by: { ($0.time, $0.id) < ($1.time, $1.id) }) else { return .snapshot(newest) }
        // The chain as far as it reads back: a moment before a damaged or
        // missing segment is restored as any other (ChainHealth.swift says
        // the same window); one past it is refused, or, when segments are
        // missing, the newest snapshot is restored instead, said in `note`.
        var reading = try repository.readChainPrefix(base)
        let chain = reading.chain
        if reading.cut == nil, let next = snapshots.first(where: { $0.replica?.follows?.chain == base.id }), let f = next.replica?.follows, f.state > chain.last {
            reading.cut = ChainCut(object: Repository.segmentPrefix(chain: base.id), error: StoreError(.notFound, location: repository.objectName(Repository.segmentPrefix(chain: base.id)),
                message: "chain \(base.shortID) lacks states \(chain.last + 1)...\(f.state), which chain \(next.shortID) recorded"))
        }
        // (To the nearest microsecond: a time printed to the microsecond, read back, is that microsecond.)
        let limit = at.map { $0.isFinite && $0 > 0 ? UInt64(($0 * 1e6).rounded()) : 0 } ?? .max
        if let cut = reading.cut, limit > chain.states.last?.observedMicros ?? ReplicaState.micros(base.time) {
            let error = cut.error
            guard error.kind == .notFound || error.message.contains(" lacks states ") else { throw error }
            note("chain \(base.shortID) cannot be read (\(error.description)); restoring snapshot \(newest.shortID) of \(Timestamp.iso8601(newest.time)) instead")
            return .snapshot(newest)
        }
        guard let state = chain.states.last(where: { $0.observedMicros <= limit }), state.observed >= newest.time else {
            return .snapshot(newest)
        }
        return .state(chain: chain, state: state)
    }
}

/// A span of time a database can be restored to, at any moment in it (the
/// states of chains that follow one another).
public struct RestorableRange: Sendable {
    public var database: String
    public var path: String
    public var hostname: String
    public var from: Double
    public var to: Double
    /// The chains, oldest first (their bases' ids).
    public var chains: [String]
    /// States in them (the newest chain's counted, the others' from their successors' records).
    public var states: UInt64
}

extension Repository {
    /// Each database's restorable ranges, as `chainHealth` judges them with
    /// the pages taken as readable (its spans that are ranges); a chain with
    /// a gap is handed to `damaged`, its moments before the gap still listed.
    public func restorableRanges(_ snapshots: [Snapshot], damaged: (DamagedChain) -> Void) throws -> [RestorableRange] {
        let health = try chainHealth(snapshots) { _ in nil }
        health.damaged.forEach(damaged)
        return health.databases.flatMap { h in
            h.ranges.map { r in
                RestorableRange(database: h.database, path: h.path, hostname: h.hostname, from: r.from, to: r.to ?? r.from,
                                chains: r.chains, states: r.states)
            }
        }
    }
}
