// The recent segments of a chain gathered into one, with their pages stored
// again together. Each segment's pack holds the versions of its second side
// by side, so zstd stores each page's first version of the second whole and
// the later ones as their changed bytes; but a page changed every second is
// stored whole every second. A gathering stores every version of one page of
// the whole period (a minute by default) side by side in new blobs, one new
// pack (or a few), one index object and one segment for the period's states;
// the shipper then removes the segments and index objects it replaces, and,
// one gathering later (a restore that read the old index objects has had a
// minute to read their packs), the packs it replaces (Shipper.reclaim).
//
// The pages come from the follower's spool (an unlinked temporary file of
// the raw pages it recorded, PageSpool), not from the repository: a
// gathering reads no object, and runs on a thread of its own beside the
// follower and the shipper, as pure computation; the follower hands its
// objects to the shipper as one unit, in write order. Part of the replicate
// capability, built on Repository/'s pack assembler, sealed objects and segments.
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A temporary file unlinked as soon as it is made: it takes no memory, and
/// nothing of it is left after the process ends, however it ends. What is
/// appended is written 128 KiB at a time (a write of each 4 KiB page was a
/// system call and a page-cache step each, 6 % of the follower's CPU); a
/// read writes what it needs first. One thread appends, another may read.
final class SpoolFile: @unchecked Sendable {
    private let descriptor: Int32
    /// In messages: the file has no name once made.
    let path = TemporaryFiles.folder(nil) + "/(a spool file)"
    private let lock = NSLock()
    private let pending: UnsafeMutableRawBufferPointer
    private var pendingCount = 0
    /// Bytes in the file itself.
    private var written: Int64 = 0
    static let bufferSize = 128 << 10

    init() throws {
        do { descriptor = try TemporaryFiles.anonymous() } catch let error as DatabaseError {
            throw StoreError(.io, location: error.path ?? TemporaryFiles.folder(nil), message: error.message)
        }
        pending = .allocate(byteCount: Self.bufferSize, alignment: 16)
    }

    deinit { close(descriptor); pending.deallocate() }

    /// Bytes appended.
    var size: Int64 { lock.withLock { written + Int64(pendingCount) } }

    /// Appends `bytes`; returns where they start.
    @discardableResult
    func append(_ bytes: UnsafeRawBufferPointer) throws -> Int64 {
        lock.lock(); defer { lock.unlock() }
        let start = written + Int64(pendingCount)
        if pendingCount + bytes.count > pending.count { try writePending() }
        if bytes.count >= pending.count {
            try write(bytes)
        } else if let base = bytes.baseAddress {
            (pending.baseAddress! + pendingCount).copyMemory(from: base, byteCount: bytes.count)
            pendingCount += bytes.count
        }
        return start
    }

    /// Writes the bytes waiting in the buffer (under the lock).
    private func writePending() throws {
        guard pendingCount > 0 else { return }
        try write(UnsafeRawBufferPointer(rebasing: pending[..<pendingCount]))
        pendingCount = 0
    }

    /// Writes `bytes` at the file's end (under the lock).
    private func write(_ bytes: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(written) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw StoreError(.io, location: path, message: "cannot write a spool file: \(String(cString: strerror(errno)))")
            }
            done += n
        }
        written += Int64(bytes.count)
    }

    /// Reads `count` bytes at `offset` into `buffer` at `at`.
    func read(offset: Int64, count: Int, into buffer: UnsafeMutableRawBufferPointer, at: Int = 0) throws {
        precondition(at + count <= buffer.count)
        try lock.withLock { if offset + Int64(count) > written { try writePending() } }
        var done = 0
        while done < count {
            let n = pread(descriptor, buffer.baseAddress! + at + done, count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw StoreError(.io, location: path, message: "cannot read a spool file: \(n < 0 ? String(cString: strerror(errno)) : "it is shorter than written")")
            }
            done += n
        }
    }

    /// `count` bytes at `offset`.
    func read(offset: Int64, count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { try read(offset: offset, count: count, into: $0) }
        return bytes
    }
}

/// The raw pages the follower recorded since the last gathering, in a spool file.
final class PageSpool: @unchecked Sendable {
    struct Entry {
        var page: UInt32
        var number: UInt64
        var id: PageID
        var offset: Int64
    }
    private(set) var entries: [Entry] = []
    let pageSize: Int
    private let file: SpoolFile
    var size: Int64 { file.size }

    init(pageSize: Int) throws {
        self.pageSize = pageSize
        file = try SpoolFile()
    }

    /// Adds a page of state `number`.
    func append(page: UInt32, number: UInt64, id: PageID, bytes: UnsafeRawBufferPointer) throws {
        precondition(bytes.count == pageSize)
        let offset = try file.append(bytes)
        entries.append(Entry(page: page, number: number, id: id, offset: offset))
    }

