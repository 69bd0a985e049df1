// A small synchronous S3 client over async-http-client: path-style requests
// (ENDPOINT/BUCKET/KEY) signed with SigV4, retried with exponential backoff
// and jitter on throttling, 5xx answers, timeouts and dropped connections, and
// every failure turned into one StoreError line. Callers are plain threads,
// never event-loop threads, so each request blocks on its future.
import AsyncHTTPClient
import Foundation
import LitectlCore
import NIOCore
import NIOHTTP1

public struct S3Tuning: Sendable {
    /// Attempts per request (the first included).
    public var attempts = 5
    /// The first backoff; each next one doubles, with up to 50% jitter.
    public var backoff = 0.2
    /// Seconds for a whole request (connecting has 3 s, within which
    /// async-http-client retries a refused connection itself).
    public var requestTimeout = 120.0
    /// Bodies above this go up as multipart uploads, in parts of `partSize`.
    public var multipartThreshold = 16 << 20
    public var partSize = 8 << 20
    public init() {}
}

public final class S3Client: @unchecked Sendable {
    public let settings: S3Settings
    public let bucket: String
    public var tuning: S3Tuning
    let baseURL: String
    let hostHeader: String

    /// One HTTP client for the process (its connections are pooled and reused).
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(3), read: .seconds(60))
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    public init(settings: S3Settings, bucket: String, tuning: S3Tuning = S3Tuning()) {
        self.settings = settings; self.bucket = bucket; self.tuning = tuning
        let endpoint = settings.endpoint ?? "https://s3.\(settings.region).amazonaws.com"
        baseURL = endpoint
        let url = URL(string: endpoint)
        let defaultPort = endpoint.hasPrefix("https") ? 443 : 80
        hostHeader = (url?.host ?? "") + (url?.port.map { $0 == defaultPort ? "" : ":\($0)" } ?? "")
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
                        body: [UInt8] = [], what: String) throws -> Response {
        let path = "/" + SigV4Signer.uriEncode(bucket, keepSlash: false)
            + (key.map { "/" + SigV4Signer.uriEncode($0, keepSlash: true) } ?? "")
        let queryString = SigV4Signer.canonicalQuery(query)
        let url = baseURL + path + (queryString.isEmpty ? "" : "?" + queryString)
        let payloadHash = SigV4Signer.sha256Hex(body)
        var lastProblem = ""
        var delay = tuning.backoff
        for attempt in 1...max(1, tuning.attempts) {
            if attempt > 1 {
                Thread.sleep(forTimeInterval: delay * (1 + Double.random(in: 0..<0.5)))
                delay *= 2
            }
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
                response = try Self.http.execute(request: request, deadline: .now() + .milliseconds(Int64(tuning.requestTimeout * 1000))).wait()
            } catch {
                let problem = Self.describe(error, endpoint: baseURL)
                lastProblem = problem.text
                if problem.retry { continue }
                throw StoreError(.unavailable, location: what, message: problem.text)
            }
            var bytes: [UInt8] = []
            if var buffer = response.body { bytes = buffer.readBytes(length: buffer.readableBytes) ?? [] }
            let status = Int(response.status.code)
            let result = Response(status: status, headers: response.headers.map { ($0.name, $0.value) }, body: bytes)
            // A body cut short (a dropped connection) is retried like any transient failure.
            if (200..<300).contains(status), method == "GET", let length = result.header("content-length").flatMap(Int.init), length != bytes.count {
                lastProblem = "the answer was cut short (\(bytes.count) of \(length) bytes)"
                continue
            }
            if (200..<300).contains(status) { return result }
            let detail = Self.errorDetail(bytes)
            let code = detail.code ?? "HTTP \(status)"
            if [429, 500, 502, 503, 504].contains(status) || ["SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable"].contains(code) {
                lastProblem = "HTTP \(status) \(detail.code ?? "")".trimmingCharacters(in: .whitespaces)
                continue
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
        throw StoreError(.unavailable, location: what, message: "\(lastProblem), after \(tuning.attempts) attempts")
    }

    /// One line for a transport error, and whether it is worth a retry.
    static func describe(_ error: any Error, endpoint: String) -> (text: String, retry: Bool) {
        let text = String(describing: error)
        let lower = text.lowercased()
        if lower.contains("refused") { return ("cannot reach \(endpoint): connection refused", true) }
        if lower.contains("timeout") || lower.contains("timedout") || lower.contains("deadline") {
            return ("no answer from \(endpoint) in time", true)
        }
        if lower.contains("remoteconnectionclosed") || lower.contains("connection reset") || lower.contains("eof") || lower.contains("closed") {
            return ("\(endpoint) dropped the connection", true)
        }
        if lower.contains("dns") || lower.contains("resolve") || lower.contains("getaddrinfo") || lower.contains("unknown host") {
            return ("cannot reach \(endpoint): unknown host", false)
        }
        if lower.contains("ssl") || lower.contains("tls") || lower.contains("certificate") || lower.contains("handshake") {
            return ("cannot reach \(endpoint): TLS failed (\(text.prefix(120)))", false)
        }
        if error is HTTPClientError { return ("cannot reach \(endpoint): \(text.prefix(120))", true) }
        return ("cannot reach \(endpoint): \(text.split(whereSeparator: \.isNewline).first ?? "")".prefix(200).description, true)
    }

    static func amzDate(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ n: Int32, _ w: Int = 2) -> String { let s = String(n); return String(repeating: "0", count: max(0, w - s.count)) + s }
        return pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1) + pad(parts.tm_mday) + "T" + pad(parts.tm_hour) + pad(parts.tm_min) + pad(parts.tm_sec) + "Z"
    }

    // MARK: Operations

    public func put(_ key: String, _ bytes: [UInt8], what: String) throws {
        if bytes.count > tuning.multipartThreshold { return try putMultipart(key, bytes, what: what) }
        _ = try request("PUT", key: key, body: bytes, what: what)
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
