// A failed attempt to talk to an S3 endpoint, in words, and whether another
// attempt can pass: the transport half of the S3 client's retry policy (the
// HTTP-status half is in S3Client.request). docs/repo.md, "Locations and
// credentials", states the policy for users.
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// What a transport error (no HTTP answer) means for the S3 client.
struct S3Failure: Sendable {
    enum Retry: Sendable {
        /// Can pass with time: a timeout, an answer cut short.
        case always
        /// The endpoint cannot be reached or does not answer (refused, no
        /// route, no answer to connecting, a connection closed or reset before
        /// an answer, an answer that is not HTTP). Before the endpoint has
        /// answered in this run that is a wrong endpoint (a port, a scheme) or
        /// a server that is down, and waiting only delays the error; after it
        /// answered, it is a connection dropped mid-request or a server
        /// restarting mid-run, and the usual backoff gives it time.
        case ifAnsweredBefore
        /// Cannot pass: a host name that does not resolve, a TLS failure.
        case never
    }

    var retry: Retry
    /// The cause in a few words, for retry notes ("connection refused").
    var cause: String
    /// The whole explanation, after the location ("cannot connect: connection refused").
    var text: String
    /// Whether it concerns the endpoint as a whole (named in the error instead of the object).
    var aboutEndpoint: Bool

    init(_ retry: Retry, cause: String, text: String? = nil, aboutEndpoint: Bool = true) {
        self.retry = retry
        self.cause = cause
        self.text = text ?? "cannot connect: " + cause
        self.aboutEndpoint = aboutEndpoint
    }

    /// Whether another attempt is worth making.
    func isRetried(answeredBefore: Bool) -> Bool {
        switch retry {
        case .always: return true
        case .ifAnsweredBefore: return answeredBefore
        case .never: return false
        }
    }

    /// Where the failed request went: what the words below need to be precise.
    struct Endpoint: Sendable {
        /// As the user gave it (`https://host:port`), for messages.
        var url: String
        var host: String
        var port: Int
        var isTLS: Bool
        /// The CA bundle in use instead of the system's roots (AWS_CA_BUNDLE), if any.
        var caBundle: String?
    }

