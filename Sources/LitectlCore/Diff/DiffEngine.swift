// The row-level diff engine: for each table, A and B are read in key order on
// separate connections (never ATTACH: the two files may differ in text
// encoding) and merged in one pass, comparing values exactly. Where a table's
// b-tree order is the merge's key order, its rows are decoded straight from
// the pages (DiffPages), in key-ordered parts on several threads per side;
// otherwise statements read it. Memory does not grow with table size: a few
// batches of rows per reading thread.
import CSQLite

/// Where a long diff is: a table's name and the rows read so far (both
/// sides), every 100,000 rows; nil once at the end.
public typealias DiffProgress = (String?, Int) -> Void

public enum DiffEngine {
    /// Compares the databases at `pathA` and `pathB`, reporting to `consumer`.
    /// Both are opened read-only, each read inside one transaction (one snapshot).
    /// The same file on both sides is identical at once.
    @discardableResult
    ///
    /// `progress`, when given, is called every 100,000 rows of a table with
    /// the table's name and the rows read so far (both sides), and with nil
    /// once at the end, so that a terminal can show where a long diff is.
    public static func run(pathA: String, pathB: String, options: DiffOptions, consumer: DiffConsumer,
                           busyTimeout: Int = Connection.defaultBusyTimeout,
                           progress: DiffProgress? = nil) throws -> DiffSummary {
        defer { progress?(nil, 0) }
        let a = try Connection(path: pathA, mode: .readOnly, busyTimeout: busyTimeout)
        let b = try Connection(path: pathB, mode: .readOnly, busyTimeout: busyTimeout)
        if sameFile(pathA, pathB) {
            let schema = try a.readSchema()
            let comparison = try SchemaComparison(a: schema, b: schema, connectionA: a, connectionB: a, options: options)
            try consumer.begin(comparison)
            let summary = DiffSummary()
            try consumer.finish(summary)
            return summary
        }
        // Rows are read once, in order: a small page cache holds the interior
        // pages that the range reads of the shared-pages shortcut revisit.
        try a.execute("PRAGMA cache_size = -1024")
        try b.execute("PRAGMA cache_size = -1024")
        // Read before each transaction begins and right after, to pin down its snapshot's -wal frames.
        let beforeA = options.readPages ? WALIndexHeader.current(a) : nil
        let beforeB = options.readPages ? WALIndexHeader.current(b) : nil
        return try a.readTransaction {
            let walA = WALIndexHeader.pinned(a, before: beforeA)
            return try b.readTransaction {
                let walB = WALIndexHeader.pinned(b, before: beforeB)
                let pages = options.readPages && !options.schemaOnly
                    ? DiffPages(a, walIndex: walA, b, walIndex: walB, threadsPerSide: options.threadsPerSide,
                                compareRecords: options.compareRecords) : nil
                return try run(a, b, options: options, consumer: consumer, pages: pages, progress: progress)
            }
        }
    }

    static func sameFile(_ x: String, _ y: String) -> Bool {
        // A moment is no file: one moment, opened once, is the same as itself.
        if PageVFS.namesSource(x) || PageVFS.namesSource(y) {
            guard let a = PageVFS.source(named: x), let b = PageVFS.source(named: y) else { return false }
            return a === b
        }
        var sx = stat(), sy = stat()
        guard stat(x, &sx) == 0, stat(y, &sy) == 0 else { return false }
        return sx.st_dev == sy.st_dev && sx.st_ino == sy.st_ino
    }

