// `litectl recover`: salvage what can be read from a damaged database into a
// new one. The file is read page by page by Recover/'s own readers (never by
// SQLite's b-tree code, which stops at the first bad page): the schema from
// the sqlite_schema pages that survive, every row of every table b-tree
// reachable from its root, then the pages no b-tree reaches any more, given
// back to the table they fit or kept in lost_and_found. The new database is
// written by SQLite, in a temporary file renamed into place.
// The design follows SQLite's recover extension (ext/recover/sqlite3recover.c).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What to recover, and where to.
public struct RecoveryRequest: Sendable {
    /// The damaged database (read only; its -wal, if any, is read too).
    public var source: String
    /// The new database to write.
    public var output: String
    /// Replace `output` when it exists.
    public var replace = false
    /// Look at free pages for rows a damaged table lost (false: ignore the freelist).
    public var readFreelist = true
    /// Let SQLite copy the tables whose b-trees are sound (TreeCopy); false
    /// salvages every table row by row (the tests compare both ways).
    var copiesSoundTrees = true

    public init(source: String, output: String) {
        self.source = source
        self.output = output
    }
}

/// Salvage of a damaged database into a new one.
public enum Recovery {
    /// Recovers `request.source` into `request.output`. Throws when nothing
    /// could be done (the source is missing or holds no database pages, the
    /// output cannot be written); damage is reported, not thrown.
    public static func run(_ request: RecoveryRequest, progress: ((CopyProgress) -> Void)? = nil) throws -> RecoveryReport {
        try RecoveryRun(request, progress: progress).run()
    }
}

/// One schema row as read from the damaged file.
struct SchemaEntry {
    var type: String
    var name: String
    var tableName: String
    var root: UInt32
    var sql: String?
    /// Its rowid in sqlite_schema (objects are made again in this order).
    var order: Int64
}

/// The state of one recovery.
final class RecoveryRun {
    let request: RecoveryRequest
    let file: DamagedFile
    var owners: PageOwners
    let walker: TreeSalvage
    let payloads: SalvagePayloadReader
    let progress: ((CopyProgress) -> Void)?
    var out: RecoveredDatabase!
    var lost: LostAndFound!
    /// Tables by tree id (0 is sqlite_schema, which has no table here).
    var tables: [Int: SalvageTable] = [:]
    var nextTree = 1
    var record = SalvagedRecord()
    var schema: [SchemaEntry] = []
    var schemaDamaged = false
    /// Pages where schema rows were found that sqlite_schema no longer reaches.
    var schemaPages: [UInt32] = []
    var problems: [String] = []
    var failures: [RecoveryReport.ObjectFailure] = []
    var unreadableCells = 0
    /// Cells whose record is damaged, kept in lost_and_found as far as they read.
    var damagedRecords = 0
    var freelistRowsIgnored = 0
    var orphanPages = 0
    var unaccountedPages = 0
    var freelistPages = 0
    var extraPagesRead = 0
    /// R*Trees whose schema rows wait for their shadow tables' rows.
    var rtreePlans: [RTreePlan] = []
    var rtreeResults: [RecoveryReport.RTreeResult] = []
    /// Copies stopped or never begun because their table's proof failed (TreeCopy).
    var copiesRefused = 0

    init(_ request: RecoveryRequest, progress: ((CopyProgress) -> Void)?) throws {
        self.request = request
        self.progress = progress
        // A target we may not write fails before any reading.
        try RecoveredDatabase.checkTarget(request.output, source: request.source, replace: request.replace)
        file = try DamagedFile(path: request.source)
        owners = PageOwners(pageCount: file.pageCount)
        walker = TreeSalvage(file: file)
        payloads = SalvagePayloadReader(file: file)
        problems = file.notes
    }

    func report(_ done: Int) {
        progress?(CopyProgress(pagesCopied: min(done, Int(file.pageCount)), pageCount: Int(file.pageCount)))
    }

