// The index: where each stored page is. A page lives in a blob (up to 255
// pages compressed together), a blob at a byte range of a pack. Each backup
// writes one index object for the blobs it added; opening a repository reads
// them all into one table sorted by page id (40 bytes a page, 20 a blob), so
// that a lookup is a directory step and a short binary search, and memory is
// what the entries need. docs/repository.md specifies the index objects:
//   version 2: "LCIX" u32 2 | u32 P, P pack ids | u32 B, B blobs
//              { u32 pack# | u32 offset | u32 length | u8 log2(page size) | u8 k | k page ids }
//   version 1: "LCIX" u32 1 | u32 P, P pack ids | u32 N, N { page id | u32 pack# | u32 offset | u32 length }
//              (each entry a blob of one page)

/// One blob: where it is and what it holds.
struct BlobRecord: Equatable {
    /// Its pack, as a number into `RepoIndex.packs` (or a writer's packs).
    var pack: UInt32
    var offset: UInt32
    var length: UInt32
    /// How many pages it holds (1 in a version-1 repository).
    var pages: UInt8
    /// log2 of its pages' size; 0 when the object does not say (version 1).
    var pageSizeLog2: UInt8
    /// Which index object listed it (for prune), a number into `objectKeys`.
    var source: UInt32
}

/// One page: its id and its place in a blob.
struct IndexEntry {
    var id: PageID
    var blob: UInt32
    var slot: UInt8
}

/// Where a page is, resolved.
public struct PageLocation: Sendable, Equatable {
    public var pack: PageID
    public var offset: UInt32
    public var length: UInt32
    public var pages: Int
    public var slot: Int
    /// The page size the index records for the blob (nil: version 1, not recorded).
    public var pageSize: Int?
}

enum IndexObject {
    static let magic: [UInt8] = Array("LCIX".utf8)

    /// Encodes blobs for the repository's format version: `blob(i)` gives the
    /// i-th blob and `id(i, slot)` the id of its page in `slot`.
    static func encode(for repository: Repository, packs: [PageID], blobCount: Int,
                       blob: (Int) -> BlobRecord, id: (Int, Int) -> PageID) -> [UInt8] {
        var pageCount = 0
        for b in 0..<blobCount { pageCount += Int(blob(b).pages) }
        let writer = ObjectWriter(repository: repository,
                                  size: repository.version == 1
                                      ? 12 + 32 * packs.count + 4 + 44 * pageCount
                                      : 12 + 32 * packs.count + 4 + 14 * blobCount + 32 * pageCount)
        writer.raw(magic); writer.u32(UInt32(min(repository.version, 2)))  // version 3 kept version 2's index
        writer.u32(UInt32(packs.count)); for p in packs { writer.id(p) }
        if repository.version == 1 {
            writer.u32(UInt32(pageCount))
            for b in 0..<blobCount {
                let record = blob(b)
                for s in 0..<Int(record.pages) {
                    writer.id(id(b, s)); writer.u32(record.pack); writer.u32(record.offset); writer.u32(record.length)
                }
            }
        } else {
            writer.u32(UInt32(blobCount))
            for b in 0..<blobCount {
                let record = blob(b)
                writer.u32(record.pack); writer.u32(record.offset); writer.u32(record.length)
                writer.u8(record.pageSizeLog2); writer.u8(record.pages)
                for s in 0..<Int(record.pages) { writer.id(id(b, s)) }
            }
        }
        return writer.finish()
    }