    static func run(_ a: Connection, _ b: Connection, options: DiffOptions, consumer: DiffConsumer,
                    pages: DiffPages? = nil, progress: DiffProgress? = nil) throws -> DiffSummary {
        var options = options
        // A --data-only patch changes no schema: it writes the columns both sides name alike.
        options.compareAcrossColumns = !(consumer.rebuildsChangedTables && options.dataOnly)
        let comparison = try SchemaComparison(a: try a.readSchema(), b: try b.readSchema(), connectionA: a, connectionB: b,
                                              options: options)
        try consumer.begin(comparison)
        var summary = DiffSummary()
        summary.schemaChanges = comparison.changes
        let shared = options.skipSharedPages && !options.schemaOnly ? try SharedPages(a, b) : nil
        if !options.schemaOnly {
            var work: [(a: Table?, b: Table?, rebuild: Bool)] = []
            for pair in comparison.sameTables { work.append((pair.a, pair.b, false)) }
            for pair in comparison.changedTables {
                // A patch rebuilds a table that no ALTER TABLE turns into B's;
                // the others are compared row by row on every column.
                let rebuild = consumer.rebuildsChangedTables && !options.dataOnly
                    && comparison.alterations[sqlNameKey(pair.b.name)] == nil
                work.append(rebuild ? (nil, pair.b, true) : (pair.a, pair.b, false))
            }
            if !options.dataOnly {
                for table in comparison.addedTables { work.append((nil, table, false)) }
            }
            work.sort { compareNames(($0.b ?? $0.a)!.name, ($1.b ?? $1.a)!.name) }
            for item in work {
                let shortcut = try item.a.flatMap { ta in try item.b.flatMap { tb in try shared?.shortcut(ta, tb) } }
                let counts = try diffTable(a, item.a, b, item.b, options: options, consumer: consumer, shortcut: shortcut,
                                           pages: pages, progress: progress)
                summary.tables.append(((item.b ?? item.a)!.name, counts))
            }
            if !options.dataOnly {
                for table in comparison.droppedTables {
                    var counts = ChangeCounts()
                    if table.problem == nil, case .integer(let n) = try a.scalar("SELECT count(*) FROM \(quoteIdentifier(table.name))") ?? .null {
                        counts.deleted = Int(n)
                    }
                    summary.tables.append((table.name, counts))
                }
                summary.tables.sort { compareNames($0.name, $1.name) }
            }
        }
        summary.notes = pages?.notes ?? []
        try consumer.finish(summary)
        return summary
    }

    // MARK: Planning

    /// The name the rowid is selected under: the first of SQLite's names
    /// that no column takes ("rowid" when columns take all three: see README).
    static func rowidName(_ tables: [Table]) -> String {
        selectableRowidName(tables) ?? "rowid"
    }

    /// The first of SQLite's names for the rowid that no column of `tables`
    /// takes; nil when columns take all three (the rowid cannot be selected).
    static func selectableRowidName(_ tables: [Table]) -> String? {
        let names = Set(tables.flatMap { $0.columns.map { sqlNameKey($0.name) } })
        return ["rowid", "_rowid_", "oid"].first { !names.contains(sqlNameKey($0)) }
    }

    /// How to read and match `b` against `a` (either may be nil: table on one side only).
    static func plan(_ a: Table?, _ b: Table?, options: DiffOptions, keylessMode: MatchMode? = nil) throws -> TablePlan {
        let reference = (b ?? a)!
        let both = [a, b].compactMap { $0 }
        // Columns present on both sides (all of B's when A is absent), in B's
        // order; across a rename, addition or drop of columns, all of them
        // (B's, then those dropped), each side read by its own names.
        var columns = reference.contentColumns
        var across: AcrossColumns? = nil
        var keyOfA: [String]? = a?.primaryKey.map(\.name)
        if let a, let b {
            let namesA = Set(a.contentColumns.map { sqlNameKey($0.name) })
            columns = b.contentColumns.filter { namesA.contains(sqlNameKey($0.name)) }
            if options.compareAcrossColumns && namesA != Set(b.contentColumns.map { sqlNameKey($0.name) }) {
                let pairing = ColumnPairing.pair(a, b)
                let absent = pairing.entries.map { entry -> Value in
                    guard entry.kind == .added, let column = b.columns.first(where: { $0.name == entry.nameB! }) else { return .null }
                    return addedColumnValue(column)
                }
                across = AcrossColumns(namesA: pairing.entries.map(\.nameA), namesB: pairing.entries.map(\.nameB),
                                       absentValues: absent, pairing: pairing)
                keyOfA = pairing.primaryKeyOfA(a)
            }
        }
        let ignored = Set(options.ignoredColumns.compactMap { spec -> [UInt8]? in
            guard let dot = spec.lastIndex(of: ".") else { return nil }
            return sameSQLName(String(spec[..<dot]), reference.name) ? sqlNameKey(String(spec[spec.index(after: dot)...])) : nil
        })
        var names = across.map { $0.pairing.entries.map(\.name) } ?? columns.map(\.name)
        var keyNames: [String] = []
        var mode: MatchMode = .key
        var rowidColumn: String? = nil
        let isVirtual = reference.kind == .virtual
        let userKey = options.keys.first { sameSQLName($0.key, reference.name) }?.value
        // A's key in B's names (a renamed key column is the same key).
        var declaredKeys: [[[UInt8]]] = []
        if a != nil { declaredKeys.append((keyOfA ?? []).map { sqlNameKey($0) }) }
        if let b { declaredKeys.append(b.primaryKey.map { sqlNameKey($0.name) }) }
        let sameKey = declaredKeys.allSatisfy { $0 == declaredKeys[0] } && !declaredKeys[0].isEmpty
        let rowidTables = both.allSatisfy { !$0.withoutRowid }
        if let userKey {
            keyNames = userKey
        } else if isVirtual {
            mode = .rowid
        } else if sameKey {
            keyNames = reference.primaryKey.map(\.name)
        } else if options.matchRowid && rowidTables {
            mode = .rowid
        } else if let keylessMode, keylessMode == .rowid, rowidTables {
            mode = .rowid
        } else {
            mode = .multiset
        }
        if mode == .rowid {
            let name = rowidName(both)
            rowidColumn = name
            names.insert(name, at: 0)
            across?.namesA.insert(name, at: 0)
            across?.namesB.insert(name, at: 0)
            across?.absentValues.insert(.null, at: 0)
        }
        let lowered = names.map(sqlNameKey)
        var keyIndexes: [Int] = []
        switch mode {
        case .key:
            for key in keyNames {
                guard let i = lowered.firstIndex(of: sqlNameKey(key)) else {
                    throw DatabaseError(code: .error, message: "no column \(key) in table \(reference.name) (from --key)")
                }
                keyIndexes.append(i)
            }
        case .rowid:
            keyIndexes = [0]
        case .multiset:
            keyIndexes = names.indices.filter { !ignored.contains(lowered[$0]) }
        }
        if let across, mode != .multiset {
            for i in keyIndexes where across.namesA[i] == nil || across.namesB[i] == nil {
                throw DatabaseError(code: .error, message: "table \(reference.name): key column \(names[i]) is not in both databases")
            }
        }
        let keySet = Set(keyIndexes)
        let compared = names.indices.filter { !keySet.contains($0) && !ignored.contains(lowered[$0]) }
        return TablePlan(name: reference.name, columns: names, keyIndexes: keyIndexes, comparedIndexes: compared, mode: mode,
                         rowidColumn: rowidColumn, onlyInB: a == nil, onlyInA: b == nil, isVirtual: isVirtual,
                         userKey: userKey != nil, across: across)
    }

