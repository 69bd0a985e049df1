// The fault-injecting HTTP proxy of the S3 tests (faultproxy.py beside this
// file) in front of the moto server: error statuses, stalls and connections
// dropped mid-body, chosen by request number. It stops when this object goes.
import Foundation

public final class FaultProxy: @unchecked Sendable {
    public let endpoint: String
    let process: Process
    let stdin: Pipe

    /// `arguments`: e.g. ["--fail-first", "2"], ["--drop-every", "3"], ["--stall-every", "4", "--stall", "3"].
    public init(upstream: MotoServer, arguments: [String]) throws {
        let port = try MotoServer.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        let upstreamPort = String(upstream.endpoint.split(separator: ":").last!)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("faultproxy.py").path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script, String(port), upstreamPort] + arguments
        stdin = Pipe()
        let out = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let ready = out.fileHandleForReading.availableData
        guard String(decoding: ready, as: UTF8.self).contains("ready") else { throw POSIXError(.EIO) }
    }

    deinit {
        try? stdin.fileHandleForWriting.close()
        process.terminate()
    }
}
