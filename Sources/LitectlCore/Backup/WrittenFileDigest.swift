// The SHA-256 of a backup destination computed from the writes that make it,
// as they are made: the manifest's hash without a second pass over the file.

/// The SHA-256 of a file that starts empty, computed from the writes that
/// fill it. It holds only for the way the backup API writes its destination:
/// page 1 is written last (at commit; it is predicted before the copy
/// starts and compared at the end), every other page once and in file order,
/// with gaps (the page holding the pending byte at 1 GiB) left as holes that
/// read as zeros. Anything else (a page rewritten after a restart, a
/// truncation, page 1 different from the prediction, a size other than what
/// was hashed) makes `result` nil, and the caller hashes the finished file.
/// Without `hashesFile`, only the observer is told of the pages (a repository
/// whose snapshots record their pages' ids instead of the file's SHA-256):
/// the same checks hold, and the result's `sha256` is empty.
struct WrittenFileDigest {
    let predictedFirstPage: [UInt8]
    let hashesFile: Bool
    /// Told of every page after the first, in order, as it is hashed (holes
    /// as pages of zeros); page 1 is the caller's to read once the copy is done.
    var observer: (any WrittenPageObserver)?
    private var hasher = SHA256Hasher()
    /// Bytes hashed so far, page 1 included.
    private var end: Int64
    /// Page 1 as last written.
    private var firstPage: [UInt8]?
    private var broken = false

    init(predictedFirstPage: [UInt8], hashesFile: Bool = true) {
        self.predictedFirstPage = predictedFirstPage
        self.hashesFile = hashesFile
        end = Int64(predictedFirstPage.count)
        if hashesFile { hasher.update(predictedFirstPage) }
    }

    var pageSize: Int { predictedFirstPage.count }

    /// Whether the observer is still told of the pages (false once either gave up).
    var followsPages: Bool { !broken && (observer?.following ?? false) }

    /// `bytes` were written at `offset`. `prepared`: what the observer's
    /// `prepare` made of these bytes' pages (`preparedStride` bytes a page), when it ran.
    mutating func wrote(_ bytes: UnsafeRawBufferPointer, at offset: Int64, prepared: UnsafeRawPointer? = nil) {
        guard !broken, !bytes.isEmpty else { return }
        var bytes = bytes, offset = offset, prepared = prepared
        if offset < Int64(pageSize) {
            // Only whole writes of page 1 are followed (SQLite writes whole pages).
            guard offset == 0, bytes.count >= pageSize else { broken = true; return }
            firstPage = Array(bytes[0..<pageSize])
            bytes = UnsafeRawBufferPointer(rebasing: bytes[pageSize...])
            offset = Int64(pageSize)
            prepared = prepared.map { $0 + (observer?.preparedStride ?? 0) }
            if bytes.isEmpty { return }
        }
        guard offset >= end else { broken = true; return }  // rewritten: the hash already has the old bytes
        if offset > end { hashZeros(offset - end) }
        if hashesFile { hasher.update(bytes) }
        if let observer {
            let size = Int64(pageSize)
            guard offset % size == 0, Int64(bytes.count) % size == 0 else { broken = true; return }
            observer.wrote(bytes, firstPage: Int(offset / size) + 1, pageSize: pageSize, prepared: prepared)
        }
        end += Int64(bytes.count)
    }

    /// The file was truncated to `size` bytes.
    mutating func truncated(to size: Int64) {
        if size < end { broken = true }
    }

    /// The digest, when the finished file of `fileSize` bytes is exactly what was hashed.
    func result(fileSize: Int64) -> StreamDigest? {
        guard !broken, fileSize == end, let firstPage, firstPage == predictedFirstPage else { return nil }
        return StreamDigest(bytes: end, sha256: hashesFile ? hasher.finalizeHex() : "")
    }

    private mutating func hashZeros(_ count: Int64) {
        let zeros = [UInt8](repeating: 0, count: Int(min(count, 1 << 16)))
        var left = hashesFile ? count : 0
        while left > 0 {
            let n = Int(min(left, Int64(zeros.count)))
            zeros.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            left -= Int64(n)
        }
        if let observer {
            let size = Int64(pageSize)
            guard end % size == 0, count % size == 0 else { broken = true; return }
            let page = [UInt8](repeating: 0, count: pageSize)
            for k in 0..<Int(count / size) {
                page.withUnsafeBytes { observer.wrote($0, firstPage: Int(end / size) + 1 + k, pageSize: pageSize, prepared: nil) }
            }
        }
        end += count
    }
}

/// Receives the pages of a copy as they are written (see `WrittenFileDigest`).
protocol WrittenPageObserver: AnyObject, Sendable {
    /// `bytes` are whole pages, from page number `firstPage` on, in order.
    /// `prepared`: `prepare`'s output for exactly these pages, or nil when it did not run.
    func wrote(_ bytes: UnsafeRawBufferPointer, firstPage: Int, pageSize: Int, prepared: UnsafeRawPointer?)
    /// Bytes of `prepare`'s output per page (0: there is no such work).
    var preparedStride: Int { get }
    /// Whether later pages still matter (false once the observer gave up);
    /// asked on the thread that calls `wrote`.
    var following: Bool { get }
    /// The part of the work on whole pages that needs no order (a page's
    /// id): `preparedStride` bytes a page into `output`. Called on any
    /// thread, for several runs of pages at once, before `wrote` of them.
    func prepare(_ pages: UnsafeRawBufferPointer, pageSize: Int, into output: UnsafeMutableRawPointer)
}
