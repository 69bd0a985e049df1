// Streaming passes over files in fixed-size chunks (memory does not grow with
// the file): its SHA-256, a copy, the whole of a small file or pipe. The gzip
// streams of backups extend it in Backup/GzipStreams.swift.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes and SHA-256 of a stream.
public struct StreamDigest: Sendable, Equatable {
    public var bytes: Int64
    public var sha256: String
}

public enum FileStreams {
    static let chunkSize = 1 << 20

    /// SHA-256 and size of the file at `path`.
    public static func digest(of path: String) throws -> StreamDigest {
        let fd = try openForReading(path)
        defer { close(fd) }
        var hasher = SHA256Hasher()
        var total: Int64 = 0
        try readChunks(fd, path: path) { chunk in
            hasher.update(chunk)
            total += Int64(chunk.count)
        }
        return StreamDigest(bytes: total, sha256: hasher.finalizeHex())
    }

    /// Copies the bytes of the file at `path` into `output`.
    public static func copy(_ path: String, into output: TemporaryFile) throws {
        let fd = try openForReading(path)
        defer { close(fd) }
        try readChunks(fd, path: path) { try output.write($0) }
    }

    static func openForReading(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            throw DatabaseError(code: .cantopen, message: err == ENOENT ? "no such file" : String(cString: strerror(err)), path: path)
        }
        return fd
    }

    static func readChunks(_ fd: Int32, path: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer.baseAddress!, chunkSize)
            if n < 0 {
                if errno == EINTR { continue }
                throw DatabaseError(code: .ioerr, message: "read failed: \(String(cString: strerror(errno)))", path: path)
            }
            if n == 0 { return }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
    }
}

extension FileStreams {
    /// The whole file (for small files: manifests, metrics, patches), read
    /// until its end: a pipe or FIFO (`<(...)`) reads as a file does.
    public static func readAll(_ path: String) throws -> [UInt8] {
        let fd = try openForReading(path)
        defer { close(fd) }
        var out: [UInt8] = []
        try readChunks(fd, path: path) { out.append(contentsOf: $0) }
        return out
    }
}
