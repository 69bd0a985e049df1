// recover's fast path for tables whose b-trees are sound. SQLite copies such
// a table, with its indexes, straight from the damaged file (INSERT INTO t
// SELECT * FROM source.t, which SQLite runs as a transfer of b-tree records
// in key order, never decoding a row or sorting an index, as VACUUM does) on
// a second thread, while this thread walks the same b-trees with Recover/'s
// own readers and proves the copy right:
//   - every page of the table and of its indexes sound and owned once, every
//     cell whole, every row one that salvage would have written unchanged
//     (the table accepts it, no field short, no value its column's affinity
//     would convert);
//   - rowids (a WITHOUT ROWID table's primary keys) strictly ascending;
//   - every index holding exactly the entries its table's rows make (their
//     count, and a 128-bit sum of entry hashes), in ascending order under its
//     collations and sort orders, with no duplicate key where it is UNIQUE.
// That is what integrity_check would find of the copy. A table that fails any
// of it is emptied and salvaged row by row as before (its copy, if still
// running, is interrupted: SQLite would loop through a tree that revisits
// pages). Nothing is copied this way from a file with a -wal (SQLite and this
// reader would read different pages), a damaged schema or header, or text
// that is not UTF-8; nor tables with CHECK constraints, generated columns,
// expression or partial indexes, or collations other than BINARY, NOCASE and
// RTRIM: their rows cannot be proved here. A table is copied only from the
// root pages the proof walked, as SQLite's own reading of the schema places them.

import CSQLite
import Synchronization

/// A collation this reader can order keys by.
enum KeyCollation {
    case binary, nocase, rtrim

    init?(name: String) {
        switch asciiUpper(name) {
        case "BINARY": self = .binary
        case "NOCASE": self = .nocase
        case "RTRIM": self = .rtrim
        default: return nil
        }
    }
}

/// How one index's entries are made from its table's rows, and ordered.
struct IndexShape {
    var name: String
    var root: UInt32
    var unique: Bool
    /// Per entry field: the table column it holds (-1: the rowid).
    var columns: [Int]
    /// The leading fields that are the index's key.
    var keyCount: Int
    var collations: [KeyCollation]
    var descending: [Bool]
}

/// A table that may be copied b-tree by b-tree.
struct TreeCopyPlan {
    let table: SalvageTable
    var indexes: [IndexShape]
    /// A WITHOUT ROWID table's order (its primary key's fields first).
    var primaryKey: IndexShape?
    /// SQLite's transfer numbers rowids afresh for a rowid table with no
    /// INTEGER PRIMARY KEY and no index: such a table is copied only when
    /// its rowids are 1, 2, 3, ...
    var denseRowids: Bool
    /// Its non-UNIQUE indexes, made before the copy rather than after the rows.
    var earlyIndexes: [String] = []
    /// The tree numbers its indexes' walks used (released if it falls back).
    var indexTrees: [Int] = []
}

extension RecoveryRun {
    static let sourceSchema = "litectl_source"

