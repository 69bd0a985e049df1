// Tables without a primary key compared as multisets of rows without sorting
// them: both sides are read in rowid order, a row equal to the other side's row
// under the same rowid cancels it (equal rows are equal as a multiset), and
// only the rows left over, the residue, are sorted and compared in memory.
// A copy, a backup or a VACUUMed file keeps its rowids, so the residue is the
// rows that changed; when it outgrows its memory limit it goes on in a
// temporary file (RowSpill) and is sorted there in runs that are merged, so
// memory stays bounded and only the rows that differ are ever sorted.

/// The rows of a keyless table's two sides that differ under the same rowid,
/// in rowid order, each row as read by a rowid plan (the rowid first).
final class KeylessResidue {
    /// Each side's rows in memory: all of them, or those after the spilled ones.
    private(set) var a: RowBatch
    private(set) var b: RowBatch
    /// Each side's first rows, in rowid order, once the residue outgrew `limit`.
    private var spilled: (a: RowSpill, b: RowSpill)?
    private let limit: Int

    /// Bytes of rows (values and offsets) kept in memory at most: beyond it,
    /// the rows go to a temporary file. Small: a diff's other memory is
    /// about 31 MB, and its target 32 MB.
    static let defaultLimit = 256 << 10
    /// Bytes of rows the temporary file takes at most: beyond it `collect`
    /// gives up and the caller has SQLite sort both sides (the rowids no
    /// longer pair rows: most of the table is residue).
    static let spillLimit: Int64 = 32 << 20
    /// Sorted runs per side at most (runs grow past half the memory limit to
    /// keep to it), so the merge of runs reads a bounded number of files at once.
    static let maxRuns = 32

    private init(columns: Int, limit: Int) {
        a = RowBatch(columns: columns, byteCapacity: 1 << 12)
        b = RowBatch(columns: columns, byteCapacity: 1 << 12)
        self.limit = limit
    }

    /// Whether rows went to a temporary file.
    var isSpilled: Bool { spilled != nil }

    /// Bytes of rows in the temporary files.
    private var spilledBytes: Int64 { spilled.map { $0.a.end + $0.b.end } ?? 0 }

    /// Moves the rows in memory to the end of the temporary files.
    private func spill() throws {
        if spilled == nil { spilled = (try RowSpill(columns: a.columns), try RowSpill(columns: b.columns)) }
        for (batch, file) in [(a, spilled!.a), (b, spilled!.b)] {
            for i in 0..<batch.rows { try file.append(batch.row(i)) }
        }
        // New batches: the old ones' memory grew past the limit.
        a = RowBatch(columns: a.columns, byteCapacity: 1 << 12)
        b = RowBatch(columns: b.columns, byteCapacity: 1 << 12)
    }

    /// Reads both sides of `byRowid`'s table in rowid order (the rows the
    /// files share page for page left out, see `shortcut`) and keeps the
    /// rows that differ: in memory up to `limit` bytes, the rest in a temporary
    /// file. nil when that file would outgrow `spill` bytes.
    static func collect(_ ca: Connection, _ cb: Connection, byRowid: TablePlan, shortcut: TableShortcut?,
                        sources: (a: PageSource?, b: PageSource?)?, limit: Int = defaultLimit,
                        spill: Int64 = spillLimit, progress: DiffProgress? = nil) throws -> KeylessResidue? {
        precondition(byRowid.mode == .rowid && byRowid.keyIndexes == [0])
        let reading = try DiffEngine.reading(byRowid, shortcut: shortcut, filter: nil, sources: sources)
        if reading.isEverything, let pa = sources?.a, let pb = sources?.b,
           let records = try PageSource.recordStreams(byRowid, pa, pb) {
            defer {
                records.a.close()
                records.b.close()
            }
            return try collect(records.a, records.b, byRowid: byRowid, limit: limit, spill: spill, progress: progress)
        }
        let sa = try DiffEngine.stream(ca, byRowid.reading(.a), reading, pages: sources?.a)
        defer { sa.close() }
        let sb = try DiffEngine.stream(cb, byRowid.reading(.b), reading, pages: sources?.b)
        defer { sb.close() }
        return try collect(sa, sb, byRowid: byRowid, limit: limit, spill: spill, progress: progress)
    }

