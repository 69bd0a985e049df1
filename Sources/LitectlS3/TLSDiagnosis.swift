// Why a server's certificate failed the check: BoringSSL reports only
// CERTIFICATE_VERIFY_FAILED to the HTTP client, so after such a failure a
// second handshake, which accepts nothing, fetches the certificates the server
// presents so that their dates can be read (expired, not yet valid, or else
// untrusted).
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

enum TLSDiagnosis {
    /// The certificates the server at `host:port` presents, leaf first, not
    /// judged; nil when they cannot be had within `timeout` (the caller then
    /// says "untrusted" without the details).
    static func presentedChain(host: String, port: Int, timeout: TimeAmount = .seconds(2)) -> [NIOSSLCertificate]? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        // Not .none: the callback below replaces the check, and NIOSSL skips it under .none.
        configuration.certificateVerification = .noHostnameVerification
        guard let context = try? NIOSSLContext(configuration: configuration) else { return nil }
        let seen = Seen()
        // SNI takes a host name, never an IP address.
        let serverName = (try? SocketAddress(ipAddress: host, port: port)) == nil ? host : nil
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(context: context, serverHostname: serverName,
                                                          customVerificationCallback: { chain, verdict in
                        seen.chain = chain
                        // Refused: this handshake only looks, it never carries a request.
                        verdict.succeed(.failed)
                    })
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        guard let channel = try? bootstrap.connect(host: host, port: port).wait() else { return nil }
        // The refused check closes the channel; a server that stalls is cut off.
        let stop = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        try? channel.closeFuture.wait()
        stop.cancel()
        return seen.chain
    }

    /// The chain, handed from the event loop to the waiting thread.
    private final class Seen: @unchecked Sendable {
        private let lock = NSLock()
        private var value: [NIOSSLCertificate]?
        var chain: [NIOSSLCertificate]? {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }
}
