// What the follower ships at each interval, built from the states it
// recorded: their new pages gathered into blobs (the versions of one page
// side by side, so that zstd stores a later version as its few changed
// bytes), the blobs into packs, one index object for them, then the segment
// naming the states. Each object is made whole here (the packs and their
// index object by Repository/'s pack assembler), on the follower's thread,
// and handed to the shipper in write order (packs, index, segment), so that
// no segment is ever durable before the pages it names. Part of the
// replicate capability, built on Repository/'s pack assembler and sealed objects.

/// One unit of work for the shipper: objects written under one shared lock, in order.
enum UploadItem {
    /// Take the repository's shared lock (prune waits for it).
    case begin
    /// Write an object (its key names its content; writing it again is harmless).
    case put(SealedObject, role: Role)
    /// Write a pack whose bytes wait in a spool file (a gathering's).
    case putSpooled(key: ObjectKey, file: SpoolFile, offset: Int64, count: Int)
    /// Gather every segment and index object of the chain into one each,
    /// when a fold closes it.
    case closeChain(String)
    /// Remove what a gathering replaced (its objects are durable), and the
    /// packs the gathering before it replaced (Gathering.swift).
    case replace(Replacement)
    /// Release the lock; what was written is durable: report it.
    case end(ShippedUnit)
    /// (A stop with nothing to gather) remove the packs the last gathering
    /// replaced, which no later one will; when the lock or the store says
    /// no, they are left to prune (a problem event says so).
    case tidy
    /// No more items: the shipper stops once everything before is written.
    case finish

    enum Role { case pack, index, segment, list, snapshot, gatheredIndex, gatheredSegment }

    var size: Int { if case .put(let object, _) = self { return object.bytes.count } else { return 0 } }
}

/// What a unit made durable.
struct ShippedUnit {
    enum Kind { case states, base, fold, merge }
    var kind: Kind
    var chain: String
    /// The states shipped (empty for a merge).
    var states: [ReplicaState] = []
    /// The snapshot written (base, fold).
    var snapshot: String?
    var segment: ObjectKey?
}

/// A set of page ids known to be stored and named by the current chain (the
/// pages of the state the period began at, and those added since): a page
/// met again is not stored again. 40 bytes a page.
struct KnownPages {
    private(set) var ids: [PageID] = []
    private var table = IDTable()

    init<S: Sequence>(_ initial: S) where S.Element == PageID {
        for id in initial { _ = insert(id) }
    }

    func contains(_ id: PageID) -> Bool { table.find(id, in: ids) != nil }

    /// Adds `id`; false when it was there already.
    mutating func insert(_ id: PageID) -> Bool {
        if table.find(id, in: ids) != nil { return false }
        ids.append(id)
        table.insert(id, position: UInt32(ids.count - 1), in: ids)
        return true
    }
}

final class SegmentBatch {
    let repository: Repository
    let pageSize: Int
    /// Segment packs are compressed at zstd's fast level -2 (no Huffman
    /// coding of literals), not backup's level 1: a gathering stores their
    /// pages again within a period, so they are short-lived, and at level 1
    /// they were 15 % of the follower's CPU. Measured at 160 commits/s: the
    /// follower's CPU 8 % lower over 90 s, the segments' bytes 1 % more.
    static let level: Int32 = -2
    private let compressor = ZstdCompressor(level: SegmentBatch.level)
    /// New pages not yet in blobs, compressed at the cut (or sooner, past
    /// `rawLimit`) in (page, state) order; their bytes one after another in
    /// `rawBytes`, whose storage is kept from cut to cut (no array per page).
    private var raw: [(page: UInt32, number: UInt64, id: PageID, at: Int)] = []
    private var rawBytes: [UInt8] = []
    static let rawLimit = 8 << 20
    /// The pages of one blob before compression (kept from cut to cut: no
    /// fresh megabyte to fault in every second).
    private var blobBuffer: [UInt8] = []
    /// The packs of the unit in progress (salted: Repository/PackAssembler.swift).
    private var assembler: PackAssembler!
    private(set) var states: [ReplicaState] = []
    private var begun = false
    /// Bytes handed to the shipper for the unit in progress.
    private(set) var bytes: Int64 = 0
    /// The objects of the last cut: its packs and index object.
    private(set) var lastPacks: [ObjectKey] = []
    private(set) var lastIndex: ObjectKey?
    /// Pages added since the batch was made.
    private(set) var pagesAdded = 0
    let emit: (UploadItem) throws -> Void

