// The page reader in the diff: a side of a table is decoded straight from its
// b-tree pages when the tree's order is the merge's key order (the rowid, an
// INTEGER PRIMARY KEY, or a WITHOUT ROWID table's BINARY ascending key in a
// UTF-8 file), in key-ordered parts read by several threads at once; any other
// table, and any side whose snapshot the reader cannot see, is read with
// statements as before, with a note saying why (diff -v).

/// Both sides' page readers for one diff, and the notes of what they could not read.
final class DiffPages {
    let a: SnapshotReader?
    let b: SnapshotReader?
    let threadsPerSide: Int
    /// Compare rows read from pages as raw records first (see `RecordStream`).
    let compareRecords: Bool
    private(set) var notes: [String] = []
    private var noted: Set<String> = []
    /// Per side and table: the WITHOUT ROWID key sorts BINARY and ascending.
    private var treeOrderedKeys: [String: Bool] = [:]

    /// Call inside both read transactions; `walIndex` is each snapshot's
    /// pinned wal-index header (see `WALIndexHeader.pinned`).
    init(_ ca: Connection, walIndex wa: WALIndexHeader?, _ cb: Connection, walIndex wb: WALIndexHeader?, threadsPerSide: Int = 0,
         compareRecords: Bool = true) {
        self.compareRecords = compareRecords
        self.threadsPerSide = threadsPerSide > 0 ? threadsPerSide : max(1, min(4, SnapshotReader.threads() / 2))
        var failures: [String] = []
        // A walk in key order reads pages mostly in file order: 4 chunks of
        // cache per reading thread are as good as 8, and keep the peak
        // memory of a diff under 32 MB.
        do { a = try SnapshotReader(ca, walIndex: wa, cacheChunks: 4) } catch {
            a = nil
            failures.append("every table of A read with statements: \(error)")
        }
        do { b = try SnapshotReader(cb, walIndex: wb, cacheChunks: 4) } catch {
            b = nil
            failures.append("every table of B read with statements: \(error)")
        }
        for failure in failures { note(failure) }
    }

    func note(_ text: String) {
        if noted.insert(text).inserted { notes.append(text) }
    }

    /// Each side's table with its page reader (nil for a side without the table or a reader).
    func sources(_ ta: Table?, _ tb: Table?) -> (a: PageSource?, b: PageSource?) {
        (ta.flatMap { t in a.map { PageSource(reader: $0, table: t, side: "A", owner: self) } },
         tb.flatMap { t in b.map { PageSource(reader: $0, table: t, side: "B", owner: self) } })
    }

    /// The WITHOUT ROWID `table`'s key columns all sort BINARY and ascending,
    /// so that its b-tree order is the merge's (asked of SQLite once).
    func keySortsAsTheMerge(_ table: Table, side: String, reader: SnapshotReader) throws -> Bool {
        let cacheKey = side + "\u{0}" + table.name
        if let known = treeOrderedKeys[cacheKey] { return known }
        let odd = try reader.connection.scalar("""
            SELECT count(*) FROM pragma_index_list(?1) AS l, pragma_index_xinfo(l.name) AS x
            WHERE l.origin = 'pk' AND x.key = 1 AND (x."desc" != 0 OR x.coll != 'BINARY')
            """, [.text(table.name)])
        let ordered = odd == .integer(0)
        treeOrderedKeys[cacheKey] = ordered
        return ordered
    }
}

/// One side of one table, readable from its pages.
struct PageSource {
    let reader: SnapshotReader
    let table: Table
    /// "A" or "B", for notes.
    let side: String
    unowned let owner: DiffPages

    /// Notes that this side of the table is read with statements, and why.
    func noteStatements(_ why: String) {
        owner.note("table \(table.name) of \(side) read with statements: \(why)")
    }

    /// Why `plan`'s key order is not this table's b-tree order; nil when it is.
    func orderMismatch(_ plan: TablePlan) throws -> String? {
        switch plan.mode {
        case .multiset:
            return "no primary key (SQLite sorts its rows)"
        case .rowid:
            return table.withoutRowid ? "WITHOUT ROWID table matched by rowid" : nil
        case .key:
            if plan.userKey { return "--key order (SQLite sorts its rows)" }
            let keys = plan.keyIndexes.map { Array(plan.columns[$0].utf8) }
            if !table.withoutRowid {
                guard table.hasRowidAlias, keys.count == 1, table.primaryKey.count == 1,
                      keys[0] == Array(table.primaryKey[0].name.utf8) else {
                    return "its key is not the rowid (SQLite sorts its rows)"
                }
                return nil
            }
            guard reader.encoding == .utf8 else { return "UTF-16 keys (their b-tree order is not the merge's)" }
            guard keys == table.primaryKey.map({ Array($0.name.utf8) }),
                  try owner.keySortsAsTheMerge(table, side: side, reader: reader) else {
                return "its key does not sort BINARY ascending (SQLite sorts its rows)"
            }
            return nil
        }
    }

    /// `plan`'s rows decoded from the pages, in key order; nil (and a note)
    /// when they must be read with statements.
    func stream(_ plan: TablePlan) throws -> RowStream? {
        if let mismatch = try orderMismatch(plan) {
            noteStatements(mismatch)
            return nil
        }
        let layout: TableLayout
        do {
            layout = try reader.layout(table, columns: plan.columns, rowidName: plan.rowidColumn)
        } catch {
            noteStatements("\(error)")
            return nil
        }
        return try stream(layout, columns: plan.columns.count, noting: true) { decoder, part, sink in
            try decoder.forEachRow(in: part) { try sink.append($0) }
        }
    }

