// A small synchronous S3 client over async-http-client: path-style requests
// (ENDPOINT/BUCKET/KEY) signed with SigV4, retried with exponential backoff
// and jitter only for what can pass (throttling, 5xx answers, timeouts,
// connections dropped mid-request; `S3Failure` sorts transport errors), and
// every failure turned into one StoreError line. Callers are plain threads,
// never event-loop threads, so each request blocks on its future.
import AsyncHTTPClient
import Foundation
import LitectlCore
import NIOCore
import NIOHTTP1
import NIOSSL

public struct S3Tuning: Sendable {
    /// Attempts per request (the first included).
    public var attempts = 5
    /// The first backoff; each next one doubles, with up to 50% jitter.
    public var backoff = 0.2
    /// Seconds for a whole request (connecting has 3 s of it).
    public var requestTimeout = 120.0
    /// Bodies above this go up as multipart uploads, in parts of `partSize`.
    public var multipartThreshold = 16 << 20
    public var partSize = 8 << 20
    public init() {}
}

/// A request about to be tried again, for a note to the user (the client
/// itself never prints): `retrying PUT s3://b/r/packs/ab/... after HTTP 503
/// SlowDown (attempt 2 of 5)`.
public struct S3RetryNote: Sendable, CustomStringConvertible {
    public var method: String
    /// The object (`s3://BUCKET/PREFIX/KEY`) or the location the request is about.
    public var object: String
    /// What failed, in a few words (`HTTP 503 SlowDown`, `connection refused`).
    public var cause: String
    /// The attempt about to be made (2 for the first retry) and how many there are in all.
    public var attempt: Int
    public var attempts: Int
    /// Seconds until that attempt.
    public var delay: Double

    public var description: String { "retrying \(method) \(object) after \(cause) (attempt \(attempt) of \(attempts))" }
}

public final class S3Client: @unchecked Sendable {
    public let settings: S3Settings
    public let bucket: String
    public var tuning: S3Tuning
    /// Called before each retry, from the thread that makes the request.
    public let onRetry: (@Sendable (S3RetryNote) -> Void)?
    let baseURL: String
    let hostHeader: String
    let endpoint: S3Failure.Endpoint
    let http: HTTPClient
    private let answeredLock = NSLock()
    private var answeredFlag = false

    /// Whether the endpoint has answered a request (any HTTP status) in this
    /// run: from then on a refused connection is a server restarting, and retried.
    var hasAnswered: Bool {
        get { answeredLock.withLock { answeredFlag } }
        set { answeredLock.withLock { answeredFlag = newValue } }
    }

    nonisolated(unsafe) private static var clients: [String: HTTPClient] = [:]
    private static let clientsLock = NSLock()

    /// One HTTP client per trust setting for the process (connections pooled
    /// and reused): the system's CA roots, or a CA bundle (AWS_CA_BUNDLE).
    static func http(caBundle: String?) -> HTTPClient {
        clientsLock.withLock {
            if let client = clients[caBundle ?? ""] { return client }
            var configuration = HTTPClient.Configuration()
            configuration.timeout = .init(connect: .seconds(3), read: .seconds(60))
            configuration.decompression = .disabled
            // A connection that cannot be made fails the request at once, so
            // that `request` decides what is retried: the pool would keep trying
            // a refused port for the whole connect timeout, on every attempt.
            configuration.connectionPool.retryConnectionEstablishment = false
            if let caBundle {
                var tls = TLSConfiguration.makeClientConfiguration()
                tls.trustRoots = .file(caBundle)
                configuration.tlsConfiguration = tls
            }
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            clients[caBundle ?? ""] = client
            return client
        }
    }

