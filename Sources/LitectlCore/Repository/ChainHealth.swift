// The health of the chains `litectl replicate` writes: for each database, the
// spans of time a restore lands on the right moment (to the microsecond),
// the gaps where it no longer does (a segment missing, unreadable or out of
// order, a state whose pages no longer resolve to blobs, chains that should
// follow one another and do not meet), each with the first moment it cannot
// restore and why, and the time of the last commit shipped. `snapshots
// --ranges` and `verify --repo` print it; the restore selector
// (ReplicaChains.swift) reads chains the same tolerant way, so that the
// window said is the window a restore can do.
import Foundation

/// Why the states of a chain that read back stop where they do.
public struct ChainCut: Sendable {
    /// The object at fault (a segment, a list, a snapshot), as its key.
    public var object: String
    /// The error that says so (what `loadChain` would have thrown).
    public var error: StoreError
}

/// A chain read as far as it can be: the states that read back in order
/// from 1 (the base alone when none does), and where and why they stop.
public struct ChainReading: Sendable {
    public var chain: ReplicaChain
    /// Nil when every segment read back and the states follow one another to the last.
    public var cut: ChainCut?
    /// The newest time a state was observed, among every segment that read back
    /// (also past a gap: those states were shipped, though they cannot be restored).
    public var newestSeen: Double
}

/// A span of one database's history: restorable to any moment of it, or a gap.
public struct HistorySpan: Sendable {
    public var restorable: Bool
    /// Seconds since 1970, to the microsecond. For a range, its first and last
    /// restorable moments (both included); for a gap, its first moment that
    /// cannot be restored and the first that can again (nil: none after it).
    public var from: Double
    public var to: Double?
    /// The chains it covers (their bases' ids), oldest first.
    public var chains: [String]
    /// A range: the states in it. A gap: 0.
    public var states: UInt64
    /// A gap: the object at fault (its key) and the cause, one line.
    public var object: String = ""
    public var cause: String = ""
}

/// One database's chains, judged.
public struct DatabaseHistory: Sendable {
    public var database: String
    public var path: String
    public var hostname: String
    /// Ranges and gaps in time order.
    public var spans: [HistorySpan]
    /// When the newest state shipped was observed (a base's time when no state was).
    public var lastCommit: Double
    public var ranges: [HistorySpan] { spans.filter(\.restorable) }
    public var gaps: [HistorySpan] { spans.filter { !$0.restorable } }
}

/// A chain that cannot be restored at every moment of it: the chains
/// reported as damaged by the commands that go through every chain.
public struct ChainHealthReport: Sendable {
    public var databases: [DatabaseHistory]
    public var damaged: [DamagedChain]
}