    /// Appends the object's blobs and pages to `index` (unsorted).
    static func decode(_ compressed: [UInt8], what: String, into index: inout RepoIndex, source: UInt32) throws {
        let raw = try decompressObject(compressed, what: what)
        var r = ByteReader(raw, what: what)
        guard try r.raw(4) == magic else { throw r.damaged("not an index") }
        let version = try r.u32()
        guard version == 1 || version == 2 else { throw r.damaged("unknown index version \(version)") }
        let packCount = try r.count(of: 32)
        var packs: [UInt32] = []
        packs.reserveCapacity(packCount)
        for _ in 0..<packCount { packs.append(index.number(of: try r.id())) }
        if version == 1 {
            let n = try r.count(of: 44)
            for _ in 0..<n {
                let id = try r.id(), pack = Int(try r.u32()), offset = try r.u32(), length = try r.u32()
                guard pack < packs.count else { throw r.damaged("pack number out of range") }
                index.blobs.append(BlobRecord(pack: packs[pack], offset: offset, length: length, pages: 1, pageSizeLog2: 0, source: source))
                index.entries.append(IndexEntry(id: id, blob: UInt32(index.blobs.count - 1), slot: 0))
            }
        } else {
            let n = try r.count(of: 14)
            for _ in 0..<n {
                let pack = Int(try r.u32()), offset = try r.u32(), length = try r.u32()
                let log2 = try r.u8(), k = try r.u8()
                guard pack < packs.count else { throw r.damaged("pack number out of range") }
                guard (9...16).contains(log2), k >= 1 else { throw r.damaged("blob of \(k) pages of 2^\(log2) bytes") }
                index.blobs.append(BlobRecord(pack: packs[pack], offset: offset, length: length, pages: k, pageSizeLog2: log2, source: source))
                for s in 0..<k { index.entries.append(IndexEntry(id: try r.id(), blob: UInt32(index.blobs.count - 1), slot: s)) }
            }
        }
        guard r.atEnd else { throw r.damaged("bytes after the last entry") }
    }
}

/// Every page the repository holds, sorted by id, in flat arrays.
public struct RepoIndex: @unchecked Sendable {
    var entries: [IndexEntry] = []
    var blobs: [BlobRecord] = []
    var packs: [PageID] = []
    var packNumber: [PageID: UInt32] = [:]
    /// Keys of the index objects read.
    public internal(set) var objectKeys: [String] = []
    /// For each value of an id's first 16 bits, the first entry at or past it (65,537 numbers).
    private var directory: [UInt32] = []

    public init() {}

    public var count: Int { entries.count }

    mutating func number(of pack: PageID) -> UInt32 {
        if let n = packNumber[pack] { return n }
        let n = UInt32(packs.count)
        packs.append(pack); packNumber[pack] = n
        return n
    }

    /// Sorts the entries by id in place and builds the lookup directory. A
    /// page stored twice (two backups stored it at once) keeps both entries,
    /// so that every blob still lists all its pages; lookups find the one
    /// from the earliest index object.
    mutating func finish() {
        let blobs = self.blobs
        entries.withUnsafeMutableBufferPointer { buffer in
            InPlaceSort.sort(buffer) { a, b in
                a.id != b.id ? a.id < b.id : (blobs[Int(a.blob)].source, a.blob) < (blobs[Int(b.blob)].source, b.blob)
            }
        }
        directory = [UInt32](repeating: 0, count: 65537)
        var e = 0
        for bucket in 0..<65536 {
            directory[bucket] = UInt32(e)
            while e < entries.count && Int(entries[e].id.a >> 48) == bucket { e += 1 }
        }
        directory[65536] = UInt32(entries.count)
    }

