// A repository under s3://BUCKET/PREFIX: the ObjectStore of the core over the
// S3 client. Keys map to PREFIX/key; errors name s3://BUCKET/PREFIX/key.
import LitectlCore

public final class S3ObjectStore: ObjectStore, @unchecked Sendable {
    public let location: String
    public let client: S3Client
    let prefix: String

    /// Parses `s3://BUCKET[/PREFIX]`.
    public static func parse(_ url: String) throws -> (bucket: String, prefix: String) {
        guard url.hasPrefix("s3://") else { throw StoreError(.other, location: URLRedaction.redacted(url), message: "not an s3:// URL") }
        if let problem = URLRedaction.credentialProblem(url) { throw StoreError(.other, location: "repository URL", message: problem) }
        let rest = url.dropFirst(5)
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let bucket = String(parts[0])
        guard (3...63).contains(bucket.count), bucket.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "-" || $0 == "." }) else {
            throw StoreError(.other, location: URLRedaction.redacted(url), message: "not a valid bucket name (3-63 lower-case letters, digits, dots and hyphens): give s3://BUCKET/PREFIX")
        }
        var prefix = parts.count > 1 ? String(parts[1]) : ""
        while prefix.hasSuffix("/") { prefix.removeLast() }
        return (bucket, prefix)
    }

    /// `onRetry` hears of each request about to be tried again (for a note on a terminal).
    public init(url: String, options: S3Options, tuning: S3Tuning = S3Tuning(),
                onRetry: (@Sendable (S3RetryNote) -> Void)? = nil) throws {
        let (bucket, prefix) = try Self.parse(url)
        location = "s3://" + bucket + (prefix.isEmpty ? "" : "/" + prefix)
        self.prefix = prefix.isEmpty ? "" : prefix + "/"
        client = S3Client(settings: try AWSSettings.resolve(options, location: location), bucket: bucket, tuning: tuning,
                          onRetry: onRetry)
    }

    func name(_ key: String) -> String { location + "/" + key }

    public func put(_ key: String, _ bytes: [UInt8]) throws { try client.put(prefix + key, bytes, what: name(key)) }

    public func put(_ key: String, _ bytes: [UInt8], sha256: [UInt8]) throws {
        try client.put(prefix + key, bytes, what: name(key), sha256: sha256)
    }

    public func get(_ key: String) throws -> [UInt8] { try client.get(prefix + key, what: name(key)) }

    public func get(_ key: String, offset: Int64, length: Int) throws -> [UInt8] {
        try client.get(prefix + key, range: (offset, length), what: name(key))
    }

    public func list(prefix listPrefix: String) throws -> [StoredObject] {
        try client.list(prefix: prefix + listPrefix, what: location).map {
            StoredObject(key: String($0.key.dropFirst(prefix.count)), size: $0.size)
        }.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
    }

    public func delete(_ key: String) throws { try client.delete(prefix + key, what: name(key)) }

    /// Creates the bucket when it does not exist (tests; `repo init` expects an existing bucket).
    public func createBucketIfMissing() throws { try client.createBucket(what: "s3://" + client.bucket) }
}
