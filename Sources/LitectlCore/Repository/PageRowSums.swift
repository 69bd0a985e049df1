// The logical hash of a backup's copy (`litectl hash`, Hash/ContentHash.swift)
// computed in the page scan itself, page by page in file order: each page that
// holds rows of a hashed table (a rowid table's leaves; every page of a
// WITHOUT ROWID table's tree) adds the sum of its rows' digests to its table's
// sum, and a page whose number, table and content are those of a page the
// previous backup of the database met reuses that backup's sum (RowSumCache)
// instead of decoding its rows again: an incremental backup decodes only the
// pages that changed. Rows are decoded by the page reader (Pages/) and hashed
// as PageHasher hashes them, so the digest is the same bit for bit; a table
// the reader cannot read, or whose pages are not where its tree says, is left
// to ContentHasher's own paths. Built on Diff's hash and Pages' decoder.
import Crypto
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class PageRowSums {
    /// The copy's connection (or the source's, whose snapshot was copied), in a read transaction until `finish`.
    private let connection: Connection
    private let walIndex: WALIndexHeader?
    private let ownsTransaction: Bool
    private let reader: SnapshotReader
    private let tables: [Table]
    private var layouts: [TableLayout?]
    private var decoders: [RowDecoder?]
    /// Each table's overflow pages claimed (shared by its decoders).
    private var claims: [ClaimedPages?]
    /// More decoders for the threads of `add(_:threads:)`, made on first use.
    private var workerDecoders: [[RowDecoder?]] = []
    /// Per page number: 1 + the index of the table whose rows it holds, 0 for none.
    private var owner: [UInt16]
    private var sums: [UInt256]
    private var rows: [Int64]
    private var failed: [Bool]
    private(set) var notes: [String] = []
    private var cacheIn: RowSumCache.Reader?
    private var cacheOut: RowSumCache.Writer?
    /// Entries for the new cache not yet written: the file must list pages in
    /// increasing order, and a chunk's reused sums are known before its decoded ones.
    private var pending: [RowSumCache.Entry] = []
    private let digester = RowDigester()
    /// Pages whose sums came from the cache, and pages decoded.
    private(set) var reused = 0, decoded = 0

    /// The fingerprint a cache must carry to be used for this database:
    /// everything the decoded values depend on besides the pages themselves.
    private(set) var fingerprint: [UInt8] = []

    /// Opens the copy at `path` and finds the pages of every hashed table.
    /// `cacheFile` is where the previous backup's sums are and, when
    /// `writeCache`, this one's go (a restore only reads it).
    convenience init(path: String, cacheFile: String?, writeCache: Bool = true) throws {
        let connection = try Connection(path: path, mode: .readOnly, immutable: true)
        try connection.execute("BEGIN DEFERRED")
        do {
            _ = try connection.scalar("SELECT count(*) FROM sqlite_schema")
            try self.init(connection, walIndex: nil, ownsTransaction: true, cacheFile: cacheFile, writeCache: writeCache)
        } catch {
            try? connection.execute("COMMIT")
            throw error
        }
    }

    /// Sums the tables of the snapshot that `connection`'s read transaction
    /// sees (`walIndex` pins its -wal frames); the transaction is the caller's
    /// unless `ownsTransaction`. Statements run on `connection` here and in
    /// `finish` only: meanwhile another thread may run its own (the pages are
    /// read through the file handles, not the connection).
    init(_ connection: Connection, walIndex: WALIndexHeader?, ownsTransaction: Bool, cacheFile: String?, writeCache: Bool = true) throws {
        self.connection = connection
        self.walIndex = walIndex
        self.ownsTransaction = ownsTransaction
        reader = try SnapshotReader(connection, walIndex: walIndex)
        tables = ContentHasher.hashedTables(try connection.readSchema())
        layouts = Array(repeating: nil, count: tables.count)
        decoders = Array(repeating: nil, count: tables.count)
        claims = Array(repeating: nil, count: tables.count)
        sums = Array(repeating: UInt256(), count: tables.count)
        rows = Array(repeating: 0, count: tables.count)
        failed = Array(repeating: false, count: tables.count)
        owner = [UInt16](repeating: 0, count: Int(reader.pages.pageCount) + 1)
        guard tables.count < Int(UInt16.max) else { throw PageError(.unsupported, "too many tables") }

        var fingerprint = SHA256()
        fingerprint.update(data: Array("litectl row sums 1".utf8))
        for n in [reader.pages.pageSize, reader.pages.usableSize] { withUnsafeBytes(of: UInt64(n).littleEndian) { fingerprint.update(bufferPointer: $0) } }
        fingerprint.update(data: Array(reader.encoding.rawValue.utf8) + [0])
        for (t, table) in tables.enumerated() {
            fingerprint.update(data: Array(table.name.utf8) + [0])
            do {
                let layout = try reader.layout(table, columns: table.contentColumns.map(\.name))
                layouts[t] = layout
                let claimed = ClaimedPages(pageCount: reader.pages.pageCount)
                claims[t] = claimed
                decoders[t] = reader.decoder(layout, claimed: claimed)
                fingerprint.update(data: Array("\(layout.withoutRowid)".utf8) + [0])
                for column in layout.columns {
                    fingerprint.update(data: Array("\(column.name)\u{0}\(column.source)\u{0}\(column.realAffinity)\u{0}\(column.declaredType)\u{0}\(column.defaultSQL ?? "\u{1}")\u{0}".utf8))
                }
                try markPages(of: t, layout)
            } catch {
                fail(t, "\(error)")
            }
        }
        self.fingerprint = Array(fingerprint.finalize())
        if let cacheFile {
            cacheIn = RowSumCache.Reader(path: cacheFile, fingerprint: self.fingerprint)
            if writeCache { cacheOut = RowSumCache.Writer(path: cacheFile, fingerprint: self.fingerprint) }
        }
    }

    deinit { if ownsTransaction { try? connection.execute("COMMIT") } }

    private func fail(_ t: Int, _ why: String) {
        if !failed[t] { notes.append("table \(tables[t].name) hashed apart from the page scan: \(why)") }
        failed[t] = true
    }

    /// Marks the pages that hold `t`'s rows, reading only interior pages: a
    /// b-tree's leaves are all at one depth, so once one child of a level is a
    /// leaf, all of that level are (the scan checks each one's kind).
    private func markPages(of t: Int, _ layout: TableLayout) throws {
        let walker = BTreeWalker(pages: reader.pages, claimed: ClaimedPages(pageCount: reader.pages.pageCount))
        var level: [UInt32] = [layout.root]
        var leaves = false
        var depth = 0
        while !level.isEmpty {
            var next: [UInt32] = []
            for p in level {
                guard p >= 1, Int(p) < owner.count, owner[Int(p)] == 0 else {
                    throw PageError(.badTree, page: p, "page outside the file or in two trees")
                }
                if leaves {
                    owner[Int(p)] = UInt16(t + 1)
                    continue
                }
                let (page, cells) = try walker.node(p, depth: min(depth, BTreeWalker.maxDepth - 1), index: layout.withoutRowid)
                if page.isLeaf || layout.withoutRowid { owner[Int(p)] = UInt16(t + 1) } else { owner[Int(p)] = UInt16.max }
                if page.isLeaf { continue }
                for i in 0..<cells { next.append(try page.cell(i).leftChild) }
                next.append(page.rightChild)
            }
            depth += 1
            guard depth < BTreeWalker.maxDepth else { throw PageError(.badTree, "b-tree deeper than 20 levels") }
            if let first = next.first, !leaves {
                leaves = try walker.node(first, depth: min(depth, BTreeWalker.maxDepth - 1), index: layout.withoutRowid).page.isLeaf
            }
            level = next
        }
    }

    /// Whether page `p` (whose id is `id`) must be read for its rows: a page
    /// of a hashed table whose sum the cache does not have. A page whose sum
    /// the cache has is added here. Pages must be asked in increasing order.
    func needs(_ p: Int, id: PageID) -> Bool {
        guard p < owner.count else { return false }
        let o = Int(owner[p])
        guard o != 0 && o != Int(UInt16.max) else { return false }
        let t = o - 1
        if failed[t] { return false }
        if let cached = cacheIn?.entry(for: UInt32(p)), cached.table == UInt16(t), cached.id == id {
            cached.sum.withUnsafeBytes { sums[t].add($0) }
            rows[t] += Int64(cached.rows)
            if cacheOut != nil { pending.append(cached) }
            reused += 1
            return false
        }
        return true
    }

    /// Adds the rows of page `p`, one that `needs` asked for (the batch
    /// below writes the cache entries).
    private func addOne(_ p: Int, bytes: UnsafeRawBufferPointer, id: PageID) {
        let t = Int(owner[p]) - 1
        apply(p, t, id, Result { try pageSum(t, bytes, page: UInt32(p), decoders: decoders, digester: digester) })
    }

    /// A page's rows as `sum(of:worker:digester:)` gives them.
    typealias PageSum = Result<(UInt256, Int, Bool), any Error>

    /// Adds the rows of pages that `needs` asked for, given in increasing
    /// order: decoded on up to `threads` threads, added in order. Call it once
    /// per run of pages asked about (even with none): it writes their cache
    /// entries, reused and new, in page order.
    func add(_ pages: [(p: Int, id: PageID, bytes: UnsafeRawBufferPointer)], threads: Int) {
        let n = min(threads, pages.count / 4)
        guard n >= 2 else {
            for page in pages { addOne(page.p, bytes: page.bytes, id: page.id) }
            writePending()
            return
        }
        prepareWorkers(n)
        var results = [PageSum?](repeating: nil, count: pages.count)
        results.withUnsafeMutableBufferPointer { out in
            nonisolated(unsafe) let out = out, pages = pages
            nonisolated(unsafe) let sums = self
            // Pages are taken 8 at a time as workers come free (another thread
            // may hold a core meanwhile, so a fixed share each would wait on the slowest).
            let next = Locked(0)
            DispatchQueue.concurrentPerform(iterations: n) { w in
                let digester = RowDigester()
                while true {
                    let from = next.withLock { k -> Int in k += 8; return k - 8 }
                    guard from < pages.count else { return }
                    for k in from..<min(from + 8, pages.count) { out[k] = sums.sum(of: pages[k], worker: w, digester: digester) }
                }
            }
        }
        apply(pages, results.map { $0! })
    }

    /// Makes the decoders of workers 1 ..< n (worker 0 uses this object's
    /// own): call it before `sum(of:worker:digester:)` runs on several threads.
    func prepareWorkers(_ n: Int) {
        while workerDecoders.count < n - 1 {
            workerDecoders.append(tables.indices.map { t in
                layouts[t].flatMap { layout in claims[t].map { reader.decoder(layout, claimed: $0) } }
            })
        }
    }

    /// The rows of a page that `needs` asked for, decoded with worker `w`'s
    /// decoders: from any thread, one thread per worker at a time, each with
    /// a digester of its own. `apply` adds them.
    func sum(of page: (p: Int, id: PageID, bytes: UnsafeRawBufferPointer), worker w: Int, digester: RowDigester) -> PageSum {
        let t = Int(owner[page.p]) - 1
        return Result { try pageSum(t, page.bytes, page: UInt32(page.p), decoders: w == 0 ? decoders : workerDecoders[w - 1], digester: digester) }
    }

    /// Adds the sums `sum(of:worker:digester:)` gave for `pages` (in
    /// increasing order), as `add` does, and writes their cache entries.
    func apply(_ pages: [(p: Int, id: PageID, bytes: UnsafeRawBufferPointer)], _ results: [PageSum]) {
        for (k, page) in pages.enumerated() { apply(page.p, Int(owner[page.p]) - 1, page.id, results[k]) }
        writePending()
    }

    private func writePending() {
        guard let cacheOut, !pending.isEmpty else { return }
        pending.sort { $0.page < $1.page }
        for entry in pending { cacheOut.add(entry) }
        pending.removeAll(keepingCapacity: true)
    }

    private func apply(_ p: Int, _ t: Int, _ id: PageID, _ result: Result<(UInt256, Int, Bool), any Error>) {
        guard !failed[t] else { return }
        switch result {
        case .success(let (sum, count, overflow)):
            sums[t].add(sum)
            rows[t] += Int64(count)
            decoded += 1
            // A page whose rows run on in overflow pages depends on those
            // too: its sum is never reused.
            if !overflow && cacheOut != nil {
                pending.append(RowSumCache.Entry(page: UInt32(p), table: UInt16(t), id: id, rows: UInt32(count), sum: sum.bytes))
            }
        case .failure(let error):
            fail(t, "\(error)")
        }
    }

    /// Adds the pages `first ..< first + ids.count` of a scan that has them all at hand.
    func add(first: Int, pages: UnsafeRawBufferPointer, pageSize: Int, ids: UnsafeBufferPointer<PageID>, threads: Int) {
        var wanted: [(p: Int, id: PageID, bytes: UnsafeRawBufferPointer)] = []
        for k in 0..<ids.count where needs(first + k, id: ids[k]) {
            wanted.append((first + k, ids[k], UnsafeRawBufferPointer(rebasing: pages[k * pageSize..<(k + 1) * pageSize])))
        }
        add(wanted, threads: threads)
    }

    /// Adds every page of the file at `path`, page n's id being `ids[n - 1]`
    /// (the sum counts only once the bytes are proven to be those ids' pages,
    /// as a restore proves them by the file's SHA-256):
    /// reads, 2 MiB at a time, only the pages whose sums the cache lacks.
    func add(file path: String, ids: [PageID], pageSize: Int, threads: Int) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DatabaseError(code: .cantopen, message: "cannot open: \(String(cString: strerror(errno)))", path: path) }
        defer { close(fd) }
        let chunk = max(1, (2 << 20) / pageSize)
        var buffer = [UInt8](repeating: 0, count: chunk * pageSize)
        var first = 0
        while first < ids.count {
            let count = min(chunk, ids.count - first)
            let wanted = (0..<count).filter { needs(first + $0 + 1, id: ids[first + $0]) }
            if let lo = wanted.first, let hi = wanted.last {
                let length = (hi + 1 - lo) * pageSize
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + lo * pageSize, length, off_t(first + lo) * off_t(pageSize)) }
                guard n == length else { throw DatabaseError(code: .ioerr, message: "short read", path: path) }
            }
            buffer.withUnsafeBytes { raw in
                add(wanted.map { k in (first + k + 1, ids[first + k], UnsafeRawBufferPointer(rebasing: raw[k * pageSize..<(k + 1) * pageSize])) },
                    threads: threads)
            }
            first += count
        }
    }

    /// The sum and count of the rows on one page of `t`'s tree, and whether any runs into overflow pages.
    private func pageSum(_ t: Int, _ bytes: UnsafeRawBufferPointer, page number: UInt32, decoders: [RowDecoder?],
                         digester: RowDigester) throws -> (UInt256, Int, Bool) {
        guard let layout = layouts[t], let decoder = decoders[t] else { throw PageError(.unsupported, "no layout") }
        let page = BTreePage(bytes: bytes, usable: reader.pages.usableSize, page: number)
        let header = try page.header()
        guard page.isTable != layout.withoutRowid, page.isLeaf || layout.withoutRowid else {
            throw PageError(.unexpectedPageType, page: number, "not a page of this table's rows")
        }
        var sum = UInt256(), overflow = false
        for i in 0..<header.cellCount {
            let cell = try page.cell(i)
            if cell.overflow != 0 { overflow = true }
            digester.add(try decoder.decode(page, cell), to: &sum)
        }
        return (sum, header.cellCount, overflow)
    }

    /// The logical hash: the schema and the tables the scan could not sum
    /// from ContentHasher, the rest from the pages. Writes the new cache.
    func finish() throws -> String {
        var known: [Int: (sum: UInt256, rows: Int64)] = [:]
        for t in tables.indices where !failed[t] { known[t] = (sums[t], rows[t]) }
        let hash = try ContentHasher.hash(connection, options: ContentHashOptions(), walIndex: walIndex, known: known)
        notes += hash.notes
        writePending()
        cacheOut?.commit()
        return hash.digest
    }
}
