// The pages of a moment as PageVFS asks for them: each fetched on demand as
// its blob (a ranged read of its pack), opened, decompressed and checked
// against its page id before SQLite sees a byte; kept in a bounded cache by
// id; and, when SQLite reads pages in runs of consecutive numbers (a table
// scan, check, hash, dump), the next pages' blobs fetched ahead on a few
// threads, neighbouring blobs of one pack in one ranged read. Built on
// Repository/ (its page map and blob reads: Repository/RepositoryReads.swift).
import Foundation

/// What the moments of one repository share: the cache, the pages being
/// fetched, the read-ahead threads and the count of what was read. A moment
/// and the ones `refreshed` gives share one.
final class MomentFetcher: @unchecked Sendable {
    let repository: Repository
    let readAhead: Bool
    /// How blobs of one pack are read together (restore's rule, `RepoRestore.Reads`).
    let reads: RepoRestore.Reads
    /// Threads that fetch ahead, at most.
    let workers: Int
    /// Guards everything below; waiters for a page being fetched wait on it.
    let condition = NSCondition()
    let cache: PageCache
    /// The folder blobs are kept in across runs, if any (--cache-dir).
    let folder: BlobFolder?
    /// Ids of pages a read under way will bring.
    private(set) var inFlight = Set<PageID>()
    private(set) var requests = 0
    private(set) var bytes: Int64 = 0
    private var queue: [() -> Void] = []
    private var running = 0
    /// Decompressors and buffers for reads in the foreground, reused.
    private var tools: [(ZstdDecompressor, RepoRestore.Buffers)] = []

    init(repository: Repository, options: MomentOptions) throws {
        self.repository = repository
        folder = try options.cacheFolder.map { try BlobFolder(path: $0) }
        readAhead = options.readAhead
        cache = PageCache(capacity: options.cacheBytes)
        let remote = !(repository.store is FolderStore)
        // A moment's reads are a query's: smaller than a restore's, so that
        // read-ahead does not fill the cache with one read.
        reads = remote ? RepoRestore.Reads(gap: 256 << 10, most: min(4 << 20, max(1 << 20, options.cacheBytes / 8)))
                       : RepoRestore.Reads(gap: 32 << 10, most: 1 << 20)
        workers = remote ? 8 : max(1, min(4, ProcessInfo.processInfo.activeProcessorCount))
    }

    var fetched: (requests: Int, bytes: Int64) { condition.lock(); defer { condition.unlock() }; return (requests, bytes) }

    /// With the lock held: marks `ids` as being fetched.
    func mark(_ ids: some Sequence<PageID>) { inFlight.formUnion(ids) }

    /// Ends a read: its pages kept (those `keep` wants), its marks dropped,
    /// waiters woken.
    func finish(marked: [PageID], pages: [(PageID, [UInt8])], requests: Int, bytes: Int64) {
        condition.lock()
        for (id, page) in pages { cache.put(id, page) }
        for id in marked { inFlight.remove(id) }
        self.requests += requests
        self.bytes += bytes
        condition.broadcast()
        condition.unlock()
    }

    func takeTools() -> (ZstdDecompressor, RepoRestore.Buffers) {
        condition.lock(); defer { condition.unlock() }
        return tools.popLast() ?? (ZstdDecompressor(), RepoRestore.Buffers())
    }

    func giveBack(_ t: (ZstdDecompressor, RepoRestore.Buffers)) {
        condition.lock(); defer { condition.unlock() }
        if tools.count < 4 { tools.append(t) }
    }

    /// Runs `job` on one of at most `workers` threads (started as needed,
    /// ended when there is nothing left to do).
    func submit(_ job: @escaping () -> Void) {
        condition.lock()
        queue.append(job)
        let start = running < workers
        if start { running += 1 }
        condition.unlock()
        guard start else { return }
        let thread = Thread { [self] in
            while true {
                condition.lock()
                guard !queue.isEmpty else { running -= 1; condition.unlock(); return }
                let next = queue.removeFirst()
                condition.unlock()
                next()
            }
        }
        thread.name = "litectl-ahead"
        thread.start()
    }
}

/// One moment's pages (PageVFS's source).
final class MomentPages: ImagePages, @unchecked Sendable {
    let pageSize: Int
    var pageCount: Int { ids.count }
    let ids: [PageID]
    /// The ids, sorted: whether a page a blob holds belongs to this moment.
    private let sortedIDs: [PageID]
    let map: StatePages
    let fetcher: MomentFetcher
    /// Runs of consecutive page numbers being read (guarded by the fetcher's lock).
    private var streams: [Stream] = []
    private struct Stream { var next: Int; var length: Int; var scheduled: Int }
    /// The most pages fetched ahead of a run.
    private let aheadMost: Int

    init(ids: [PageID], pageSize: Int, map: StatePages, fetcher: MomentFetcher) {
        self.ids = ids
        self.pageSize = pageSize
        self.map = map
        self.fetcher = fetcher
        sortedIDs = ids.sorted()
        aheadMost = max(0, min(4096, fetcher.cache.capacity / 2 / max(pageSize, 1)))
    }

