// A repository of page-deduplicated database snapshots in an object store
// (docs/repository.md is the format's specification): opening and creating
// one, reading its snapshots, page lists and index, and writing objects under
// their content-derived names, sealed when the repository is encrypted.
import Foundation
import Crypto

public final class Repository: @unchecked Sendable {
    public static let format = "litectl-repository"
    /// The version `repo init` creates; repositories of versions 1 to 3 are
    /// still read and written, each as its own version (`repo upgrade` makes
    /// a version-3 repository version 4, which `replicate` needs).
    public static let version = 4
    static let supportedVersions = 1...4
    /// Packs are closed once they reach this size (the last one of a run is
    /// smaller): 4 MiB keeps a backup's memory flat (one pack is filled at a
    /// time) and prune's unit small, at one S3 request per 4 MiB.
    public static let defaultPackSize = 4 << 20
    /// zstd level of blobs (versions 2 and 3; prune's rewritten blobs too). Level 1: on a database's pages, 1-3 %
    /// larger than level 3 (restic's default) at about 0.7x its CPU; about
    /// zlib -6's ratio at several times its speed (docs/performance.md).
    static let blobLevel: Int32 = 1
    /// A blob holds at most this many bytes of pages (version 2), and at most 255 pages.
    static let blobBytes = 256 << 10

    public let store: ObjectStore
    public let id: String
    public let encrypted: Bool
    /// The format version of this repository (1 to 4).
    public let version: Int
    /// Whether its snapshots record the SHA-256 of their page ids (version 3)
    /// rather than of the database file: a backup then hashes each page once,
    /// not the file as well.
    var recordsPagesDigest: Bool { version >= 3 }
    /// Whether it may hold segments (version 4): older litectl refuse it,
    /// so that none prunes the pages only segments use.
    public var holdsSegments: Bool { version >= 4 }
    let keys: RepoKeys
    /// Target pack size; LITECTL_PACK_SIZE overrides it (tests make many small packs).
    public var packSize: Int

    init(store: ObjectStore, id: String, keys: RepoKeys, version: Int = Repository.version) {
        self.store = store; self.id = id; self.keys = keys; encrypted = keys.encrypted; self.version = version
        packSize = Int(ProcessInfo.processInfo.environment["LITECTL_PACK_SIZE"] ?? "").map { max(4096, $0) } ?? Self.defaultPackSize
    }

    public var location: String { store.location }

    /// How many pages of `pageSize` bytes one blob holds at most.
    func blobPages(pageSize: Int) -> Int {
        version == 1 ? 1 : max(1, min(255, Self.blobBytes / max(pageSize, 1)))
    }

    /// Creates a repository in an empty location (a missing folder is created
    /// by the caller). Refuses a location that holds anything.
    public static func initialize(_ store: ObjectStore, secret: RepoSecret?, version: Int = Repository.version) throws -> Repository {
        precondition(supportedVersions.contains(version))
        try requireKeyOutside(store, secret)
        let existing = try store.list(prefix: "")
        if existing.contains(where: { $0.key == "config" }) {
            throw StoreError(.other, location: store.location, message: "already a repository")
        }
        if !existing.isEmpty {
            throw StoreError(.other, location: store.location, message: "not empty and not a repository (\(existing.count) objects, e.g. \(existing[0].key)); choose an empty location")
        }
        var id = [UInt8](repeating: 0, count: 16)
        for i in id.indices { id[i] = UInt8.random(in: 0...255) }
        var fields: [(String, JSON)] = [
            ("format", .string(format)), ("version", .integer(Int64(version))), ("id", .string(Hex.encode(id))),
            ("created_at", .string(Timestamp.iso8601(Clock.wall()))),
            ("page_id", .string(secret == nil ? "sha256" : "hmac-sha256")), ("compression", .string(version == 1 ? "zlib" : "zstd")),
        ]
        let keys: RepoKeys
        if let secret {
            if case .keyFile(let path) = secret { try RepoKeyFile.createIfMissing(path) }
            let (wrapping, master) = try KeyWrapping.create(secret: secret)
            var enc: [(String, JSON)] = [("cipher", .string("aes-256-gcm")), ("kdf", .string(wrapping.kdf)),
                                         ("salt", .string(Hex.encode(wrapping.salt)))]
            if wrapping.kdf == "scrypt" {
                enc += [("n", .integer(Int64(wrapping.n))), ("r", .integer(Int64(wrapping.r))), ("p", .integer(Int64(wrapping.p)))]
            }
            enc.append(("wrapped_key", .string(Hex.encode(wrapping.wrappedKey))))
            fields.append(("encryption", .object(enc)))
            keys = RepoKeys(master: master, location: store.location)
        } else {
            fields.append(("encryption", .null))
            keys = .plain(location: store.location)
        }
        try store.put("config", Array((JSON.object(fields).pretty + "\n").utf8))
        return Repository(store: store, id: Hex.encode(id), keys: keys, version: version)
    }