    func run() throws -> RecoveryReport {
        let total = file.pageCount
        walker.progress = { [weak self] read in self?.report(read + (self?.extraPagesRead ?? 0)) }
        // Counted up before use, so that a count of UInt32.max cannot overflow.
        var page: UInt32 = 0
        while page < total {
            page += 1
            if file.isReserved(page) { _ = owners.claim(page, as: .reserved) }
        }
        readSchema()

        var settings = RecoveredDatabase.Settings()
        settings.pageSize = file.pageSize
        settings.encoding = file.encoding
        if file.header.valid {
            settings.autoVacuum = file.header.autoVacuum ? (file.header.incrementalVacuum != 0 ? 2 : 1) : 0
            settings.userVersion = file.header.userVersion
            settings.applicationID = file.header.applicationID
            settings.wal = file.header.walMode
        }
        settings.maxLength = Int(clamping: min(1_000_000_000, max(file.fileSize * 2, 16 << 20)))
        let permissions = (try? DurableFolder.permissions(of: request.source)) ?? 0o644
        out = try RecoveredDatabase(path: request.output, source: request.source, replace: request.replace, permissions: permissions | 0o600,
                                    settings: settings)
        lost = LostAndFound(database: out)
        do {
            try createTables()
            try copySoundTrees()
            try copyTables()
            try walkIndexes()
            claimFreelist()
            try salvageOrphans()
            try finishRTrees()
            try lost.flush()
            try createLaterObjects()
            report(Int(total))
            var result = makeReport()
            if !result.sound {
                result.foreignKeyOrphans = try foreignKeyOrphans()
                result.problems = problems
            }
            if !result.sound && result.rowsRecovered == 0 && lost.rows == 0 && !schema.contains(where: { $0.type == "table" }) {
                throw DatabaseError(code: .corrupt, message: "nothing could be recovered: no table or row could be read", path: request.source)
            }
            closeStatements()
            try out.commit()
            return result
        } catch {
            closeStatements()
            out.discard()
            throw error
        }
    }

    private func closeStatements() {
        for table in tables.values { table.close() }
        lost.close()
    }

    // MARK: Tables

    /// Makes every table of the schema (sqlite_sequence first, so that
    /// AUTOINCREMENT tables find it; virtual tables as their schema rows,
    /// when their CREATE statement parses and names them, R*Trees only after
    /// their shadow tables' rows: see RecoveryRun+RTrees), and the UNIQUE
    /// indexes, which must refuse duplicate rows as they come.
    func createTables() throws {
        let ordered = schema.filter { $0.type == "table" }.sorted { a, b in
            let aSeq = sameSQLName(a.name, "sqlite_sequence"), bSeq = sameSQLName(b.name, "sqlite_sequence")
            return aSeq != bSeq ? aSeq : a.order < b.order
        }
        var roots = Set<UInt32>()
        for entry in ordered {
            guard let sql = entry.sql else {
                failures.append(.init(type: "table", name: entry.name, message: "its CREATE statement is lost"))
                continue
            }
            if RecoveredDatabase.startsWith(sql, ["CREATE", "VIRTUAL", "TABLE"]) {
                do {
                    let declared = try out.virtualTableDeclaration(sql)
                    guard sameSQLName(declared.name, entry.name) else {
                        throw DatabaseError(code: .error, message: "its CREATE statement names another table (\(declared.name))")
                    }
                    if let plan = try rtreePlan(entry, sql: sql, name: declared.name, module: declared.module) {
                        rtreePlans.append(plan)
                    } else {
                        try out.addVirtualTable(name: entry.name, sql: sql)
                    }
                } catch {
                    failures.append(.init(type: "table", name: entry.name, message: describe(error)))
                }
                continue
            }
            let name: String
            do {
                try out.create(.table, sql: sql)
                name = try out.newestTable() ?? entry.name
            } catch {
                failures.append(.init(type: "table", name: entry.name, message: describe(error)))
                continue
            }
            let table = try SalvageTable(db: out.db, id: nextTree, name: name, root: entry.root, encoding: file.encoding)
            nextTree += 1
            tables[table.id] = table
            if let why = table.unwritable {
                problems.append("rows cannot be written to table \(name) (\(why)): they are kept in lost_and_found")
            }
            if entry.root < 2 || entry.root > file.pageCount || !roots.insert(entry.root).inserted {
                problems.append("table \(entry.name) has root page \(entry.root), \(entry.root < 2 || entry.root > file.pageCount ? "outside the file" : "which another table has too"): its rows cannot be found from it")
                table.damaged = true
                table.lostRanges.append((nil, nil))
            }
        }
        for entry in schema where entry.type == "index" {
            guard let sql = entry.sql, RecoveredDatabase.isCreate(.uniqueIndex, sql) else { continue }
            do { try out.create(.uniqueIndex, sql: sql) } catch {
                failures.append(.init(type: "index", name: entry.name, message: describe(error)))
            }
        }
    }

