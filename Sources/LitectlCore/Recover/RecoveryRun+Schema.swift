// The schema of a damaged file: the rows of the sqlite_schema b-tree (root
// page 1) as far as its pages survive. When that b-tree is damaged, schema
// rows are also looked for on table leaf pages no b-tree and no freelist
// reaches (the recover extension reads only what page 1 reaches); such a row
// is taken only when its name is new and its root page is a b-tree page of
// the right kind that no other object names, so that a stale copy of the
// schema cannot bring back a dropped table over a page now used by another.
// https://www.sqlite.org/schematab.html

extension RecoveryRun {
    /// Reads the schema into `schema`, and sets `schemaDamaged`.
    func readSchema() {
        var entries: [SchemaEntry] = []
        if !file.header.valid { schemaDamaged = true }
        let outcome = walker.walk(root: 1, tree: 0, table: true, owners: &owners) { cell, owners in
            // A schema row whose cell's payload size is damaged is read at
            // the size its page proves (see readRecord), as the shell's
            // `.recover` reads it; its page is then damaged.
            let resized = self.readRecord(cell, tree: 0, owners: &owners).resized
            guard self.record.damage == nil, self.record.isComplete,
                  let entry = self.schemaEntry(self.record, rowid: cell.cell.rowid) else {
                self.unreadableCells += 1
                self.schemaDamaged = true
                self.walker.noteDamage(cell.page, "a sqlite_schema cell that is no schema row")
                return
            }
            if cell.trust != .sound || resized {
                self.schemaDamaged = true
                if resized { self.walker.noteDamage(cell.page, "cell \(cell.index): its payload size is damaged") }
            }
            entries.append(entry)
        }
        if outcome.damaged { schemaDamaged = true }
        if schemaDamaged { entries += unreachedSchemaRows(known: entries) }
        // One object per name: the first (reachable) row wins.
        var names = Set<[UInt8]>()
        schema = entries.filter { names.insert(sqlNameKey($0.name)).inserted }
    }

    /// A schema row (type, name, tbl_name, rootpage, sql), nil when the
    /// record is not shaped like one.
    func schemaEntry(_ record: SalvagedRecord, rowid: Int64) -> SchemaEntry? {
        guard record.count == 5,
              let type = text(record.cell(0)), ["table", "index", "view", "trigger"].contains(type),
              let name = text(record.cell(1)), !name.isEmpty,
              let tableName = text(record.cell(2)) else { return nil }
        var root: UInt32 = 0
        switch record.cell(3) {
        case .integer(let r)?: guard r >= 0, r <= Int64(UInt32.max) else { return nil }; root = UInt32(r)
        case .null?: root = 0
        default: return nil
        }
        var sql: String?
        switch record.cell(4) {
        case .null?: sql = nil
        case .some(let cell): guard let t = text(cell) else { return nil }; sql = t
        case nil: return nil
        }
        return SchemaEntry(type: type, name: name, tableName: tableName, root: root, sql: sql, order: rowid)
    }

    /// TEXT in the file's encoding as a Swift string (nil for other values).
    func text(_ cell: Cell?) -> String? {
        guard case .text(let bytes)? = cell else { return nil }
        if file.encoding == .utf8 { return String(decoding: bytes, as: UTF8.self) }
        var converted: [UInt8] = []
        UTF16Text.toUTF8(bytes, bigEndian: file.encoding == .utf16be, into: &converted)
        return String(decoding: converted, as: UTF8.self)
    }

    /// Schema rows on table leaf pages nothing reaches (not the freelist's).
    func unreachedSchemaRows(known: [SchemaEntry]) -> [SchemaEntry] {
        let free = SalvageFreelist.read(file) { self.owners.role($0) == .tree }
        var freePages = PageSet(pageCount: file.pageCount)
        for page in free.trunks + free.leaves { _ = freePages.insert(page) }
        var names = Set(known.map { sqlNameKey($0.name) })
        var roots = Set(known.map(\.root).filter { $0 != 0 })
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: file.pageSize, alignment: 8)
        defer { buffer.deallocate() }
        var found: [SchemaEntry] = []
        // Counted up before use, so that a count of UInt32.max cannot overflow.
        var page: UInt32 = 1
        while page < file.pageCount {
            page += 1
            extraPagesRead += 1
            if page & 255 == 0 { report(extraPagesRead) }
            guard owners.role(page) == .none, !freePages.contains(page), file.copy(page, into: buffer),
                  buffer.load(as: UInt8.self) == BTreePage.tableLeaf,
                  let leaf = SalvagePage.read(buffer, pageSize: file.pageSize, usable: file.usable, number: page,
                                              table: true, repair: false) else { continue }
            var taken: [SchemaEntry] = []
            for item in leaf.cells {
                let cell = SalvageCell(page: page, index: item.index, cell: item.cell, bytes: UnsafeRawPointer(buffer), trust: .salvaged)
                _ = readRecord(cell, tree: 0, owners: &owners, claim: .peek)
                guard record.damage == nil, record.isComplete, let entry = schemaEntry(record, rowid: item.cell.rowid) else { continue }
                guard !names.contains(sqlNameKey(entry.name)), plausibleRoot(entry, roots: roots) else { continue }
                taken.append(entry)
            }
            // A page of schema rows: sqlite_schema's, unless a table's b-tree reaches it.
            guard !taken.isEmpty, taken.count * 2 > leaf.cells.count else { continue }
            schemaPages.append(page)
            for entry in taken {
                names.insert(sqlNameKey(entry.name))
                if entry.root != 0 { roots.insert(entry.root) }
                found.append(entry)
            }
        }
        if !found.isEmpty {
            problems.append("\(found.count) schema rows were found on pages sqlite_schema no longer reaches")
        }
        return found
    }

    /// True when `entry`'s root page could be its b-tree's: in the file,
    /// named by no other object, and a b-tree page of the right kind.
    func plausibleRoot(_ entry: SchemaEntry, roots: Set<UInt32>) -> Bool {
        let virtual = entry.sql.map { RecoveredDatabase.startsWith($0, ["CREATE", "VIRTUAL", "TABLE"]) } ?? false
        switch entry.type {
        case "view", "trigger": return entry.root == 0
        case "table" where virtual: return entry.root == 0
        default: break
        }
        guard entry.root >= 2, entry.root <= file.pageCount, !roots.contains(entry.root), !file.isReserved(entry.root),
              let data = file.page(entry.root) else { return false }
        let type = data.load(as: UInt8.self)
        return entry.type == "table" ? type == BTreePage.tableLeaf || type == BTreePage.tableInterior
            || type == BTreePage.indexLeaf || type == BTreePage.indexInterior  // WITHOUT ROWID tables are index b-trees
            : type == BTreePage.indexLeaf || type == BTreePage.indexInterior
    }
}