extension Repository {
    /// The segments of `refs`, each read on its own: a segment that does not
    /// read back is an error in its place (a store that fails throws).
    func loadSegmentsEach(_ refs: [SegmentRef]) throws -> [Result<Segment, StoreError>] {
        let out = Locked([Result<Segment, StoreError>?](repeating: nil, count: refs.count))
        let failure = Locked<(any Error)?>(nil), next = Locked(0)
        let workers = max(1, min(refs.count, store is FolderStore ? ProcessInfo.processInfo.activeProcessorCount : 8))
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while failure.withLock({ $0 == nil }) {
                let i = next.withLock { n -> Int in n += 1; return n - 1 }
                guard i < refs.count else { return }
                do {
                    let segment = try loadSegment(refs[i].key)
                    out.withLock { $0[i] = .success(segment) }
                } catch let error as StoreError where DamagedChain.isDamage(error) {
                    out.withLock { $0[i] = .failure(error) }
                } catch {
                    failure.withLock { if $0 == nil { $0 = error } }
                }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        return out.withLock { $0 }.map { $0! }
    }

    /// `base`'s chain read as far as it can be: the states in order from 1 up
    /// to the first that is missing, clashes with another segment's, goes
    /// back in time, or lies past a segment that does not read back. Throws
    /// only when the store fails (a segment listed and gone is read again as
    /// `loadChain` does).
    public func readChainPrefix(_ base: Snapshot) throws -> ChainReading {
        var attempt = 1
        while true {
            let refs = try segmentKeys(chain: base.id)
            let loaded = try loadSegmentsEach(refs)
            let gone = loaded.contains { result in
                if case .failure(let error) = result, error.kind == .notFound { return true }
                return false
            }
            if gone && attempt < 3 { attempt += 1; continue }
            return chainPrefix(base, loaded: loaded, refs: refs)
        }
    }

    /// The states `loaded` (the segments of `refs`, or why each did not read
    /// back) cover in order from 1, up to the first fault.
    func chainPrefix(_ base: Snapshot, loaded: [Result<Segment, StoreError>], refs: [SegmentRef]) -> ChainReading {
        var segments: [(segment: Segment, key: String)] = []
        var unreadable: ChainCut?
        var newest = base.time
        for (result, ref) in zip(loaded, refs) {
            switch result {
            case .failure(let error):
                if unreadable == nil || ref.key < unreadable!.object { unreadable = ChainCut(object: ref.key, error: error) }
            case .success(let segment):
                if !sameBytes(segment.path, base.path) || !sameBytes(segment.hostname, base.hostname) || segment.pageSize != base.pageSize {
                    let error = StoreError(.other, location: objectName(ref.key), message: "damaged segment: it is of \(segment.path) on \(segment.hostname) (\(segment.pageSize)-byte pages), its chain's base of \(base.path) on \(base.hostname) (\(base.pageSize))")
                    if unreadable == nil || ref.key < unreadable!.object { unreadable = ChainCut(object: ref.key, error: error) }
                } else {
                    segments.append((segment, ref.key))
                    newest = max(newest, segment.states.last?.observed ?? newest)
                }
            }
        }
        segments.sort { ($0.segment.first, $1.segment.last) < ($1.segment.first, $0.segment.last) }
        var states: [ReplicaState] = []
        var cut: ChainCut?
        walk: for (segment, key) in segments {
            let next = UInt64(states.count) + 1
            guard segment.first <= next else {
                cut = ChainCut(object: key, error: StoreError(.other, location: objectName(key),
                    message: "chain \(base.shortID) lacks states \(next)...\(segment.first - 1): no segment holds them (its states \(segment.first)...\(segment.last) cannot be restored)"))
                break
            }
            for state in segment.states {
                if state.number < next {
                    guard state.number >= 1, states[Int(state.number) - 1].digest == state.digest else {
                        // Which of the two is right is unknown: neither from here.
                        states.removeLast(states.count - Int(state.number) + 1)
                        cut = ChainCut(object: key, error: StoreError(.other, location: objectName(key), message: "damaged segment: its state \(state.number) differs from another segment's"))
                        break walk
                    }
                } else if state.number == UInt64(states.count) + 1 {
                    guard state.observedMicros >= (states.last?.observedMicros ?? 0) else {
                        cut = ChainCut(object: key, error: StoreError(.other, location: objectName(key), message: "damaged segment: state \(state.number) is older than state \(state.number - 1)"))
                        break walk
                    }
                    states.append(state)
                }
            }
        }
        // A segment that does not read back may hold states past the last
        // one read: they cannot be told from a gap.
        if cut == nil, let unreadable { cut = unreadable }
        return ChainReading(chain: ReplicaChain(base: base, states: states, segments: refs), cut: cut, newestSeen: newest)
    }

    /// Every database's history: for each chain, which of its states a
    /// restore can rebuild (its base's list and the states read back as far
    /// as `readChainPrefix` goes, replayed against the digests they
    /// recorded, every page of the state resolvable: `unresolvable(id)`
    /// gives why a page id cannot be read, nil when it can), and the
    /// chains joined where one continues another.
    public func chainHealth(_ snapshots: [Snapshot], unresolvable: (PageID) -> String?) throws -> ChainHealthReport {
        let bases = Self.chainBases(snapshots)
        let listed = try segmentKeys()
        var successor: [String: Snapshot] = [:]
        for base in bases { if let f = base.replica?.follows { successor[f.chain] = base } }
        var databases: [DatabaseHistory] = []
        var damaged: [DamagedChain] = []
        let groups = Dictionary(grouping: bases) { seriesKey(hostname: $0.hostname, path: $0.path) }
        for key in groups.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let chains = groups[key]!.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
            var history = DatabaseHistory(database: chains.last!.database, path: chains.last!.path, hostname: chains.last!.hostname,
                                          spans: [], lastCommit: 0)
            var previous: (id: String, endsWhole: Bool)?
            for base in chains {
                let judged = try judge(base, listed: listed[base.id] != nil, successor: successor[base.id], unresolvable: unresolvable)
                history.lastCommit = max(history.lastCommit, judged.newest)
                if let first = judged.pieces.first(where: { !$0.restorable }) {
                    damaged.append(DamagedChain(chain: base.id, base: base, cause: first.cause))
                }
                let joined = previous.map { p in p.endsWhole && base.replica?.follows?.chain == p.id } ?? false
                for (n, piece) in judged.pieces.enumerated() {
                    Self.append(piece, to: &history.spans, joined: n == 0 && joined)
                }
                previous = (base.id, judged.pieces.last?.restorable ?? false)
            }
            databases.append(history)
        }
        return ChainHealthReport(databases: databases, damaged: damaged)
    }