    /// Copies the tables that can be copied b-tree by b-tree (see above);
    /// the others are left to `copyTables`.
    func copySoundTrees() throws {
        var plans = try planTreeCopies()
        guard !plans.isEmpty else { return }
        let db = out.db
        // ATTACH, DETACH and journal modes change outside a transaction. The
        // file's schema is read with writable_schema off, so that SQLite
        // refuses a schema whose rows disagree with their SQL (with it on, it
        // would skip such rows, and copy from b-trees other than those proved).
        try db.execute("COMMIT; PRAGMA writable_schema = OFF;")
        do {
            let attach = try db.prepare("ATTACH ?1 AS \(RecoveryRun.sourceSchema)")
            try attach.bind([.text(Array((Connection.fileURI(request.source) + "?mode=ro&immutable=1").utf8))])
            try attach.step()
        } catch {
            try dropEarlyIndexes(&plans)
            try db.execute("PRAGMA writable_schema = ON; BEGIN;")
            return
        }
        // Each table is copied in a transaction of its own, which a page
        // SQLite finds corrupt rolls back whole: that needs a journal (in
        // memory: the pages it holds are the few the copy changes of those
        // already in the file).
        try db.execute("PRAGMA main.journal_mode = MEMORY")
        // Only tables SQLite sees as the reader does (the same root pages),
        // and statements SQLite compiles as a transfer (any other would write
        // rows it decoded, or give them new rowids).
        let roots = RecoveryRun.sourceRoots(db)
        var kept: [TreeCopyPlan] = []
        for var plan in plans {
            if let roots, RecoveryRun.sourceMatches(roots, plan) && RecoveryRun.isTransfer(db, plan.table.name) {
                kept.append(plan)
            } else {
                try dropEarlyIndexes(of: &plan)
            }
        }
        plans = kept
        let names = plans.map { $0.table.name }
        // A copy whose table the proof refuses is interrupted: SQLite does not
        // notice a page reached twice, and would loop through such a tree.
        let control = CopyControl()
        let handle = db.rawHandle
        sqlite3_progress_handler(handle, 1000, { context in
            Unmanaged<CopyControl>.fromOpaque(context!).takeUnretainedValue().shouldStop ? 1 : 0
        }, Unmanaged.passUnretained(control).toOpaque())
        let copying = Concurrently.start { try RecoveryRun.transfer(db, names, control) }
        var proved: [Int?] = []
        let seed = (UInt64.random(in: 0...UInt64.max), UInt64.random(in: 0...UInt64.max))
        for index in plans.indices {
            let rows = prove(&plans[index], seed: seed)
            if rows == nil { control.refuse(index) }
            proved.append(rows)
        }
        // The proof usually ends first: meanwhile, the pages copied so far go to disk.
        out.flushWritten()
        let copied = Result { try copying.wait() }
        sqlite3_progress_handler(handle, 0, nil, nil)
        try db.execute("PRAGMA main.journal_mode = OFF")
        try db.execute("DETACH \(RecoveryRun.sourceSchema)")
        try db.execute("PRAGMA writable_schema = ON; BEGIN;")
        let done = try copied.get()
        copiesRefused += done.filter { $0 == .stopped }.count
        var released = Set<Int>()
        for index in plans.indices {
            var plan = plans[index]
            let table = plan.table
            if let rows = proved[index], done[index] == .copied,
               try db.scalar("SELECT count(*) FROM main.\(quoteIdentifier(table.name))") == .integer(Int64(rows)) {
                table.rows = rows
                table.treeCopied = true
                continue
            }
            // Salvaged row by row instead, from a clean start.
            try db.execute("DELETE FROM main.\(quoteIdentifier(table.name))")
            try dropEarlyIndexes(of: &plan)
            released.insert(table.id)
            released.formUnion(plan.indexTrees)
            table.forgetWalk()
        }
        owners.releaseTrees(released)
        payloads.trim()
    }

    // MARK: Planning

    /// The damaged file's schema, looked up by name and root page (built
    /// once: a hostile schema may hold many thousands of rows).
    private struct SchemaLookup {
        var tables: [[UInt8]: SchemaEntry] = [:]
        var indexes: [[UInt8]: [SchemaEntry]] = [:]
        var objectsAtRoot: [UInt32: Int] = [:]
        /// The shadow tables of R*Trees (rebuilt by their own code).
        var rtreeShadows: Set<[UInt8]> = []
    }