    /// `collect` over either kind of side (see `MergeSide`): rows under the
    /// same rowid that are the same bytes are equal and never decoded; the
    /// others are decoded, and kept when their values differ.
    private static func collect<Side: MergeSide>(_ sa: Side, _ sb: Side, byRowid: TablePlan,
                                                 limit: Int, spill: Int64, progress: DiffProgress?) throws -> KeylessResidue? {
        let residue = KeylessResidue(columns: byRowid.columns.count, limit: limit)
        let compared = byRowid.comparedIndexes
        var hasA = try sa.next(), hasB = try sb.next()
        var processed = 0
        while hasA || hasB {
            processed += 1
            if processed % 100_000 == 0, let progress { progress(byRowid.name, processed) }
            let order: Int
            if !hasA { order = 1 } else if !hasB { order = -1 } else {
                // Both kinds of side hold the rowid first.
                let x = sa.keyRow.int64(at: 0), y = sb.keyRow.int64(at: 0)
                order = x < y ? -1 : (x == y ? 0 : 1)
            }
            if order < 0 {
                residue.a.append(try sa.decoded())
                hasA = try sa.next()
            } else if order > 0 {
                residue.b.append(try sb.decoded())
                hasB = try sb.next()
            } else {
                if !sa.sameBytes(as: sb) {
                    let ra = try sa.decoded(), rb = try sb.decoded()
                    if compared.contains(where: { !DiffEngine.cellsIdentical(ra, rb, $0) }) {
                        residue.a.append(ra)
                        residue.b.append(rb)
                    }
                }
                hasA = try sa.next()
                hasB = try sb.next()
            }
            if residue.bytes > limit {
                try residue.spill()
                if residue.spilledBytes > spill { return nil }
            }
        }
        return residue
    }

    /// Memory the kept rows take.
    var bytes: Int {
        a.byteCount + b.byteCount + (a.offsetCount + b.offsetCount) * MemoryLayout<Int>.size
    }

    /// Compares the residue as two multisets of `multiset`'s rows (the rowid
    /// plan's rows less the rowid): rows equal in `multiset`'s key columns
    /// cancel; the others are reported to `consumer` as deleted (A) and
    /// inserted (B), in the order an ORDER BY of every column would give.
    func compareAsMultisets(_ multiset: TablePlan, consumer: DiffConsumer?) throws -> ChangeCounts {
        let keys = multiset.keyIndexes
        let sa = try sortedRows(a, spilled?.a, keys: keys), sb = try sortedRows(b, spilled?.b, keys: keys)
        var ra = try sa.next(), rb = try sb.next()
        var counts = ChangeCounts()
        while ra != nil || rb != nil {
            let order: Int
            if ra == nil { order = 1 } else if rb == nil { order = -1 } else {
                order = DiffEngine.compareKey(ra!.droppingFirst, rb!.droppingFirst, keys)
            }
            if order < 0 {
                counts.deleted += 1
                try consumer?.deleted(multiset, old: ra!.droppingFirst)
                ra = try sa.next()
            } else if order > 0 {
                counts.inserted += 1
                try consumer?.inserted(multiset, new: rb!.droppingFirst)
                rb = try sb.next()
            } else {
                ra = try sa.next()
                rb = try sb.next()
            }
        }
        return counts
    }

    /// Reports the residue as a merge by rowid reports it: rows under a rowid
    /// on one side only as deleted or inserted, rows under the same rowid as
    /// updated (the residue holds only rows that differ).
    func replayByRowid(_ byRowid: TablePlan, consumer: DiffConsumer) throws {
        let sa = try rowidOrder(a, spilled?.a), sb = try rowidOrder(b, spilled?.b)
        var ra = try sa.next(), rb = try sb.next()
        var changed: [Int] = []
        while ra != nil || rb != nil {
            let order: Int
            if ra == nil { order = 1 } else if rb == nil { order = -1 } else {
                let x = ra!.int64(at: 0), y = rb!.int64(at: 0)
                order = x < y ? -1 : (x == y ? 0 : 1)
            }
            if order < 0 {
                try consumer.deleted(byRowid, old: ra!)
                ra = try sa.next()
            } else if order > 0 {
                try consumer.inserted(byRowid, new: rb!)
                rb = try sb.next()
            } else {
                changed.removeAll(keepingCapacity: true)
                for k in byRowid.comparedIndexes where !DiffEngine.cellsIdentical(ra!, rb!, k) { changed.append(k) }
                try consumer.updated(byRowid, old: ra!, new: rb!, changed: changed)
                ra = try sa.next()
                rb = try sb.next()
            }
        }
    }

