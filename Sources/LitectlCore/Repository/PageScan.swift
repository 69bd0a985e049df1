// A backup's copy turned into page references and stored pages: each page's
// id (SHA-256, or HMAC-SHA256 when encrypted) looked up in the index, the
// pages the repository lacks gathered in file order into blobs, compressed
// on every core and written into packs, and the copy's SHA-256. Two ways:
// when the copy was written in order (the usual case), the ids come from the
// writes themselves (PageCollector, on the copy's hashing thread) and only
// the new pages and the changed pages of tables are read back (from the
// source's snapshot when the copy kept only page 1, each checked against its
// id); otherwise one scan reads the whole copy. The logical hash's row sums
// (PageRowSums) ride along either way.
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct PageScan {
    var refs = PageRefs()
    var pageSize = 0
    var pageCount = 0
    var newPages = 0
    var packBytes: Int64 = 0
    var sha256 = ""
    var firstPage: [UInt8]?
    var writer: PackWriter
    /// The ids came from the copy's writes (`storeCollected`), not a scan of it.
    var fromWrites = false
}

/// Where a page goes: the index (by position), this run's new pages, or the
/// pages other backups of the run stored. Not thread-safe: one owner at a time.
struct PageClassifier {
    let base: RepoIndex
    let shared: SharedIndex
    let checkOthers: Bool
    let writer: PackWriter

    init(index: SharedIndex, writer: PackWriter) {
        base = index.base; shared = index; checkOthers = index.hasAdded; self.writer = writer
    }

    /// Appends the page's reference; true when it is new (claimed: its bytes must be stored).
    func classify(_ id: PageID, into refs: inout PageRefs) -> Bool {
        if let p = base.position(of: id) {
            refs.refs.append(UInt32(p))
        } else if let p = writer.position(of: id) {
            refs.refs.append(PageRefs.own | UInt32(p))
        } else if checkOthers && shared.addedContains(id) {
            refs.appendOther(id)
        } else {
            let p = writer.claim(id)!
            refs.refs.append(PageRefs.own | UInt32(p))
            return true
        }
        return false
    }
}

/// Gathers claimed pages into blobs (in claim order) and stores them: the
/// full blobs of a batch compressed on every core, then added in order.
final class BlobBuilder {
    let repository: Repository
    let writer: PackWriter
    let pageSize: Int
    private let groupPages: Int
    private let log2: UInt8
    private var group: [UInt8] = []
    private var groupFirst = 0
    private var full: [(first: Int, pages: [UInt8])] = []
    /// How many threads may compress at once.
    let workers: Int
    private let compressors: [ZstdCompressor]

    init(repository: Repository, writer: PackWriter, pageSize: Int) {
        self.repository = repository; self.writer = writer; self.pageSize = pageSize
        groupPages = repository.blobPages(pageSize: pageSize)
        log2 = UInt8(pageSize.trailingZeroBitCount)
        group.reserveCapacity(groupPages * pageSize)
        workers = min(ProcessInfo.processInfo.activeProcessorCount, 4)
        compressors = (0..<workers).map { _ in ZstdCompressor(level: Repository.blobLevel, contentChecksum: writer.frameChecksums) }
    }

    /// Buffers of blobs stored, for the next ones (`recycle`): a fresh one
    /// for each blob cost a page fault and a zeroing of every page of it.
    private var spare: [[UInt8]] = []

    /// Adds the next claimed page (its claim position and bytes).
    func append(_ position: Int, _ page: UnsafeRawBufferPointer) {
        if group.isEmpty { groupFirst = position }
        group.append(contentsOf: page)
        if group.count == groupPages * pageSize {
            full.append((groupFirst, group))
            group = spare.popLast() ?? []
            group.reserveCapacity(groupPages * pageSize)
        }
    }

    /// Takes back the buffers of blobs `takeFull` gave once they are stored.
    func recycle(_ blobs: inout [(first: Int, pages: [UInt8])]) {
        while var blob = blobs.popLast() {
            blob.pages.removeAll(keepingCapacity: true)
            if spare.count < 8 { spare.append(blob.pages) }
        }
    }

    /// The blobs filled so far, to be compressed by the caller
    /// (`compress(_:worker:)`) and then added in order (`add(_:compressed:)`).
    func takeFull() -> [(first: Int, pages: [UInt8])] {
        defer { full.removeAll() }
        return full
    }

    /// One of the blobs `takeFull` gave, compressed with worker `w`'s compressor
    /// (w < `workers`; from any thread, one thread per worker at a time).
    func compress(_ blob: (first: Int, pages: [UInt8]), worker w: Int) throws -> [UInt8] {
        try blob.pages.withUnsafeBytes { try repository.blob(of: $0, compressor: compressors[w]) }
    }

