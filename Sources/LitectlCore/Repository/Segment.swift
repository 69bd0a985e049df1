// Segments (repository version 4): what `litectl replicate` ships between
// full snapshots. A chain is a base snapshot followed by numbered states, each
// one exact committed state of the database as the follower observed it, kept
// as the pages it changed (page number and page id; the pages themselves are
// in packs, indexed as backups' are). A segment object holds a run of a
// chain's states; docs/repository.md specifies it:
//   "LCSG" | u32 version = 1 | chain (base snapshot id, 32) | u16+host | u16+path
//   | u32 page size | u32 S | S × state { u64 number | u64 observed µs
//   | WAL position: u32 salt-1, salt-2, frame, checksum-1, checksum-2
//   | u32 transactions | u8 kind | u32 page count | u32 K | K × { u32 page | id (32) }
//   | digest (32) }
// compressed with zstd and sealed like index objects, under
// `segments/<chain>/<SHA-256 of the stored bytes>`.
import Crypto
import Foundation

/// A position as a snapshot's replica facts record it (docs/repository.md).
extension WALPosition {
    var json: JSON {
        .object([("salt1", .integer(Int64(salt1))), ("salt2", .integer(Int64(salt2))), ("frame", .integer(Int64(frame))),
                 ("checksum1", .integer(Int64(checksum1))), ("checksum2", .integer(Int64(checksum2)))])
    }

    init?(json object: [String: Any]) {
        func u32(_ key: String) -> UInt32? {
            guard let v = (object[key] as? NSNumber)?.int64Value, v >= 0, v <= Int64(UInt32.max) else { return nil }
            return UInt32(v)
        }
        guard let s1 = u32("salt1"), let s2 = u32("salt2"), let f = u32("frame"), let c1 = u32("checksum1"), let c2 = u32("checksum2") else { return nil }
        self.init(salt1: s1, salt2: s2, frame: f, checksum1: c1, checksum2: c2)
    }
}

/// The digest of a state's page ids that a segment records for each state:
/// the sum, modulo 2^256, of SHA-256(page number as 4 big-endian bytes ‖
/// page id) over pages 1 to the page count, each read as a big-endian
/// number. A sum can be kept up to date page by page (add the new term,
/// subtract the old) where a hash of the whole list would be made again
/// for every state; a rebuilt list whose sum matches is the list the
/// follower had.
public struct StateDigest: Equatable, Sendable {
    /// Most significant word first.
    var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    public init() {}

    init(_ id: PageID) { words = (id.a, id.b, id.c, id.d) }

    public static func == (l: StateDigest, r: StateDigest) -> Bool { l.words == r.words }

    /// The term of page `page` holding `id`.
    static func term(_ page: UInt32, _ id: PageID) -> (UInt64, UInt64, UInt64, UInt64) {
        var buffer: (UInt32, UInt32, UInt64, UInt64, UInt64, UInt64) = (page.bigEndian, 0, id.a.bigEndian, id.b.bigEndian, id.c.bigEndian, id.d.bigEndian)
        return withUnsafeBytes(of: &buffer) { raw in
            var hasher = SHA256()
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: raw[0..<4]))
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: raw[8..<40]))
            let digest = PageID(digest: hasher.finalize())
            return (digest.a, digest.b, digest.c, digest.d)
        }
    }

    public mutating func add(_ page: UInt32, _ id: PageID) {
        let t = Self.term(page, id)
        var carry: UInt64 = 0
        func step(_ x: UInt64, _ y: UInt64) -> UInt64 {
            let (s1, o1) = x.addingReportingOverflow(y)
            let (s2, o2) = s1.addingReportingOverflow(carry)
            carry = (o1 ? 1 : 0) + (o2 ? 1 : 0)
            return s2
        }
        let w3 = step(words.3, t.3), w2 = step(words.2, t.2), w1 = step(words.1, t.1), w0 = step(words.0, t.0)
        words = (w0, w1, w2, w3)
    }

    public mutating func remove(_ page: UInt32, _ id: PageID) {
        let t = Self.term(page, id)
        var borrow: UInt64 = 0
        func step(_ x: UInt64, _ y: UInt64) -> UInt64 {
            let (d1, o1) = x.subtractingReportingOverflow(y)
            let (d2, o2) = d1.subtractingReportingOverflow(borrow)
            borrow = (o1 ? 1 : 0) + (o2 ? 1 : 0)
            return d2
        }
        let w3 = step(words.3, t.3), w2 = step(words.2, t.2), w1 = step(words.1, t.1), w0 = step(words.0, t.0)
        words = (w0, w1, w2, w3)
    }

    /// The digest of a whole list (page n is `ids[n - 1]`).
    public static func of<C: Collection>(_ ids: C) -> StateDigest where C.Element == PageID {
        var digest = StateDigest()
        var page: UInt32 = 1
        for id in ids { digest.add(page, id); page += 1 }
        return digest
    }

    var id: PageID { PageID(a: words.0, b: words.1, c: words.2, d: words.3) }
    public var hex: String { id.hex }
}