    /// Sorts a transport error. A failed certificate check is looked into
    /// (`TLSDiagnosis`) to say whether the certificate expired or is untrusted.
    static func of(_ error: any Error, endpoint: Endpoint) -> S3Failure {
        switch error {
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return of(first.error, endpoint: endpoint) }
            if error.dnsAError != nil || error.dnsAAAAError != nil {
                return S3Failure(.never, cause: "no such host \(error.host)",
                                 text: "cannot connect: no such host \(error.host) (check the endpoint's host name)")
            }
        case let error as IOError:
            switch error.errnoCode {
            case ECONNREFUSED: return S3Failure(.ifAnsweredBefore, cause: "connection refused")
            case ENETUNREACH: return S3Failure(.ifAnsweredBefore, cause: "network unreachable")
            case EHOSTUNREACH: return S3Failure(.ifAnsweredBefore, cause: "no route to host")
            case ETIMEDOUT: return S3Failure(.ifAnsweredBefore, cause: "no answer to connecting")
            case ECONNRESET, EPIPE, ECONNABORTED: return closed(endpoint)
            default: break
            }
        case let error as HTTPClientError:
            switch error {
            case .connectTimeout:
                return S3Failure(.ifAnsweredBefore, cause: "no answer to connecting within 3 s")
            case .readTimeout, .writeTimeout, .deadlineExceeded, .getConnectionFromPoolTimeout:
                return S3Failure(.always, cause: "no answer in time", text: "no answer from \(endpoint.url) in time", aboutEndpoint: false)
            case .remoteConnectionClosed, .uncleanShutdown:
                return closed(endpoint)
            case .tlsHandshakeTimeout:
                return S3Failure(.never, cause: "no answer to the TLS handshake",
                                 text: "TLS handshake failed: the server did not answer it (does it speak TLS on this port?)")
            default: break
            }
        case let error as ChannelError:
            switch error {
            case .connectTimeout: return S3Failure(.ifAnsweredBefore, cause: "no answer to connecting within 3 s")
            case .eof, .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed: return closed(endpoint)
            default: break
            }
        case let error as NIOSSLError:
            switch error {
            case .handshakeFailed(let reason): return tls(reason, endpoint: endpoint)
            case .uncleanShutdown: return closed(endpoint)
            default: break
            }
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return S3Failure(.never, cause: "certificate not for \(endpoint.host)",
                             text: "the server's certificate is not issued for \(endpoint.host); give the endpoint by a name the certificate holds, or fix the certificate")
        case HTTPParserError.invalidEOFState, HTTPParserError.closedConnection:
            // The connection closed in the middle of an answer.
            return S3Failure(.always, cause: "an answer cut short", text: "the answer was cut short", aboutEndpoint: false)
        case is HTTPParserError:
            return S3Failure(.ifAnsweredBefore, cause: "the answer is not HTTP",
                             text: endpoint.isTLS ? "the answer is not HTTP"
                                : "the answer is not HTTP; if the server speaks TLS on this port, give \(switchScheme(endpoint.url))")
        default: break
        }
        // Anything else is unexpected: said as it is, and not retried.
        let first = String(describing: error).split(whereSeparator: \.isNewline).first.map(String.init) ?? "unknown error"
        return S3Failure(.never, cause: String(first.prefix(120)), text: "cannot connect: " + first.prefix(200))
    }

    /// The connection closed or reset before an answer: mid-request once the
    /// endpoint has answered, else most likely plain HTTP sent to a TLS port.
    static func closed(_ endpoint: Endpoint) -> S3Failure {
        S3Failure(.ifAnsweredBefore, cause: "connection closed",
                  text: "the server closed the connection without answering"
                    + (endpoint.isTLS ? "" : "; if it speaks TLS on this port, give \(switchScheme(endpoint.url))"))
    }

    /// `https://` for `http://` and the other way round.
    static func switchScheme(_ url: String) -> String {
        url.hasPrefix("https://") ? "http://" + url.dropFirst(8) : "https://" + url.dropFirst(7)
    }

    /// A failed TLS handshake in words, with what to do about it.
    static func tls(_ reason: BoringSSLError, endpoint: Endpoint) -> S3Failure {
        var codes: [String] = []
        if case .sslError(let stack) = reason { codes = stack.map { reasonCode(String(describing: $0)) } }
        if codes.contains(where: { ["WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "PACKET_LENGTH_TOO_LONG", "UNEXPECTED_RECORD", "RECORD_TOO_LARGE"].contains($0) }) {
            return S3Failure(.never, cause: "TLS handshake failed",
                             text: "TLS handshake failed: the server does not speak TLS on this port; if it serves plain HTTP, give \(switchScheme(endpoint.url))")
        }
        if codes.contains(where: { $0.contains("EOF during handshake") }) || reason == .syscallError || reason == .zeroReturn {
            return S3Failure(.never, cause: "TLS handshake failed",
                             text: "TLS handshake failed: the server closed the connection (does it speak TLS on this port?)")
        }
        if codes.contains("CERTIFICATE_VERIFY_FAILED") {
            return certificate(endpoint: endpoint)
        }
        let words = codes.first.map { $0.lowercased().replacingOccurrences(of: "_", with: " ") } ?? String(describing: reason)
        return S3Failure(.never, cause: "TLS handshake failed", text: "TLS handshake failed: \(words)")
    }

    /// The reason of a BoringSSL error line (`error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at ...`),
    /// or the line itself when it has none.
    static func reasonCode(_ line: String) -> String {
        guard let marker = line.range(of: "OPENSSL_internal:") else { return line }
        return String(line[marker.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" })
    }

    /// The server's certificate failed the check: looks at it to say why.
    static func certificate(endpoint: Endpoint) -> S3Failure {
        let now = time(nil)
        let chain = TLSDiagnosis.presentedChain(host: endpoint.host, port: endpoint.port) ?? []
        if let expired = chain.first(where: { $0.notValidAfter < now }) {
            let which = expired == chain.first ? "the server's certificate" : "a certificate in the server's chain"
            return S3Failure(.never, cause: "certificate expired",
                             text: "\(which) expired on \(utc(expired.notValidAfter)); renew it on the server (or check this machine's clock)")
        }
        if let early = chain.first(where: { $0.notValidBefore > now }) {
            let which = early == chain.first ? "the server's certificate" : "a certificate in the server's chain"
            return S3Failure(.never, cause: "certificate not yet valid",
                             text: "\(which) is valid only from \(utc(early.notValidBefore)); check this machine's clock")
        }
        if let caBundle = endpoint.caBundle {
            return S3Failure(.never, cause: "certificate not trusted",
                             text: "the server's certificate is not signed by an authority in the CA bundle \(caBundle) (AWS_CA_BUNDLE); give the bundle that holds its CA certificate")
        }
        return S3Failure(.never, cause: "certificate not trusted",
                         text: "the server's certificate is not signed by an authority this machine trusts (self-signed, or a private CA); if you trust it, give its CA certificate in AWS_CA_BUNDLE")
    }

    /// `2026-11-27 18:53 UTC`.
    static func utc(_ t: time_t) -> String {
        var t = t
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(pad(parts.tm_mon + 1))-\(pad(parts.tm_mday)) \(pad(parts.tm_hour)):\(pad(parts.tm_min)) UTC"
    }
}