    /// SELECT of the plan's columns from `table`, ordered by the key under
    /// BINARY (never the column's collation). For a multiset, each column is
    /// followed by typeof() so that 1 sorts before 1.0 on both sides alike.
    static func selectSQL(_ plan: TablePlan, where filter: String? = nil) -> String {
        let parts = selectParts(plan, where: filter, columnLimit: Int.max)
        return "SELECT \(parts.columns.isEmpty ? "NULL" : parts.columns.joined(separator: ", "))\(parts.tail)"
    }

    /// `selectSQL` as its result columns and the rest (FROM, WHERE, ORDER BY),
    /// for a `WideSelect`: when the columns (the rowid and 2,000 others) are
    /// more than `columnLimit`, the rows are read in parts that must come in
    /// one order, so rows the key leaves in a tie (a multiset's equal rows)
    /// are ordered by the rowid last.
    static func selectParts(_ plan: TablePlan, where filter: String? = nil, columnLimit: Int) -> (columns: [String], tail: String) {
        func expression(_ i: Int) -> String {
            if i == 0 && plan.rowidColumn != nil { return plan.columns[0] }
            guard let across = plan.across, let side = plan.readSide else { return quoteIdentifier(plan.columns[i]) }
            // A column the side lacks reads as the value its rows are taken to hold (bound).
            return (side == .a ? across.namesA[i] : across.namesB[i]).map(quoteIdentifier) ?? absentParameter(i)
        }
        let list = plan.columns.indices.map(expression)
        var order: [String] = []
        for i in plan.keyIndexes {
            let column = expression(i)
            if plan.rowidColumn != nil && i == 0 { order.append(column); continue }
            order.append(column + " COLLATE BINARY")
            if plan.mode == .multiset || plan.userKey { order.append("typeof(\(column))") }
        }
        // SQLite takes as many ORDER BY terms as result columns (SQLITE_MAX_COLUMN).
        let split = list.count > columnLimit
        let termLimit = min(columnLimit, 2000) - (split ? 1 : 0)
        if order.count > termLimit { order = plan.keyIndexes.prefix(termLimit).map { expression($0) + " COLLATE BINARY" } }
        if split, let rowid = plan.rowidColumn, plan.mode != .rowid { order.append(rowid) }
        let tail = " FROM \(quoteIdentifier(plan.name))" + (filter.map { " WHERE " + $0 } ?? "")
            + (order.isEmpty ? "" : " ORDER BY " + order.joined(separator: ", "))
        return (list, tail)
    }

