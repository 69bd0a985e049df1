// Garbage collection of a follower's own objects (`litectl replicate`): what a
// gathering replaced (the period's segments and index objects at once, their
// packs one gathering later), and a closed chain's segments and index objects
// gathered into one each. The follower's shipper calls it between writes; a
// pack another writer's index object names (a prune that ran meanwhile) is
// never removed. Prune collects everything else.
import Foundation

/// What a gathering replaces: removed once the gathering's objects are durable.
struct Replacement {
    var segments: [ObjectKey]
    var indexes: [ObjectKey]
    /// Packs that only `indexes` name (the follower's segment packs end with
    /// random bytes, so no other writer's pack has their name).
    var packs: [ObjectKey]
    /// A stop's gathering: no later one removes its packs.
    var last = false
}

/// One follower's record of the objects it wrote, and their removal.
final class ReplicaCollector {
    let repository: Repository
    /// Segment and index objects of the current chain written since they were last gathered.
    private var recentSegments: [ObjectKey] = []
    private var recentIndexes: [ObjectKey] = []
    /// Index objects of the chain that gatherings made.
    private var chainIndexes: [ObjectKey] = []
    /// Index objects that cannot name a pack a gathering replaced: those
    /// there before this follower wrote its first pack, and those it has
    /// read or written since (nil until listed; kept to the last listing).
    private var innocentIndexes: Set<ObjectKey>?
    /// Index objects written by any follower of this process (each names
    /// only its own follower's packs): never read for another's packs.
    static let writtenHere = Locked(Set<ObjectKey>())
    /// The segment packs this follower wrote that a gathering may yet
    /// replace, and those of them another index object names (a prune's).
    private var ownPacks = Set<ObjectKey>()
    private var namedElsewhere = Set<ObjectKey>()
    /// The packs the last gathering replaced, removed at the next one.
    private var replacedPacks: [ObjectKey] = []

    init(repository: Repository) { self.repository = repository }

    /// Whether the index objects there before this follower's first pack are listed yet.
    var listedIndexes: Bool { innocentIndexes != nil }

    /// Lists the index objects there now: none of them names a pack this
    /// follower writes from now on. (When they cannot be listed, no pack is
    /// ever removed: prune does it.)
    func listIndexes() throws {
        innocentIndexes = Set(try repository.indexObjectKeys())
    }

    /// Takes `keys` as the index objects listed (replicate --dir lists them
    /// once for every database of the fleet, before the fleet's first pack).
    func listed(_ keys: Set<ObjectKey>) { innocentIndexes = keys }

    /// Whether packs a gathering replaced wait to be removed.
    var hasReplacedPacks: Bool { !replacedPacks.isEmpty }

    func wroteSegment(_ key: ObjectKey) { recentSegments.append(key) }
    func wrotePack(_ key: ObjectKey) { ownPacks.insert(key) }
    /// An index object written: by a segment (`gathered` false) or a gathering.
    func wroteIndex(_ key: ObjectKey, gathered: Bool) {
        if gathered { chainIndexes.append(key) } else { recentIndexes.append(key) }
        wrote(index: key)
    }

    private func wrote(index key: ObjectKey) {
        innocentIndexes?.insert(key)
        Self.writtenHere.withLock { _ = $0.insert(key) }
    }

    private func removed(index key: ObjectKey) {
        Self.writtenHere.withLock { _ = $0.remove(key) }
    }

    /// Removes the segments and index objects a gathering replaced (its own
    /// are durable), then the packs the gathering before it replaced (and, at
    /// a stop's, its own): none that an index object other than this
    /// process's own names (a prune that ran meanwhile gathers the index
    /// objects it finds, ours too).
    func replace(_ replaced: Replacement) throws {
        for key in replaced.segments { try repository.remove(key) }
        for key in replaced.indexes { try repository.remove(key); removed(index: key) }
        let gone = Set(replaced.segments + replaced.indexes)
        recentSegments.removeAll { gone.contains($0) }
        recentIndexes.removeAll { gone.contains($0) }
        try reclaim()
        // Packs are removed one gathering later: a restore that read the
        // old index objects has had that long to read them. A stop's
        // gathering has no later one: its packs go now (a restore that
        // read the old index objects finds one missing, reads the index
        // again and takes the gathering's).
        replacedPacks = replaced.packs
        if replaced.last { try reclaim() }
    }