    /// The tables that may be copied, their indexes made (empty) in the new database.
    private func planTreeCopies() throws -> [TreeCopyPlan] {
        guard request.copiesSoundTrees, !schemaDamaged, file.wal == nil, file.encoding == .utf8, file.header.valid,
              DamagedFile.pageSize(field: file.header.pageSizeField) == file.pageSize else { return [] }
        var lookup = SchemaLookup()
        for entry in schema {
            if entry.type == "table" && lookup.tables[sqlNameKey(entry.name)] == nil { lookup.tables[sqlNameKey(entry.name)] = entry }
            if entry.type == "index" { lookup.indexes[sqlNameKey(entry.tableName), default: []].append(entry) }
            lookup.objectsAtRoot[entry.root, default: 0] += 1
        }
        for plan in rtreePlans {
            for suffix in ["_node", "_rowid", "_parent"] { lookup.rtreeShadows.insert(sqlNameKey(plan.entry.name + suffix)) }
        }
        var plans: [TreeCopyPlan] = []
        for table in tables.values.sorted(by: { $0.id < $1.id }) {
            guard var plan = try plan(table, lookup) else { continue }
            let indexes = lookup.indexes[sqlNameKey(table.name)] ?? []
            // Its other indexes, made now while the table is empty.
            var made = true
            for entry in indexes {
                guard let sql = entry.sql, !RecoveredDatabase.isCreate(.uniqueIndex, sql) else { continue }
                do {
                    try out.create(.index, sql: sql)
                } catch {
                    made = false
                    break
                }
                // The name its SQL gives, which a damaged schema row may not.
                guard case .text(let created)? = try out.db.scalar(
                    "SELECT name FROM main.sqlite_schema WHERE type = 'index' ORDER BY rowid DESC LIMIT 1") else { made = false; break }
                let name = String(decoding: created, as: UTF8.self)
                plan.earlyIndexes.append(name)
                if !sameSQLName(name, entry.name) {
                    made = false
                    break
                }
            }
            guard made, try indexesMatch(&plan, indexes, lookup) else {
                try dropEarlyIndexes(of: &plan)
                continue
            }
            plans.append(plan)
        }
        return plans
    }

    /// The plan for `table` before its indexes are made, or nil when it
    /// cannot be copied this way.
    private func plan(_ table: SalvageTable, _ lookup: SchemaLookup) throws -> TreeCopyPlan? {
        let key = sqlNameKey(table.name)
        guard !table.generic, table.unwritable == nil, !table.damaged, table.root >= 2, table.root <= file.pageCount,
              owners.role(table.root) == .none, lookup.objectsAtRoot[table.root] == 1,
              !asciiUpper(table.name).hasPrefix("SQLITE_"), !lookup.rtreeShadows.contains(key),
              !table.columns.contains(where: { $0.hidden != 0 }),
              let sql = lookup.tables[key]?.sql, !asciiUpper(sql).contains("CHECK") else { return nil }
        var plan = TreeCopyPlan(table: table, indexes: [], primaryKey: nil, denseRowids: false)
        if table.withoutRowid {
            guard let primaryKey = try indexShapes(of: table).first(where: { $0.origin == "pk" })?.shape else { return nil }
            plan.primaryKey = primaryKey
        }
        return plan
    }

    /// The table's indexes as the new database has them (with `origin`:
    /// c, u or pk), nil shapes left out: those it cannot order.
    private func indexShapes(of table: SalvageTable) throws -> [(origin: String, shape: IndexShape?)] {
        var result: [(origin: String, shape: IndexShape?)] = []
        let list = try out.db.rows("SELECT name, \"unique\", origin, partial FROM main.pragma_index_list(?1)", [.text(table.name)])
        for row in list {
            guard case .text(let nameBytes) = row[0], case .text(let originBytes) = row[2] else { return [] }
            let name = String(decoding: nameBytes, as: UTF8.self)
            let origin = String(decoding: originBytes, as: UTF8.self)
            guard row[3] == .integer(0) else {
                result.append((origin, nil))
                continue
            }
            var shape = IndexShape(name: name, root: 0, unique: row[1] == .integer(1), columns: [], keyCount: 0,
                                   collations: [], descending: [])
            var orderable = true
            for field in try out.db.rows("SELECT cid, \"desc\", coll, key FROM main.pragma_index_xinfo(?1) ORDER BY seqno", [.text(name)]) {
                guard case .integer(let cid) = field[0], cid >= -1, cid < table.columns.count,
                      case .text(let collation) = field[2],
                      let order = KeyCollation(name: String(decoding: collation, as: UTF8.self)) else {
                    orderable = false
                    break
                }
                shape.columns.append(Int(cid))
                shape.collations.append(order)
                shape.descending.append(field[1] == .integer(1))
                if field[3] == .integer(1) { shape.keyCount += 1 }
            }
            result.append((origin, orderable && !shape.columns.isEmpty ? shape : nil))
        }
        return result
    }

