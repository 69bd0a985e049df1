// The fault-injecting HTTP proxy of the S3 tests (faultproxy.py beside this
// file) in front of the moto server: error statuses, stalls and connections
// dropped mid-body, chosen by request number; over TLS when given a
// certificate. It stops when this object goes, or at `stop()`.
import Foundation

public final class FaultProxy: @unchecked Sendable {
    public let endpoint: String
    let process: Process
    let stdin: Pipe

    /// `arguments`: e.g. ["--fail-first", "2"], ["--drop-every", "3"], ["--stall-every", "4", "--stall", "3"].
    /// `port`: a given one (a server coming back where it was), else a free one.
    /// `certificate`: speak HTTPS with it.
    public init(upstream: MotoServer, arguments: [String], port: Int? = nil, certificate: TestCertificate? = nil) throws {
        let port = try port ?? MotoServer.freePort()
        endpoint = (certificate == nil ? "http" : "https") + "://127.0.0.1:\(port)"
        let upstreamPort = String(upstream.endpoint.split(separator: ":").last!)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("faultproxy.py").path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        var tls: [String] = []
        if let certificate { tls = ["--cert", certificate.certificate, "--key", certificate.key] }
        process.arguments = [script, String(port), upstreamPort] + arguments + tls
        stdin = Pipe()
        let out = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let ready = out.fileHandleForReading.availableData
        guard String(decoding: ready, as: UTF8.self).contains("ready") else { throw POSIXError(.EIO) }
    }

    /// The port the proxy listens on.
    public var port: Int { Int(endpoint.split(separator: ":").last!)! }

    /// Stops the proxy and waits until its port is closed (it can be started again on the same port: an outage, then recovery).
    public func stop() {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    deinit {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
    }
}
