// A real S3 API server on loopback for the tests: moto's standalone server
// (`pip install 'moto[server]'`), started once per test process on a free
// port and stopped when the process ends (a watchdog ends it when our end of
// its stdin pipe closes, even after a crash). Each test makes its own bucket.
// Without moto_server installed, `shared` is nil and S3 tests skip.
import Foundation

public final class MotoServer: @unchecked Sendable {
    public let endpoint: String
    let process: Process
    let stdin: Pipe
    private static let counter = NSLock()
    nonisolated(unsafe) private static var made = 0

    /// nil when moto_server is not installed (S3 tests then skip), unless
    /// LITECTL_REQUIRE_S3 is set (CI): then a server that cannot start stops the run.
    public static let shared: MotoServer? = {
        let required = ProcessInfo.processInfo.environment["LITECTL_REQUIRE_S3"] != nil
        guard let path = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":")
            .map({ $0 + "/moto_server" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            if required { fatalError("LITECTL_REQUIRE_S3 is set but moto_server is not on PATH") }
            return nil
        }
        do { return try MotoServer(executable: path) } catch {
            if required { fatalError("LITECTL_REQUIRE_S3 is set but moto_server did not start: \(error)") }
            return nil
        }
    }()

    init(executable: String) throws {
        let port = try Self.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", """
            import signal, subprocess, sys
            # The test process may spawn us with SIGTERM blocked (a blocked mask is
            # inherited): unblock it for the server, or terminate() never stops it.
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            p = subprocess.Popen([sys.argv[1], "-H", "127.0.0.1", "-p", sys.argv[2]], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            sys.stdin.read()
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill(); p.wait()
            """, executable, String(port)]
        stdin = Pipe()
        process.standardInput = stdin
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if Self.answers(port) { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw POSIXError(.ETIMEDOUT)
    }

    deinit { try? stdin.fileHandleForWriting.close() }

    /// A new, empty bucket with a unique name.
    public func makeBucket() throws -> String {
        let n = Self.counter.withLock { Self.made += 1; return Self.made }
        let name = "litectl-test-\(getpid())-\(n)"
        let r = try runProcess("/usr/bin/curl", ["-sf", "-X", "PUT", "\(endpoint)/\(name)"])
        guard r.status == 0 else { throw POSIXError(.EIO) }
        return name
    }

    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func answers(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