    /// Fills in the plan's indexes; false unless the new database has
    /// exactly the indexes the damaged file's schema names for the table
    /// (`entries`), each with a root page no other object has, and can order them all.
    private func indexesMatch(_ plan: inout TreeCopyPlan, _ entries: [SchemaEntry], _ lookup: SchemaLookup) throws -> Bool {
        let table = plan.table
        var byName: [[UInt8]: SchemaEntry] = [:]
        for entry in entries { byName[sqlNameKey(entry.name)] = entry }
        var shapes: [IndexShape] = []
        for (origin, shape) in try indexShapes(of: table) {
            if table.withoutRowid && origin == "pk" { continue }
            guard var shape, let entry = byName.removeValue(forKey: sqlNameKey(shape.name)),
                  entry.root >= 2, entry.root <= file.pageCount, owners.role(entry.root) == .none,
                  lookup.objectsAtRoot[entry.root] == 1 else { return false }
            shape.root = entry.root
            shapes.append(shape)
        }
        guard byName.isEmpty, shapes.count == entries.count else { return false }
        plan.indexes = shapes
        plan.denseRowids = !table.withoutRowid && table.rowidAlias == nil && shapes.isEmpty
        return true
    }

    private func dropEarlyIndexes(of plan: inout TreeCopyPlan) throws {
        for name in plan.earlyIndexes { try out.db.execute("DROP INDEX main.\(quoteIdentifier(name))") }
        plan.earlyIndexes = []
    }

    private func dropEarlyIndexes(_ plans: inout [TreeCopyPlan]) throws {
        for index in plans.indices { try dropEarlyIndexes(of: &plans[index]) }
    }

    // MARK: Copying (on the second thread)

    /// The attached file's schema rows as SQLite reads them: per table name
    /// (ASCII case folded) its table rows' root pages, and its indexes' names
    /// and root pages (nil when they cannot be read).
    static func sourceRoots(_ db: Connection) -> [[UInt8]: (tables: [Int64], indexes: [[UInt8]: Int64], duplicate: Bool)]? {
        guard let rows = try? db.rows("SELECT type, name, tbl_name, rootpage FROM \(sourceSchema).sqlite_schema") else { return nil }
        var roots: [[UInt8]: (tables: [Int64], indexes: [[UInt8]: Int64], duplicate: Bool)] = [:]
        for row in rows {
            guard case .text(let type) = row[0], case .text(let name) = row[1], case .text(let table) = row[2] else { continue }
            let root: Int64
            if case .integer(let r) = row[3] { root = r } else { root = 0 }
            if type == Array("table".utf8) {
                roots[name.map(asciiLower), default: ([], [:], false)].tables.append(root)
            } else if type == Array("index".utf8) {
                let key = table.map(asciiLower)
                if roots[key, default: ([], [:], false)].indexes.updateValue(root, forKey: name.map(asciiLower)) != nil {
                    roots[key]?.duplicate = true
                }
            }
        }
        return roots
    }

    /// True when SQLite's schema of the attached file names the table once,
    /// at the root page the reader walks, and names for it exactly the
    /// indexes the plan proves, at the same root pages (the copy takes each
    /// index from a source index of the same shape: it must be one proved).
    static func sourceMatches(_ roots: [[UInt8]: (tables: [Int64], indexes: [[UInt8]: Int64], duplicate: Bool)], _ plan: TreeCopyPlan) -> Bool {
        guard let entry = roots[sqlNameKey(plan.table.name)], !entry.duplicate,
              entry.tables == [Int64(plan.table.root)], entry.indexes.count == plan.indexes.count else { return false }
        return plan.indexes.allSatisfy { entry.indexes[sqlNameKey($0.name)] == Int64($0.root) }
    }