    /// Copies every table's rows, walking its b-tree from its root.
    func copyTables() throws {
        let sequence = tables.values.first { sameSQLName($0.name, "sqlite_sequence") }
        for table in tables.values.sorted(by: { $0.id < $1.id }) where table !== sequence && !table.treeCopied {
            try walk(table)
        }
        guard let sequence else { return }
        // The AUTOINCREMENT inserts above made rows of their own: the file's
        // rows replace them; those of tables the file has no row for stay.
        let automatic = try out.db.rows("SELECT name, seq FROM main.sqlite_sequence")
        try out.db.execute("DELETE FROM main.sqlite_sequence")
        try walk(sequence)
        for row in automatic {
            let present = try out.db.scalar("SELECT count(*) FROM main.sqlite_sequence WHERE name = ?1", [row[0]])
            if present == .integer(0) {
                let insert = try out.db.prepare("INSERT INTO main.sqlite_sequence(name, seq) VALUES (?1, ?2)")
                try insert.bind(row)
                try insert.step()
            }
        }
    }

    private func walk(_ table: SalvageTable) throws {
        guard table.root >= 2, table.root <= file.pageCount, owners.role(table.root) == .none else {
            if table.root >= 2 && table.root <= file.pageCount && !table.damaged {
                walker.noteDamage(table.root, "the root page of \(table.name) belongs to another b-tree")
                table.damaged = true
                table.lostRanges.append((nil, nil))
            }
            return
        }
        let outcome = try walker.walk(root: table.root, tree: table.id, table: !table.withoutRowid, owners: &owners) { cell, owners in
            try self.place(cell, in: table, owners: &owners)
        }
        table.pagesRead += outcome.pages
        table.damagedPages += outcome.damagedPages
        table.lostRanges += outcome.lostRanges
        if outcome.damaged { table.damaged = true }
        payloads.trim()
    }

    /// Puts the row in `cell` into `table`, or into lost_and_found when it
    /// cannot be trusted there or the new schema refuses it.
    func place(_ cell: SalvageCell, in table: SalvageTable, owners: inout PageOwners, attached: Bool = false) throws {
        let (payload, resized) = readRecord(cell, tree: table.id, owners: &owners)
        let rowid: Int64? = table.withoutRowid ? nil : cell.cell.rowid
        var trust = cell.trust
        if resized {
            // The cell's payload size was what the damage hit: the record,
            // whole and well formed, is read at the size its header gives.
            walker.noteDamage(cell.page, "cell \(cell.index): its payload size is damaged")
            if trust == .sound { trust = .salvaged }
        }
        var reason: String?
        if let damage = record.damage {
            damagedRecords += 1
            walker.noteDamage(cell.page, "a cell whose record is damaged")
            reason = "its record is damaged: \(damage)"
        } else if !record.isComplete {
            reason = payload.problem ?? "part of the row's bytes are lost"
            walker.noteDamage(cell.page, "cell \(cell.index): \(reason ?? "")")
        } else if record.count > table.storedFieldCount {
            reason = "more fields than the table has columns"
        } else {
            switch trust {
            case .sound:
                break
            case .salvaged:
                if !table.accepts(record) { reason = "on a damaged page, and does not fit the table's columns" }
            case .doubtful:
                reason = "out of key order or range on a damaged page"
            case .stray:
                reason = "read from past the cell pointer array of a damaged page"
            }
        }
        if attached && reason == nil && !table.accepts(record) { reason = "does not fit the table's columns" }
        if reason == nil {
            switch try table.insert(record, rowid: rowid ?? 0) {
            case .inserted:
                table.rows += 1
                return
            case .refused(let message):
                reason = "refused by the new schema: \(message)"
            }
        }
        table.lostRows += 1
        table.damaged = true
        try lost.add(root: table.root, page: cell.page, cell: cell.index, rowid: rowid, record: record, reason: reason ?? "")
    }