    /// The entry's position, or nil.
    func position(of id: PageID) -> Int? {
        guard !directory.isEmpty else { return nil }
        let bucket = Int(id.a >> 48)
        var low = Int(directory[bucket]), high = Int(directory[bucket + 1])
        let end = high
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].id < id { low = mid + 1 } else { high = mid }
        }
        return low < end && entries[low].id == id ? low : nil
    }

    public func contains(_ id: PageID) -> Bool { position(of: id) != nil }

    func location(at position: Int) -> PageLocation {
        let entry = entries[position], blob = blobs[Int(entry.blob)]
        return PageLocation(pack: packs[Int(blob.pack)], offset: blob.offset, length: blob.length, pages: Int(blob.pages),
                            slot: Int(entry.slot), pageSize: blob.pageSizeLog2 == 0 ? nil : 1 << Int(blob.pageSizeLog2))
    }

    public func location(of id: PageID) -> PageLocation? { position(of: id).map { location(at: $0) } }

    /// Entry positions by blob, in slot order: blob b's pages are
    /// `positions[starts[b] ..< starts[b + 1]]` (a blob has one entry per slot).
    func entriesByBlob() -> (starts: [UInt32], positions: [UInt32]) {
        var starts = [UInt32](repeating: 0, count: blobs.count + 1)
        for b in blobs.indices { starts[b + 1] = starts[b] + UInt32(blobs[b].pages) }
        var positions = [UInt32](repeating: 0, count: Int(starts[blobs.count]))
        for (p, e) in entries.enumerated() { positions[Int(starts[Int(e.blob)]) + Int(e.slot)] = UInt32(p) }
        return (starts, positions)
    }

    /// Blob numbers by pack: pack n's blobs are `blobs[starts[n] ..< starts[n + 1]]`, in offset order.
    func blobsByPack() -> (starts: [UInt32], blobs: [UInt32]) {
        var starts = [UInt32](repeating: 0, count: packs.count + 1)
        for b in blobs { starts[Int(b.pack) + 1] += 1 }
        for n in packs.indices { starts[n + 1] += starts[n] }
        var fill = starts, out = [UInt32](repeating: 0, count: blobs.count)
        for (b, blob) in blobs.enumerated() { out[Int(fill[Int(blob.pack)])] = UInt32(b); fill[Int(blob.pack)] += 1 }
        for n in packs.indices {
            out[Int(starts[n])..<Int(starts[n + 1])].sort { blobs[Int($0)].offset < blobs[Int($1)].offset }
        }
        return (starts, out)
    }
}

/// An in-place sort (introsort: quicksort with a median of three, heapsort
/// past a depth limit, insertion sort for short runs) for the index's large
/// arrays, which the standard library's sort would copy into a buffer of
/// their own size.
enum InPlaceSort {
    static func sort<T>(_ a: UnsafeMutableBufferPointer<T>, by less: (T, T) -> Bool) {
        guard a.count > 1 else { return }
        var depth = 0, n = a.count
        while n > 0 { depth += 2; n >>= 1 }
        introsort(a, 0, a.count, depth, less)
    }

    private static func introsort<T>(_ a: UnsafeMutableBufferPointer<T>, _ from: Int, _ to: Int, _ depth: Int, _ less: (T, T) -> Bool) {
        var from = from, to = to, depth = depth
        while to - from > 16 {
            if depth == 0 { heapsort(a, from, to, less); return }
            depth -= 1
            let mid = from + (to - from) / 2
            // Median of three to a[from], then partition around it.
            if less(a[mid], a[from]) { a.swapAt(mid, from) }
            if less(a[to - 1], a[from]) { a.swapAt(to - 1, from) }
            if less(a[to - 1], a[mid]) { a.swapAt(to - 1, mid) }
            a.swapAt(from, mid)
            let pivot = a[from]
            var i = from + 1, j = to - 1
            while true {
                while i <= j && less(a[i], pivot) { i += 1 }
                while i <= j && less(pivot, a[j]) { j -= 1 }
                if i >= j { break }
                a.swapAt(i, j); i += 1; j -= 1
            }
            a.swapAt(from, j)
            // Recurse into the smaller side, loop on the larger.
            if j - from < to - j - 1 { introsort(a, from, j, depth, less); from = j + 1 }
            else { introsort(a, j + 1, to, depth, less); to = j }
        }
        for i in (from + 1)..<max(from + 1, to) {
            let x = a[i]
            var j = i
            while j > from && less(x, a[j - 1]) { a[j] = a[j - 1]; j -= 1 }
            a[j] = x
        }
    }

    private static func heapsort<T>(_ a: UnsafeMutableBufferPointer<T>, _ from: Int, _ to: Int, _ less: (T, T) -> Bool) {
        let n = to - from
        func sift(_ start: Int, _ end: Int) {
            var root = start
            while 2 * root + 1 < end {
                var child = 2 * root + 1
                if child + 1 < end && less(a[from + child], a[from + child + 1]) { child += 1 }
                guard less(a[from + root], a[from + child]) else { return }
                a.swapAt(from + root, from + child); root = child
            }
        }
        for start in stride(from: n / 2 - 1, through: 0, by: -1) { sift(start, n) }
        for end in stride(from: n - 1, to: 0, by: -1) { a.swapAt(from, from + end); sift(0, end) }
    }
}