    /// The statement that copies table `name` (the one `isTransfer` checks is the one run).
    static func copyStatement(_ name: String) -> String {
        let q = quoteIdentifier(name)
        return "INSERT INTO main.\(q) SELECT * FROM \(sourceSchema).\(q)"
    }

    /// True when SQLite compiles the copy of table `name` as a transfer of
    /// records (its program reads whole records, RowData or RowCell).
    static func isTransfer(_ db: Connection, _ name: String) -> Bool {
        guard let program = try? db.rows("EXPLAIN " + copyStatement(name)) else { return false }
        return program.contains { step in
            step.count > 1 && (step[1] == .text(Array("RowData".utf8)) || step[1] == .text(Array("RowCell".utf8)))
        }
    }

    /// Copies each table, each in a transaction of its own; false for one
    /// SQLite could not copy (a page it found corrupt) or whose proof failed
    /// (the copy interrupted): its transaction rolled back. A full disk or
    /// lack of memory ends the run.
    static func transfer(_ db: Connection, _ names: [String], _ control: CopyControl) throws -> [CopyOutcome] {
        var outcomes: [CopyOutcome] = []
        for (index, name) in names.enumerated() {
            guard control.begin(index) else {
                outcomes.append(.stopped)
                continue
            }
            do {
                try db.execute(copyStatement(name))
                outcomes.append(.copied)
            } catch let error as DatabaseError where error.code.matches(.full) || error.code.matches(.nomem) {
                throw error
            } catch let error as DatabaseError where error.code.matches(.interrupt) {
                outcomes.append(.stopped)
            } catch {
                outcomes.append(.failed)
            }
        }
        return outcomes
    }

    enum CopyOutcome {
        case copied
        /// SQLite could not copy it (a page it found corrupt).
        case failed
        /// Stopped (or never begun) because the proof refused it.
        case stopped
    }

    // MARK: Proving (on this thread)

    private struct NotCopyable: Error {}

    /// Walks the table's b-tree and its indexes' (claiming their pages);
    /// the table's row count when everything above holds, else nil.
    private func prove(_ plan: inout TreeCopyPlan, seed: (UInt64, UInt64)) -> Int? {
        let table = plan.table
        let payloads = self.payloads
        let rules = table.fieldRules
        let fieldCount = table.storedFieldCount
        let dense = plan.denseRowids
        // Per index, per entry field: the record field it is (-1: the rowid).
        let sources: [[Int]] = plan.indexes.map { shape in
            shape.columns.map { cid in cid < 0 || cid == table.rowidAlias ? -1 : table.fieldOfColumn[cid] }
        }
        var sums = Array(repeating: EntrySum(), count: plan.indexes.count)
        var record = SalvagedRecord()
        var rows = 0
        var last: Int64?
        let order = plan.primaryKey.map { EntryOrder($0, fields: $0.keyCount) }
        do {
            let outcome = try walker.walk(root: table.root, tree: table.id, table: !table.withoutRowid, owners: &owners) { cell, owners in
                guard cell.trust == .sound else { throw NotCopyable() }
                let payload = payloads.payload(cell.cell, page: cell.bytes, tree: table.id, owners: &owners)
                guard payload.complete, record.parse(payload), record.isComplete, record.count == fieldCount,
                      RecoveryRun.plainFields(record), table.accepts(record),
                      RecoveryRun.unchangedByAffinity(record, rules) else { throw NotCopyable() }
                let rowid = cell.cell.rowid
                if let order {
                    guard order.admit(record, unique: false) else { throw NotCopyable() }
                } else {
                    if let last {
                        guard rowid > last, !dense || rowid == last &+ 1 else { throw NotCopyable() }
                    } else if dense && rowid != 1 {
                        throw NotCopyable()
                    }
                    last = rowid
                }
                for i in sources.indices {
                    var hash = EntryHash(seed)
                    for source in sources[i] {
                        if source < 0 { hash.add(.integer(rowid)) } else if let value = record.cell(source) { hash.add(value) } else { throw NotCopyable() }
                    }
                    sums[i].add(hash)
                }
                rows += 1
            }
            table.pagesRead += outcome.pages
            guard !outcome.damaged else { return nil }
            for (i, shape) in plan.indexes.enumerated() {
                let tree = nextTree
                nextTree += 1
                plan.indexTrees.append(tree)
                var found = EntrySum()
                let order = EntryOrder(shape, fields: shape.columns.count)
                let width = shape.columns.count
                let walked = try walker.walk(root: shape.root, tree: tree, table: false, owners: &owners) { cell, owners in
                    guard cell.trust == .sound else { throw NotCopyable() }
                    let payload = payloads.payload(cell.cell, page: cell.bytes, tree: tree, owners: &owners)
                    guard payload.complete, record.parse(payload), record.isComplete, record.count == width,
                          RecoveryRun.plainFields(record), order.admit(record, unique: shape.unique) else { throw NotCopyable() }
                    var hash = EntryHash(seed)
                    for f in 0..<width {
                        guard let value = record.cell(f) else { throw NotCopyable() }
                        hash.add(value)
                    }
                    found.add(hash)
                }
                guard !walked.damaged, found == sums[i], found.count == rows else { return nil }
            }
        } catch {
            return nil
        }
        return rows
    }

