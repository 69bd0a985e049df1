// `litectl stats`: where a database file's pages go, per table, per index and
// per table with all its indexes, read in one pass over the `dbstat` virtual
// table, with the same definitions as sqlite3_analyzer (tool/spaceanal.tcl).
// See https://www.sqlite.org/dbstat.html
import CSQLite

/// Page statistics of one b-tree, or of a table with all its indexes.
public struct ObjectStats: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// One table's own b-tree.
        case table
        /// One index's b-tree.
        case index
        /// A table and all its indexes together.
        case tableWithIndexes = "table+indexes"
    }

    public var name: String
    /// The table the object belongs to (its own name for a table).
    public var table: String
    public var kind: Kind
    /// True for an index or a WITHOUT ROWID table: every cell, interior ones
    /// included, is an entry (sqlite3_analyzer's rule).
    public var cellsAreEntries: Bool
    public var leafPages: Int64 = 0
    public var interiorPages: Int64 = 0
    public var overflowPages: Int64 = 0
    /// Cells on all b-tree pages, and on leaf pages only.
    public var cells: Int64 = 0
    public var leafCells: Int64 = 0
    /// Payload bytes, all pages (overflow pages included).
    public var payload: Int64 = 0
    public var overflowPayload: Int64 = 0
    /// Entries whose payload spills onto overflow pages.
    public var overflowEntries: Int64 = 0
    public var maxPayload: Int64 = 0
    public var interiorUnused: Int64 = 0
    public var leafUnused: Int64 = 0
    public var overflowUnused: Int64 = 0
    /// Levels of the b-tree (1 for a tree that is only its root).
    public var depth: Int64 = 0
    /// Leaf pages that do not directly follow the page before them in file order.
    public var nonSequentialPages: Int64 = 0

    public init(name: String, table: String, kind: Kind, cellsAreEntries: Bool) {
        self.name = name
        self.table = table
        self.kind = kind
        self.cellsAreEntries = cellsAreEntries
    }

    public var pages: Int64 { leafPages + interiorPages + overflowPages }
    /// Rows of a table, keys of an index.
    public var entries: Int64 { cellsAreEntries ? cells : leafCells }
    public var unused: Int64 { interiorUnused + leafUnused + overflowUnused }
    public func bytes(pageSize: Int64) -> Int64 { pages * pageSize }
    public var averagePayload: Double { entries == 0 ? 0 : Double(payload) / Double(entries) }
    /// Share of non-sequential pages, in percent of the pages after the first.
    public var fragmentationPercent: Double {
        pages <= 1 ? 0 : Double(nonSequentialPages) * 100 / Double(pages - 1)
    }

    mutating func add(_ other: ObjectStats) {
        leafPages += other.leafPages; interiorPages += other.interiorPages; overflowPages += other.overflowPages
        if other.cellsAreEntries { cells += other.cells; leafCells += other.cells } else {
            cells += other.leafCells; leafCells += other.leafCells
        }
        payload += other.payload; overflowPayload += other.overflowPayload
        overflowEntries += other.overflowEntries
        maxPayload = max(maxPayload, other.maxPayload)
        interiorUnused += other.interiorUnused; leafUnused += other.leafUnused; overflowUnused += other.overflowUnused
        depth = max(depth, other.depth)
        nonSequentialPages += other.nonSequentialPages
    }
}

/// Page statistics of one database file.
public struct FileStats: Sendable {
    public var path: String
    public var pageSize: Int64
    /// PRAGMA page_count.
    public var pageCount: Int64
    /// PRAGMA freelist_count (the header's count).
    public var freelistPages: Int64
    /// Auto-vacuum pointer-map pages (0 without auto_vacuum).
    public var pointerMapPages: Int64
    public var fileSize: Int64?
    public var walSize: Int64?
    /// Every b-tree (tables, indexes, sqlite_schema), largest first.
    public var objects: [ObjectStats]
    /// Each table with all its indexes, largest first.
    public var tables: [ObjectStats]

    /// Pages that hold b-tree content.
    public var usedPages: Int64 { objects.reduce(0) { $0 + $1.pages } }
    /// Bytes on b-tree pages that hold payload or page structure (not unused space).
    public var bytesInUse: Int64 { usedPages * pageSize - objects.reduce(0) { $0 + $1.unused } }
    /// Unused bytes on b-tree pages plus free pages, as a share of the file's pages, in percent.
    public var unusedPercent: Double {
        let total = pageCount * pageSize
        guard total > 0 else { return 0 }
        return Double(total - bytesInUse) * 100 / Double(total)
    }
    /// An object's share of the file, in percent of PRAGMA page_count.
    public func sharePercent(_ object: ObjectStats) -> Double {
        pageCount == 0 ? 0 : Double(object.pages) * 100 / Double(pageCount)
    }
}

extension FileStats {
    /// Reads the statistics of `path` read-only in one scan of `dbstat`.
    /// `progress(done, total)` is called now and then with pages scanned so far.
    public static func read(path: String, busyTimeout: Int = Connection.defaultBusyTimeout,
                            progress: ((Int64, Int64) -> Void)? = nil) throws -> FileStats {
        let fileSize = FileCheck.size(of: path)
        let walSize = FileCheck.size(of: path + "-wal")
        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        try? connection.execute("PRAGMA mmap_size=\(Int64(1) << 40)")
        return try connection.readTransaction {
            try read(connection, path: path, fileSize: fileSize, walSize: walSize, progress: progress)
        }
    }

