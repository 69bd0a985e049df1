// The fault-injecting HTTP proxy of the S3 tests (faultproxy.py beside this
// file) in front of the moto server: error statuses, stalls and connections
// dropped mid-body, chosen by request number. It stops when this object goes.
import Foundation

public final class FaultProxy: @unchecked Sendable {
    public let endpoint: String
    public let port: Int
    let process: Process
    let stdin: Pipe

    /// `arguments`: e.g. ["--fail-first", "2"], ["--drop-every", "3"], ["--stall-every", "4", "--stall", "3"].
    /// `port`: listen there (a proxy started again where one was stopped: an outage, then recovery).
    public init(upstream: MotoServer, arguments: [String], port: Int? = nil) throws {
        let port = try port ?? MotoServer.freePort()
        self.port = port
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

    /// Stops listening now (and waits for the process to end).
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
