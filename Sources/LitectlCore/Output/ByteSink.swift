// Buffered output to a file descriptor: writers append bytes, the sink writes
// them in 64 KiB blocks, so streaming millions of rows costs few system calls.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where formatted output goes.
public protocol ByteSink: AnyObject {
    func write(_ bytes: [UInt8])
    func flush() throws
}

/// A sink over a file descriptor (stdout by default), buffered.
public final class FileDescriptorSink: ByteSink {
    let descriptor: Int32
    var buffer: [UInt8] = []
    let capacity: Int
    /// The first write error (EPIPE when the reader went away, say).
    public private(set) var failure: Int32?

    public init(descriptor: Int32 = 1, capacity: Int = 1 << 16) {
        self.descriptor = descriptor
        self.capacity = capacity
        buffer.reserveCapacity(capacity)
    }

    deinit { try? flush() }

    public func write(_ bytes: [UInt8]) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= capacity { try? flush() }
    }

    public func flush() throws {
        guard !buffer.isEmpty, failure == nil else { buffer.removeAll(keepingCapacity: true); return }
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                failure = errno
                break
            }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
        if let failure { throw DatabaseError(code: .ioerr, message: "cannot write output: \(String(cString: strerror(failure)))") }
    }
}

/// A sink that keeps nothing (`-q`: the rows are computed, nothing printed).
public final class DiscardSink: ByteSink {
    public init() {}
    public func write(_ bytes: [UInt8]) {}
    public func flush() throws {}
}

/// A sink that collects everything in memory (for tests and small reports).
public final class MemorySink: ByteSink {
    public private(set) var bytes: [UInt8] = []
    public init() {}
    public func write(_ bytes: [UInt8]) { self.bytes.append(contentsOf: bytes) }
    public func flush() throws {}
    public var text: String { String(decoding: bytes, as: UTF8.self) }
}
