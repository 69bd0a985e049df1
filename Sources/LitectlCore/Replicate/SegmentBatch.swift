// What the follower ships at each interval, built from the states it
// recorded: their new pages gathered into blobs (the versions of one page
// side by side, so that zstd stores a later version as its few changed
// bytes), the blobs into packs, one index object for them, then the segment
// naming the states. Each object is made whole here, on the follower's
// thread, and handed to the shipper in write order (packs, index, segment),
// so that no segment is ever durable before the pages it names. Part of the
// replicate capability, built on Repository/'s blobs, packs, index objects,
// crypto and object names.
import Crypto

/// One unit of work for the shipper: objects written under one shared lock, in order.
enum UploadItem {
    /// Take the repository's shared lock (prune waits for it).
    case begin
    /// Write an object (its key names its content; writing it again is harmless).
    case put(key: String, bytes: [UInt8], role: Role)
    /// Write a pack whose bytes wait in a spool file (a gathering's).
    case putSpooled(key: String, file: SpoolFile, offset: Int64, count: Int)
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

    var size: Int { if case .put(_, let bytes, _) = self { return bytes.count } else { return 0 } }
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
    var segment: String?
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
    private let log2: UInt8
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
    /// The pack being filled, and the blobs written since the last index object.
    private var pack: [UInt8] = []
    private var packIDs: [PageID] = []
    private var blobs: [BlobRecord] = []
    private var blobIDs: [[PageID]] = []
    private(set) var states: [ReplicaState] = []
    private var begun = false
    /// Bytes handed to the shipper for the unit in progress.
    private(set) var bytes: Int64 = 0
    /// The objects of the last cut: its packs and index object.
    private(set) var lastPacks: [String] = []
    private(set) var lastIndex: String?
    /// Pages added since the batch was made.
    private(set) var pagesAdded = 0
    let emit: (UploadItem) throws -> Void

    init(repository: Repository, pageSize: Int, emit: @escaping (UploadItem) throws -> Void) {
        self.repository = repository; self.pageSize = pageSize; self.emit = emit
        log2 = UInt8(pageSize.trailingZeroBitCount)
        rawBytes.reserveCapacity(Self.rawLimit + pageSize)
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
            let blob = try blobBuffer.withUnsafeBytes { try repository.blob(of: $0, compressor: compressor) }
            if !pack.isEmpty && pack.count + blob.count > repository.packSize { try flushPack() }
            blobs.append(BlobRecord(pack: UInt32(packIDs.count), offset: UInt32(pack.count), length: UInt32(blob.count),
                                    pages: UInt8(end - start), pageSizeLog2: log2, source: 0))
            blobIDs.append(raw[start..<end].map(\.id))
            pack.append(contentsOf: blob)
            start = end
        }
        raw.removeAll(keepingCapacity: true)
        rawBytes.removeAll(keepingCapacity: true)
    }

    /// Writes the pack, ended with 16 random bytes that no blob covers: no
    /// other writer's pack can have its name, so the pack a gathering
    /// replaces can be removed without reading every index object.
    private func flushPack() throws {
        guard !pack.isEmpty else { return }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2 { withUnsafeBytes(of: random.next() as UInt64) { pack.append(contentsOf: $0) } }
        let id = PageID(digest: SHA256.hash(data: pack))
        packIDs.append(id)
        lastPacks.append(Repository.packKey(id))
        try send(.put(key: Repository.packKey(id), bytes: pack, role: .pack))
        pack = []
    }

    /// Ends the batch: the last pack, the index object of its blobs, the
    /// segment of its states, and the end of the unit. nil when no state was recorded.
    func cut(chain: String, hostname: String, path: String) throws -> ShippedUnit? {
        guard !states.isEmpty else { return nil }
        lastIndex = nil
        try compressRaw()
        try flushPack()
        if !blobs.isEmpty {
            let object = IndexObject.encode(for: repository, packs: packIDs, blobCount: blobs.count, blob: { self.blobs[$0] },
                                            id: { self.blobIDs[$0][$1] })
            let sealed = try repository.keys.seal(object)
            lastIndex = "index/" + Hex.encode(Array(SHA256.hash(data: sealed)))
            try send(.put(key: lastIndex!, bytes: sealed, role: .index))
        }
        let segment = Segment(chain: chain, hostname: hostname, path: path, pageSize: pageSize, states: states)
        let (key, sealed) = try repository.sealSegment(segment)
        try send(.put(key: key, bytes: sealed, role: .segment))
        let unit = ShippedUnit(kind: .states, chain: chain, states: states, segment: key)
        try emit(.end(unit))
        states = []; blobs = []; blobIDs = []; packIDs = []; begun = false; bytes = 0
        return unit
    }

    /// Forgets the packs of the last cuts (the follower has taken them).
    func takePacks() -> [String] {
        defer { lastPacks = [] }
        return lastPacks
    }
}