    init(repository: Repository, pageSize: Int, emit: @escaping (UploadItem) throws -> Void) {
        self.repository = repository; self.pageSize = pageSize; self.emit = emit
        rawBytes.reserveCapacity(Self.rawLimit + pageSize)
        assembler = PackAssembler(repository: repository, closing: .beforeOverflow, salted: true) { [unowned self] pack in
            lastPacks.append(pack.key)
            try send(.put(pack.object, role: .pack))
        }
    }

    var isEmpty: Bool { states.isEmpty }
    var firstObserved: UInt64? { states.first?.observedMicros }

    /// A new page of state `number` (its bytes are copied).
    func addPage(_ page: UInt32, number: UInt64, id: PageID, bytes: UnsafeRawBufferPointer) throws {
        precondition(bytes.count == pageSize)
        raw.append((page, number, id, rawBytes.count))
        rawBytes.append(contentsOf: bytes)
        pagesAdded += 1
        if rawBytes.count >= Self.rawLimit { try compressRaw() }
    }

    func addState(_ state: ReplicaState) { states.append(state) }

    private func send(_ item: UploadItem) throws {
        if !begun { begun = true; try emit(.begin) }
        bytes += Int64(item.size)
        try emit(item)
    }

    /// The raw pages into blobs: a page's versions side by side.
    private func compressRaw() throws {
        guard !raw.isEmpty else { return }
        raw.sort { ($0.page, $0.number) < ($1.page, $1.number) }
        let perBlob = repository.blobPages(pageSize: pageSize)
        var start = 0
        blobBuffer.reserveCapacity(perBlob * pageSize)
        while start < raw.count {
            let end = min(raw.count, start + perBlob)
            blobBuffer.removeAll(keepingCapacity: true)
            rawBytes.withUnsafeBytes { all in
                for r in raw[start..<end] { blobBuffer.append(contentsOf: all[r.at..<r.at + pageSize]) }
            }
            try blobBuffer.withUnsafeBytes {
                try assembler.add(pages: $0, pageIDs: raw[start..<end].lazy.map(\.id), pageSize: pageSize, compressor: compressor)
            }
            start = end
        }
        raw.removeAll(keepingCapacity: true)
        rawBytes.removeAll(keepingCapacity: true)
    }

    /// Ends the batch: the last pack, the index object of its blobs, the
    /// segment of its states, and the end of the unit. nil when no state was recorded.
    func cut(chain: String, hostname: String, path: String) throws -> ShippedUnit? {
        guard !states.isEmpty else { return nil }
        lastIndex = nil
        try compressRaw()
        try assembler.flush()
        if let sealed = try assembler.sealIndex() {
            lastIndex = sealed.key
            try send(.put(sealed, role: .index))
        }
        assembler.reset()
        let segment = Segment(chain: chain, hostname: hostname, path: path, pageSize: pageSize, states: states)
        let sealed = try repository.sealSegment(segment)
        try send(.put(sealed, role: .segment))
        let unit = ShippedUnit(kind: .states, chain: chain, states: states, segment: sealed.key)
        try emit(.end(unit))
        states = []; begun = false; bytes = 0
        return unit
    }

    /// Forgets the packs of the last cuts (the follower has taken them).
    func takePacks() -> [ObjectKey] {
        defer { lastPacks = [] }
        return lastPacks
    }
}