    /// The plan's rows as a statement, or several stepped together when the
    /// row is wider than SQLite returns at once.
    static func prepareRows(_ connection: Connection, _ plan: TablePlan, where filter: String? = nil) throws -> WideSelect {
        let parts = selectParts(plan, where: filter, columnLimit: connection.columnLimit)
        let select = try WideSelect(connection, columns: parts.columns, tail: parts.tail)
        if let across = plan.across, let side = plan.readSide {
            let names = side == .a ? across.namesA : across.namesB
            for i in names.indices where names[i] == nil {
                try select.bind { statement in
                    if sqlite3_bind_parameter_index(statement.handle, absentParameter(i)) > 0 {
                        try statement.bind(across.absentValues[i], named: absentParameter(i))
                    }
                }
            }
        }
        return select
    }

    /// The parameter a side's statement selects for plan column `i`, which that side lacks.
    static func absentParameter(_ i: Int) -> String { ":litectl_absent_\(i)" }

    // MARK: Merging

    static func diffTable(_ ca: Connection, _ ta: Table?, _ cb: Connection, _ tb: Table?, options: DiffOptions,
                          consumer: DiffConsumer, shortcut given: TableShortcut? = nil, pages: DiffPages? = nil,
                          progress: DiffProgress? = nil) throws -> ChangeCounts {
        let reference = (tb ?? ta)!
        if let problem = reference.problem {
            throw DatabaseError(code: .error, message: "cannot read table \(reference.name): \(problem)")
        }
        var options = options
        var plan = try plan(ta, tb, options: options)
        // Columns read by different names on each side: statements read them,
        // every row (pages and shared ranges are matched by one column list).
        let sources = plan.across == nil ? pages?.sources(ta, tb) : nil
        let shortcut = plan.across == nil ? given : nil
        if plan.userKey && consumer.wantsRowidsForKeylessTables && !(ta?.withoutRowid ?? false) && !(tb?.withoutRowid ?? false) {
            // A patch cannot address rows by a --key that may repeat: tables
            // without a primary key are written by rowid whatever --key says.
            options.keys = options.keys.filter { !sameSQLName($0.key, reference.name) }
            plan = try self.plan(ta, tb, options: options)
        }
        if plan.mode == .multiset && consumer.wantsRowidsForKeylessTables && ta == nil && tb != nil {
            // A table the patch creates (added, or rebuilt from B's rows) is
            // read by rowid, so that its rows keep B's rowids.
            let byRowid = try self.plan(ta, tb, options: options, keylessMode: .rowid)
            if byRowid.mode == .rowid { plan = byRowid }
        }
        if plan.mode == .multiset && ta != nil && tb != nil {
            // Rows equal under the same rowid are equal as a multiset: one
            // pass in rowid order (from the pages where it can be) leaves
            // only the rows that differ, compared as multisets in memory (or
            // sorted in a temporary file). No sort of the whole table; when
            // most of it differs under the same rowids, SQLite sorts both
            // sides instead (below).
            let byRowid = try self.plan(ta, tb, options: options, keylessMode: .rowid)
            if byRowid.mode == .rowid,
               let residue = try KeylessResidue.collect(ca, cb, byRowid: byRowid, shortcut: shortcut, sources: sources,
                                                        progress: progress) {
                if consumer.wantsRowidsForKeylessTables {
                    // Counted as multisets; written by rowid only if they differ.
                    let counting = try residue.compareAsMultisets(plan, consumer: nil)
                    if counting.total == 0 {
                        try consumer.beginTable(plan)
                        try consumer.endTable(plan, counts: counting)
                        return counting
                    }
                    try consumer.beginTable(byRowid)
                    try residue.replayByRowid(byRowid, consumer: consumer)
                    try consumer.endTable(byRowid, counts: counting)
                    return counting
                }
                try consumer.beginTable(plan)
                let counts = try residue.compareAsMultisets(plan, consumer: consumer)
                try consumer.endTable(plan, counts: counts)
                return counts
            }
        }
        if plan.mode == .multiset && consumer.wantsRowidsForKeylessTables && ta != nil && tb != nil {
            // Count as multisets; match by rowid only if they differ.
            let counting = try merge(ca, cb, plan: plan, consumer: nil, shortcut: shortcut, progress: progress)
            if counting.total == 0 {
                try consumer.beginTable(plan)
                try consumer.endTable(plan, counts: counting)
                return counting
            }
            let rowidPlan = try self.plan(ta, tb, options: options, keylessMode: .rowid)
            if rowidPlan.mode == .rowid {
                plan = rowidPlan
                try consumer.beginTable(plan)
                _ = try merge(ca, cb, plan: plan, consumer: consumer, shortcut: shortcut, sources: sources, progress: progress)
                try consumer.endTable(plan, counts: counting)
                return counting
            }
        }
        try consumer.beginTable(plan)
        let sideA = ta == nil ? nil : ca, sideB = tb == nil ? nil : cb
        let nullable = keyMayBeNull(plan, [ta, tb].compactMap { $0 })
        var (counts, nullKeyRows) = try mergeCounting(sideA, sideB, plan: plan, consumer: consumer, shortcut: shortcut,
                                                     skippingNullKeys: nullable, sources: sources, progress: progress)
        if nullKeyRows > 0 {
            // Rows whose key holds a NULL have no key: SQLite lets any number
            // of them share it. They are compared as a multiset of whole rows,
            // and reported (and patched) as rows without a key.
            // A patch deletes them by rowid (exact, whatever the values); the
            // comparison leaves the rowid out.
            let rowid = consumer.wantsRowidsForKeylessTables ? selectableRowidName([ta, tb].compactMap { $0 }) : nil
            let (plan, filter) = nullKeyPlan(plan, rowid: rowid)
            let more = try merge(sideA, sideB, plan: plan, consumer: consumer, filter: filter, progress: progress)
            counts.inserted += more.inserted
            counts.deleted += more.deleted
            counts.updated += more.updated
        }
        try consumer.endTable(plan, counts: counts)
        return counts
    }

