// AWS Signature Version 4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html):
// the canonical request, the string to sign, the derived signing key and the
// Authorization header. S3 signs the path encoded once (no double encoding)
// and the payload's SHA-256 sent as x-amz-content-sha256.
import Crypto

public struct AWSCredentials: Sendable, Equatable {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String?
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID; self.secretAccessKey = secretAccessKey; self.sessionToken = sessionToken
    }
}

public struct SigV4Signer: Sendable {
    public var credentials: AWSCredentials
    public var region: String
    public var service: String

    public init(credentials: AWSCredentials, region: String, service: String = "s3") {
        self.credentials = credentials; self.region = region; self.service = service
    }

    /// RFC 3986 percent-encoding of everything but unreserved characters
    /// (and `/` when `keepSlash`), as SigV4 requires.
    public static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 15)])
            }
        }
        return out
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    public static func sha256Hex(_ bytes: [UInt8]) -> String { hex(SHA256.hash(data: bytes)) }

    /// The canonical query string of already-decoded (name, value) pairs.
    public static func canonicalQuery(_ query: [(String, String)]) -> String {
        query.map { (uriEncode($0.0, keepSlash: false), uriEncode($0.1, keepSlash: false)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// The pieces of a signature, for tests against published vectors.
    public struct Signed: Sendable {
        public var canonicalRequest: String
        public var stringToSign: String
        public var signature: String
        public var authorization: String
    }

    /// Signs a request. `path` is the encoded path as sent (S3: each segment
    /// encoded once); `headers` must include host and x-amz-date (and for S3
    /// x-amz-content-sha256); all of them are signed.
    public func sign(method: String, path: String, query: [(String, String)], headers: [(String, String)],
                     payloadHash: String, amzDate: String) -> Signed {
        var merged: [String: [String]] = [:]
        for (name, value) in headers {
            let trimmed = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            merged[name.lowercased(), default: []].append(trimmed)
        }
        let names = merged.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(merged[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let canonicalRequest = [method, path.isEmpty ? "/" : path, Self.canonicalQuery(query), canonicalHeaders, signedHeaders, payloadHash]
            .joined(separator: "\n")
        let date = String(amzDate.prefix(8))
        let scope = "\(date)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, Self.sha256Hex(Array(canonicalRequest.utf8))].joined(separator: "\n")
        func hmac(_ key: [UInt8], _ text: String) -> [UInt8] {
            Array(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: key)))
        }
        let kDate = hmac(Array(("AWS4" + credentials.secretAccessKey).utf8), date)
        let kSigning = hmac(hmac(hmac(kDate, region), service), "aws4_request")
        let signature = Self.hex(hmac(kSigning, stringToSign))
        let authorization = "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return Signed(canonicalRequest: canonicalRequest, stringToSign: stringToSign, signature: signature, authorization: authorization)
    }
}
