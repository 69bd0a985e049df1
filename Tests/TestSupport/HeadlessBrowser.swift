// A real browser for the tests of HTML reports: Debian's headless Chromium
// renders a page from disk to a PNG and dumps its DOM after the page's script
// ran, while a listener on loopback, set as the browser's proxy for every URL,
// records any request the page makes (a page that fetches nothing leaves it
// silent). Tests skip when no Chromium is installed, unless
// LITECTL_REQUIRE_BROWSER is set (CI): then they fail.
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a page did in the browser.
public struct BrowserRender: Sendable {
    /// The DOM after the page's script ran, serialized (`--dump-dom`).
    public var dom: String
    /// Lines the page wrote to the console, CSP violations included.
    public var console: [String]
    /// The first line of each request that reached the proxy.
    public var requests: [String]
    /// The PNG screenshot.
    public var screenshot: String
}

public enum HeadlessBrowser {
    /// The browser: $LITECTL_CHROMIUM, else Debian's chromium-headless-shell or chromium.
    public static let path: String? = {
        let environment = ProcessInfo.processInfo.environment
        let candidates = [environment["LITECTL_CHROMIUM"], "/usr/bin/chromium-headless-shell", "/usr/bin/chromium"].compactMap { $0 }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// True when the tests must run in a browser (CI sets LITECTL_REQUIRE_BROWSER).
    public static let required = (ProcessInfo.processInfo.environment["LITECTL_REQUIRE_BROWSER"] ?? "").isEmpty == false

    /// True when browser tests should run: a browser is there, or one is required
    /// (and its absence then fails the test).
    public static let shouldRun = path != nil || required

    /// Renders the HTML file at `page` (its URL followed by `fragment`, e.g.
    /// `#sort=objects-table:4`) in a window of `width` x `height`,
    /// saves a screenshot at `screenshot`, and returns the DOM, the console
    /// and the requests. `scratch` holds the browser's throwaway profile.
    public static func render(_ page: String, fragment: String = "", screenshot: String, width: Int = 1280,
                              height: Int = 1600, scratch: String) throws -> BrowserRender {
        guard let path else {
            throw BrowserError("no headless Chromium (install chromium-headless-shell; LITECTL_REQUIRE_BROWSER is set)")
        }
        let proxy = try RequestRecorder()
        defer { proxy.stop() }
        let profile = scratch + "/chromium-profile-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let url = URL(fileURLWithPath: page).absoluteString + fragment
        let result = try runProcess("/usr/bin/timeout", [
            "120", path,
            "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--mute-audio",
            "--user-data-dir=\(profile)",
            "--proxy-server=http://127.0.0.1:\(proxy.port)", "--proxy-bypass-list=<-loopback>",
            "--enable-logging=stderr", "--v=0",
            "--virtual-time-budget=5000", "--window-size=\(width),\(height)",
            "--screenshot=\(screenshot)", "--dump-dom", url,
        ])
        guard result.status == 0 else {
            throw BrowserError("chromium exited with status \(result.status): \(result.stderr.suffix(2_000))")
        }
        let console = result.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") }.map(String.init)
        return BrowserRender(dom: result.stdout, console: console, requests: proxy.stop(), screenshot: screenshot)
    }
}

public struct BrowserError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// A folder under the package's .build for what tests keep for a person to
/// look at (screenshots): $LITECTL_TEST_OUTPUT/NAME, or .build/test-output/NAME.
public func testOutputFolder(_ name: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["LITECTL_TEST_OUTPUT"] ?? packageRoot + "/.build/test-output"
    let folder = base + "/" + name
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}

/// A TCP listener on loopback that accepts connections and records the first
/// line of what each sends (a proxy request: `GET http://...` or `CONNECT
/// host:443`), answering nothing.
final class RequestRecorder: @unchecked Sendable {
    let port: Int
    private let socket: Int32
    private let lock = NSLock()
    private var lines: [String] = []
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        socket = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in self.acceptLoop() }
        thread.start()
    }

    private func acceptLoop() {
        defer { done.signal() }
        while true {
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 100)
            if lock.withLock({ stopped }) { return }
            guard ready > 0 else { continue }
            let client = accept(socket, nil, nil)
            guard client >= 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 1024)
            var reader = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            var line = "(connection without a request)"
            if poll(&reader, 1, 2_000) > 0 {
                let n = read(client, &buffer, buffer.count)
                if n > 0 {
                    line = String(decoding: buffer.prefix(n), as: UTF8.self).split(separator: "\r\n").first.map(String.init) ?? ""
                }
            }
            close(client)
            lock.withLock { lines.append(line) }
        }
    }

    /// Stops listening (once) and returns the requests seen.
    @discardableResult
    func stop() -> [String] {
        let first = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        if first {
            done.wait()
            close(socket)
        }
        return lock.withLock { lines }
    }
}
