// Helpers shared by the test targets: temporary folders, running the built
// litectl binary and the sqlite3 CLI (the independent oracle), and the real
// databases in ../shared/corpus/real.
import Foundation
import LitectlCore

/// Tests keep litectl's caches (the row sums of repository backups) out of
/// the home folder, in a folder of the test process's own, here and in the
/// litectl processes they start.
private let keepCachesOutOfHome: Void = {
    if getenv("LITECTL_CACHE_DIR") == nil {
        setenv("LITECTL_CACHE_DIR", FileManager.default.temporaryDirectory.path + "/litectl-test-cache-\(getpid())", 1)
    }
}()

/// A fresh temporary folder, removed when the value is deinitialized.
public final class TemporaryFolder: @unchecked Sendable {
    public let path: String

    public init(_ label: String = "test") throws {
        _ = keepCachesOutOfHome
        let base = FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/litectl-\(label)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// `path/name`.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Copies `source` into the folder under `name` (writable) and returns the copy's path.
    public func copy(_ source: String, as name: String? = nil) throws -> String {
        let destination = file(name ?? (source as NSString).lastPathComponent)
        try FileManager.default.copyItem(atPath: source, toPath: destination)
        chmod(destination, 0o644)
        return destination
    }

    /// Names of the files in the folder, sorted.
    public func listing() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }
}

/// The outcome of running a program.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    public var stdoutBytes: [UInt8]

    public init(status: Int32, stdout: String, stderr: String, stdoutBytes: [UInt8]) {
        self.status = status; self.stdout = stdout; self.stderr = stderr; self.stdoutBytes = stdoutBytes
    }
}

/// Runs `executable` with `arguments`, feeding `input` on stdin, and waits.
@discardableResult
public func runProcess(_ executable: String, _ arguments: [String], input: [UInt8]? = nil,
                       currentDirectory: String? = nil) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
    let out = Pipe(), err = Pipe(), inPipe = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = inPipe
    try process.run()
    // Read both pipes concurrently with writing stdin, so no side blocks.
    let group = DispatchGroup()
    nonisolated(unsafe) var outData = Data(), errData = Data()
    group.enter()
    DispatchQueue.global().async { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    group.enter()
    DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    if let input { try? inPipe.fileHandleForWriting.write(contentsOf: Data(input)) }
    try? inPipe.fileHandleForWriting.close()
    group.wait()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self), stdoutBytes: Array(outData))
}

/// The package's root folder (where Package.swift is).
public let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
    }
    return FileManager.default.currentDirectoryPath
}()

/// The litectl binary built with the tests: `LITECTL_BIN` when set, else the
/// one next to the test bundle, else `.build/debug/litectl`.
public let litectlBinary: String = {
    if let path = ProcessInfo.processInfo.environment["LITECTL_BIN"] { return path }
    let besideTests = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("litectl").path
    for candidate in [besideTests,
                      URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("litectl").path,
                      packageRoot + "/.build/debug/litectl"]
    where FileManager.default.isExecutableFile(atPath: candidate) {
        return candidate
    }
    return packageRoot + "/.build/debug/litectl"
}()

/// Runs the built litectl.
@discardableResult
public func litectl(_ arguments: String..., input: [UInt8]? = nil, in folder: String? = nil) throws -> ProcessResult {
    try runProcess(litectlBinary, arguments, input: input, currentDirectory: folder)
}

/// The sqlite3 CLI: the independent oracle.
public let sqlite3Binary = "/usr/bin/sqlite3"

/// Runs `sqlite3 ARGS...` with `input` on stdin; fails the caller when it exits non-zero.
@discardableResult
public func sqlite3(_ arguments: [String], input: String? = nil) throws -> String {
    let result = try runProcess(sqlite3Binary, arguments, input: input.map { Array($0.utf8) })
    guard result.status == 0 else {
        throw DatabaseError(code: .error, message: "sqlite3 \(arguments.joined(separator: " ")) failed: \(result.stderr)")
    }
    return result.stdout
}

/// One value from `sqlite3 DB SQL` (trimmed).
public func sqlite3Scalar(_ database: String, _ sql: String) throws -> String {
    try sqlite3(["-batch", database, sql]).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The real databases in ../shared/corpus/real (empty when that folder is absent).
public let realDatabases: [String] = {
    let folder = URL(fileURLWithPath: packageRoot).deletingLastPathComponent().appendingPathComponent("shared/corpus/real").path
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
    return names.filter { !$0.hasSuffix(".md") && !$0.hasPrefix(".") }
        .map { folder + "/" + $0 }
        .filter { var isDir: ObjCBool = false; return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue }
        .sorted()
}()

/// Asks `ready` every `every` seconds until it holds or `seconds` have passed;
/// whether it held (asked once more at the end). For tests that wait on
/// another process: never a timing assertion, only a bound on the wait.
public func waitUntil(_ seconds: Double, every: Double = 0.1, _ ready: () throws -> Bool) rethrows -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if try ready() { return true }
        Thread.sleep(forTimeInterval: every)
    }
    return try ready()
}

/// Makes a database at `path` with the sqlite3 CLI running `script`.
public func makeDatabase(_ path: String, _ script: String) throws {
    try sqlite3(["-batch", path], input: script)
}

/// The modification time and bytes of a file, to prove it was not touched.
public struct FileFingerprint: Equatable, Sendable {
    public var bytes: Data
    public var modified: Date?

    public init(_ path: String) throws {
        bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        modified = try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date
    }
}

/// A small deterministic random generator (SplitMix64), so that generated
/// test data, and failures, reproduce.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A sqlite3 shell kept running on a database, as another process that holds
/// it open (or locked) while a test runs litectl beside it.
public final class ShellSession {
    let process = Process()
    let input = Pipe(), output = Pipe()

    public init(_ database: String) throws {
        process.executableURL = URL(fileURLWithPath: sqlite3Binary)
        process.arguments = ["-batch", database]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// Runs `sql` in the shell and returns what it printed, once it is done.
    @discardableResult
    public func run(_ sql: String) -> String {
        let marker = "litectl-test-done"
        input.fileHandleForWriting.write(Data((sql + "\nSELECT '\(marker)';\n").utf8))
        var printed = ""
        while !printed.contains(marker) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += String(decoding: chunk, as: UTF8.self)
        }
        return printed.replacingOccurrences(of: marker + "\n", with: "")
    }

    /// Ends the shell (its open transaction, if any, rolls back).
    public func close() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    deinit { close() }
}