    static func read(_ connection: Connection, path: String, fileSize: Int64?, walSize: Int64?,
                     progress: ((Int64, Int64) -> Void)?) throws -> FileStats {
        func integer(_ sql: String) throws -> Int64 {
            if case .integer(let v)? = try connection.scalar(sql) { return v }
            return 0
        }
        let pageSize = try integer("PRAGMA main.page_size")
        let pageCount = try integer("PRAGMA main.page_count")
        let freelist = try integer("PRAGMA main.freelist_count")
        let autoVacuum = try integer("PRAGMA main.auto_vacuum")
        var pointerMap: Int64 = 0
        if autoVacuum != 0 && pageCount > 1 {
            // One pointer-map page, then pageSize/5 pages it maps, and so on
            // (https://www.sqlite.org/fileformat.html#pointer_map_or_ptrmap_pages).
            let mapped = pageSize / 5
            pointerMap = (pageCount - 1 + mapped) / (mapped + 1)
        }

        // Which table each b-tree belongs to, and which tables are WITHOUT ROWID.
        var owner: [String: (table: String, isIndex: Bool)] = ["sqlite_schema": ("sqlite_schema", false)]
        for row in try connection.rows("SELECT name, tbl_name, type FROM main.sqlite_schema WHERE rootpage > 0") {
            let name = String(decoding: row[0].bytesForDisplay, as: UTF8.self)
            let table = String(decoding: row[1].bytesForDisplay, as: UTF8.self)
            owner[name] = (table, String(decoding: row[2].bytesForDisplay, as: UTF8.self) == "index")
        }
        var withoutRowid = Set<String>()
        for row in try connection.rows("SELECT name FROM pragma_table_list WHERE schema = 'main' AND wr") {
            withoutRowid.insert(String(decoding: row[0].bytesForDisplay, as: UTF8.self))
        }

        var objects: [ObjectStats] = []
        var pageLists: [[UInt64]] = []
        var indexByName: [String: Int] = [:]
        var currentName: [UInt8] = []
        var current = -1
        var scanned: Int64 = 0
        let statement = try connection.prepare(
            "SELECT name, path, pageno, pagetype, ncell, payload, unused, mx_payload FROM dbstat('main')")
        try statement.forEachRow { row in
            let nameBytes = row.bytes(at: 0)
            if current < 0 || !nameBytes.elementsEqual(currentName) {
                currentName = Array(nameBytes)
                let name = String(decoding: currentName, as: UTF8.self)
                if let existing = indexByName[name] {
                    current = existing
                } else {
                    let facts = owner[name] ?? (name, false)
                    let kind: ObjectStats.Kind = facts.isIndex ? .index : .table
                    objects.append(ObjectStats(name: name, table: facts.table, kind: kind,
                                               cellsAreEntries: facts.isIndex || withoutRowid.contains(name)))
                    pageLists.append([])
                    current = objects.count - 1
                    indexByName[name] = current
                }
            }
            let pathBytes = row.bytes(at: 1)
            let pageType = row.bytes(at: 3)
            let cells = row.int64(at: 4), payload = row.int64(at: 5), unused = row.int64(at: 6)
            // pagetype is "internal", "leaf" or "overflow": the first byte tells them apart.
            let type = pageType.first ?? 0
            let isLeaf = type == UInt8(ascii: "l")
            pageLists[current].append(UInt64(row.int64(at: 2)) << 1 | (isLeaf ? 1 : 0))
            objects.withUnsafeMutableBufferPointer { all in
                switch type {
                case UInt8(ascii: "i"):
                    all[current].interiorPages += 1
                    all[current].interiorUnused += unused
                case UInt8(ascii: "l"):
                    all[current].leafPages += 1
                    all[current].leafUnused += unused
                    all[current].leafCells += cells
                default:
                    all[current].overflowPages += 1
                    all[current].overflowUnused += unused
                    all[current].overflowPayload += payload
                }
                all[current].cells += cells
                all[current].payload += payload
                all[current].maxPayload = max(all[current].maxPayload, row.int64(at: 7))
                if pathBytes.contains(UInt8(ascii: "+")) {
                    // The first overflow page of an entry ends in "+000000".
                    if pathBytes.count >= 7, pathBytes.suffix(7).elementsEqual("+000000".utf8) { all[current].overflowEntries += 1 }
                } else {
                    all[current].depth = max(all[current].depth, Int64((pathBytes.count + 3) / 4))
                }
            }
            scanned += 1
            if let progress, scanned & 0xFFF == 0 { progress(scanned, pageCount) }
        }
        progress?(scanned, pageCount)

        // Non-sequential pages, as sqlite3_analyzer counts them: in page-number
        // order, a leaf page that does not follow the page before it.
        for i in objects.indices {
            pageLists[i].sort()
            var previous: UInt64 = 0
            var gaps: Int64 = 0
            for entry in pageLists[i] {
                let page = entry >> 1
                if previous > 0 && entry & 1 == 1 && page != previous + 1 { gaps += 1 }
                previous = page
            }
            objects[i].nonSequentialPages = gaps
        }

        var groups: [String: ObjectStats] = [:]
        for object in objects {
            groups[object.table, default: ObjectStats(name: object.table, table: object.table, kind: .tableWithIndexes,
                                                     cellsAreEntries: false)].add(object)
        }
        let bySize: (ObjectStats, ObjectStats) -> Bool = {
            $0.pages != $1.pages ? $0.pages > $1.pages : Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8))
        }
        return FileStats(path: path, pageSize: pageSize, pageCount: pageCount, freelistPages: freelist,
                         pointerMapPages: pointerMap, fileSize: fileSize, walSize: walSize,
                         objects: objects.sorted(by: bySize), tables: groups.values.sorted(by: bySize))
    }
}