    /// True when the key of `plan` may hold NULL in some row of `tables`:
    /// a key column neither declared NOT NULL nor made so by SQLite (the
    /// rowid's INTEGER PRIMARY KEY, a WITHOUT ROWID table's primary key).
    /// A UNIQUE column lets any number of rows hold NULL too, so a --key on
    /// it is no better.
    static func keyMayBeNull(_ plan: TablePlan, _ tables: [Table]) -> Bool {
        guard plan.mode == .key else { return false }
        for table in tables {
            for i in plan.keyIndexes {
                guard let column = table.columns.first(where: { sameSQLName($0.name, plan.columns[i]) }) else { continue }
                if column.notNull || (column.primaryKeyPosition > 0 && (table.withoutRowid || table.hasRowidAlias)) { continue }
                return true
            }
        }
        return false
    }

    /// The plan for the rows of `plan`'s table whose key holds a NULL: a
    /// multiset of the columns `plan` compares (key included), and the SQL
    /// condition that selects those rows. With `rowid` (a name to select it
    /// by), the rowid is read too, as column 0, but not compared: a patch
    /// deletes by it.
    static func nullKeyPlan(_ plan: TablePlan, rowid: String? = nil) -> (plan: TablePlan, filter: String) {
        var multiset = plan
        multiset.mode = .multiset
        multiset.userKey = false
        let wanted = Set(plan.keyIndexes + plan.comparedIndexes)
        multiset.keyIndexes = plan.columns.indices.filter { wanted.contains($0) }
        multiset.comparedIndexes = []
        if let rowid {
            multiset.columns.insert(rowid, at: 0)
            multiset.keyIndexes = multiset.keyIndexes.map { $0 + 1 }
            multiset.rowidColumn = rowid
            multiset.across?.namesA.insert(rowid, at: 0)
            multiset.across?.namesB.insert(rowid, at: 0)
            multiset.across?.absentValues.insert(.null, at: 0)
        }
        let filter = plan.keyIndexes.map { quoteIdentifier(plan.columns[$0]) + " IS NULL" }.joined(separator: " OR ")
        return (multiset, "(" + filter + ")")
    }

    /// One pass over both sides in key order. A nil connection is an empty
    /// side. Each side is read on its own thread (see `RowStream`). `filter`
    /// (SQL) limits the rows read.
    static func merge(_ ca: Connection?, _ cb: Connection?, plan: TablePlan, consumer: DiffConsumer?,
                      stopAtFirstDifference: Bool = false, shortcut: TableShortcut? = nil,
                      filter: String? = nil, sources: (a: PageSource?, b: PageSource?)? = nil,
                      progress: DiffProgress? = nil) throws -> ChangeCounts {
        try mergeCounting(ca, cb, plan: plan, consumer: consumer, stopAtFirstDifference: stopAtFirstDifference,
                          shortcut: shortcut, filter: filter, sources: sources, progress: progress).counts
    }