    public init(settings: S3Settings, bucket: String, tuning: S3Tuning = S3Tuning(),
                onRetry: (@Sendable (S3RetryNote) -> Void)? = nil) {
        self.settings = settings; self.bucket = bucket; self.tuning = tuning; self.onRetry = onRetry
        let endpoint = settings.endpoint ?? "https://s3.\(settings.region).amazonaws.com"
        baseURL = endpoint
        let url = URL(string: endpoint)
        let isTLS = endpoint.hasPrefix("https")
        let defaultPort = isTLS ? 443 : 80
        hostHeader = (url?.host ?? "") + (url?.port.map { $0 == defaultPort ? "" : ":\($0)" } ?? "")
        // Messages name the endpoint: never with credentials (which AWSSettings refuses anyway).
        self.endpoint = S3Failure.Endpoint(url: URLRedaction.redacted(endpoint), host: url?.host ?? "", port: url?.port ?? defaultPort,
                                           isTLS: isTLS, caBundle: settings.caBundle)
        http = Self.http(caBundle: settings.caBundle)
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name }?.1 }
    }

    /// The S3 error code and message of an error body.
    static func errorDetail(_ body: [UInt8]) -> (code: String?, message: String?) {
        let text = String(decoding: body, as: UTF8.self)
        return (XML.first("Code", in: text), XML.first("Message", in: text))
    }

    /// One request, retried as described above. `what` names the object in errors.
    public func request(_ method: String, key: String?, query: [(String, String)] = [], headers extra: [(String, String)] = [],
                        body: [UInt8] = [], bodySHA256: [UInt8]? = nil, what: String) throws -> Response {
        let attempts = max(1, tuning.attempts)
        var lastProblem = "", lastLocation = what
        var delay = tuning.backoff
        for attempt in 1...attempts {
            switch try attemptOnce(method, key: key, query: query, headers: extra, body: body, bodySHA256: bodySHA256, what: what) {
            case .answer(let response):
                return response
            case .again(let cause, let text, let location):
                lastProblem = text
                lastLocation = location
                guard attempt < attempts else { break }
                let pause = delay * (1 + Double.random(in: 0..<0.5))
                delay *= 2
                onRetry?(S3RetryNote(method: method, object: what, cause: cause, attempt: attempt + 1, attempts: attempts, delay: pause))
                Thread.sleep(forTimeInterval: pause)
            }
        }
        throw StoreError(.unavailable, location: lastLocation, message: "\(lastProblem), after \(attempts) attempts")
    }

    enum Outcome {
        case answer(Response)
        /// Worth another attempt: the cause for the note, and the error's text and location if none passes.
        case again(cause: String, text: String, location: String)
    }

    /// One attempt: an answer, a failure worth retrying, or a thrown error that no retry can mend.
    func attemptOnce(_ method: String, key: String?, query: [(String, String)], headers extra: [(String, String)],
                     body: [UInt8], bodySHA256: [UInt8]? = nil, what: String) throws -> Outcome {
        let path = "/" + SigV4Signer.uriEncode(bucket, keepSlash: false)
            + (key.map { "/" + SigV4Signer.uriEncode($0, keepSlash: true) } ?? "")
        let queryString = SigV4Signer.canonicalQuery(query)
        let url = baseURL + path + (queryString.isEmpty ? "" : "?" + queryString)
        let payloadHash = bodySHA256.map { Hex.encode($0) } ?? SigV4Signer.sha256Hex(body)
        let amzDate = Self.amzDate(Date())
        var headers = extra + [("host", hostHeader), ("x-amz-date", amzDate), ("x-amz-content-sha256", payloadHash)]
        if let token = settings.credentials.sessionToken { headers.append(("x-amz-security-token", token)) }
        let signer = SigV4Signer(credentials: settings.credentials, region: settings.region)
        let signed = signer.sign(method: method, path: path, query: query, headers: headers, payloadHash: payloadHash, amzDate: amzDate)
        var httpHeaders = HTTPHeaders()
        for (name, value) in headers where name != "host" { httpHeaders.add(name: name, value: value) }
        httpHeaders.add(name: "authorization", value: signed.authorization)
        let response: HTTPClient.Response
        do {
            let request = try HTTPClient.Request(url: url, method: HTTPMethod(rawValue: method), headers: httpHeaders,
                                                 body: body.isEmpty && method != "PUT" && method != "POST" ? nil : .bytes(body))
            response = try http.execute(request: request, deadline: .now() + .milliseconds(Int64(tuning.requestTimeout * 1000))).wait()
        } catch {
            let failure = S3Failure.of(error, endpoint: endpoint)
            let location = failure.aboutEndpoint ? endpoint.url : what
            guard failure.isRetried(answeredBefore: hasAnswered) else {
                throw StoreError(.unavailable, location: location, message: failure.text)
            }
            return .again(cause: failure.cause, text: failure.text, location: location)
        }
        hasAnswered = true
        var bytes: [UInt8] = []
        if var buffer = response.body { bytes = buffer.readBytes(length: buffer.readableBytes) ?? [] }
        let status = Int(response.status.code)
        let result = Response(status: status, headers: response.headers.map { ($0.name, $0.value) }, body: bytes)
        // A body cut short (a dropped connection) is retried like any transient failure.
        if (200..<300).contains(status), method == "GET", let length = result.header("content-length").flatMap(Int.init), length != bytes.count {
            return .again(cause: "an answer cut short", text: "the answer was cut short (\(bytes.count) of \(length) bytes)", location: what)
        }
        if (200..<300).contains(status) { return .answer(result) }
        let detail = Self.errorDetail(bytes)
        let code = detail.code ?? "HTTP \(status)"
        if [429, 500, 502, 503, 504].contains(status) || ["SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable"].contains(code) {
            let text = "HTTP \(status) \(detail.code ?? "")".trimmingCharacters(in: .whitespaces)
            return .again(cause: text, text: text, location: what)
        }
        let why = [detail.code, detail.message].compactMap { $0 }.joined(separator: ": ")
        switch (status, detail.code) {
        case (404, "NoSuchBucket"?):
            throw StoreError(.noSuchContainer, location: what, message: "no such bucket \(bucket)")
        case (404, _) where method == "HEAD" || detail.code == "NoSuchKey" || detail.code == nil:
            throw StoreError(.notFound, location: what, message: "no such object")
        case (401, _), (403, _):
            throw StoreError(.denied, location: what, message: "access denied (\(why.isEmpty ? "HTTP \(status)" : why)); check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE) and the bucket's permissions")
        case (301, _), (307, _), (400, "AuthorizationHeaderMalformed"?):
            throw StoreError(.other, location: what, message: "wrong region or endpoint (\(why.isEmpty ? "HTTP \(status)" : why)); give --region or --endpoint")
        default:
            throw StoreError(.other, location: what, message: "HTTP \(status)\(why.isEmpty ? "" : " " + why)")
        }
    }

    static func amzDate(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ n: Int32, _ w: Int = 2) -> String { let s = String(n); return String(repeating: "0", count: max(0, w - s.count)) + s }
        return pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1) + pad(parts.tm_mday) + "T" + pad(parts.tm_hour) + pad(parts.tm_min) + pad(parts.tm_sec) + "Z"
    }

    // MARK: Operations

    /// `sha256`: the bytes' SHA-256, when the caller has it (their name):
    /// signed as the payload's hash, which S3 checks, instead of computed again.
    public func put(_ key: String, _ bytes: [UInt8], what: String, sha256: [UInt8]? = nil) throws {
        if bytes.count > tuning.multipartThreshold { return try putMultipart(key, bytes, what: what) }
        _ = try request("PUT", key: key, body: bytes, bodySHA256: sha256.flatMap { $0.count == 32 ? $0 : nil }, what: what)
    }

    func putMultipart(_ key: String, _ bytes: [UInt8], what: String) throws {
        let start = try request("POST", key: key, query: [("uploads", "")], what: what)
        guard let uploadID = XML.first("UploadId", in: String(decoding: start.body, as: UTF8.self)) else {
            throw StoreError(.other, location: what, message: "the server started no multipart upload")
        }
        do {
            var parts: [String] = []
            var offset = 0, number = 1
            while offset < bytes.count {
                let end = min(bytes.count, offset + tuning.partSize)
                let r = try request("PUT", key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)],
                                    body: Array(bytes[offset..<end]), what: what)
                guard let etag = r.header("etag") else { throw StoreError(.other, location: what, message: "a part came back without an ETag") }
                parts.append("<Part><PartNumber>\(number)</PartNumber><ETag>\(XML.escape(etag))</ETag></Part>")
                offset = end; number += 1
            }
            let document = "<CompleteMultipartUpload>\(parts.joined())</CompleteMultipartUpload>"
            let done = try request("POST", key: key, query: [("uploadId", uploadID)], body: Array(document.utf8), what: what)
            // S3 may answer 200 with an error document.
            if let code = XML.first("Code", in: String(decoding: done.body, as: UTF8.self)) {
                throw StoreError(.other, location: what, message: "multipart upload failed: \(code)")
            }
        } catch {
            _ = try? request("DELETE", key: key, query: [("uploadId", uploadID)], what: what)
            throw error
        }
    }

    public func get(_ key: String, range: (Int64, Int)? = nil, what: String) throws -> [UInt8] {
        var headers: [(String, String)] = []
        if let (offset, length) = range {
            guard length > 0 else { return [] }
            headers.append(("range", "bytes=\(offset)-\(offset + Int64(length) - 1)"))
        }
        return try request("GET", key: key, headers: headers, what: what).body
    }

    public func delete(_ key: String, what: String) throws {
        do { _ = try request("DELETE", key: key, what: what) } catch let error as StoreError where error.kind == .notFound {}
    }

    /// Every object under `prefix`, all pages of ListObjectsV2.
    public func list(prefix: String, maxKeys: Int? = nil, what: String) throws -> [StoredObject] {
        var out: [StoredObject] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            if let maxKeys { query.append(("max-keys", String(maxKeys))) }
            let text = String(decoding: try request("GET", key: nil, query: query, what: what).body, as: UTF8.self)
            for contents in XML.all("Contents", in: text) {
                guard let key = XML.first("Key", in: contents), let size = XML.first("Size", in: contents).flatMap({ Int64($0) }) else { continue }
                out.append(StoredObject(key: key, size: size))
            }
            token = XML.first("IsTruncated", in: text) == "true" ? XML.first("NextContinuationToken", in: text) : nil
        } while token != nil
        return out
    }

    public func createBucket(what: String) throws {
        var body: [UInt8] = []
        if settings.region != "us-east-1" {
            body = Array("<CreateBucketConfiguration><LocationConstraint>\(settings.region)</LocationConstraint></CreateBucketConfiguration>".utf8)
        }
        do { _ = try request("PUT", key: nil, body: body, what: what) } catch let error as StoreError
            where error.message.contains("BucketAlreadyOwnedByYou") {}
    }
}