    func holds(_ id: PageID) -> Bool {
        var low = 0, high = sortedIDs.count
        while low < high {
            let mid = (low + high) / 2
            if sortedIDs[mid] < id { low = mid + 1 } else { high = mid }
        }
        return low < sortedIDs.count && sortedIDs[low] == id
    }

    func page(_ number: Int) throws -> [UInt8] {
        guard number >= 1 && number <= ids.count else {
            throw StoreError(.other, location: fetcher.repository.location, message: "page \(number) is past the moment's \(ids.count) pages")
        }
        let id = ids[number - 1]
        let c = fetcher.condition
        c.lock()
        let ahead = fetcher.readAhead ? notice(number) : nil
        while true {
            if let bytes = fetcher.cache.get(id) {
                let marked = ahead.map { claim($0) } ?? []
                c.unlock()
                if !marked.isEmpty { _ = try? fetchAhead(marked, foreground: nil) }
                return bytes
            }
            if fetcher.inFlight.contains(id) { c.wait(); continue }
            break
        }
        fetcher.mark([id])
        let marked = ahead.map { claim($0) } ?? []
        c.unlock()
        guard let bytes = try fetchAhead(marked, foreground: (number, id)) else {
            throw StoreError(.other, location: fetcher.repository.location, message: "damaged index: page \(number) was not read")
        }
        return bytes
    }

    /// With the lock held: the run page `number` continues, and the pages to
    /// fetch ahead of it (nil when none are due).
    private func notice(_ number: Int) -> ClosedRange<Int>? {
        guard aheadMost > 0 else { return nil }
        if let s = streams.firstIndex(where: { $0.next == number }) {
            var stream = streams.remove(at: s)
            stream.next = number + 1
            stream.length += 1
            defer { streams.append(stream) }
            guard stream.length >= 3 else { return nil }
            // The window grows with the run: a short run fetches a little ahead.
            let window = min(aheadMost, max(16, stream.length * 4))
            let from = max(stream.scheduled + 1, number + 1), to = min(ids.count, number + window)
            guard from <= to, stream.scheduled < number + window / 2 else { return nil }
            stream.scheduled = to
            return from...to
        }
        if streams.count >= 8 { streams.removeFirst() }
        streams.append(Stream(next: number + 1, length: 1, scheduled: number))
        return nil
    }

    /// With the lock held: the pages of `range` neither kept nor being
    /// fetched, now marked as being fetched (page numbers and ids).
    private func claim(_ range: ClosedRange<Int>) -> [(Int, PageID)] {
        var out: [(Int, PageID)] = []
        var seen = Set<PageID>()
        for n in range {
            let id = ids[n - 1]
            if fetcher.cache.contains(id) || fetcher.inFlight.contains(id) || !seen.insert(id).inserted { continue }
            out.append((n, id))
        }
        fetcher.mark(out.map(\.1))
        return out
    }

    /// Fetches the blobs of `marked` (and of `foreground`'s page): the
    /// ranged read that holds the foreground page here, the others on the
    /// fetcher's threads. Returns the foreground page.
    @discardableResult
    private func fetchAhead(_ marked: [(Int, PageID)], foreground: (number: Int, id: PageID)?) throws -> [UInt8]? {
        var blobOf: [PageID: UInt32] = [:]
        for (n, id) in marked { blobOf[id] = map.blob(ofPage: n) }
        let front = foreground.map { map.blob(ofPage: $0.number) }
        // The other pages of this moment the same blobs hold are marked too,
        // so that no other read fetches those blobs meanwhile.
        let c = fetcher.condition
        c.lock()
        var more: [PageID] = []
        for b in Set(blobOf.values).union(front.map { [$0] } ?? []) {
            for slot in 0..<map.pageCount(ofBlob: b) {
                guard let id = map.id(ofBlob: b, slot: slot), blobOf[id] == nil, id != foreground?.id, holds(id),
                      !fetcher.cache.contains(id), !fetcher.inFlight.contains(id) else { continue }
                blobOf[id] = b
                more.append(id)
            }
        }
        fetcher.mark(more)
        c.unlock()
        let marked = marked.map(\.1) + more
        let spans = map.spans(Array(blobOf.values) + (front.map { [$0] } ?? []), reads: fetcher.reads)
        // Every other span is handed to the fetcher's threads before the
        // foreground read, which may throw: each span's read drops its
        // marks, so that no page stays marked as being fetched (a later read
        // of it would wait for ever).
        var frontSpan: (span: StatePages.Span, owned: [PageID])?
        for span in spans {
            let blobs = Set(span.blobs)
            var owned = marked.filter { blobs.contains(blobOf[$0]!) }
            if let foreground, let front, blobs.contains(front) {
                owned.append(foreground.id)
                frontSpan = (span, owned)
            } else {
                fetcher.submit { [self] in _ = try? read(span, marked: owned, want: nil) }
            }
        }
        guard let foreground else { return nil }
        guard let frontSpan else {
            fetcher.finish(marked: [foreground.id], pages: [], requests: 0, bytes: 0)
            throw StoreError(.other, location: fetcher.repository.location, message: "damaged index: page \(foreground.number) lies in no blob")
        }
        return try read(frontSpan.span, marked: frontSpan.owned, want: foreground.id)
    }