    /// True when no field of `record` is one the reader and SQLite read
    /// differently: serial types 10 and 11 (reserved), or a REAL whose bytes
    /// are a NaN (SQLite reads it as NULL).
    static func plainFields(_ record: SalvagedRecord) -> Bool {
        for f in 0..<record.count {
            switch record.type(f) {
            case 10, 11: return false
            case 7: if case .real(let d)? = record.cell(f), d.isNaN { return false }
            default: break
            }
        }
        return true
    }

    /// True when no value of `record` is one that writing it to its column
    /// would change: a number in a TEXT column, text that reads as a number
    /// or a REAL that is a whole number in a NUMERIC or INTEGER column (the
    /// row salvage writes would differ from the row SQLite copies).
    static func unchangedByAffinity(_ record: SalvagedRecord, _ rules: [SalvageTable.FieldRule]) -> Bool {
        for f in 0..<record.count {
            let rule = rules[f]
            guard rule.column >= 0, !rule.isAlias, rule.affinity != .blob else { continue }
            let type = record.type(f)
            switch rule.affinity {
            case .text:
                if (1...9).contains(type) { return false }
            case .numeric, .integer:
                if type == 7, case .real(let d)? = record.cell(f), Int64(exactly: d) != nil { return false }
                if type >= 13 && type & 1 == 1, case .text(let bytes)? = record.cell(f), mayReadAsNumber(bytes) { return false }
            case .real:
                if type >= 13 && type & 1 == 1, case .text(let bytes)? = record.cell(f), mayReadAsNumber(bytes) { return false }
            case .blob:
                break
            }
        }
        return true
    }

    /// True when `text` could be what SQLite's numeric affinity converts:
    /// spaces, a sign, digits with at most one point, an exponent, spaces
    /// (a superset of what it converts: such a row is salvaged instead).
    static func mayReadAsNumber(_ text: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        let n = text.count
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || (c >= 0x09 && c <= 0x0D) }
        func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        while i < n && isSpace(text[i]) { i += 1 }
        if i < n && (text[i] == 0x2B || text[i] == 0x2D) { i += 1 }
        var digits = 0
        while i < n && isDigit(text[i]) { i += 1; digits += 1 }
        if i < n && text[i] == 0x2E {
            i += 1
            while i < n && isDigit(text[i]) { i += 1; digits += 1 }
        }
        guard digits > 0 else { return false }
        if i < n && (text[i] == 0x65 || text[i] == 0x45) {
            i += 1
            if i < n && (text[i] == 0x2B || text[i] == 0x2D) { i += 1 }
            while i < n && isDigit(text[i]) { i += 1 }
        }
        while i < n && isSpace(text[i]) { i += 1 }
        return i == n
    }
}