    /// Adds a chain's piece to a database's spans: a range continues the
    /// last one when `joined` (the chain continues the one before, whose
    /// last state is restorable); a gap continues a gap, and ends at the next range.
    private static func append(_ piece: HistorySpan, to spans: inout [HistorySpan], joined: Bool) {
        if piece.restorable {
            if let i = spans.indices.last, !spans[i].restorable, spans[i].to == nil { spans[i].to = max(spans[i].from, piece.from) }
            if joined, var last = spans.last, last.restorable {
                last.to = max(last.to ?? piece.from, piece.to ?? piece.from)
                last.chains.append(contentsOf: piece.chains.filter { $0 != last.chains.last })
                last.states += piece.states
                spans[spans.count - 1] = last
                return
            }
            spans.append(piece)
        } else if var last = spans.last, !last.restorable, last.to == nil || last.to! >= piece.from {
            last.to = piece.to
            if last.chains.last != piece.chains.last { last.chains += piece.chains }
            spans[spans.count - 1] = last
        } else {
            spans.append(piece)
        }
    }

    /// One chain's pieces: ranges of states a restore rebuilds, gaps where
    /// it does not, in time order; and the newest state it shipped.
    private func judge(_ base: Snapshot, listed: Bool, successor: Snapshot?,
                       unresolvable: (PageID) -> String?) throws -> (pieces: [HistorySpan], newest: Double) {
        let t0 = ReplicaState.micros(base.time)
        func seconds(_ micros: UInt64) -> Double { Double(micros) / 1e6 }
        func gap(from: UInt64, object: String, cause: String) -> HistorySpan {
            HistorySpan(restorable: false, from: seconds(from), to: nil, chains: [base.id], states: 0, object: object, cause: cause)
        }
        // The base's page list, checked against its digest.
        var ids: [PageID]
        do {
            ids = try pageIDs(of: base)
            guard let recorded = base.pagesSHA256, Array(PagesDigest.of(ids).utf8) == Array(recorded.utf8) else {
                throw StoreError(.other, location: objectName("lists/" + base.list), message: RepoRestore.listMismatch(base, repository: self, rebuilt: false))
            }
        } catch let error as StoreError where DamagedChain.isDamage(error) {
            return ([gap(from: t0, object: "lists/" + base.list, cause: error.description)], base.time)
        }
        var reading = ChainReading(chain: ReplicaChain(base: base, states: [], segments: []), cut: nil, newestSeen: base.time)
        if listed { reading = try readChainPrefix(base) }
        // The chain that continues this one recorded how far it went.
        if reading.cut == nil, let successor, let f = successor.replica?.follows, f.state > reading.chain.last {
            reading.cut = ChainCut(object: Self.segmentPrefix(chain: base.id),
                                   error: StoreError(.other, location: objectName(Self.segmentPrefix(chain: base.id)),
                                                     message: "chain \(base.shortID) ends at state \(reading.chain.last) in its segments, but chain \(successor.shortID), which continues it, recorded its state \(f.state) of \(Timestamp.iso8601(f.lastTime)): the segments of the states between are missing"))
        }
        // The states replayed from the base's list: each digest checked, the
        // pages that do not resolve counted among those the state holds.
        var bad: [Int: String] = [:]  // page index -> why it cannot be read
        for (p, id) in ids.enumerated() { if let why = unresolvable(id) { bad[p] = why } }
        var digest = StateDigest.of(ids)
        var good: [(number: UInt64, at: UInt64, why: String?)] = [(0, t0, bad.first.map { "page \($0.key + 1): \($0.value)" })]
        var cut = reading.cut
        var kept = reading.chain.states.count
        for (i, state) in reading.chain.states.enumerated() {
            let n = Int(state.pageCount)
            for p in min(n, ids.count)..<ids.count { digest.remove(UInt32(p + 1), ids[p]); bad[p] = nil }
            for change in state.changes where Int(change.page) <= ids.count { digest.remove(change.page, ids[Int(change.page) - 1]) }
            do { try state.apply(to: &ids) } catch {
                cut = ChainCut(object: Self.segmentPrefix(chain: base.id), error: StoreError(.other, location: objectName(Self.segmentPrefix(chain: base.id)),
                    message: "damaged segment of chain \(base.shortID): state \(state.number) names pages outside the database or leaves new pages unnamed"))
                kept = i
                break
            }
            for change in state.changes {
                digest.add(change.page, change.id)
                bad[Int(change.page) - 1] = unresolvable(change.id)
            }
            guard digest == state.digest else {
                cut = ChainCut(object: Self.segmentPrefix(chain: base.id), error: StoreError(.other, location: objectName(Self.segmentPrefix(chain: base.id)),
                    message: "the page ids of state \(state.number) of chain \(base.shortID), rebuilt from its base and segments, do not match the digest the state recorded: a segment or the base's list is damaged"))
                kept = i
                break
            }
            good.append((state.number, state.observedMicros, bad.min(by: { $0.key < $1.key }).map { "state \(state.number), page \($0.key + 1): \($0.value)" }))
        }
        if kept < reading.chain.states.count, let c = cut { reading.cut = c }
        // Pieces: the moments that land on state s are [t(s), t(s + 1)); the
        // last state's, up to its own time (later ones are the next chain's).
        var pieces: [HistorySpan] = []
        for (i, s) in good.enumerated() {
            let end: UInt64
            if i + 1 < good.count {
                guard good[i + 1].at > s.at else { continue }  // no moment lands on it
                end = good[i + 1].at - 1
            } else {
                end = s.at
            }
            let piece: HistorySpan
            if let why = s.why {
                piece = gap(from: s.at, object: Self.segmentPrefix(chain: base.id), cause: "a page cannot be read: \(why)")
            } else {
                piece = HistorySpan(restorable: true, from: seconds(s.at), to: seconds(end), chains: [base.id], states: s.number == 0 ? 0 : 1)
            }
            if var last = pieces.last, last.restorable == piece.restorable {
                last.to = piece.restorable ? piece.to : nil
                last.states += piece.states
                pieces[pieces.count - 1] = last
            } else {
                if var last = pieces.last, !last.restorable { last.to = seconds(s.at); pieces[pieces.count - 1] = last }
                pieces.append(piece)
            }
        }
        if let c = reading.cut {
            let last = good.last!.at
            if var tail = pieces.last, !tail.restorable {
                tail.to = nil; pieces[pieces.count - 1] = tail
            } else {
                pieces.append(gap(from: last < .max ? last + 1 : last, object: c.object, cause: c.error.description))
            }
        }
        return (pieces, reading.newestSeen)
    }
}

