// Diff rows written to a temporary file and read back: where the residue of a
// keyless table (KeylessResidue) goes once it outgrows its memory, so that
// only the rows that differ are ever sorted, in bounded memory, instead of
// SQLite sorting every row of both sides. Each row is stored as a RowBatch
// holds it: its size, its columns' offsets, its bytes.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An append-only file of rows of `columns` columns, removed when let go (or
/// on a signal; a file a killed diff left is removed by the next one that spills).
final class RowSpill {
    static let stem = "litectl-diff-spill"
    let columns: Int
    private let file: TemporaryFile
    /// Bytes written to the file so far (the buffer not counted).
    private(set) var written: Int64 = 0
    private var buffer: [UInt8] = []
    /// Rows appended.
    private(set) var rows = 0

    /// A new spill file in $TMPDIR (else /tmp), where SQLite's own sorter spills too.
    init(columns: Int) throws {
        var folder = "/tmp"
        if let tmp = getenv("TMPDIR").map({ String(cString: $0) }), !tmp.isEmpty { folder = tmp }
        TemporaryFiles.removeStale(in: folder, stem: Self.stem)
        file = try TemporaryFile(in: folder, stem: Self.stem, permissions: 0o600)
        self.columns = columns
        buffer.reserveCapacity(16 << 10)
    }

    deinit { file.discard() }

    /// Where the next row will start (`reader(from:to:)` takes such offsets).
    var end: Int64 { written + Int64(buffer.count) }

    func append(_ row: DiffRow) throws {
        precondition(row.count == columns)
        let start = row.offsets[0], size = row.offsets[row.count] - start
        func int(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { buffer.append(contentsOf: $0) } }
        int(size)
        for k in 0...columns { int(row.offsets[k] - start) }
        buffer.append(contentsOf: UnsafeBufferPointer(start: row.bytes + start, count: size))
        rows += 1
        if buffer.count >= 16 << 10 { try flush() }
    }

    /// Writes what is buffered; call before reading.
    func flush() throws {
        guard !buffer.isEmpty else { return }
        try buffer.withUnsafeBytes { try file.write($0) }
        written += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    /// The rows written between two offsets that `end` gave, in order.
    func reader(from: Int64, to: Int64) -> Reader {
        Reader(descriptor: file.descriptor, path: file.path, columns: columns, from: from, to: to)
    }

    /// Reads rows back one at a time; each row is valid until the next `next`.
    final class Reader {
        private let descriptor: Int32
        private let path: String
        private let columns: Int
        private var position: Int64
        private let end: Int64
        /// Grows to the largest row; small, as a merge reads many runs at once.
        private var buffer = [UInt8](repeating: 0, count: 8 << 10)
        private var start = 0, count = 0
        private let batch: RowBatch

        fileprivate init(descriptor: Int32, path: String, columns: Int, from: Int64, to: Int64) {
            self.descriptor = descriptor
            self.path = path
            self.columns = columns
            position = from
            end = to
            batch = RowBatch(columns: columns, byteCapacity: 1 << 10)
        }

        /// The next row, or nil after the last.
        func next() throws -> DiffRow? {
            guard Int64(count - start) > 0 || position < end else { return nil }
            let header = 4 * (columns + 2)
            try fill(header)
            let size = Int(load(start))
            try fill(header + size)
            batch.removeAll()
            batch.reserve(size)
            batch.reserveOffsets(columns + 1)
            buffer.withUnsafeBytes { raw in
                (batch.bytes).update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + start + header, count: size)
            }
            for k in 0...columns { batch.offsets[k] = Int(load(start + 4 * (k + 1))) }
            batch.offsetCount = columns + 1
            batch.byteCount = size
            batch.rows = 1
            start += header + size
            return batch.row(0)
        }

        private func load(_ at: Int) -> UInt32 {
            buffer.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
        }

        /// Makes the next `want` bytes of the region lie in the buffer from `start`.
        private func fill(_ want: Int) throws {
            guard count - start < want else { return }
            // Keep what is left, at the front, then read after it.
            let left = count - start
            if left > 0 { buffer.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: $0.baseAddress! + start, byteCount: left) } }
            start = 0
            count = left
            if buffer.count < want { buffer += [UInt8](repeating: 0, count: want - buffer.count) }
            while count < want {
                let room = min(buffer.count - count, Int(end - position))
                guard room > 0 else {
                    throw DatabaseError(code: .ioerr, message: "the diff's temporary file is shorter than written", path: path)
                }
                let n = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + count, room, off_t(position)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    // errno holds a cause only when pread failed; 0 bytes is an early end.
                    let cause = n < 0 ? String(cString: strerror(errno)) : "it ends before what was written"
                    throw DatabaseError(code: .ioerr, message: "cannot read the diff's temporary file: \(cause)", path: path)
                }
                count += n
                position += Int64(n)
            }
        }
    }
}