    /// Reads `cell`'s record into `record`, its overflow pages taken for
    /// `tree` as `claim` says. A record whose header does not describe its
    /// payload is still read as far as it goes (as the recover extension
    /// reads it): its rowid and first fields are usually right, and it is
    /// kept in lost_and_found (`record.damage` says why). `resized` is true
    /// when the cell's own payload size was damaged and its page proves the
    /// size the record's header gives (see `provenPayload`): the record was
    /// then read at that size from the page alone.
    func readRecord(_ cell: SalvageCell, tree: Int, owners: inout PageOwners,
                    claim: SalvagePayloadReader.Claim = .claim) -> (payload: SalvagedPayload, resized: Bool) {
        // A payload size that damage made too large for the page calls for an
        // overflow chain whose first "pointer" is the record's own next bytes
        // or the next cell's: the proof comes first, so that no page is
        // claimed (and taken from its b-tree) for such a chain.
        let overflows = cell.cell.localSize < cell.cell.payloadSize
        if overflows, let proven = provenPayload(cell) { return (proven, true) }
        let payload = payloads.payload(cell.cell, page: cell.bytes, tree: tree, owners: &owners, claim: claim)
        record.parse(payload, damaged: true)
        if record.damage != nil && !overflows {
            if let proven = provenPayload(cell) { return (proven, true) }
            record.parse(payload, damaged: true)
        }
        return (payload, false)
    }

    /// The payload of `cell` at the size its record's header describes, read
    /// from its page (and parsed into `record`), when that size differs from
    /// the cell's own, fits the page without overflow, and the page proves
    /// it: at that size the cell ends exactly where the next cell, a
    /// freeblock or the page's end begins (cells never overlap), so the
    /// payload size, which says otherwise, is what the damage hit. nil (and
    /// `record` left unspecified) when not proven. The shell's `.recover`
    /// trusts the header in every case (sqlite_dbdata reads each field the
    /// header names from the bytes there are); a cell the page does not
    /// prove stays in lost_and_found.
    private func provenPayload(_ cell: SalvageCell) -> SalvagedPayload? {
        let usable = file.usable
        let start = cell.cell.localStart
        guard start > 0, start < usable else { return nil }
        let bytes = cell.bytes + start
        let room = usable - start
        // The size the header describes: its own length plus each field's.
        guard let header = Varint.read32(bytes, 0, room), Int(header.value) > header.length, Int(header.value) <= room else {
            return nil
        }
        let headerSize = Int(header.value)
        var at = header.length
        var size = headerSize
        while at < headerSize {
            guard let type = Varint.read32(bytes, at, headerSize) else { return nil }
            at += type.length
            size += SerialType.length(type.value)
            if size > room { return nil }
        }
        guard size != cell.cell.payloadSize else { return nil }
        let isTable = cell.bytes.load(fromByteOffset: cell.page == 1 ? 100 : 0, as: UInt8.self) == BTreePage.tableLeaf
        guard BTreePage.localSize(payload: size, usable: usable, table: isTable) == size else { return nil }
        let ends = SalvagePage.cellEnds(cell.bytes, usable: usable, number: cell.page)
        guard ends.filter({ $0 > start }).min() == start + size else { return nil }
        let payload = SalvagedPayload(bytes: bytes, available: size, size: size)
        return record.parse(payload) ? payload : nil
    }

    /// Walks every index b-tree, so that its pages (and overflow pages) are
    /// accounted for; indexes are made again from the tables' rows.
    func walkIndexes() throws {
        for entry in schema where entry.type == "index" && entry.root >= 2 && entry.root <= file.pageCount {
            guard owners.role(entry.root) == .none else { continue }
            let tree = nextTree
            nextTree += 1
            let outcome = walker.walk(root: entry.root, tree: tree, table: false, owners: &owners) { cell, owners in
                _ = self.payloads.payload(cell.cell, page: cell.bytes, tree: tree, owners: &owners)
            }
            if outcome.damaged {
                problems.append("the b-tree of index \(entry.name) is damaged (the index is made again from its table)")
            }
        }
        payloads.trim()
    }

    /// Claims the pages the freelist names; a page a b-tree owns stays the b-tree's.
    func claimFreelist() {
        let list = SalvageFreelist.read(file) { self.owners.role($0) == .tree }
        problems += list.problems
        for trunk in list.trunks where !owners.claim(trunk, as: .freeTrunk) {
            problems.append("the freelist names page \(trunk) as a trunk, which \(describeOwner(trunk))")
        }
        for leaf in list.leaves where !owners.claim(leaf, as: .freeLeaf) {
            problems.append("the freelist names page \(leaf), which \(describeOwner(leaf))")
        }
        freelistPages = list.trunks.count + list.leaves.count
    }