/// One state of a chain: the database after the last commit the follower
/// read at one moment.
public struct ReplicaState: Sendable {
    public enum Kind: UInt8, Sendable {
        /// Read from the -wal: the commits of frames after the previous state's, up to `position`.
        case frames = 0
        /// A page-level comparison of the whole database with the previous
        /// state, made when frames were missed (the -wal restarted while the
        /// follower was down), or a first state of a chain.
        case resync = 1
    }

    /// 1, 2, 3... within the chain (its base is state 0).
    public var number: UInt64
    /// When the follower observed it: microseconds since 1970, UTC.
    public var observedMicros: UInt64
    public var position: WALPosition
    /// The SQLite transactions (commit frames) since the previous state (0 for a resync).
    public var transactions: UInt32
    public var kind: Kind
    /// The database's size in pages.
    public var pageCount: UInt32
    /// The pages that differ from the previous state, by increasing page
    /// number (pages past `pageCount` are dropped, not listed).
    public var changes: [(page: UInt32, id: PageID)]
    /// `StateDigest` of the state's page ids.
    public var digest: StateDigest

    public var observed: Double { Double(observedMicros) / 1e6 }

    public init(number: UInt64, observedMicros: UInt64, position: WALPosition, transactions: UInt32, kind: Kind,
                pageCount: UInt32, changes: [(page: UInt32, id: PageID)], digest: StateDigest) {
        self.number = number; self.observedMicros = observedMicros; self.position = position; self.transactions = transactions
        self.kind = kind; self.pageCount = pageCount; self.changes = changes; self.digest = digest
    }

    /// Applies the state to the page ids of the previous one.
    func apply(to ids: inout [PageID]) throws {
        let n = Int(pageCount)
        if ids.count > n { ids.removeLast(ids.count - n) }
        let zero = PageID(a: 0, b: 0, c: 0, d: 0)
        let covered = ids.count
        // Pages past the previous state's end must all be named: checked
        // before the list grows, so that a hostile page count costs no memory.
        guard n - min(covered, n) <= changes.count else { throw SegmentError.pagesMissing }
        if ids.count < n { ids += [PageID](repeating: zero, count: n - ids.count) }
        var seen = 0
        for change in changes {
            guard change.page >= 1 && Int(change.page) <= n else { throw SegmentError.pageOutOfRange }
            ids[Int(change.page) - 1] = change.id
            if Int(change.page) > covered { seen += 1 }
        }
        // Pages past the previous state's end must all be named.
        guard seen == n - min(covered, n) else { throw SegmentError.pagesMissing }
    }
}

enum SegmentError: Error { case pageOutOfRange, pagesMissing }

extension ReplicaState {
    /// Microseconds of a time in seconds read from the repository (or a
    /// command line): 0 for a negative, NaN or infinite one, never a trap.
    static func micros(_ seconds: Double) -> UInt64 {
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return seconds * 1e6 >= 1.8e19 ? UInt64.max / 2 : UInt64((seconds * 1e6).rounded(.down))
    }
}

/// A segment object: a run of consecutive states of one chain.
public struct Segment: Sendable {
    static let magic: [UInt8] = Array("LCSG".utf8)
    static let formatVersion: UInt32 = 1

    /// The chain: the id of its base snapshot.
    public var chain: String
    public var hostname: String
    public var path: String
    public var pageSize: Int
    public var states: [ReplicaState]