/// One entry's hash: two 64-bit lanes over its values (an integer and a REAL
/// of the same whole value alike, as SQLite stores a whole REAL as an integer
/// where it may). Not a cryptographic hash, but seeded per run: it tells an
/// index from its table's rows when pages were damaged.
struct EntryHash {
    private var a: UInt64
    private var b: UInt64

    /// Lanes started from a seed drawn for each run, so that no file can be
    /// made ahead of time whose index sums match rows they do not hold.
    init(_ seed: (UInt64, UInt64)) {
        a = seed.0 ^ 0x243F_6A88_85A3_08D3
        b = seed.1 ^ 0x1319_8A2E_0370_7344
    }

    private mutating func mix(_ v: UInt64) {
        a = (a ^ v) &* 0x9E37_79B9_7F4A_7C15
        a ^= a >> 32
        b = (b &+ v) &* 0xC2B2_AE3D_27D4_EB4F
        b ^= b >> 29
    }

    mutating func add(_ cell: Cell) {
        switch cell {
        case .null:
            mix(0xA0)
        case .integer(let i):
            mix(0xA1)
            mix(UInt64(bitPattern: i))
        case .real(let d):
            // A whole REAL hashes as the integer SQLite may store it as; -0.0 by its bits.
            if let i = Int64(exactly: d), d.sign == .plus || d != 0 {
                mix(0xA1)
                mix(UInt64(bitPattern: i))
            } else {
                mix(0xA2)
                mix(d.bitPattern)
            }
        case .text(let bytes):
            mix(0xA3)
            add(bytes)
        case .blob(let bytes):
            mix(0xA4)
            add(bytes)
        }
    }