    /// `merge`, and with `skippingNullKeys` rows whose key holds a NULL left
    /// out of it and counted (both sides together).
    static func mergeCounting(_ ca: Connection?, _ cb: Connection?, plan: TablePlan, consumer: DiffConsumer?,
                              stopAtFirstDifference: Bool = false, shortcut: TableShortcut? = nil, filter: String? = nil,
                              skippingNullKeys: Bool = false,
                              sources: (a: PageSource?, b: PageSource?)? = nil,
                              progress: DiffProgress? = nil) throws -> (counts: ChangeCounts, nullKeyRows: Int) {
        let bothUTF8 = try isUTF8(ca) && isUTF8(cb)
        // In UTF-8 databases SQLite's BINARY order is the engine's order (with
        // typeof() breaking 1 / 1.0 ties); UTF-16 text sorts differently, so
        // there each side's order is checked row by row.
        let checkOrder = plan.mode != .rowid && !bothUTF8
        let reading = try self.reading(plan, shortcut: shortcut, filter: filter, sources: sources)
        if filter == nil, !skippingNullKeys, reading.isEverything, let ca, let cb,
           let pa = sources?.a, let pb = sources?.b, let records = try PageSource.recordStreams(plan, pa, pb) {
            defer {
                records.a.close()
                records.b.close()
            }
            // Raw records: the keys are the stream's first columns.
            return try mergeSides(records.a, records.b, plan: plan, keys: Array(0..<records.a.keyCount), consumer: consumer,
                                  stopAtFirstDifference: stopAtFirstDifference, skippingNullKeys: false,
                                  checkOrder: checkOrder, paths: (ca.path, cb.path), progress: progress)
        }
        let sa = try ca.map { try stream($0, plan.reading(.a), reading, filter: filter, pages: sources?.a) }
        defer { sa?.close() }
        let sb = try cb.map { try stream($0, plan.reading(.b), reading, filter: filter, pages: sources?.b) }
        defer { sb?.close() }
        return try mergeSides(sa, sb, plan: plan, keys: plan.keyIndexes, consumer: consumer,
                              stopAtFirstDifference: stopAtFirstDifference, skippingNullKeys: skippingNullKeys,
                              checkOrder: checkOrder, paths: (ca?.path ?? "", cb?.path ?? ""), progress: progress)
    }

    /// The merge of two sides in key order (`keys`: where each side's key
    /// columns are); a nil side is an empty one. Rows under the same key
    /// that are the same bytes are equal rows and are not decoded; the others
    /// are decoded and compared value by value (two records may differ in
    /// bytes and not in values: an integer stored in more bytes than it
    /// needs, 1 and 1.0 in a REAL column).
    static func mergeSides<Side: MergeSide>(_ sa: Side?, _ sb: Side?, plan: TablePlan, keys: [Int], consumer: DiffConsumer?,
                                            stopAtFirstDifference: Bool, skippingNullKeys: Bool, checkOrder: Bool,
                                            paths: (a: String, b: String),
                                            progress: DiffProgress? = nil) throws -> (counts: ChangeCounts, nullKeyRows: Int) {
        // Order checks see the keys where the sides hold them.
        var keyPlan = plan
        keyPlan.keyIndexes = keys
        func keyHoldsNull(_ row: DiffRow) -> Bool { keys.contains { row.isNull(at: $0) } }
        var counts = ChangeCounts()
        var nullKeyRows = 0
        var previousA: [Value] = [], previousB: [Value] = []
        var processed = 0
        // A row of one side only: deleted (A) or inserted (B).
        func single(_ side: Side, inA: Bool) throws {
            if inA {
                counts.deleted += 1
                if let consumer { try consumer.deleted(plan, old: try side.decoded()) }
                if checkOrder { try checkAscending(side.keyRow, keyPlan, &previousA, path: paths.a) }
            } else {
                counts.inserted += 1
                if let consumer { try consumer.inserted(plan, new: try side.decoded()) }
                if checkOrder { try checkAscending(side.keyRow, keyPlan, &previousB, path: paths.b) }
            }
        }
        guard let sa, let sb else {
            // The table on one side only.
            guard let side = sa ?? sb else { return (counts, 0) }
            while try side.next() {
                if stopAtFirstDifference && counts.total > 0 { break }
                if skippingNullKeys && keyHoldsNull(side.keyRow) { nullKeyRows += 1; continue }
                processed += 1
                if processed % 100_000 == 0, let progress { progress(plan.name, processed) }
                try single(side, inA: sa != nil)
            }
            return (counts, nullKeyRows)
        }
        var hasA = try sa.next(), hasB = try sb.next()
        var changed: [Int] = []
        while hasA || hasB {
            if stopAtFirstDifference && counts.total > 0 { break }
            if skippingNullKeys {
                if hasA && keyHoldsNull(sa.keyRow) { nullKeyRows += 1; hasA = try sa.next(); continue }
                if hasB && keyHoldsNull(sb.keyRow) { nullKeyRows += 1; hasB = try sb.next(); continue }
            }
            processed += 1
            if processed % 100_000 == 0, let progress { progress(plan.name, processed) }
            let order: Int
            if !hasA { order = 1 } else if !hasB { order = -1 } else { order = compareKey(sa.keyRow, sb.keyRow, keys) }
            if order < 0 {
                try single(sa, inA: true)
                hasA = try sa.next()
            } else if order > 0 {
                try single(sb, inA: false)
                hasB = try sb.next()
            } else {
                if !sa.sameBytes(as: sb) {
                    // The values decide (the bytes differed: for decoded rows
                    // already in their values, for raw records perhaps only
                    // in how they are stored).
                    let ra = try sa.decoded(), rb = try sb.decoded()
                    changed.removeAll(keepingCapacity: true)
                    for i in plan.comparedIndexes where !cellsIdentical(ra, rb, i) { changed.append(i) }
                    if !changed.isEmpty {
                        counts.updated += 1
                        try consumer?.updated(plan, old: ra, new: rb, changed: changed)
                    }
                }
                if checkOrder {
                    try checkAscending(sa.keyRow, keyPlan, &previousA, path: paths.a)
                    try checkAscending(sb.keyRow, keyPlan, &previousB, path: paths.b)
                }
                hasA = try sa.next()
                hasB = try sb.next()
            }
        }
        return (counts, nullKeyRows)
    }

