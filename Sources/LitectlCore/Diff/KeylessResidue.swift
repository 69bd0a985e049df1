// Tables without a primary key compared as multisets of rows without sorting
// them: both sides are read in rowid order, a row equal to the other side's row
// under the same rowid cancels it (equal rows are equal as a multiset), and
// only the rows left over, the residue, are sorted and compared in memory.
// A copy, a backup or a VACUUMed file keeps its rowids, so the residue is the
// rows that changed; when it outgrows its memory limit the caller sorts the
// whole table with SQLite instead.

/// The rows of a keyless table's two sides that differ under the same rowid,
/// in rowid order, each row as read by a rowid plan (the rowid first).
final class KeylessResidue {
    let a: RowBatch
    let b: RowBatch

    /// Bytes of rows (values and offsets) kept at most: beyond it, `collect` gives up.
    static let defaultLimit = 4 << 20

    private init(columns: Int) {
        a = RowBatch(columns: columns, byteCapacity: 1 << 12)
        b = RowBatch(columns: columns, byteCapacity: 1 << 12)
    }

    /// Reads both sides of `byRowid`'s table in rowid order (the rows the
    /// files share page for page left out, see `shortcut`) and keeps the
    /// rows that differ. nil when they take more than `limit` bytes.
    static func collect(_ ca: Connection, _ cb: Connection, byRowid: TablePlan, shortcut: TableShortcut?,
                        sources: (a: PageSource?, b: PageSource?)?, limit: Int = defaultLimit) throws -> KeylessResidue? {
        precondition(byRowid.mode == .rowid && byRowid.keyIndexes == [0])
        let reading = try DiffEngine.reading(byRowid, shortcut: shortcut, filter: nil, sources: sources)
        if reading.isEverything, let pa = sources?.a, let pb = sources?.b,
           let records = try PageSource.recordStreams(byRowid, pa, pb) {
            return try collect(records.a, records.b, byRowid: byRowid, limit: limit)
        }
        let sa = try DiffEngine.stream(ca, byRowid, reading, pages: sources?.a)
        defer { sa.close() }
        let sb = try DiffEngine.stream(cb, byRowid, reading, pages: sources?.b)
        defer { sb.close() }
        let residue = KeylessResidue(columns: byRowid.columns.count)
        let compared = byRowid.comparedIndexes
        var hasA = try sa.next(), hasB = try sb.next()
        var processed = 0
        while hasA || hasB {
            processed += 1
            if processed % 100_000 == 0, let progress = DiffEngine.progress { progress(byRowid.name, processed) }
            let order: Int
            if !hasA { order = 1 } else if !hasB { order = -1 } else {
                let x = sa.row.int64(at: 0), y = sb.row.int64(at: 0)
                order = x < y ? -1 : (x == y ? 0 : 1)
            }
            if order < 0 {
                residue.a.append(sa.row)
                hasA = try sa.next()
            } else if order > 0 {
                residue.b.append(sb.row)
                hasB = try sb.next()
            } else {
                let ra = sa.row, rb = sb.row
                if compareBytes(ra.encoded, rb.encoded) != 0,
                   compared.contains(where: { !DiffEngine.cellsIdentical(ra, rb, $0) }) {
                    residue.a.append(ra)
                    residue.b.append(rb)
                }
                hasA = try sa.next()
                hasB = try sb.next()
            }
            if residue.bytes > limit { return nil }
        }
        return residue
    }

    /// `collect` over raw records (see `RecordStream`): rows under the same
    /// rowid with equal records are equal and never decoded; the others are
    /// decoded and kept as `collect` keeps them.
    private static func collect(_ sa: RecordStream, _ sb: RecordStream, byRowid: TablePlan,
                                limit: Int) throws -> KeylessResidue? {
        defer {
            sa.close()
            sb.close()
        }
        let residue = KeylessResidue(columns: byRowid.columns.count)
        let compared = byRowid.comparedIndexes
        var hasA = try sa.next(), hasB = try sb.next()
        var processed = 0
        while hasA || hasB {
            processed += 1
            if processed % 100_000 == 0, let progress = DiffEngine.progress { progress(byRowid.name, processed) }
            let order: Int
            if !hasA { order = 1 } else if !hasB { order = -1 } else {
                let x = sa.keys.int64(at: 0), y = sb.keys.int64(at: 0)
                order = x < y ? -1 : (x == y ? 0 : 1)
            }
            if order < 0 {
                residue.a.append(try sa.decoded())
                hasA = try sa.next()
            } else if order > 0 {
                residue.b.append(try sb.decoded())
                hasB = try sb.next()
            } else {
                if compareBytes(sa.record, sb.record) != 0 {
                    let ra = try sa.decoded(), rb = try sb.decoded()
                    if compareBytes(ra.encoded, rb.encoded) != 0,
                       compared.contains(where: { !DiffEngine.cellsIdentical(ra, rb, $0) }) {
                        residue.a.append(ra)
                        residue.b.append(rb)
                    }
                }
                hasA = try sa.next()
                hasB = try sb.next()
            }
            if residue.bytes > limit { return nil }
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
        func sorted(_ batch: RowBatch) -> [Int] {
            (0..<batch.rows).sorted { i, j in
                let c = DiffEngine.compareKey(batch.row(i).droppingFirst, batch.row(j).droppingFirst, keys)
                return c != 0 ? c < 0 : i < j
            }
        }
        let orderA = sorted(a), orderB = sorted(b)
        var counts = ChangeCounts()
        var i = 0, j = 0
        while i < orderA.count || j < orderB.count {
            let order: Int
            if i == orderA.count { order = 1 } else if j == orderB.count { order = -1 } else {
                order = DiffEngine.compareKey(a.row(orderA[i]).droppingFirst, b.row(orderB[j]).droppingFirst, keys)
            }
            if order < 0 {
                counts.deleted += 1
                try consumer?.deleted(multiset, old: a.row(orderA[i]).droppingFirst)
                i += 1
            } else if order > 0 {
                counts.inserted += 1
                try consumer?.inserted(multiset, new: b.row(orderB[j]).droppingFirst)
                j += 1
            } else {
                i += 1
                j += 1
            }
        }
        return counts
    }

    /// Reports the residue as a merge by rowid reports it: rows under a rowid
    /// on one side only as deleted or inserted, rows under the same rowid as
    /// updated (the residue holds only rows that differ).
    func replayByRowid(_ byRowid: TablePlan, consumer: DiffConsumer) throws {
        var i = 0, j = 0
        var changed: [Int] = []
        while i < a.rows || j < b.rows {
            let order: Int
            if i == a.rows { order = 1 } else if j == b.rows { order = -1 } else {
                let x = a.row(i).int64(at: 0), y = b.row(j).int64(at: 0)
                order = x < y ? -1 : (x == y ? 0 : 1)
            }
            if order < 0 {
                try consumer.deleted(byRowid, old: a.row(i))
                i += 1
            } else if order > 0 {
                try consumer.inserted(byRowid, new: b.row(j))
                j += 1
            } else {
                let ra = a.row(i), rb = b.row(j)
                changed.removeAll(keepingCapacity: true)
                for k in byRowid.comparedIndexes where !DiffEngine.cellsIdentical(ra, rb, k) { changed.append(k) }
                try consumer.updated(byRowid, old: ra, new: rb, changed: changed)
                i += 1
                j += 1
            }
        }
    }
}