    func describeOwner(_ page: UInt32) -> String {
        switch owners.role(page) {
        case .tree, .overflow:
            if let owner = owners.owner(page), let table = tables[owner] { return "belongs to table \(table.name)" }
            return owners.owner(page) == 0 ? "belongs to sqlite_schema" : "belongs to a b-tree"
        case .freeTrunk, .freeLeaf: return "the freelist names twice"
        case .reserved: return "the format reserves"
        case .none: return "belongs to nobody"
        }
    }

    /// Makes the indexes (but UNIQUE ones, made before the rows), views and
    /// triggers (after the rows, so that none fires), in schema order.
    func createLaterObjects() throws {
        let copied = Set(tables.values.filter(\.treeCopied).map { sqlNameKey($0.name) })
        for entry in schema.sorted(by: { $0.order < $1.order }) where entry.type != "table" {
            guard let sql = entry.sql else {
                if entry.type != "index" { failures.append(.init(type: entry.type, name: entry.name, message: "its CREATE statement is lost")) }
                continue
            }
            let kind: RecoveredDatabase.Kind
            switch entry.type {
            case "index":
                if RecoveredDatabase.isCreate(.uniqueIndex, sql) { continue }
                // Made before the rows of a table copied b-tree by b-tree (TreeCopy).
                if copied.contains(sqlNameKey(entry.tableName)) { continue }
                kind = .index
            case "view": kind = .view
            case "trigger": kind = .trigger
            default: continue
            }
            do { try out.create(kind, sql: sql) } catch {
                failures.append(.init(type: entry.type, name: entry.name, message: describe(error)))
            }
        }
    }

    func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message }
        return "\(error)"
    }

    // MARK: Report

    func makeReport() -> RecoveryReport {
        for table in tables.values.sorted(by: { $0.id < $1.id }) where table.alteredRows > 0 {
            problems.append("\(table.alteredRows) rows of \(table.name) read a default (added by ALTER TABLE ADD COLUMN) that "
                            + "their column's type does not allow (integrity_check reports them): written as the type makes them")
        }
        let unclaimed = owners.unclaimed().count
        var results: [RecoveryReport.TableResult] = []
        for table in tables.values {
            results.append(.init(name: table.name, root: table.root, rows: table.rows, lostAndFoundRows: table.lostRows,
                                 pagesRead: table.pagesRead, pagesDamaged: table.damagedPages,
                                 pagesAttached: table.pagesAttached, generic: table.generic, damaged: table.damaged,
                                 treeCopied: table.treeCopied))
        }
        results.sort { sqlNameKey($0.name).lexicographicallyPrecedes(sqlNameKey($1.name)) }
        let damaged = walker.damage.keys.sorted().map { RecoveryReport.DamagedPage(page: $0, problem: walker.damage[$0] ?? "") }
        let sound = damaged.isEmpty && problems.isEmpty && !schemaDamaged && unreadableCells == 0 && lost.rows == 0
            && failures.isEmpty && unclaimed == 0 && orphanPages == 0 && unaccountedPages == 0
            && !tables.values.contains { $0.damaged }
        return RecoveryReport(
            source: request.source, output: request.output, pageSize: file.pageSize, pageCount: Int(file.pageCount),
            encoding: file.encoding.rawValue, walPages: file.wal?.frames.count ?? 0, tables: results,
            lostAndFoundTable: lost.name, lostAndFoundRows: lost.rows, damagedPages: damaged,
            unreadableCells: unreadableCells, damagedRecords: damagedRecords, orphanPages: orphanPages, unaccountedPages: unaccountedPages,
            rtrees: rtreeResults.sorted { sqlNameKey($0.name).lexicographicallyPrecedes(sqlNameKey($1.name)) },
            freelistPages: freelistPages, freelistRowsIgnored: freelistRowsIgnored, schemaDamaged: schemaDamaged,
            objectsNotRecreated: failures, problems: problems, sound: sound, copiesRefused: copiesRefused)
    }
}
