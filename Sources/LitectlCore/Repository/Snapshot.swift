// A snapshot: one database at one moment, as a small JSON object in
// `snapshots/<id>` (sealed when the repository is encrypted) that names its
// page list and records what a restore checks: page size and count, the
// SHA-256 of the database file (snapshot version 1, repository versions 1
// and 2) or of its page ids in order (snapshot version 2, repository version
// 3), and its logical content hash (`litectl hash`).
import Foundation

public struct Snapshot: Sendable {
    public static let format = "litectl-snapshot"

    /// The object's id (SHA-256 of its JSON), hex; set when read or written.
    public var id: String = ""
    /// The database file's name, and its absolute resolved path.
    public var database: String
    public var path: String
    public var hostname: String
    public var time: Double
    public var tags: [String]
    public var pageSize: Int
    public var pageCount: Int
    /// The page list object's id (hex).
    public var list: String
    /// The snapshot whose page list the delta was made against (nil for the first).
    public var parent: String?
    /// SHA-256 of the database bytes (page 1 to the last page): snapshot version 1.
    public var databaseSHA256: String?
    /// SHA-256 of the page ids, 32 bytes each, page 1 to the last page:
    /// snapshot version 2 (`PagesDigest`). A snapshot has one or the other.
    public var pagesSHA256: String?
    /// `litectl hash` of the database.
    public var logicalHash: String
    /// Header facts: text encoding, user_version, application_id, schema format, journal mode, ...
    public var header: [(String, JSON)]
    public var pagesNew: Int
    /// Bytes this snapshot added to the repository (packs, index, list, snapshot).
    public var bytesAdded: Int64
    public var durationSeconds: Double
    public var strategy: String
    public var verification: String
    /// For the base of a chain of `litectl replicate` (repository version 4):
    /// its position in the -wal and the chain it continues (Segment.swift).
    public var replica: ReplicaInfo? = nil

    public var shortID: String { String(id.prefix(8)) }

    public var json: JSON {
        .object([
            ("format", .string(Self.format)), ("version", .integer(pagesSHA256 == nil ? 1 : 2)),
            ("id", .string(id)),
            ("database", .string(database)), ("path", .string(path)), ("hostname", .string(hostname)),
            ("time", .string(Timestamp.iso8601(time))), ("time_unix", .number(time)),
            ("tags", .array(tags.map { .string($0) })),
            ("page_size", .integer(Int64(pageSize))), ("page_count", .integer(Int64(pageCount))),
            ("bytes", .integer(Int64(pageSize) * Int64(pageCount))),
            ("list", .string(list)), ("parent", .optional(parent) { .string($0) }),
        ] + (pagesSHA256.map { [("pages_sha256", JSON.string($0))] } ?? [("database_sha256", .string(databaseSHA256 ?? ""))]) + [
            // Empty: not recorded (a snapshot `litectl replicate` made).
            ("logical_hash", logicalHash.isEmpty ? .null : .string(logicalHash)),
            ("header", .object(header)),
            ("pages_new", .integer(Int64(pagesNew))), ("bytes_added", .integer(bytesAdded)),
            ("duration_seconds", .number((durationSeconds * 1000).rounded() / 1000)),
            ("strategy", .string(strategy)), ("verification", .string(verification)),
        ] + (replica.map { [("replica", $0.json)] } ?? []))
    }

    /// The stored form: the JSON without its own id.
    func encoded() -> [UInt8] {
        guard case .object(let fields) = json else { return [] }
        return Array(JSON.object(fields.filter { $0.0 != "id" }).compact.utf8)
    }

    static func decode(_ bytes: [UInt8], id: String, what: String) throws -> Snapshot {
        func damaged(_ detail: String) -> StoreError { StoreError(.other, location: what, message: "damaged snapshot: \(detail)") }
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              object["format"] as? String == format else { throw damaged("not a litectl snapshot") }
        let version = (object["version"] as? NSNumber)?.intValue
        guard version == 1 || version == 2 else { throw damaged("unknown version") }
        func string(_ key: String) throws -> String {
            guard let s = object[key] as? String else { throw damaged("field \(key)") }
            return s
        }
        func number(_ key: String) throws -> NSNumber {
            guard let n = object[key] as? NSNumber else { throw damaged("field \(key)") }
            return n
        }
        var header: [(String, JSON)] = []
        if let h = object["header"] as? [String: Any] {
            for key in h.keys.sorted() {
                if let s = h[key] as? String { header.append((key, .string(s))) }
                else if let n = h[key] as? NSNumber { header.append((key, .integer(n.int64Value))) }
            }
        }
        let snapshot = Snapshot(
            id: id, database: try string("database"), path: try string("path"), hostname: try string("hostname"),
            time: try number("time_unix").doubleValue, tags: object["tags"] as? [String] ?? [],
            pageSize: try number("page_size").intValue, pageCount: try number("page_count").intValue,
            list: try string("list"), parent: object["parent"] as? String,
            databaseSHA256: version == 1 ? try string("database_sha256") : nil,
            pagesSHA256: version == 2 ? try string("pages_sha256") : nil,
            logicalHash: object["logical_hash"] is NSNull && object["replica"] != nil ? "" : try string("logical_hash"),
            header: header, pagesNew: try number("pages_new").intValue, bytesAdded: try number("bytes_added").int64Value,
            durationSeconds: try number("duration_seconds").doubleValue, strategy: try string("strategy"),
            verification: try string("verification"),
            replica: try (object["replica"] as? [String: Any]).map { json in
                guard let info = ReplicaInfo(json: json) else { throw damaged("field replica") }
                return info
            })
        guard (512...65536).contains(snapshot.pageSize), snapshot.pageSize & (snapshot.pageSize - 1) == 0,
              snapshot.pageCount >= 0, PageID(hex: snapshot.list) != nil else { throw damaged("page size, count or list") }
        guard (snapshot.databaseSHA256 ?? snapshot.pagesSHA256).flatMap({ Hex.decode($0) })?.count == 32 else {
            throw damaged(version == 1 ? "field database_sha256" : "field pages_sha256")
        }
        return snapshot
    }
}

/// The SHA-256 of a snapshot's page ids in page order (32 bytes each, as
/// stored): what a version-2 snapshot records in place of the file's
/// SHA-256. A file whose every page hashes to the id at its place in a list
/// with this digest is, page for page, the file the backup read.
struct PagesDigest {
    private var hasher = SHA256Hasher()
    init() {}
    mutating func add(_ id: PageID) {
        var words = (id.a.bigEndian, id.b.bigEndian, id.c.bigEndian, id.d.bigEndian)
        withUnsafeBytes(of: &words) { hasher.update($0) }
    }
    func finalizeHex() -> String { hasher.finalizeHex() }

    static func of<S: Sequence>(_ ids: S) -> String where S.Element == PageID {
        var digest = PagesDigest()
        for id in ids { digest.add(id) }
        return digest.finalizeHex()
    }
}