    /// Adds blobs that `takeFull` gave, compressed, in the order it gave them.
    func add(_ blobs: [(first: Int, pages: [UInt8])], compressed: [[UInt8]]) throws {
        for (j, item) in blobs.enumerated() {
            try writer.add(blob: compressed[j], first: item.first, pages: item.pages.count / pageSize, pageSizeLog2: log2)
        }
    }

    /// Stores the blobs filled so far.
    func drain() throws {
        var blobs = takeFull()
        try store(blobs)
        recycle(&blobs)
    }

    /// Stores everything, the last blob partly filled.
    func finish() throws {
        try drain()
        if !group.isEmpty { try store([(groupFirst, group)]); group.removeAll() }
    }

    private func store(_ blobs: [(first: Int, pages: [UInt8])]) throws {
        guard !blobs.isEmpty else { return }
        let made = Locked([[UInt8]?](repeating: nil, count: blobs.count))
        let failure = Locked<(any Error)?>(nil)
        let n = blobs.count >= 2 ? min(workers, blobs.count) : 1
        nonisolated(unsafe) let builder = self
        // Blobs are taken one at a time as workers come free (quick_check may
        // hold a core meanwhile, so a fixed share each would wait on the slowest).
        let next = Locked(0)
        DispatchQueue.concurrentPerform(iterations: n) { w in
            while true {
                let j = next.withLock { k -> Int in k += 1; return k - 1 }
                guard j < blobs.count else { return }
                do {
                    let blob = try builder.compress(blobs[j], worker: w)
                    made.withLock { $0[j] = blob }
                } catch { failure.withLock { $0 = error } }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        try add(blobs, compressed: made.withLock { $0 }.map { $0! })
    }
}

/// The ids of a copy's pages taken from its writes (pages 2 to the last:
/// computed by the copy's threads in slices, classified in order on its
/// hashing thread): their references, and which ones were claimed as new.
/// Page 1, which SQLite writes last, is read afterwards.
final class PageCollector: WrittenPageObserver, @unchecked Sendable {
    let repository: Repository
    let classifier: PageClassifier
    /// References of pages 2, 3, ...
    var refs = PageRefs()
    /// Claimed pages, one bit per page number.
    private(set) var claimed: [Bool] = [false, false]
    private(set) var next = 2
    private(set) var broken = false

    init(repository: Repository, index: SharedIndex, writer: PackWriter) {
        self.repository = repository
        classifier = PageClassifier(index: index, writer: writer)
    }

    var preparedStride: Int { MemoryLayout<PageID>.stride }
    var following: Bool { !broken }

    /// The pages' ids: the copy's writer has them computed on whichever of
    /// its threads is free (SQLite's own, while it waits for a buffer, and
    /// the hashing thread), ahead of `wrote`, which takes them in order.
    func prepare(_ pages: UnsafeRawBufferPointer, pageSize: Int, into output: UnsafeMutableRawPointer) {
        for k in 0..<(pages.count / pageSize) {
            let id = repository.pageID(UnsafeRawBufferPointer(rebasing: pages[k * pageSize..<(k + 1) * pageSize]))
            (output + k * preparedStride).storeBytes(of: id, as: PageID.self)
        }
    }

    func wrote(_ bytes: UnsafeRawBufferPointer, firstPage: Int, pageSize: Int, prepared: UnsafeRawPointer?) {
        guard !broken, firstPage == next, bytes.count % pageSize == 0 else { broken = true; return }
        let n = bytes.count / pageSize
        for k in 0..<n {
            let id = prepared.map { $0.load(fromByteOffset: k * preparedStride, as: PageID.self) }
                ?? repository.pageID(UnsafeRawBufferPointer(rebasing: bytes[k * pageSize..<(k + 1) * pageSize]))
            claimed.append(classifier.classify(id, into: &refs))
        }
        next += n
    }
}

extension RepoBackup {
    /// After a copy whose pages `collector` saw written: page 1, then one pass
    /// in file order that reads only the pages to store (claimed) or to sum
    /// (changed pages of tables), in runs of up to 2 MiB.
    /// nil, before doing anything, when the collector did not see every page.
    /// With `snapshot` (a copy that kept only page 1), the other pages are
    /// read from the source's snapshot, and each one read is checked
    /// against the id its write was given. While `soleThread()`, a chunk's
    /// work runs on this thread only (the check holds another core).
    static func storeCollected(_ path: String, collector: PageCollector, sha256: String, repository: Repository,
                               snapshot: SourceSnapshot? = nil,
                               lock: RepoLock?, rowSums: PageRowSums?, soleThread: () -> Bool = { false },
                               progress: (Int, Int) -> Void) throws -> PageScan? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DatabaseError(code: .cantopen, message: "cannot read the copy", path: path) }
        defer { close(fd) }
        var info = stat()
        fstat(fd, &info)
        let writer = collector.classifier.writer
        if let lock { writer.afterPack = { try lock.refresh() } }
        var head = [UInt8](repeating: 0, count: 100)
        guard pread(fd, &head, 100, 0) == 100 else { throw DatabaseError(code: .ioerr, message: "cannot read the copy", path: path) }
        let field = Int(head[16]) << 8 | Int(head[17])
        let pageSize = field == 1 ? 65536 : field
        let pageCount: Int
        if let snapshot {
            guard snapshot.pages.pageSize == pageSize else { return nil }
            pageCount = Int(snapshot.pages.pageCount)
        } else {
            guard pageSize >= 512, Int(info.st_size) % pageSize == 0 else { return nil }
            pageCount = Int(info.st_size) / pageSize
        }
        guard pageSize >= 512, collector.next == pageCount + 1, !collector.broken else { return nil }
        var scan = PageScan(pageSize: pageSize, pageCount: pageCount, writer: writer)
        scan.sha256 = sha256
        scan.fromWrites = true
        let source = snapshot?.pages.clone()
        // The page the backup API never writes (it holds the byte SQLite locks): a hole of zeros in a copy.
        let pendingBytePage = (1 << 30) / pageSize + 1
        func readPages(_ first: Int, _ count: Int, into buffer: inout [UInt8], at start: Int = 0) throws {
            if let source, first > 1 {
                try buffer.withUnsafeMutableBytes { out in
                    let pages = first..<(first + count)
                    let inWAL = !source.walPages.isEmpty && pages.contains { source.walPages.contains(UInt32($0)) }
                    if !inWAL && source.read(into: out.baseAddress! + start, count: count * pageSize, offset: (first - 1) * pageSize) {
                        // Read in one go.
                    } else {
                        for q in pages {
                            guard let page = source.singlePage(UInt32(q)) else {
                                throw DatabaseError(code: .ioerr, message: "cannot read page \(q) of the snapshot", path: snapshot!.pages.connection.path)
                            }
                            (out.baseAddress! + start + (q - first) * pageSize).copyMemory(from: page, byteCount: pageSize)
                        }
                    }
                    if pages.contains(pendingBytePage) {
                        memset(out.baseAddress! + start + (pendingBytePage - first) * pageSize, 0, pageSize)
                    }
                }
                return
            }
            let want = count * pageSize
            var got = 0
            while got < want {
                let r = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + start + got, want - got, off_t((first - 1) * pageSize + got)) }
                if r < 0 && errno == EINTR { continue }
                guard r > 0 else { throw DatabaseError(code: .ioerr, message: "cannot read the copy", path: path) }
                got += r
            }
        }
        // Page 1: its reference first, then the others' as the writes gave them.
        var first = [UInt8](repeating: 0, count: pageSize)
        try readPages(1, 1, into: &first)
        scan.firstPage = first
        let firstID = first.withUnsafeBytes { repository.pageID($0) }
        var refs = PageRefs()
        refs.refs.reserveCapacity(pageCount)
        let firstIsNew = collector.classifier.classify(firstID, into: &refs)
        refs.others = collector.refs.others.map { $0 }
        // (Page 1's reference may be an "other" one: keep its index past the collector's.)
        if refs.refs[0] & PageRefs.kindMask == PageRefs.other {
            refs.refs[0] = PageRefs.other | UInt32(collector.refs.others.count)
            refs.others.append(firstID)
        }
        refs.refs += collector.refs.refs
        scan.refs = refs

        // Pages 2...: those claimed (stored in claim order) and those the row sums need.
        // Each chunk's work is one parallel pass whose tasks the threads take
        // as they come free (one thread while the check runs, `soleThread`): the
        // blobs the chunks before filled are compressed, and this chunk's pages
        // checked and summed, 8 at a time. What goes in order follows the pass:
        // the sums added, the blobs stored, the chunk's new pages put in blobs.
        let builder = BlobBuilder(repository: repository, writer: writer, pageSize: pageSize)
        let threads = builder.workers
        rowSums?.prepareWorkers(threads)
        let chunkPages = max(1, (2 << 20) / pageSize)
        var buffer = [UInt8](repeating: 0, count: chunkPages * pageSize)
        var p = 2
        while p <= pageCount {
            let end = min(pageCount + 1, p + chunkPages)
            // Which pages of [p, end) are needed, in runs.
            var needed = [Bool](repeating: false, count: end - p)
            var summed = [Bool](repeating: false, count: end - p)
            for q in p..<end {
                summed[q - p] = rowSums?.needs(q, id: refs.id(q - 1, index: collector.classifier.base, writer: writer)) ?? false
                needed[q - p] = collector.claimed[q] || summed[q - p]
            }
            // The needed pages, read in runs to their places in the buffer.
            var q = p
            while q < end {
                guard needed[q - p] else { q += 1; continue }
                var r = q
                while r < end && needed[r - p] { r += 1 }
                try readPages(q, r - q, into: &buffer, at: (q - p) * pageSize)
                q = r
            }
            let wanted = (p..<end).filter { needed[$0 - p] }
            // Read from the source, not the copy: each page must be the one its write was hashed as.
            let expected = snapshot == nil ? [] : wanted.map { refs.id($0 - 1, index: collector.classifier.base, writer: writer) }
            var blobs = builder.takeFull()
            let chunkFirst = p
            try buffer.withUnsafeBytes { all in
                nonisolated(unsafe) let all = all
                @Sendable func page(_ s: Int) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: all[(s - chunkFirst) * pageSize..<(s - chunkFirst + 1) * pageSize]) }
                var sums: [(p: Int, id: PageID, bytes: UnsafeRawBufferPointer)] = []
                // Where each wanted page's sum goes in `sums`, or -1.
                var sumSlot = [Int](repeating: -1, count: wanted.count)
                for (k, s) in wanted.enumerated() where summed[s - chunkFirst] {
                    sumSlot[k] = sums.count
                    sums.append((s, refs.id(s - 1, index: collector.classifier.base, writer: writer), page(s)))
                }
                var compressed = [[UInt8]?](repeating: nil, count: blobs.count)
                var results = [PageRowSums.PageSum?](repeating: nil, count: sums.count)
                let groups = snapshot == nil && rowSums == nil ? 0 : (wanted.count + 7) / 8
                let tasks = blobs.count + groups
                let bad = Locked<Int?>(nil), failure = Locked<(any Error)?>(nil), next = Locked(0)
                compressed.withUnsafeMutableBufferPointer { compressedOut in
                    results.withUnsafeMutableBufferPointer { resultsOut in
                        nonisolated(unsafe) let compressedOut = compressedOut, resultsOut = resultsOut
                        nonisolated(unsafe) let sums = sums, sumSlot = sumSlot, blobs = blobs, rowSums = rowSums, builder = builder
                        DispatchQueue.concurrentPerform(iterations: min(soleThread() ? 1 : threads, tasks)) { w in
                            let digester = RowDigester()
                            while true {
                                let task = next.withLock { k -> Int in k += 1; return k - 1 }
                                guard task < tasks else { return }
                                if task < blobs.count {
                                    do { compressedOut[task] = try builder.compress(blobs[task], worker: w) } catch { failure.withLock { $0 = error } }
                                    continue
                                }
                                let from = (task - blobs.count) * 8
                                for k in from..<min(from + 8, wanted.count) {
                                    if !expected.isEmpty && repository.pageID(page(wanted[k])) != expected[k] {
                                        bad.withLock { $0 = min($0 ?? wanted[k], wanted[k]) }
                                    }
                                    if sumSlot[k] >= 0, let rowSums {
                                        resultsOut[sumSlot[k]] = rowSums.sum(of: sums[sumSlot[k]], worker: w, digester: digester)
                                    }
                                }
                            }
                        }
                    }
                }
                if let s = bad.withLock({ $0 }) {
                    throw DatabaseError(code: .internal, message: "page \(s) of the source's snapshot is not the page the copy was given; no snapshot made",
                                        path: snapshot!.pages.connection.path)
                }
                if let error = failure.withLock({ $0 }) { throw error }
                rowSums?.apply(sums, results.map { $0! })
                try builder.add(blobs, compressed: compressed.map { $0! })
                for s in wanted where collector.claimed[s] {
                    builder.append(Int(refs.refs[s - 1] & ~PageRefs.own), page(s))
                    scan.newPages += 1
                }
            }
            builder.recycle(&blobs)
            p = end
            progress(p - 1, pageCount)
        }
        try builder.finish()
        // Page 1 was claimed last: its blob comes last.
        if firstIsNew {
            first.withUnsafeBytes { builder.append(Int(refs.refs[0] & ~PageRefs.own), $0) }
            try builder.finish()
            scan.newPages += 1
        }
        try writer.flush()
        writer.releaseBuffer()
        scan.packBytes = writer.bytesWritten
        return scan
    }

    /// Reads the whole copy page by page: the file's SHA-256 (but for a
    /// repository that records the pages' digest instead), each page's id,
    /// the new pages into packs, and the row sums.
    static func scanPages(_ path: String, repository: Repository, index: SharedIndex, lock: RepoLock?,
                          rowSums: PageRowSums? = nil, frameChecksums: Bool = true, progress: (Int, Int) -> Void) throws -> PageScan {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DatabaseError(code: .cantopen, message: "cannot read the copy", path: path) }
        defer { close(fd) }
        var info = stat()
        fstat(fd, &info)
        let size = Int(info.st_size)
        var head = [UInt8](repeating: 0, count: 100)
        guard size >= 512, pread(fd, &head, 100, 0) == 100 else {
            throw DatabaseError(code: .notadb, message: "the copy is empty", path: path)
        }
        let field = Int(head[16]) << 8 | Int(head[17])
        let pageSize = field == 1 ? 65536 : field
        guard pageSize >= 512, pageSize & (pageSize - 1) == 0, size % pageSize == 0 else {
            throw DatabaseError(code: .notadb, message: "the copy's size is not a whole number of pages", path: path)
        }
        let writer = PackWriter(repository: repository, frameChecksums: frameChecksums)
        if let lock { writer.afterPack = { try lock.refresh() } }
        let classifier = PageClassifier(index: index, writer: writer)
        var scan = PageScan(pageSize: pageSize, writer: writer)
        let pageCount = size / pageSize
        scan.pageCount = pageCount
        scan.refs.refs.reserveCapacity(pageCount)
        var hasher = SHA256Hasher()
        let builder = BlobBuilder(repository: repository, writer: writer, pageSize: pageSize)
        let chunkPages = max(repository.blobPages(pageSize: pageSize), (2 << 20) / pageSize)
        var buffer = [UInt8](repeating: 0, count: chunkPages * pageSize)
        var ids = [PageID](repeating: PageID(a: 0, b: 0, c: 0, d: 0), count: chunkPages)
        let workers = min(ProcessInfo.processInfo.activeProcessorCount, 4)

        var page = 0
        while page < pageCount {
            let n = min(chunkPages, pageCount - page)
            let want = n * pageSize
            var got = 0
            while got < want {
                let r = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, want - got, off_t(page * pageSize + got)) }
                if r < 0 && errno == EINTR { continue }
                guard r > 0 else { throw DatabaseError(code: .ioerr, message: "cannot read the copy", path: path) }
                got += r
            }
            if page == 0 { scan.firstPage = Array(buffer[0..<pageSize]) }
            buffer.withUnsafeBytes { all in
                // The file's SHA-256 (before version 3) on one thread, the page ids on the others.
                nonisolated(unsafe) let chunk = UnsafeRawBufferPointer(rebasing: all[0..<want])
                let hashesFile = !repository.recordsPagesDigest
                let idWorkers = hashesFile ? max(1, workers - 1) : workers
                ids.withUnsafeMutableBufferPointer { out in
                    nonisolated(unsafe) let out = out
                    nonisolated(unsafe) var h = hasher
                    DispatchQueue.concurrentPerform(iterations: idWorkers + (hashesFile ? 1 : 0)) { w in
                        if w == idWorkers { h.update(chunk); return }
                        for k in stride(from: w, to: n, by: idWorkers) {
                            out[k] = repository.pageID(UnsafeRawBufferPointer(rebasing: chunk[k * pageSize..<(k + 1) * pageSize]))
                        }
                    }
                    hasher = h
                }
                ids.withUnsafeBufferPointer { ids in
                    rowSums?.add(first: page + 1, pages: chunk, pageSize: pageSize, ids: UnsafeBufferPointer(rebasing: ids[0..<n]), threads: workers)
                }
                for k in 0..<n where classifier.classify(ids[k], into: &scan.refs) {
                    builder.append(Int(scan.refs.refs.last! & ~PageRefs.own), UnsafeRawBufferPointer(rebasing: all[k * pageSize..<(k + 1) * pageSize]))
                    scan.newPages += 1
                }
            }
            try builder.drain()
            page += n
            progress(page, pageCount)
        }
        try builder.finish()
        try writer.flush()
        writer.releaseBuffer()
        scan.packBytes = writer.bytesWritten
        scan.sha256 = hasher.finalizeHex()
        return scan
    }
}