    /// One ranged read: every page it brings that this moment holds is kept;
    /// the marks it owns are dropped whatever happens. Returns page `want`.
    /// With a cache folder, the span's blobs it holds (each checked page by
    /// page) are not read, and those read are kept in it.
    private func read(_ span: StatePages.Span, marked: [PageID], want: PageID?) throws -> [UInt8]? {
        var pages: [(PageID, [UInt8])] = []
        var wanted: [UInt8]?
        var count = 0, reads = 0
        let tools = fetcher.takeTools()
        defer {
            fetcher.giveBack(tools)
            fetcher.finish(marked: marked, pages: pages, requests: reads, bytes: Int64(count))
        }
        func keep(_ id: PageID, _ bytes: UnsafeRawBufferPointer) {
            if id == want { wanted = Array(bytes) }
            if holds(id) { pages.append((id, id == want ? wanted! : Array(bytes))) }
        }
        var spans = [span]
        if let folder = fetcher.folder {
            let missing = span.blobs.filter { !served($0, from: folder, tools: tools, keep) }
            spans = missing.count == span.blobs.count ? [span] : map.spans(missing, reads: fetcher.reads)
        }
        for span in spans {
            count += try fetcher.repository.read(span, map: map, pageSize: pageSize, decompressor: tools.0, buffers: tools.1, page: keep)
            reads += 1
            // Every page of the span was checked against its id: its blobs may be kept.
            if let folder = fetcher.folder {
                for b in span.blobs {
                    let record = map.index.blobs[Int(b)]
                    let lo = Int(record.offset) - span.from, hi = lo + Int(record.length)
                    guard lo >= 0, hi <= count, hi <= tools.1.read.count else { continue }
                    folder.put(BlobFolder.name(ids: slotIDs(b), pageSize: pageSize), Array(tools.1.read[lo..<hi]))
                }
            }
        }
        if let want, wanted == nil {
            throw StoreError(.other, location: fetcher.repository.location, message: "damaged index: page \(want.hex.prefix(12)) is not in the blob it names")
        }
        return wanted
    }

    /// The ids of a blob's slots, as the index names them.
    private func slotIDs(_ blob: UInt32) -> [PageID?] { (0..<map.pageCount(ofBlob: blob)).map { map.id(ofBlob: blob, slot: $0) } }

    /// Hands each page of blob `b` to `keep` from the cache folder, when it
    /// holds the blob and every page it gives matches its id; a file that
    /// does not (corrupted, swapped, cut short) is dropped, and false says
    /// the blob must be fetched.
    private func served(_ b: UInt32, from folder: BlobFolder, tools: (ZstdDecompressor, RepoRestore.Buffers),
                        _ keep: (PageID, UnsafeRawBufferPointer) -> Void) -> Bool {
        let ids = slotIDs(b)
        let name = BlobFolder.name(ids: ids, pageSize: pageSize)
        let length = Int(map.index.blobs[Int(b)].length)
        guard let bytes = folder.get(name, length: length) else { return false }
        do {
            try bytes.withUnsafeBytes { raw in
                try fetcher.repository.pages(fromBlob: raw, pages: ids.count, pageSize: pageSize, ids: ids, decompressor: tools.0,
                                             what: folder.path(name), into: &tools.1.pages)
            }
        } catch {
            folder.drop(name)
            return false
        }
        tools.1.pages.withUnsafeBytes { all in
            for (slot, id) in ids.enumerated() {
                guard let id else { continue }
                keep(id, UnsafeRawBufferPointer(rebasing: all[slot * pageSize..<(slot + 1) * pageSize]))
            }
        }
        return true
    }
}

/// Two moments of one repository know which pages they share before either
/// is read: their page ids (the diff of two moments reads only what
/// changed: Diff/IdentifiedSharedPages.swift). Moments of two repositories
/// never count as sharing a page (their ids may be keyed apart).
extension MomentPages: IdentifiedPages {
    func samePage(_ number: Int, in other: any ImagePages) -> Bool {
        guard let other = other as? MomentPages, other.pageSize == pageSize, number >= 1,
              number <= ids.count, number <= other.ids.count,
              other.fetcher.repository.location == fetcher.repository.location else { return false }
        return ids[number - 1] == other.ids[number - 1]
    }

    /// A local file's page against this moment's: hashed as the repository
    /// names pages (SHA-256, or HMAC-SHA256 under the page-id key of an
    /// encrypted repository: docs/repository.md, "Working keys and page
    /// ids"), so a diff of a moment and a local file fetches only the pages
    /// whose ids differ.
    func samePage(_ number: Int, asBytes bytes: UnsafeRawBufferPointer) -> Bool {
        guard number >= 1, number <= ids.count, bytes.count == pageSize else { return false }
        return fetcher.repository.keys.pageID(bytes) == ids[number - 1]
    }
}
