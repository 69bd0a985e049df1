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
// of it is emptied and salvaged row by row as before. Nothing is copied this
// way from a file with a -wal (SQLite and this reader would read different
// pages), a header SQLite would read differently, or text that is not UTF-8;
// nor tables with CHECK constraints, generated columns, expression or partial
// indexes, or collations other than BINARY, NOCASE and RTRIM: their rows
// cannot be proved here.

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
        // ATTACH, DETACH and journal modes change outside a transaction.
        try db.execute("COMMIT")
        do {
            let attach = try db.prepare("ATTACH ?1 AS \(RecoveryRun.sourceSchema)")
            try attach.bind([.text(Array((Connection.fileURI(request.source) + "?mode=ro&immutable=1").utf8))])
            try attach.step()
        } catch {
            try dropEarlyIndexes(&plans)
            try db.execute("BEGIN")
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
        var kept: [TreeCopyPlan] = []
        for var plan in plans {
            if RecoveryRun.sourceMatches(db, plan) && RecoveryRun.isTransfer(db, plan.table.name) {
                kept.append(plan)
            } else {
                try dropEarlyIndexes(of: &plan)
            }
        }
        plans = kept
        let names = plans.map { $0.table.name }
        let copying = Concurrently.start { try RecoveryRun.transfer(db, names) }
        var proved: [Int?] = []
        for index in plans.indices { proved.append(prove(&plans[index])) }
        // The proof usually ends first: meanwhile, the pages copied so far go to disk.
        out.flushWritten()
        let copied = try copying.wait()
        try db.execute("PRAGMA main.journal_mode = OFF")
        try db.execute("DETACH \(RecoveryRun.sourceSchema)")
        try db.execute("BEGIN")
        for index in plans.indices {
            var plan = plans[index]
            let table = plan.table
            if let rows = proved[index], copied[index],
               try db.scalar("SELECT count(*) FROM main.\(quoteIdentifier(table.name))") == .integer(Int64(rows)) {
                table.rows = rows
                table.treeCopied = true
                continue
            }
            // Salvaged row by row instead, from a clean start.
            try db.execute("DELETE FROM main.\(quoteIdentifier(table.name))")
            try dropEarlyIndexes(of: &plan)
            owners.releaseTree(table.id)
            for tree in plan.indexTrees { owners.releaseTree(tree) }
            table.forgetWalk()
        }
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
                    plan.earlyIndexes.append(entry.name)
                } catch {
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

    /// True when SQLite's schema of the attached file names the table once,
    /// at the root page the reader walks, and names for it exactly the
    /// indexes the plan proves, at the same root pages (the copy takes each
    /// index from a source index of the same shape: it must be one proved).
    static func sourceMatches(_ db: Connection, _ plan: TreeCopyPlan) -> Bool {
        guard let rows = try? db.rows("""
            SELECT type, name, rootpage FROM \(sourceSchema).sqlite_schema
            WHERE (type = 'table' AND name = ?1 COLLATE NOCASE) OR (type = 'index' AND tbl_name = ?1 COLLATE NOCASE)
            """, [.text(Array(plan.table.name.utf8))]) else { return false }
        var tables: [Int64] = []
        var indexes: [[UInt8]: Int64] = [:]
        for row in rows {
            guard case .text(let type) = row[0], case .text(let name) = row[1], case .integer(let root) = row[2] else { return false }
            if type == Array("table".utf8) {
                tables.append(root)
            } else if indexes.updateValue(root, forKey: name.map(asciiLower)) != nil {
                return false
            }
        }
        guard tables == [Int64(plan.table.root)], indexes.count == plan.indexes.count else { return false }
        return plan.indexes.allSatisfy { indexes[sqlNameKey($0.name)] == Int64($0.root) }
    }

    /// True when SQLite compiles the copy of table `name` as a transfer of
    /// records (its program reads whole records, RowData or RowCell).
    static func isTransfer(_ db: Connection, _ name: String) -> Bool {
        let q = quoteIdentifier(name)
        guard let program = try? db.rows("EXPLAIN INSERT INTO main.\(q) SELECT * FROM \(sourceSchema).\(q)") else { return false }
        return program.contains { step in
            step.count > 1 && (step[1] == .text(Array("RowData".utf8)) || step[1] == .text(Array("RowCell".utf8)))
        }
    }

    /// Copies each table, each in a transaction of its own; false for one
    /// SQLite could not copy (a page it found corrupt: the transaction rolled
    /// back). A full disk or lack of memory ends the run.
    static func transfer(_ db: Connection, _ names: [String]) throws -> [Bool] {
        var copied: [Bool] = []
        for name in names {
            let q = quoteIdentifier(name)
            do {
                try db.execute("INSERT INTO main.\(q) SELECT * FROM \(sourceSchema).\(q)")
                copied.append(true)
            } catch let error as DatabaseError where error.code.matches(.full) || error.code.matches(.nomem) {
                throw error
            } catch {
                copied.append(false)
            }
        }
        return copied
    }

    // MARK: Proving (on this thread)

    private struct NotCopyable: Error {}

    /// Walks the table's b-tree and its indexes' (claiming their pages);
    /// the table's row count when everything above holds, else nil.
    private func prove(_ plan: inout TreeCopyPlan) -> Int? {
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
                      table.accepts(record), RecoveryRun.unchangedByAffinity(record, rules) else { throw NotCopyable() }
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
                    var hash = EntryHash()
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
                          order.admit(record, unique: shape.unique) else { throw NotCopyable() }
                    var hash = EntryHash()
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

/// One entry's hash: two 64-bit lanes over its values, each value as SQLite
/// compares it (an integer and a REAL of the same whole value alike). Not a
/// cryptographic hash: it tells an index from its table's rows when pages
/// were damaged by accident (a file made to fool it only fails
/// integrity_check afterwards).
struct EntryHash {
    private var a: UInt64 = 0x243F_6A88_85A3_08D3
    private var b: UInt64 = 0x1319_8A2E_0370_7344

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
            if let i = Int64(exactly: d) {
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

    /// NOCASE: bytes compared with ASCII capitals as small letters, then length.
    private static func compareFolded(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = min(a.count, b.count)
        for i in 0..<n {
            var x = a[i], y = b[i]
            if x >= 0x41 && x <= 0x5A { x += 0x20 }
            if y >= 0x41 && y <= 0x5A { y += 0x20 }
            if x != y { return x < y ? -1 : 1 }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    /// RTRIM: the text without its trailing spaces.
    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var n = bytes.count
        while n > 0 && bytes[n - 1] == 0x20 { n -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[0..<n])
    }
}
