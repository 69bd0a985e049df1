// The names of a repository's objects (docs/repository.md, "Layout"), made
// and read in one place: code outside Repository/ holds an `ObjectKey` it was
// given and never spells a prefix (`scripts/check-layers` fails when it does).
// Also the sealed objects the repository hands out to be written later (the
// follower's shipper writes them in its own order).
import Crypto

/// The key of one object in a repository's object store.
public struct ObjectKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The key as the object store spells it.
    public let name: String

    init(_ name: String) { self.name = name }

    public var description: String { name }
    public static func < (l: ObjectKey, r: ObjectKey) -> Bool { Array(l.name.utf8).lexicographicallyPrecedes(Array(r.name.utf8)) }

    /// The folders of a repository, each a kind of object.
    enum Kind: String, CaseIterable {
        case packs, index, lists, snapshots, segments, locks, followers
        /// The prefix its objects are listed by.
        var prefix: String { rawValue + "/" }
    }

    /// The repository's settings object.
    static let config = ObjectKey("config")

    /// A pack: `packs/<first two hex digits>/<SHA-256 of its bytes>`.
    static func pack(_ id: PageID) -> ObjectKey { let h = id.hex; return ObjectKey("packs/\(h.prefix(2))/\(h)") }
    /// An index object, named by the SHA-256 of its stored bytes.
    static func index(_ id: String) -> ObjectKey { ObjectKey(Kind.index.prefix + id) }
    /// A page list object, named by the SHA-256 of its stored bytes.
    static func list(_ id: String) -> ObjectKey { ObjectKey(Kind.lists.prefix + id) }
    /// A snapshot object, named by the SHA-256 of its stored bytes.
    static func snapshot(_ id: String) -> ObjectKey { ObjectKey(Kind.snapshots.prefix + id) }
    /// A segment of chain `chain`, named by the SHA-256 of its stored bytes.
    static func segment(chain: String, id: String) -> ObjectKey { ObjectKey(segmentPrefix(chain: chain) + id) }
    /// The prefix of a chain's segments.
    static func segmentPrefix(chain: String) -> String { Kind.segments.prefix + chain + "/" }

    /// The last part of the name: an object's id (the SHA-256 of its stored
    /// bytes for packs, index objects, lists, snapshots and segments).
    public var id: String {
        guard let slash = name.lastIndex(of: "/") else { return name }
        return String(name[name.index(after: slash)...])
    }

    /// Whether it is an object of `kind`.
    func isOf(_ kind: Kind) -> Bool { name.hasPrefix(kind.prefix) }
}

/// An object made whole (compressed, sealed when the repository is
/// encrypted) and named by the SHA-256 of its bytes, not written yet.
public struct SealedObject: Sendable {
    public let key: ObjectKey
    public let bytes: [UInt8]
    /// SHA-256 of `bytes` (its name), given to the store so that S3's signed
    /// payload hash is not computed again.
    let sha256: [UInt8]

    init(key: ObjectKey, bytes: [UInt8], sha256: [UInt8]) {
        self.key = key; self.bytes = bytes; self.sha256 = sha256
    }

    init(_ kind: (String) -> ObjectKey, bytes: [UInt8]) {
        sha256 = Array(SHA256.hash(data: bytes))
        key = kind(Hex.encode(sha256))
        self.bytes = bytes
    }

    /// The object's id (its key's last part).
    public var id: String { key.id }
}

extension Repository {
    /// An index object's plain bytes (`IndexObject.encode`) sealed under its name.
    func sealIndexObject(_ plain: [UInt8]) throws -> SealedObject {
        SealedObject(ObjectKey.index, bytes: try keys.seal(plain))
    }

    /// A page list's plain bytes (`PageListObject.encode...`) sealed under its name.
    func sealPageList(_ plain: [UInt8]) throws -> SealedObject {
        SealedObject(ObjectKey.list, bytes: try keys.seal(plain))
    }

    /// A snapshot sealed under its name; the snapshot's `id` is set to it.
    func sealSnapshot(_ snapshot: inout Snapshot) throws -> SealedObject {
        let sealed = SealedObject(ObjectKey.snapshot, bytes: try keys.seal(snapshot.encoded()))
        snapshot.id = sealed.id
        return sealed
    }

    /// A segment sealed under its name (in its chain's folder).
    func sealSegment(_ segment: Segment) throws -> SealedObject {
        let chain = segment.chain
        return SealedObject({ ObjectKey.segment(chain: chain, id: $0) }, bytes: try segment.encode(for: self))
    }

    /// Writes a sealed object (writing it again is harmless: its name is its content).
    func put(_ object: SealedObject) throws {
        try store.put(object.key.name, object.bytes, sha256: object.sha256)
    }

    /// Writes `bytes` under `key`; a key named by the SHA-256 of the bytes
    /// gives the store that digest (S3 then signs it without hashing again).
    func put(_ key: ObjectKey, _ bytes: [UInt8]) throws {
        if key.id.utf8.count == 64, let digest = Hex.decode(key.id) {
            try store.put(key.name, bytes, sha256: digest)
        } else {
            try store.put(key.name, bytes)
        }
    }

    /// Removes an object; one already gone is not an error.
    func remove(_ key: ObjectKey) throws {
        do { try store.delete(key.name) } catch let error as StoreError where error.kind == .notFound {}
    }

    /// The store's name for an object (in messages).
    func objectName(_ key: ObjectKey) -> String { objectName(key.name) }

    /// Every index object's key.
    func indexObjectKeys() throws -> [ObjectKey] {
        try store.list(prefix: ObjectKey.Kind.index.prefix).map { ObjectKey($0.key) }
    }

    /// The id of the full page list a snapshot's list is (or is a delta on):
    /// the list a new chain's or a fold's delta list is made on.
    func fullListID(of snapshot: Snapshot) throws -> PageID? {
        guard let key = try listKeys(of: snapshot).last else { return nil }
        return PageID(hex: ObjectKey(key).id)
    }
}