    /// Removes the packs the last gathering replaced, but those an index
    /// object other than this process's own names.
    func reclaim() throws {
        guard !replacedPacks.isEmpty, let innocent = innocentIndexes else { return }
        let listed = try repository.indexObjectKeys()
        let here = Self.writtenHere.withLock { $0 }
        for key in listed where !innocent.contains(key) && !here.contains(key) {
            let bytes: [UInt8]
            do { bytes = try repository.getObject(key.name) } catch let error as StoreError where error.kind == .notFound { continue }
            var index = RepoIndex()
            try IndexObject.decode(bytes, what: repository.objectName(key), into: &index, source: 0)
            for pack in index.packs where ownPacks.contains(.pack(pack)) { namedElsewhere.insert(.pack(pack)) }
        }
        // (Those listed: read now, or innocent already; the others are gone.)
        innocentIndexes = Set(listed)
        for key in replacedPacks where !namedElsewhere.contains(key) { try repository.remove(key) }
        for key in replacedPacks { ownPacks.remove(key); namedElsewhere.remove(key) }
        replacedPacks = []
    }

    /// Gathers every segment of a chain a fold closed into one, and its
    /// index objects (those this process wrote) into one. Each new object is
    /// written before those it replaces are removed; a retry after a failure
    /// midway skips what is gone. Returns the bytes written.
    func closeChain(_ chain: String) throws -> Int64 {
        var written: Int64 = 0
        var segments: [(key: String, segment: Segment)] = []
        for key in try repository.segmentKeys(chain: chain).map(\.key) {
            do { segments.append((key, try repository.loadSegment(key))) } catch let error as StoreError where error.kind == .notFound {}
        }
        if segments.count > 1 {
            var states: [UInt64: ReplicaState] = [:]
            for s in segments { for state in s.segment.states { states[state.number] = state } }
            let ordered = states.keys.sorted().map { states[$0]! }
            // Only a run with no gap is gathered (a gap is left for verify to report).
            if let first = ordered.first, ordered.last!.number - first.number + 1 == UInt64(ordered.count) {
                let one = segments[0].segment
                let merged = Segment(chain: chain, hostname: one.hostname, path: one.path, pageSize: one.pageSize, states: ordered)
                let (key, bytes) = try repository.putSegment(merged)
                written += Int64(bytes)
                for old in segments.map(\.key) where old != key { try repository.store.delete(old) }
            }
        }
        recentSegments = []
        let indexKeys = chainIndexes + recentIndexes
        var gathered: [ObjectKey] = []
        var index = RepoIndex()
        if indexKeys.count > 1 {
            for key in indexKeys {
                let bytes: [UInt8]
                do { bytes = try repository.getObject(key.name) } catch let error as StoreError where error.kind == .notFound { continue }
                try IndexObject.decode(bytes, what: repository.objectName(key), into: &index, source: UInt32(gathered.count))
                gathered.append(key)
            }
        }
        if gathered.count > 1 {
            let byBlob = index.entriesByBlob()
            let object = IndexObject.encode(for: repository, packs: index.packs, blobCount: index.blobs.count, blob: { index.blobs[$0] },
                                            id: { b, slot in index.entries[Int(byBlob.positions[Int(byBlob.starts[b]) + slot])].id })
            let sealed = try repository.sealIndexObject(object)
            try repository.put(sealed)
            written += Int64(sealed.bytes.count)
            wrote(index: sealed.key)
            for old in gathered where old != sealed.key { try repository.store.delete(old.name); removed(index: old) }
        }
        chainIndexes = []
        recentIndexes = []
        // The chain's other segment packs are named by its index object for good.
        ownPacks = Set(replacedPacks)
        namedElsewhere.formIntersection(ownPacks)
        return written
    }
}