    public var first: UInt64 { states.first?.number ?? 0 }
    public var last: UInt64 { states.last?.number ?? 0 }

    public init(chain: String, hostname: String, path: String, pageSize: Int, states: [ReplicaState]) {
        self.chain = chain; self.hostname = hostname; self.path = path; self.pageSize = pageSize; self.states = states
    }

    /// The bytes before compression.
    func encodeRaw() -> [UInt8] {
        var w = ByteWriter()
        w.raw(Self.magic); w.u32(Self.formatVersion)
        w.id(PageID(hex: chain) ?? PageID(a: 0, b: 0, c: 0, d: 0))
        for text in [hostname, path] {
            let bytes = Array(text.utf8.prefix(65535))
            w.u8(UInt8(bytes.count & 0xFF)); w.u8(UInt8(bytes.count >> 8)); w.raw(bytes)
        }
        w.u32(UInt32(pageSize))
        w.u32(UInt32(states.count))
        for s in states {
            w.u64(s.number); w.u64(s.observedMicros)
            w.u32(s.position.salt1); w.u32(s.position.salt2); w.u32(s.position.frame)
            w.u32(s.position.checksum1); w.u32(s.position.checksum2)
            w.u32(s.transactions); w.u8(s.kind.rawValue); w.u32(s.pageCount)
            w.u32(UInt32(s.changes.count))
            for c in s.changes { w.u32(c.page); w.id(c.id) }
            w.id(s.digest.id)
        }
        return w.bytes
    }

    /// The stored object: compressed (zstd, with its content checksum) and sealed.
    func encode(for repository: Repository) throws -> [UInt8] {
        let compressed = ZstdCompressor(level: 3).compress(encodeRaw())
        return try repository.keys.seal(compressed)
    }

    static func decode(_ stored: [UInt8], what: String) throws -> Segment {
        let raw = try decompressObject(stored, what: what, limit: 1 << 30)
        var r = ByteReader(raw, what: what)
        guard try r.raw(4) == magic else { throw r.damaged("not a segment") }
        let version = try r.u32()
        guard version == formatVersion else { throw r.damaged("unknown segment version \(version)") }
        let chain = try r.id().hex
        var texts: [String] = []
        for _ in 0..<2 {
            let n = Int(try r.u8()) | Int(try r.u8()) << 8
            texts.append(String(decoding: try r.raw(n), as: UTF8.self))
        }
        let pageSize = Int(try r.u32())
        guard (512...65536).contains(pageSize), pageSize & (pageSize - 1) == 0 else { throw r.damaged("page size \(pageSize)") }
        let count = try r.count(of: 81)  // a state with no change
        var states: [ReplicaState] = []
        states.reserveCapacity(count)
        for i in 0..<count {
            let number = try r.u64(), observed = try r.u64()
            let position = WALPosition(salt1: try r.u32(), salt2: try r.u32(), frame: try r.u32(), checksum1: try r.u32(), checksum2: try r.u32())
            let transactions = try r.u32()
            guard let kind = ReplicaState.Kind(rawValue: try r.u8()) else { throw r.damaged("unknown state kind") }
            let pageCount = try r.u32()
            let k = try r.count(of: 36)
            var changes: [(page: UInt32, id: PageID)] = []
            changes.reserveCapacity(k)
            var previous: UInt32 = 0
            for _ in 0..<k {
                let page = try r.u32(), id = try r.id()
                guard page > previous, page <= pageCount else { throw r.damaged("page numbers of state \(number) out of order or range") }
                previous = page
                changes.append((page, id))
            }
            let digest = try r.id()
            if i > 0 {
                guard states[i - 1].number < UInt64.max, number == states[i - 1].number + 1 else { throw r.damaged("states not consecutive") }
                guard observed >= states[i - 1].observedMicros else { throw r.damaged("states not in time order") }
            }
            guard number >= 1 else { throw r.damaged("state number 0") }
            states.append(ReplicaState(number: number, observedMicros: observed, position: position, transactions: transactions,
                                       kind: kind, pageCount: pageCount, changes: changes,
                                       digest: StateDigest(digest)))
        }
        guard r.atEnd else { throw r.damaged("bytes after the last state") }
        guard !states.isEmpty else { throw r.damaged("no state") }
        return Segment(chain: chain, hostname: texts[0], path: texts[1], pageSize: pageSize, states: states)
    }
}

