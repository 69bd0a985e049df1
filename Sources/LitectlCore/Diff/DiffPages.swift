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
    private(set) var notes: [String] = []
    private var noted: Set<String> = []
    /// Per side and table: the WITHOUT ROWID key sorts BINARY and ascending.
    private var treeOrderedKeys: [String: Bool] = [:]

    /// Call inside both read transactions; `walIndex` is each snapshot's
    /// pinned wal-index header (see `WALIndexHeader.pinned`).
    init(_ ca: Connection, walIndex wa: WALIndexHeader?, _ cb: Connection, walIndex wb: WALIndexHeader?, threadsPerSide: Int = 0) {
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
        let claimed = ClaimedPages(pageCount: reader.pages.pageCount)
        let threads = owner.threadsPerSide
        let parts: [TreePart]
        do {
            parts = threads > 1
                ? try BTreeWalker(pages: reader.pages, claimed: claimed).split(layout.root, index: layout.withoutRowid,
                                                                               wanted: threads * 4)
                : [.subtree(page: layout.root, depth: 0)]
        } catch {
            noteStatements("\(error)")
            return nil
        }
        let decoders = (0..<min(threads, parts.count)).map { _ in reader.decoder(layout, claimed: claimed) }
        let name = table.name, path = reader.connection.path
        return try RowStream(columns: plan.columns.count, parts: parts.count, threads: decoders.count) { part, sink in
            do {
                try decoders[part % decoders.count].forEachRow(in: parts[part]) { try sink.append($0) }
            } catch let error as PageError {
                throw DatabaseError(code: .corrupt, message: "table \(name): damaged page read (\(error)); `litectl check` tells more",
                                    path: path)
            }
        }
    }
}