    private mutating func add(_ bytes: UnsafeRawBufferPointer) {
        mix(UInt64(bytes.count))
        var i = 0
        while i + 8 <= bytes.count {
            mix(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < bytes.count {
            tail |= UInt64(bytes[i]) << shift
            shift += 8
            i += 1
        }
        mix(tail)
    }

    /// The two lanes, each avalanched (MurmurHash3's finalizer).
    var value: (UInt64, UInt64) { (EntryHash.finish(a), EntryHash.finish(b ^ 0x5851_F42D_4C95_7F2D)) }

    private static func finish(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        return h
    }
}

/// An order-insensitive sum of entries: their count and the sums of their
/// hashes' lanes.
struct EntrySum: Equatable {
    private(set) var count = 0
    private var low: UInt64 = 0
    private var high: UInt64 = 0

    mutating func add(_ hash: EntryHash) {
        let (x, y) = hash.value
        low &+= x
        high &+= y
        count += 1
    }
}

/// Checks that entries come in strictly ascending order (the first `fields`
/// fields compared, as SQLite compares index records) and, for a UNIQUE
/// index, that no two share a key without a NULL in it.
final class EntryOrder {
    private let shape: IndexShape
    private let fields: Int
    /// The previous entry's bytes and fields (offsets into those bytes).
    private var previous: UnsafeMutableRawPointer
    private var capacity = 256
    private var previousFields: UnsafeMutablePointer<RecordField>
    private var any = false

    init(_ shape: IndexShape, fields: Int) {
        self.shape = shape
        self.fields = fields
        previous = .allocate(byteCount: capacity, alignment: 8)
        previousFields = .allocate(capacity: max(fields, 1))
    }

    deinit {
        previous.deallocate()
        previousFields.deallocate()
    }

    /// True when `record` (whole) comes after the previous entry.
    func admit(_ record: SalvagedRecord, unique: Bool) -> Bool {
        guard let base = record.base, record.count >= fields else { return false }
        if any {
            var later = false
            for f in 0..<fields {
                let old = previousFields[f], new = record.field(f)
                var c = EntryOrder.compare(SerialType.cell(old.type, UnsafeRawPointer(previous) + old.offset),
                                           SerialType.cell(new.type, base + new.offset), shape.collations[f])
                if shape.descending[f] { c = -c }
                if c != 0 {
                    // Later, and for a UNIQUE index not the same key (a key with a NULL is never the same).
                    later = c < 0 && !(unique && f >= shape.keyCount && EntryOrder.keyHasNoNull(record, shape.keyCount))
                    break
                }
            }
            guard later else { return false }
        }
        any = true
        // The bytes up to the end of the compared fields.
        let length = fields == 0 ? 0 : record.field(fields - 1).end
        if length > capacity {
            previous.deallocate()
            capacity = max(length, capacity * 2)
            previous = .allocate(byteCount: capacity, alignment: 8)
        }
        previous.copyMemory(from: base, byteCount: length)
        for f in 0..<fields { previousFields[f] = record.field(f) }
        return true
    }

    private static func keyHasNoNull(_ record: SalvagedRecord, _ keyCount: Int) -> Bool {
        for f in 0..<keyCount where StoredClass(serialType: record.type(f)) == .null { return false }
        return true
    }

    /// SQLite's order of two values under `collation`: NULL, numbers (by
    /// value), text, BLOB.
    static func compare(_ a: Cell, _ b: Cell, _ collation: KeyCollation) -> Int {
        func rank(_ cell: Cell) -> Int {
            switch cell {
            case .null: return 0
            case .integer, .real: return 1
            case .text: return 2
            case .blob: return 3
            }
        }
        let ra = rank(a), rb = rank(b)
        if ra != rb { return ra < rb ? -1 : 1 }
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.real(let x), .real(let y)): return x == y ? 0 : (x < y ? -1 : 1)
        case (.integer(let x), .real(let y)): return compareExactly(x, y)
        case (.real(let x), .integer(let y)): return -compareExactly(y, x)
        case (.text(let x), .text(let y)):
            switch collation {
            case .binary: return compareBytes(x, y)
            case .nocase: return compareFolded(x, y)
            case .rtrim: return compareBytes(trimmed(x), trimmed(y))
            }
        case (.blob(let x), .blob(let y)): return compareBytes(x, y)
        default: return 0
        }
    }

    /// NOCASE as SQLite's sqlite3StrNICmp and nocaseCollatingFunc compare:
    /// bytes with ASCII capitals as small letters, stopping at a NUL in the
    /// first; equal so far, the shorter first.
    private static func compareFolded(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        func fold(_ c: UInt8) -> Int { Int(c >= 0x41 && c <= 0x5A ? c + 0x20 : c) }
        let n = min(a.count, b.count)
        var r = 0
        for i in 0..<n {
            if a[i] == 0 || fold(a[i]) != fold(b[i]) {
                r = fold(a[i]) - fold(b[i])
                break
            }
        }
        if r == 0 { r = a.count - b.count }
        return r == 0 ? 0 : (r < 0 ? -1 : 1)
    }

    /// RTRIM: the text without its trailing spaces.
    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var n = bytes.count
        while n > 0 && bytes[n - 1] == 0x20 { n -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[0..<n])
    }
}

/// Which copy the second thread runs, and which tables the proof refused
/// (whose copies stop at SQLite's next progress callback).
final class CopyControl: Sendable {
    private struct State {
        var current = -1
        var refused = Set<Int>()
    }

    private let state = Mutex(State())

    /// Marks copy `index` as running; false when its proof already failed.
    func begin(_ index: Int) -> Bool {
        state.withLock { state in
            state.current = index
            return !state.refused.contains(index)
        }
    }

    func refuse(_ index: Int) {
        _ = state.withLock { $0.refused.insert(index) }
    }

    /// True when the running copy's table was refused.
    var shouldStop: Bool { state.withLock { $0.refused.contains($0.current) } }
}
