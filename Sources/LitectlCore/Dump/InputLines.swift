// A file (or standard input) read in 1 MiB blocks and handed out line by
// line as bytes, so that loading a dump of any size keeps memory to the
// longest line. Bytes, not Strings: TEXT in a script or CSV file is exact.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Lines of a file, each with its `\n` (the last one may lack it).
final class InputLines {
    /// The name used in messages.
    let name: String
    private let descriptor: Int32
    private let owned: Bool
    private var buffer: [UInt8] = []
    /// Where a block is read before it joins `buffer` (one copy, no zero fill).
    private let block = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 1 << 20)
    private var start = 0
    /// Where the search for the next newline resumes (no byte is scanned twice).
    private var searched = 0
    private var atEnd = false
    /// 1-based number of the line `next()` returned last.
    private(set) var lineNumber = 0

    /// Opens `path` for reading; "-" is standard input.
    init(path: String) throws {
        name = path == "-" ? "standard input" : path
        if path == "-" {
            descriptor = 0
            owned = false
        } else {
            var info = stat()
            if stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
                throw DatabaseError(code: .cantopen, message: "is a folder, not a file", path: path)
            }
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                let err = errno
                throw DatabaseError(code: .cantopen, message: err == ENOENT ? "no such file" : "cannot open: \(String(cString: strerror(err)))",
                                    path: path)
            }
            descriptor = fd
            owned = true
        }
    }

    deinit {
        if owned { close(descriptor) }
        block.deallocate()
    }

    /// The next line, or nil at the end of the input.
    func next() throws -> ArraySlice<UInt8>? {
        while true {
            let from = max(start, searched)
            let found = buffer.withUnsafeBytes { raw -> Int? in
                guard from < raw.count, let hit = memchr(raw.baseAddress! + from, 0x0A, raw.count - from) else { return nil }
                return UnsafeRawPointer(hit) - raw.baseAddress!
            }
            if let newline = found {
                let line = buffer[start...newline]
                start = newline + 1
                searched = start
                lineNumber += 1
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = buffer[start...]
                start = buffer.count
                lineNumber += 1
                return line
            }
            searched = buffer.count
            try fill()
        }
    }

    /// Appends the next block to the buffer (dropping what was handed out).
    private func fill() throws {
        if start > 0 {
            buffer.removeSubrange(0..<start)
            searched -= start
            start = 0
        }
        var n = 0
        repeat {
            n = read(descriptor, block.baseAddress, block.count)
        } while n < 0 && errno == EINTR
        if n < 0 {
            let err = errno
            throw DatabaseError(code: .ioerr, message: "cannot read: \(String(cString: strerror(err)))", path: name)
        }
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: block[..<n]))
        if n == 0 { atEnd = true }
    }
}