/// A segment as listed: its key and, once read, its states' range.
public struct SegmentRef: Sendable {
    public var key: String
    public var size: Int64
    public var chain: String { String(key.split(separator: "/")[1]) }
    public var id: String { String(key.split(separator: "/").last ?? "") }
}

/// The `replica` object of a snapshot written by `litectl replicate`: the
/// base of a chain (state 0), at this position of the -wal.
public struct ReplicaInfo: Sendable {
    public var position: WALPosition
    /// The chain this one continues (a fold), with its last state and the
    /// range of times it covers; nil for a chain that starts afresh.
    public var follows: Follows?

    public struct Follows: Sendable {
        public var chain: String
        public var state: UInt64
        public var firstTime: Double
        public var lastTime: Double
    }

    public init(position: WALPosition, follows: Follows?) { self.position = position; self.follows = follows }

    var json: JSON {
        .object([("position", position.json),
                 ("follows", .optional(follows) { f in
                     .object([("chain", .string(f.chain)), ("state", .integer(Int64(f.state))),
                              ("first_time_unix", .number(f.firstTime)), ("last_time_unix", .number(f.lastTime))])
                 })])
    }

    init?(json object: [String: Any]) {
        guard let p = object["position"] as? [String: Any], let position = WALPosition(json: p) else { return nil }
        self.position = position
        if let f = object["follows"] as? [String: Any] {
            guard let chain = f["chain"] as? String, PageID(hex: chain) != nil, let state = (f["state"] as? NSNumber)?.int64Value, state >= 0,
                  let first = (f["first_time_unix"] as? NSNumber)?.doubleValue, let last = (f["last_time_unix"] as? NSNumber)?.doubleValue else { return nil }
            follows = Follows(chain: chain, state: UInt64(state), firstTime: first, lastTime: last)
        }
    }
}

extension Repository {
    static func segmentPrefix(chain: String) -> String { ObjectKey.segmentPrefix(chain: chain) }

    /// Stores a segment; returns its key and stored size.
    func putSegment(_ segment: Segment) throws -> (key: String, bytes: Int) {
        let sealed = try sealSegment(segment)
        try put(sealed)
        return (sealed.key.name, sealed.bytes.count)
    }

    /// Reads a segment, checking that its bytes are the ones its name is the
    /// SHA-256 of (a damaged or swapped object fails here), and that it
    /// belongs to the chain its key names.
    public func loadSegment(_ key: String) throws -> Segment {
        let what = objectName(key)
        let stored = try store.get(key)
        let parts = key.split(separator: "/")
        guard parts.count == 3, Hex.encode(Array(SHA256.hash(data: stored))) == parts[2] else {
            throw StoreError(.other, location: what, message: "damaged segment: its content does not match its name")
        }
        let segment = try Segment.decode(try keys.open(stored, what: what), what: what)
        guard segment.chain == parts[1] else {
            throw StoreError(.other, location: what, message: "damaged segment: it names chain \(segment.chain.prefix(8)), not the one it is filed under")
        }
        return segment
    }

    /// Every segment object, by chain.
    public func segmentKeys() throws -> [String: [SegmentRef]] {
        var out: [String: [SegmentRef]] = [:]
        for object in try store.list(prefix: ObjectKey.Kind.segments.prefix) {
            let parts = object.key.split(separator: "/")
            guard parts.count == 3, PageID(hex: String(parts[1])) != nil, PageID(hex: String(parts[2])) != nil else { continue }
            out[String(parts[1]), default: []].append(SegmentRef(key: object.key, size: object.size))
        }
        return out
    }

    /// The segment objects of one chain.
    public func segmentKeys(chain: String) throws -> [SegmentRef] {
        try store.list(prefix: Self.segmentPrefix(chain: chain)).compactMap { object in
            let parts = object.key.split(separator: "/")
            guard parts.count == 3, PageID(hex: String(parts[2])) != nil else { return nil }
            return SegmentRef(key: object.key, size: object.size)
        }
    }
}