extension Repository {
    /// Why a page id cannot be read back, from the index and the packs'
    /// listing (a pack missing, or shorter than its blobs; the bytes are not
    /// read: `verify --read-data` does that): nil when it can.
    public func pageResolver() throws -> (PageID) -> String? {
        let index = try loadIndex()
        var sizes: [PageID: Int64] = [:]
        for object in try store.list(prefix: ObjectKey.Kind.packs.prefix) {
            if let id = PageID(hex: String(object.key.split(separator: "/").last ?? "")) { sizes[id] = object.size }
        }
        var extent = [Int64](repeating: 0, count: index.packs.count)
        for blob in index.blobs { extent[Int(blob.pack)] = max(extent[Int(blob.pack)], Int64(blob.offset) + Int64(blob.length)) }
        var bad: [Int: String] = [:]
        for (n, pack) in index.packs.enumerated() {
            if let size = sizes[pack] {
                if size < extent[n] { bad[n] = "\(Self.packKey(pack)) is shorter (\(size) bytes) than its index says (\(extent[n]))" }
            } else {
                bad[n] = "\(Self.packKey(pack)) is missing"
            }
        }
        return { id in
            guard let p = index.position(of: id) else { return "page id \(id.hex.prefix(12)) is not in the index" }
            return bad[Int(index.blobs[Int(index.entries[p].blob)].pack)]
        }
    }
}

extension Timestamp {
    /// `2026-12-07T09:00:00.250123Z`: to the microsecond states are observed to
    /// (what `restore --at` reads back exactly).
    public static func iso8601Micros(_ seconds: Double) -> String {
        // (Rounded: the times printed are whole microseconds held as doubles.)
        // A hostile record's time past what a UInt64 of microseconds holds is printed as the largest one.
        let micros = seconds.isFinite && seconds > 0 ? (seconds * 1e6 < 1.8e19 ? UInt64((seconds * 1e6).rounded()) : UInt64.max) : 0
        let whole = Double(micros / 1_000_000)
        let text = iso8601(whole)
        let fraction = String(micros % 1_000_000)
        return String(text.dropLast(5)) + "." + String(repeating: "0", count: 6 - fraction.count) + fraction + "Z"
    }
}