    /// Reads the page of `entry` into `buffer` at `at`.
    func read(_ entry: Entry, into buffer: UnsafeMutableRawBufferPointer, at: Int) throws {
        try file.read(offset: entry.offset, count: pageSize, into: buffer, at: at)
    }
}

/// One gathering, on a thread of its own.
final class Gathering: @unchecked Sendable {
    struct Job {
        var repository: Repository
        var spool: PageSpool
        var chain: String
        var hostname: String
        var path: String
        var states: [ReplicaState]
        var replaced: Replacement
    }
    enum Outcome {
        /// The unit to ship: .begin, packs, index, segment, .replace, .end.
        case ready([UploadItem])
        case failed(String)
    }
    private let thread: NamedThread<Outcome>

    init(_ job: Job) {
        thread = NamedThread("litectl-gather") {
            do { return .ready(try Self.run(job)) } catch {
                return .failed((error as? StoreError)?.description ?? "\(error)")
            }
        }
    }

    /// The outcome, when the gathering is done.
    var finished: Outcome? { thread.result }

    /// Waits for the outcome.
    func wait() -> Outcome { thread.wait() }

    /// The objects of a gathering: the spool's pages, each page's versions
    /// side by side and its newest in front, in blobs and packs; their index
    /// object; the segment of every state of the period.
    static func run(_ job: Job) throws -> [UploadItem] {
        let repository = job.repository, spool = job.spool, pageSize = spool.pageSize
        var order = spool.entries
        order.sort { ($0.page, $0.number) < ($1.page, $1.number) }
        let perBlob = repository.blobPages(pageSize: pageSize)
        let compressor = ZstdCompressor(level: Repository.blobLevel)
        var items: [UploadItem] = [.begin]
        // The new packs wait in a spool file of their own, read back one at
        // a time as the shipper writes them: memory stays flat. Packs of at
        // most 1 MiB: the shipper holds one, and the HTTP client its copy,
        // while the follower goes on (memory stays low).
        let output = try SpoolFile()
        let assembler = PackAssembler(repository: repository, size: min(repository.packSize, 1 << 20), closing: .beforeOverflow) { pack in
            let offset = try pack.bytes.withUnsafeBytes { try output.append($0) }
            items.append(.putSpooled(key: pack.key, file: output, offset: offset, count: pack.bytes.count))
        }
        var group = [UInt8](repeating: 0, count: perBlob * pageSize), groupIDs: [PageID] = []
        var emitted = Set<PageID>()
        func flushGroup() throws {
            guard !groupIDs.isEmpty else { return }
            try group.withUnsafeBytes {
                try assembler.add(pages: UnsafeRawBufferPointer(rebasing: $0[0..<groupIDs.count * pageSize]), pageIDs: groupIDs,
                                  pageSize: pageSize, compressor: compressor)
            }
            groupIDs.removeAll(keepingCapacity: true)
        }
        // Each page's versions newest first, its newest blob's worth (its
        // head) in front of every older one: the front of the gathering, in
        // page order, holds each page as the period left it, so a restore of
        // the period's last state (or of a later one, or of a fold's
        // snapshot) reads the front only. A page's versions stay side by
        // side (zstd stores the later ones of a blob as their changed
        // bytes); a page with more versions than a blob holds starts one
        // blob more than it would in one run, stored whole.
        var front: [PageSpool.Entry] = [], back: [PageSpool.Entry] = []
        var start = 0
        while start < order.count {
            var end = start
            while end < order.count && order[end].page == order[start].page { end += 1 }
            let newestFirst = order[start..<end].reversed()
            front += newestFirst.prefix(perBlob)
            back += newestFirst.dropFirst(perBlob)
            start = end
        }
        order = []
        for region in [front, back] {
            for entry in region where emitted.insert(entry.id).inserted {
                try group.withUnsafeMutableBytes { try spool.read(entry, into: $0, at: groupIDs.count * pageSize) }
                groupIDs.append(entry.id)
                if groupIDs.count == perBlob { try flushGroup() }
            }
            try flushGroup()
        }
        try assembler.flush()
        if let index = try assembler.sealIndex() { items.append(.put(index, role: .gatheredIndex)) }
        let segment = Segment(chain: job.chain, hostname: job.hostname, path: job.path, pageSize: pageSize, states: job.states)
        let sealed = try repository.sealSegment(segment)
        items.append(.put(sealed, role: .gatheredSegment))
        var replaced = job.replaced
        replaced.segments.removeAll { $0 == sealed.key }
        items.append(.replace(replaced))
        items.append(.end(ShippedUnit(kind: .merge, chain: job.chain, segment: sealed.key)))
        return items
    }
}
