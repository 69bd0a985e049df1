// A follower's period: the segments shipped since the last gathering, their
// states and objects, and the raw pages they added (in a spool file), which
// a gathering stores again together as one segment once the period is over
// (Gathering.swift). Part of the replicate capability, built on Repository/'s
// object keys and gatherings' replacements.

/// The period since the last gathering.
final class FollowerPeriod {
    /// A gathering also starts once the spool holds this many bytes.
    static let spoolLimit: Int64 = 256 << 20

    let pageSize: Int
    let report: (String) -> Void
    /// The period's pages (nil until the first, and when the spool failed:
    /// no gathering for this period).
    private var spool: PageSpool?
    private var spoolFailed = false
    /// The states, segments and objects of the segments shipped in the period.
    private(set) var states: [ReplicaState] = []
    private(set) var segments: [ObjectKey] = []
    private var indexes: [ObjectKey] = []
    private var packs: [ObjectKey] = []
    /// The segment batch's page count when the period began.
    private var startPages = 0
    /// The gathering under way, if any.
    private var gathering: Gathering?

    /// `report`: a problem that leaves the period's segments as they are.
    init(pageSize: Int, report: @escaping (String) -> Void) {
        self.pageSize = pageSize; self.report = report
    }

    var spoolSize: Int64 { spool?.size ?? 0 }
    var isGathering: Bool { gathering != nil }

    /// A new page of state `number`, into the spool.
    func add(page: UInt32, number: UInt64, id: PageID, bytes: UnsafeRawBufferPointer) {
        guard !spoolFailed else { return }
        do {
            if spool == nil { spool = try PageSpool(pageSize: pageSize) }
            try spool!.append(page: page, number: number, id: id, bytes: bytes)
        } catch {
            // No gathering for this period; the segments stay as they are.
            report("\((error as? StoreError)?.description ?? "\(error)"); the segments of this minute stay as they are")
            spool = nil
            spoolFailed = true
        }
    }

    /// A segment shipped: its states, key, index object and packs.
    func shipped(_ unit: ShippedUnit, index: ObjectKey?, packs: [ObjectKey]) {
        states += unit.states
        if let segment = unit.segment { segments.append(segment) }
        if let index { indexes.append(index) }
        self.packs += packs
    }

    /// Has the period's segments gathered on a thread of its own (when
    /// there are two or more, and every page their index objects name is in
    /// the spool: the gathering's index object replaces theirs), and starts
    /// a new period. `pagesAdded`: the segment batch's page count; `last`: a stop's.
    func gather(repository: Repository, chain: String, hostname: String, path: String, pagesAdded: Int, last: Bool = false) {
        if let spool, !spoolFailed, spool.entries.count == pagesAdded - startPages, segments.count > 1 {
            gathering = Gathering(Gathering.Job(repository: repository, spool: spool, chain: chain, hostname: hostname, path: path,
                                                states: states,
                                                replaced: Replacement(segments: segments, indexes: indexes, packs: packs, last: last)))
        }
        restart(pagesAdded: pagesAdded)
    }

    /// Starts a period: the next gathering covers the segments from here.
    func restart(pagesAdded: Int) {
        startPages = pagesAdded
        states = []; segments = []; indexes = []; packs = []
        spool = nil
        spoolFailed = false
    }

    /// A finished gathering's objects, to ship as one unit (with `wait`,
    /// once it is done); a gathering that failed is reported and let be.
    func takeGathering(wait: Bool) -> [UploadItem]? {
        guard let g = gathering, let outcome = wait ? g.wait() : g.finished else { return nil }
        gathering = nil
        switch outcome {
        case .ready(let items):
            return items
        case .failed(let message):
            report("\(message); the segments of this minute stay as they are")
            return nil
        }
    }
}