    /// Refuses a key file inside a folder repository: kept beside the data
    /// it locks, it protects nothing, is lost with it, and the repository's
    /// own clean-ups walk that folder.
    public static func requireKeyOutside(_ store: ObjectStore, _ secret: RepoSecret?) throws {
        guard let folder = store as? FolderStore, case .keyFile(let path)? = secret else { return }
        do {
            try SameFileRule.require(output: path, outside: folder.root, what: "the repository")
            // A folder not made yet (`repo init`) is compared by its name.
            if !DurableFolder.exists(folder.root) {
                let root = Array((DurableFolder.normalized(folder.root) + "/").utf8)
                if Array(DurableFolder.normalized(path).utf8).starts(with: root) { throw StoreError(.denied, location: path, message: "") }
            }
        } catch {
            throw StoreError(.denied, location: path,
                             message: "lies inside the repository \(folder.location); keep the key file outside it (a key kept with the data it locks protects nothing)")
        }
    }

    /// Opens an existing repository; `secret` is needed when it is encrypted.
    public static func open(_ store: ObjectStore, secret: RepoSecret?) throws -> Repository {
        try requireKeyOutside(store, secret)
        let bytes: [UInt8]
        do { bytes = try store.get("config") } catch let error as StoreError where error.kind == .notFound {
            throw StoreError(.notFound, location: store.location, message: "not a litectl repository (no config object; create one with `litectl repo init`)")
        }
        func damaged(_ what: String) -> StoreError {
            StoreError(.other, location: store.location + "/config", message: "not a valid repository config (\(what))")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              object["format"] as? String == format else { throw damaged("format") }
        guard let v = object["version"] as? NSNumber, supportedVersions.contains(v.intValue) else {
            throw StoreError(.other, location: store.location, message: "repository format version \(object["version"] ?? "?") is not supported by this litectl (it reads versions \(supportedVersions.lowerBound) to \(supportedVersions.upperBound))")
        }
        let version = v.intValue
        guard let id = object["id"] as? String else { throw damaged("id") }
        guard let enc = object["encryption"] as? [String: Any] else {
            return Repository(store: store, id: id, keys: .plain(location: store.location), version: version)
        }
        guard let kdf = enc["kdf"] as? String, let salt = (enc["salt"] as? String).flatMap(Hex.decode),
              let wrapped = (enc["wrapped_key"] as? String).flatMap(Hex.decode) else { throw damaged("encryption") }
        let wrapping = KeyWrapping(kdf: kdf, salt: salt, n: (enc["n"] as? NSNumber)?.intValue ?? 0,
                                   r: (enc["r"] as? NSNumber)?.intValue ?? 0, p: (enc["p"] as? NSNumber)?.intValue ?? 0,
                                   wrappedKey: wrapped)
        if kdf == "scrypt", !(2...(1 << 22)).contains(wrapping.n) || !(1...64).contains(wrapping.r) || !(1...16).contains(wrapping.p) {
            throw damaged("scrypt parameters")
        }
        guard let secret else {
            throw StoreError(.denied, location: store.location, message: "the repository is encrypted: give \(kdf == "scrypt" ? "--passphrase-file or LITECTL_PASSPHRASE" : "--key-file")")
        }
        let master = try wrapping.unwrap(secret, location: store.location)
        return Repository(store: store, id: id, keys: RepoKeys(master: master, location: store.location), version: version)
    }

    // MARK: Objects

    func objectName(_ key: String) -> String { store.location + "/" + key }

    /// Seals `plain` and stores it under `prefix/<sha256 of the stored bytes>`; returns the id.
    func putObject(prefix: String, _ plain: [UInt8]) throws -> (id: String, bytes: Int) {
        let sealed = try keys.seal(plain)
        let id = Hex.encode(Array(SHA256.hash(data: sealed)))
        try store.put(prefix + "/" + id, sealed)
        return (id, sealed.count)
    }

    /// The object under `key`, opened (unsealed when encrypted). An index,
    /// list or snapshot object is named by the SHA-256 of its stored bytes:
    /// bytes that hash to another name (damaged, or another valid object put
    /// in its place) are refused, so that a swapped snapshot or list is never
    /// read as the one asked for.
    func getObject(_ key: String) throws -> [UInt8] {
        let stored = try store.get(key)
        if Self.addressedPrefixes.contains(where: { key.hasPrefix($0) }) {
            let name = key[key.index(after: key.lastIndex(of: "/")!)...]
            let digest = Hex.encode(Array(SHA256.hash(data: stored)))
            guard Array(digest.utf8) == Array(name.utf8) else {
                throw StoreError(.other, location: objectName(key),
                                 message: "damaged or swapped object: its bytes' SHA-256 is \(digest.prefix(16))…, not its name")
            }
        }
        return try keys.open(stored, what: objectName(key))
    }

    /// The kinds of objects whose name is the SHA-256 of their stored bytes,
    /// read whole (packs are read in ranges; their pages are checked by id).
    static let addressedPrefixes = [ObjectKey.Kind.index, .lists, .snapshots].map(\.prefix)

    static func packKey(_ pack: PageID) -> String { ObjectKey.pack(pack).name }

    /// The index: every index object, merged into one table sorted by page id.
    public func loadIndex() throws -> RepoIndex {
        try loadIndex(damaged: nil)
    }

    /// The index; with `damaged`, an index object that cannot be read is
    /// listed there (key and error) and left out, rather than failing the
    /// load (`verify`, which then names it and the snapshots it leaves short).
    func loadIndex(damaged: UnsafeMutablePointer<[(key: String, error: String)]>?) throws -> RepoIndex {
        // An index object removed between the listing and its reading (prune,
        // or replicate gathering its own into one, writes the replacement
        // first): the listing is read again.
        for attempt in 1...3 {
            let listed = damaged?.pointee.count ?? 0
            do { return try loadIndexOnce(damaged: damaged) } catch let error as StoreError where error.kind == .notFound && attempt < 3 {
                damaged?.pointee.removeSubrange(listed...)
            }
        }
        return try loadIndexOnce(damaged: damaged)
    }

    private func loadIndexOnce(damaged: UnsafeMutablePointer<[(key: String, error: String)]>?) throws -> RepoIndex {
        var index = RepoIndex()
        let objects = try store.list(prefix: "index/")
        // Page ids do not compress, so an object holds at most about one page per
        // 32 of its bytes: reserving that much up front avoids growing (and
        // briefly doubling) the largest array.
        let bound = objects.reduce(0) { $0 + Int($1.size) / 32 + 1 }
        index.entries.reserveCapacity(bound)
        // From a server, the objects are fetched 8 at a time (a follower
        // leaves one per segment until its next gathering), each 8 decoded
        // in order once they are all there; from a folder, one at a time.
        let window = store is FolderStore ? 1 : 8
        var fetched: [Result<[UInt8], any Error>] = []
        for (i, object) in objects.enumerated() {
            if i % window == 0 {
                let keys = objects[i..<min(objects.count, i + window)].map(\.key)
                if keys.count == 1 {
                    fetched = [Result { try getObject(keys[0]) }]
                } else {
                    let results = Locked([Result<[UInt8], any Error>?](repeating: nil, count: keys.count))
                    let group = DispatchGroup()
                    for (k, key) in keys.enumerated() {
                        DispatchQueue.global().async(group: group) {
                            let result = Result { try self.getObject(key) }
                            results.withLock { $0[k] = result }
                        }
                    }
                    group.wait()
                    fetched = results.withLock { $0.map { $0! } }
                }
            }
            do {
                let bytes = try fetched[i % window].get()
                if damaged != nil {
                    // Decoded aside first: one that fails halfway must add nothing.
                    var aside = RepoIndex()
                    try IndexObject.decode(bytes, what: objectName(object.key), into: &aside, source: 0)
                }
                try IndexObject.decode(bytes, what: objectName(object.key), into: &index, source: UInt32(index.objectKeys.count))
            } catch let error as StoreError where damaged != nil && error.kind != .unavailable && error.kind != .denied && error.kind != .notFound {
                damaged!.pointee.append((object.key, error.description))
                continue
            }
            index.objectKeys.append(object.key)
        }
        index.finish()
        return index
    }

    /// Every snapshot, oldest first. Snapshots that cannot be read are
    /// returned in `damaged` (key and error) rather than failing the listing.
    public func snapshots() throws -> (snapshots: [Snapshot], damaged: [(key: String, error: String)]) {
        var out: [Snapshot] = [], damaged: [(String, String)] = []
        for object in try store.list(prefix: "snapshots/") {
            let id = String(object.key.dropFirst("snapshots/".count))
            do {
                out.append(try Snapshot.decode(try getObject(object.key), id: id, what: objectName(object.key)))
            } catch let error as StoreError where error.kind != .unavailable && error.kind != .denied {
                damaged.append((object.key, error.description))
            }
        }
        out.sort { $0.time < $1.time || ($0.time == $1.time && $0.id < $1.id) }
        return (out, damaged)
    }

    /// The ordered page ids of a snapshot (reads its list and, for a delta, its base).
    public func pageIDs(of snapshot: Snapshot) throws -> [PageID] {
        let list = try loadList(snapshot.list)
        guard list.count == snapshot.pageCount else {
            throw StoreError(.other, location: objectName("lists/" + snapshot.list), message: "damaged page list: \(list.count) pages, the snapshot says \(snapshot.pageCount)")
        }
        return list
    }

    /// A snapshot's pages as positions in `index`, read without holding the
    /// ids (4 bytes a page instead of 32). `missing(page number, id)` gives the
    /// position to use for an id the index lacks, or throws.
    func pagePositions(of snapshot: Snapshot, index: RepoIndex,
                       missing: (Int, PageID) throws -> UInt32) throws -> [UInt32] {
        let positions = try listPositions(snapshot.list, index: index, missing: missing)
        guard positions.count == snapshot.pageCount else {
            throw StoreError(.other, location: objectName("lists/" + snapshot.list), message: "damaged page list: \(positions.count) pages, the snapshot says \(snapshot.pageCount)")
        }
        return positions
    }

    /// A list object (full, or a delta on a full list) as index positions.
    func listPositions(_ id: String, index: RepoIndex, missing: (Int, PageID) throws -> UInt32) throws -> [UInt32] {
        let key = "lists/" + id, what = objectName(key)
        func look(_ n: Int, _ id: PageID) throws -> UInt32 {
            if let p = index.position(of: id) { return UInt32(p) }
            return try missing(n, id)
        }
        var positions: [UInt32] = []
        var delta: (count: Int, base: PageID, changes: Int)?
        let object = try getObject(key)
        try PageListObject.stream(object, what: what, head: { head in
            if case .delta(let count, let base, let changes) = head { delta = (count, base, changes) }
        }, item: { n, id in
            if delta == nil { positions.append(try look(n, id)) }
        })
        guard let delta else { return positions }
        let baseKey = "lists/" + delta.base.hex
        var baseIsFull = true
        // A page of the base that the delta replaces may be gone from the
        // index (prune keeps only what snapshots use): such pages are settled
        // after the delta is applied.
        var unresolved: [(n: Int, id: PageID)] = []
        try PageListObject.stream(try getObject(baseKey), what: objectName(baseKey), head: { head in
            if case .delta = head { baseIsFull = false }
        }, item: { n, id in
            guard baseIsFull && n < delta.count else { return }
            if let p = index.position(of: id) { positions.append(UInt32(p)) }
            else { unresolved.append((n, id)); positions.append(0) }
        })
        guard baseIsFull else {
            throw StoreError(.other, location: what, message: "damaged page list: its base is not a full list")
        }
        // Pages past the base's end must all be in the delta.
        let covered = positions.count
        guard delta.count - covered <= delta.changes else {
            throw StoreError(.other, location: what, message: "damaged page list: pages missing past its base")
        }
        positions += [UInt32](repeating: 0, count: delta.count - covered)
        var filled = [Bool](repeating: false, count: delta.count)
        try PageListObject.stream(object, what: what, head: { _ in }, item: { n, id in
            filled[n] = true
            positions[n] = try look(n, id)
        })
        guard !filled[covered...].contains(false) else {
            throw StoreError(.other, location: what, message: "damaged page list: pages missing past its base")
        }
        for (n, id) in unresolved where !filled[n] { positions[n] = try missing(n, id) }
        return positions
    }

    /// A list object resolved to its ids.
    func loadList(_ id: String) throws -> [PageID] {
        let key = "lists/" + id
        let decoded = try PageListObject.decode(try getObject(key), what: objectName(key))
        switch decoded.kind {
        case .full:
            return decoded.ids
        case .delta(let base, let changes):
            let baseKey = "lists/" + base.hex
            let baseList = try PageListObject.decode(try getObject(baseKey), what: objectName(baseKey))
            guard baseList.kind == .full else {
                throw StoreError(.other, location: objectName(key), message: "damaged page list: its base is not a full list")
            }
            var ids = Array(baseList.ids.prefix(decoded.pageCount))
            let zero = PageID(a: 0, b: 0, c: 0, d: 0)
            if ids.count < decoded.pageCount { ids += [PageID](repeating: zero, count: decoded.pageCount - ids.count) }
            var covered = baseList.ids.count
            for change in changes { ids[Int(change.index)] = change.id; if Int(change.index) >= covered { covered = Int(change.index) } }
            // Pages past the base's end must all be in the delta.
            if decoded.pageCount > baseList.ids.count {
                var seen = [Bool](repeating: false, count: decoded.pageCount - baseList.ids.count)
                for change in changes where Int(change.index) >= baseList.ids.count { seen[Int(change.index) - baseList.ids.count] = true }
                if seen.contains(false) { throw StoreError(.other, location: objectName(key), message: "damaged page list: pages missing past its base") }
            }
            return ids
        }
    }

    /// The list objects a snapshot needs (its own and, for a delta, the base).
    func listKeys(of snapshot: Snapshot) throws -> [String] {
        let key = "lists/" + snapshot.list
        var base: PageID?
        struct Enough: Error {}
        do {
            // Only the head is needed: stop there.
            try PageListObject.stream(try getObject(key), what: objectName(key), head: { head in
                if case .delta(_, let b, _) = head { base = b }
                throw Enough()
            }, item: { _, _ in })
        } catch is Enough {}
        if let base { return [key, "lists/" + base.hex] }
        return [key]
    }
}