    /// Which rows of `plan`'s table a merge reads: those outside the ranges
    /// both files share (see `shortcut`), or all of them.
    static func reading(_ plan: TablePlan, shortcut: TableShortcut?, filter: String?,
                        sources: (a: PageSource?, b: PageSource?)?) throws -> TableShortcut.Reading {
        var reading = shortcut?.reading(plan) ?? .everything
        if let shortcut, shortcut.shared.sharedPages * 8 < shortcut.shared.leavesA, filter == nil, sources?.a != nil,
           try sources?.a?.orderMismatch(plan) == nil, try sources?.b?.orderMismatch(plan) == nil {
            // Hardly any leaf shared whole, only cells here and there (a
            // VACUUMed or restored copy): a statement per gap between them
            // costs more than decoding every row from the pages. (A pair
            // that shares history, even with half its leaves changed, reads
            // only the gaps: fewer rows.)
            reading = .everything
        }
        return reading
    }

    /// A stream of a side's rows: all of them, or only those outside the
    /// ranges both files share.
    static func stream(_ connection: Connection, _ plan: TablePlan, _ reading: TableShortcut.Reading,
                       filter: String? = nil, pages: PageSource? = nil) throws -> RowStream {
        var reading = reading
        switch reading {
        case .gaps(_, let ranges) where ranges.isEmpty, .unsharedRowids(_, let ranges) where ranges.isEmpty:
            // Nothing shared (a VACUUMed or restored copy): every row, from the pages where it can be.
            reading = .everything
        case .spans where reading.isEverything:
            reading = .everything
        case .everything:
            break
        default:
            pages?.noteStatements("rows outside the pages both files share")
        }
        switch reading {
        case .everything:
            if filter == nil, let pages, let stream = try pages.stream(plan) { return stream }
            return try RowStream(try prepareRows(connection, plan, where: filter))
        case .unsharedRowids(let rowid, let ranges):
            try RowidFilter.register(ranges, on: connection)
            return try RowStream(try prepareRows(connection, plan, where: "litectl_unshared(\(rowid))"))
        case .gaps(let keys, let ranges):
            guard !ranges.isEmpty else { return try RowStream(try prepareRows(connection, plan)) }
            // The rows strictly between shared ranges, gap by gap in key order:
            // below the first range, between each two, above the last.
            let key = keys.count == 1 ? keys[0] : "(" + keys.joined(separator: ", ") + ")"
            func parameters(_ first: Int) -> String {
                keys.count == 1 ? "?\(first)" : "(" + keys.indices.map { "?\(first + $0)" }.joined(separator: ", ") + ")"
            }
            let below = try prepareRows(connection, plan, where: "\(key) < \(parameters(1))")
            let between = try prepareRows(connection, plan, where: "\(key) > \(parameters(1)) AND \(key) < \(parameters(keys.count + 1))")
            let above = try prepareRows(connection, plan, where: "\(key) > \(parameters(1))")
            return try RowStream(columns: below.columnCount, segmentCount: ranges.count + 1) { i in
                let select = i == 0 ? below : (i == ranges.count ? above : between)
                select.reset()
                try select.bind { statement in
                    if i == 0 {
                        _ = try ranges[0].low.bind(to: statement, at: 1)
                    } else {
                        let next = try ranges[i - 1].high.bind(to: statement, at: 1)
                        if i < ranges.count { _ = try ranges[i].low.bind(to: statement, at: next) }
                    }
                }
                return select
            }
        case .spans(let keys, let spans):
            // The rows inside each span, span by span in key order; one
            // statement for each shape of span (which ends it has, included or not).
            let key = keys.count == 1 ? keys[0] : "(" + keys.joined(separator: ", ") + ")"
            func parameters(_ first: Int) -> String {
                keys.count == 1 ? "?\(first)" : "(" + keys.indices.map { "?\(first + $0)" }.joined(separator: ", ") + ")"
            }
            func shape(_ span: KeySpan) -> String {
                var terms: [String] = []
                if span.low != nil { terms.append("\(key) \(span.lowIncluded ? ">=" : ">") \(parameters(1))") }
                if span.high != nil {
                    terms.append("\(key) \(span.highIncluded ? "<=" : "<") \(parameters(span.low == nil ? 1 : keys.count + 1))")
                }
                return terms.isEmpty ? "1" : terms.joined(separator: " AND ")
            }
            var selects: [String: WideSelect] = [:]
            for span in spans where selects[shape(span)] == nil {
                selects[shape(span)] = try prepareRows(connection, plan, where: shape(span))
            }
            let columns = try selects.values.first?.columnCount ?? prepareRows(connection, plan, where: "0").columnCount
            let prepared = selects
            return try RowStream(columns: columns, segmentCount: spans.count) { i in
                let span = spans[i]
                let select = prepared[shape(span)]!
                select.reset()
                try select.bind { statement in
                    var next = 1
                    if let low = span.low { next = try KeyBound.values(low).bind(to: statement, at: next) }
                    if let high = span.high { _ = try KeyBound.values(high).bind(to: statement, at: next) }
                }
                return select
            }
        }
    }

