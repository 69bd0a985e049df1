// Where a repository's objects live: a folder on a disk, or a bucket on an
// S3-compatible server (the `LitectlS3` target). The repository code sees only
// this protocol: whole objects written once under content-derived names, read
// whole or by byte range, listed by prefix, deleted.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One stored object: its key (relative to the repository root, `/`-separated) and size.
public struct StoredObject: Sendable, Equatable {
    public var key: String
    public var size: Int64
    public init(key: String, size: Int64) { self.key = key; self.size = size }
}

/// An object store holding one repository. Keys are relative to the
/// repository root (`config`, `packs/ab/ab12...`, `snapshots/...`).
/// Implementations retry what is worth retrying themselves and throw
/// `StoreError` with a one-line description naming the location.
public protocol ObjectStore: AnyObject, Sendable {
    /// The repository as the user named it (a folder path or `s3://bucket/prefix`), for messages.
    var location: String { get }
    /// Writes `bytes` under `key`, replacing any object there. When it
    /// returns, the object is durable (fsynced, or acknowledged by the server).
    func put(_ key: String, _ bytes: [UInt8]) throws
    /// The same, for bytes whose SHA-256 the caller has already computed
    /// (an object named by it): a store that sends it along (S3's signed
    /// payload hash) need not compute it again; the server checks it.
    func put(_ key: String, _ bytes: [UInt8], sha256: [UInt8]) throws
    /// The whole object; `StoreError.Kind.notFound` when there is none.
    func get(_ key: String) throws -> [UInt8]
    /// `length` bytes from `offset` (fewer only at the end of the object).
    func get(_ key: String, offset: Int64, length: Int) throws -> [UInt8]
    /// The same range into `buffer` (grown as needed, its storage reused
    /// from call to call); returns how many bytes were read into its start.
    func get(_ key: String, offset: Int64, length: Int, into buffer: inout [UInt8]) throws -> Int
    /// Every object whose key starts with `prefix`, in key order.
    func list(prefix: String) throws -> [StoredObject]
    /// Removes the object; removing a missing object is not an error.
    func delete(_ key: String) throws
}

extension ObjectStore {
    public func put(_ key: String, _ bytes: [UInt8], sha256: [UInt8]) throws { try put(key, bytes) }

    public func get(_ key: String, offset: Int64, length: Int, into buffer: inout [UInt8]) throws -> Int {
        let bytes = try get(key, offset: offset, length: length)
        if buffer.count < bytes.count { buffer += [UInt8](repeating: 0, count: bytes.count - buffer.count) }
        buffer.withUnsafeMutableBytes { out in bytes.withUnsafeBytes { out.copyMemory(from: $0) } }
        return bytes.count
    }
}

/// A failure of an object store, as one line: `LOCATION/KEY: what happened`.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public enum Kind: String, Sendable {
        /// No such object (HTTP 404 on a key, ENOENT).
        case notFound = "not-found"
        /// Refused: bad credentials, no permission (HTTP 401/403, EACCES).
        case denied
        /// The bucket or folder itself does not exist.
        case noSuchContainer = "no-such-container"
        /// The server could not be reached or kept failing after retries.
        case unavailable
        /// A local I/O error (full disk, ...).
        case io
        /// Anything else (an unexpected answer).
        case other
    }

    public var kind: Kind
    /// The object concerned (`s3://bucket/prefix/key`, or a file path), or the location.
    public var location: String
    public var message: String

    public init(_ kind: Kind, location: String, message: String) {
        self.kind = kind
        self.location = location
        self.message = message
    }

    public var description: String { "\(location): \(message)" }
}