    /// Rows one at a time, each valid until the next call.
    struct Rows {
        let next: () throws -> DiffRow?
    }

    /// `batch`'s rows in the order `order` gives.
    private static func rows(_ batch: RowBatch, _ order: [Int]) -> Rows {
        var i = 0
        return Rows {
            guard i < order.count else { return nil }
            defer { i += 1 }
            return batch.row(order[i])
        }
    }

    /// A side's rows in rowid order: the spilled ones, then those in memory.
    private func rowidOrder(_ batch: RowBatch, _ file: RowSpill?) throws -> Rows {
        let memory = Self.rows(batch, Array(0..<batch.rows))
        guard let file else { return memory }
        try file.flush()
        let reader = file.reader(from: 0, to: file.end)
        var onFile = true
        return Rows {
            if onFile, let row = try reader.next() { return row }
            onFile = false
            return try memory.next()
        }
    }

    /// `batch`'s row indexes in `keys` order, equal rows in rowid order.
    private static func sortedOrder(_ batch: RowBatch, keys: [Int]) -> [Int] {
        (0..<batch.rows).sorted { i, j in
            let c = DiffEngine.compareKey(batch.row(i).droppingFirst, batch.row(j).droppingFirst, keys)
            return c != 0 ? c < 0 : i < j
        }
    }

    /// A side's rows in `keys` order (less the rowid), equal rows in rowid
    /// order, as one sort of them all would give. Spilled rows are sorted in
    /// runs of at most half the memory limit, written to a second file, and
    /// the runs merged with the rows in memory (the last run); between equal
    /// rows the earlier run comes first, as in a stable sort.
    private func sortedRows(_ batch: RowBatch, _ file: RowSpill?, keys: [Int]) throws -> Rows {
        let memory = Self.rows(batch, Self.sortedOrder(batch, keys: keys))
        guard let file else { return memory }
        try file.flush()
        let runs = try RowSpill(columns: batch.columns)
        var bounds: [(Int64, Int64)] = []
        let log = file.reader(from: 0, to: file.end)
        let chunk = RowBatch(columns: batch.columns, byteCapacity: 1 << 16)
        var more = true
        while more {
            chunk.removeAll()
            while chunk.byteCount < max(limit / 2, Int(file.end / Int64(Self.maxRuns)) + 1) {
                guard let row = try log.next() else { more = false; break }
                chunk.append(row)
            }
            guard chunk.rows > 0 else { break }
            let from = runs.end
            for i in Self.sortedOrder(chunk, keys: keys) { try runs.append(chunk.row(i)) }
            bounds.append((from, runs.end))
        }
        try runs.flush()
        var sources = bounds.map { bound -> Rows in
            let reader = runs.reader(from: bound.0, to: bound.1)
            return Rows { try reader.next() }
        }
        sources.append(memory)
        var heads = try sources.map { try $0.next() }
        // The row given last, copied: its run's reader moves on to fill `heads`.
        let current = RowBatch(columns: batch.columns, byteCapacity: 1 << 10)
        return Rows {
            withExtendedLifetime(runs) {}
            var best: Int?
            for k in heads.indices {
                guard let row = heads[k] else { continue }
                if let b = best, DiffEngine.compareKey(row.droppingFirst, heads[b]!.droppingFirst, keys) >= 0 { continue }
                best = k
            }
            guard let best else { return nil }
            let row = heads[best]!
            current.removeAll()
            current.append(row)
            heads[best] = try sources[best].next()
            return current.row(0)
        }
    }
}