    /// `layout`'s b-tree read by `produce` (rows of `columns` columns), in
    /// key-ordered parts on the side's threads; nil (noted when `noting`)
    /// when the tree cannot be split.
    private func stream(_ layout: TableLayout, columns: Int, noting: Bool,
                        produce: @escaping (RowDecoder, TreePart, BatchSink) throws -> Void) throws -> RowStream? {
        let claimed = ClaimedPages(pageCount: reader.pages.pageCount)
        let threads = owner.threadsPerSide
        let parts: [TreePart]
        do {
            parts = threads > 1
                ? try BTreeWalker(pages: reader.pages, claimed: claimed).split(layout.root, index: layout.withoutRowid,
                                                                               wanted: threads * 4)
                : [.subtree(page: layout.root, depth: 0)]
        } catch {
            if noting { noteStatements("\(error)") }
            return nil
        }
        let decoders = (0..<min(threads, parts.count)).map { _ in reader.decoder(layout, claimed: claimed) }
        let name = table.name, path = reader.connection.path
        return try RowStream(columns: columns, parts: parts.count, threads: decoders.count) { part, sink in
            do {
                try produce(decoders[part % decoders.count], parts[part], sink)
            } catch let error as PageError {
                throw PageSource.damaged(error, table: name, path: path)
            }
        }
    }

    /// The error for a damaged page or record of table `name`.
    static func damaged(_ error: PageError, table name: String, path: String) -> DatabaseError {
        DatabaseError(code: .corrupt, message: "table \(name): damaged page read (\(error)); `litectl check` tells more", path: path)
    }

    /// Both sides of `plan`'s table as raw records (see `RecordStream`): when
    /// both are read from their pages in the merge's key order and a record
    /// reads as the same row on either side (`TableLayout.decodesAlike`), and
    /// the key is the rowid or leads the record (a WITHOUT ROWID table). nil
    /// otherwise, noting nothing: the caller reads rows as before (and notes
    /// why there).
    static func recordStreams(_ plan: TablePlan, _ a: PageSource, _ b: PageSource) throws -> (a: RecordStream, b: RecordStream)? {
        guard a.owner.compareRecords, plan.mode != .multiset, !plan.userKey,
              try a.orderMismatch(plan) == nil, try b.orderMismatch(plan) == nil,
              let la = try? a.reader.layout(a.table, columns: plan.columns, rowidName: plan.rowidColumn),
              let lb = try? b.reader.layout(b.table, columns: plan.columns, rowidName: plan.rowidColumn),
              la.decodesAlike(lb) else { return nil }
        // The key columns in key order: the rowid, or a WITHOUT ROWID table's
        // primary key (the record's first fields).
        let keys = plan.keyIndexes
        guard !keys.isEmpty else { return nil }
        for (k, i) in keys.enumerated() {
            switch la.columns[i].source {
            case .rowid: guard !la.withoutRowid, keys.count == 1 else { return nil }
            case .field(let n): guard la.withoutRowid, n == k else { return nil }
            }
        }
        guard let sa = try a.recordStream(la, plan: plan) else { return nil }
        let sb: RecordStream?
        do {
            sb = try b.recordStream(lb, plan: plan)
        } catch {
            sa.close()
            throw error
        }
        guard let sb else {
            sa.close()
            return nil
        }
        return (sa, sb)
    }

    /// This side's rows as key columns and raw records.
    private func recordStream(_ layout: TableLayout, plan: TablePlan) throws -> RecordStream? {
        let keys = plan.keyIndexes
        guard let rows = try stream(layout, columns: keys.count + 1, noting: false, produce: { decoder, part, sink in
            try decoder.forEachCell(in: part) { page, cell in try sink.append(try decoder.keysAndRecord(page, cell, keys: keys)) }
        }) else { return nil }
        let decoder = reader.decoder(layout, claimed: ClaimedPages(pageCount: 0))
        return RecordStream(rows: rows, keyCount: keys.count, columns: plan.columns.count, decoder: decoder,
                            table: table.name, path: reader.connection.path)
    }
}

/// One side of a table as raw records, for a merge that compares them as
/// bytes: each row is its key columns (decoded) followed by its whole record
/// as a BLOB, read from the pages on other threads. Two equal records under
/// the same key are equal rows (the layouts decode alike: see
/// `PageSource.recordStreams`); a row the merge must report or look into
/// (records that differ, a row on one side only) is decoded on the merge's
/// thread by the decoder that would have decoded it on a reading thread.
final class RecordStream {
    private let rows: RowStream
    let keyCount: Int
    private let decoder: RowDecoder
    private let scratch: RowBatch
    private let withoutRowid: Bool
    private let table: String, path: String

    init(rows: RowStream, keyCount: Int, columns: Int, decoder: RowDecoder, table: String, path: String) {
        self.rows = rows
        self.keyCount = keyCount
        self.decoder = decoder
        scratch = RowBatch(columns: columns, byteCapacity: 1 << 10)
        withoutRowid = decoder.layout.withoutRowid
        self.table = table
        self.path = path
    }

    func next() throws -> Bool { try rows.next() }

    /// The current row's key columns (0..<keyCount) and record (at keyCount).
    var keys: DiffRow { rows.row }

    /// The current row's whole record.
    var record: UnsafeRawBufferPointer { rows.row.bytes(at: keyCount) }

    /// The current row decoded into the plan's columns, valid until the next
    /// call of `decoded`.
    func decoded() throws -> DiffRow {
        let raw = rows.row
        // A rowid table's key is its rowid (see `PageSource.recordStreams`).
        let rowid = withoutRowid ? 0 : raw.int64(at: 0)
        scratch.removeAll()
        do {
            scratch.append(try decoder.decode(record: raw.bytes(at: keyCount), rowid: rowid))
        } catch let error as PageError {
            throw PageSource.damaged(error, table: table, path: path)
        }
        return scratch.row(0)
    }

    func close() { rows.close() }
}