    static func isUTF8(_ connection: Connection?) throws -> Bool {
        guard let connection else { return true }
        return try connection.scalar("PRAGMA encoding") == .text("UTF-8")
    }

    /// Fails when a side's rows do not come in the engine's order (a text key
    /// in a UTF-16 database, whose BINARY order is not UTF-8 byte order):
    /// the merge would otherwise report wrong differences.
    static func checkAscending(_ row: DiffRow, _ plan: TablePlan, _ previous: inout [Value], path: String) throws {
        let key = plan.keyIndexes.map { row.value(at: $0) }
        if !previous.isEmpty {
            var c = 0
            for (x, y) in zip(previous, key) { c = Value.compare(x, y); if c != 0 { break } }
            let ok = plan.mode == .multiset || plan.userKey ? c <= 0 : c < 0
            if !ok {
                throw DatabaseError(code: .error, message: "rows of table \(plan.name) do not come in exact key order (a UTF-16 database with text keys?); cannot compare it", path: path)
            }
        }
        previous = key
    }

    /// Compares the key columns of two rows in the engine's exact order.
    @inline(__always)
    static func compareKey(_ a: DiffRow, _ b: DiffRow, _ indexes: [Int]) -> Int {
        for i in indexes {
            let c = compareCells(a, b, i)
            if c != 0 { return c }
        }
        return 0
    }

    /// `Value.compare` on column `i` of two rows, without copying.
    @inline(__always)
    static func compareCells(_ a: DiffRow, _ b: DiffRow, _ i: Int) -> Int {
        let ta = a.storageClass(at: i), tb = b.storageClass(at: i)
        switch (ta, tb) {
        case (.integer, .integer):
            let x = a.int64(at: i), y = b.int64(at: i)
            return x < y ? -1 : (x == y ? 0 : 1)
        case (.null, .null):
            return 0
        case (.text, .text), (.blob, .blob):
            return compareBytes(a.bytes(at: i), b.bytes(at: i))
        default:
            return Value.compare(a.value(at: i), b.value(at: i))
        }
    }

    /// Exact equality of column `i`: same storage class, same bits or bytes.
    @inline(__always)
    static func cellsIdentical(_ a: DiffRow, _ b: DiffRow, _ i: Int) -> Bool {
        let t = a.storageClass(at: i)
        guard t == b.storageClass(at: i) else { return false }
        switch t {
        case .null: return true
        case .integer: return a.int64(at: i) == b.int64(at: i)
        case .real: return a.double(at: i).bitPattern == b.double(at: i).bitPattern
        case .text, .blob: return compareBytes(a.bytes(at: i), b.bytes(at: i)) == 0
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