/// Just enough XML for S3's answers: the text of elements by name, entities decoded.
enum XML {
    static func all(_ name: String, in text: String) -> [String] {
        var out: [String] = []
        var rest = text[...]
        while let open = rest.range(of: "<\(name)>"), let close = rest.range(of: "</\(name)>", range: open.upperBound..<rest.endIndex) {
            out.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return out
    }

    static func first(_ name: String, in text: String) -> String? { all(name, in: text).first.map(unescape) }

    static func unescape(_ s: String) -> String {
        guard s.contains("&") else { return s }
        var out = "", i = s.startIndex
        while i < s.endIndex {
            if s[i] == "&", let semi = s[i...].firstIndex(of: ";") {
                let entity = s[s.index(after: i)..<semi]
                var decoded: String?
                switch entity {
                case "amp": decoded = "&"
                case "lt": decoded = "<"
                case "gt": decoded = ">"
                case "quot": decoded = "\""
                case "apos": decoded = "'"
                default:
                    if entity.hasPrefix("#x"), let v = UInt32(entity.dropFirst(2), radix: 16), let u = UnicodeScalar(v) { decoded = String(u) }
                    else if entity.hasPrefix("#"), let v = UInt32(entity.dropFirst()), let u = UnicodeScalar(v) { decoded = String(u) }
                }
                if let decoded { out += decoded; i = s.index(after: semi); continue }
            }
            out.append(s[i]); i = s.index(after: i)
        }
        return out
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
