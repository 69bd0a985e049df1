// The page reader against SQLite itself: on thousands of random tables (every
// storage class, affinity, key shape, page size, reserved bytes, UTF-16,
// ADD COLUMN rows, overflow, commits left in the -wal) and on the real
// databases, the rows decoded from the pages must be exactly what SELECT
// returns in the same read transaction; on damaged pages the reader must
// throw, never trap or hang.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct RowDecoderTests {
    /// Rows of `table` read from the pages and with SELECT in one read
    /// transaction: every stored column (generated STORED ones included)
    /// unless `columns` names some. nil rows from the pages when the page
    /// reader refused (`refusal` says why).
    struct Reading {
        var fromPages: [[Value]]?
        /// The rows read as raw records (`keysAndRecord`, every column as a
        /// key) and those records decoded again (`decode(record:rowid:)`):
        /// both must be `fromPages`. nil when that threw (`recordError`).
        var keyedFromRecords: [[Value]]?
        var fromRecords: [[Value]]?
        var recordError: String?
        var refusal: String?
        var fromSelect: [[Value]]?
        var selectError: String?
        var ordered: Bool
    }

    static func read(_ path: String, _ tableName: String, columns: [String]? = nil) throws -> Reading {
        let connection = try Connection(path: path)
        let before = WALIndexHeader.current(connection)
        // Not readTransaction: a damaged file may fail its COMMIT too.
        try connection.execute("BEGIN")
        defer { try? connection.execute("ROLLBACK") }
        _ = try connection.scalar("SELECT count(*) FROM sqlite_schema")
        let walIndex = WALIndexHeader.pinned(connection, before: before)
        do {
            let table = try #require(try connection.readSchema().table(named: tableName))
            let names = columns ?? table.columns.filter { $0.hidden == .normal || $0.hidden == .generatedStored }.map(\.name)
            var reading = Reading(ordered: !table.withoutRowid)
            do {
                let reader = try SnapshotReader(connection, walIndex: walIndex)
                let layout = try reader.layout(table, columns: names)
                let decoder = reader.decoder(layout, claimed: ClaimedPages(pageCount: reader.pages.pageCount))
                var rows: [[Value]] = []
                try decoder.forEachRow { row in rows.append(row.cells.map(\.value)) }
                reading.fromPages = rows
                do {
                    let walker = reader.decoder(layout, claimed: ClaimedPages(pageCount: reader.pages.pageCount))
                    let again = reader.decoder(layout, claimed: ClaimedPages(pageCount: 0))
                    let every = Array(layout.columns.indices)
                    var keyed: [[Value]] = [], decoded: [[Value]] = []
                    try walker.forEachCell { page, cell in
                        let row = try walker.keysAndRecord(page, cell, keys: every)
                        keyed.append(row.cells.dropLast().map(\.value))
                        guard case .blob(let record)? = row.cells.last else { throw PageError(.badRecord, "no record cell") }
                        decoded.append(try again.decode(record: record, rowid: cell.rowid).cells.map(\.value))
                    }
                    reading.keyedFromRecords = keyed
                    reading.fromRecords = decoded
                } catch {
                    reading.recordError = "\(error)"
                }
            } catch {
                reading.refusal = "\(error)"
            }
            let list = names.isEmpty ? "NULL" : names.map(quoteIdentifier).joined(separator: ", ")
            do {
                // The table's own b-tree, never a covering index (a damaged
                // table and its intact index differ): NOT INDEXED does not
                // keep SQLite from scanning another index of a WITHOUT ROWID
                // table, INDEXED BY its key's index does.
                var from = quoteIdentifier(table.name) + " NOT INDEXED"
                if table.withoutRowid, case .text(let key)? = try connection.scalar(
                    "SELECT name FROM pragma_index_list(?1) WHERE origin = 'pk'", [.text(table.name)]) {
                    from = quoteIdentifier(table.name) + " INDEXED BY " + quoteIdentifier(String(decoding: key, as: UTF8.self))
                }
                reading.fromSelect = try connection.rows("SELECT \(list) FROM \(from)" + (table.withoutRowid ? "" : " ORDER BY _rowid_"))
            } catch {
                reading.selectError = "\(error)"
            }
            return reading
        }
    }

    static func sorted(_ rows: [[Value]]) -> [[Value]] {
        rows.sorted { x, y in
            for (u, v) in zip(x, y) where Value.compare(u, v) != 0 { return Value.compare(u, v) < 0 }
            return x.count < y.count
        }
    }

    static func sameRows(_ reading: Reading) -> Bool {
        guard let pages = reading.fromPages, let select = reading.fromSelect else { return false }
        return reading.ordered ? pages == select : sorted(pages) == sorted(select)
    }

    /// The raw-record path read what the row decoder read.
    static func recordsAgree(_ reading: Reading) -> Bool {
        reading.fromPages != nil && reading.keyedFromRecords == reading.fromPages && reading.fromRecords == reading.fromPages
    }

    /// The first difference, for a failure message.
    static func firstDifference(_ reading: Reading) -> String {
        guard let pages = reading.fromPages, let select = reading.fromSelect else {
            return "pages: \(reading.refusal ?? "ok"), select: \(reading.selectError ?? "ok")"
        }
        let x = reading.ordered ? pages : sorted(pages), y = reading.ordered ? select : sorted(select)
        if x.count != y.count { return "\(x.count) rows from pages, \(y.count) from SELECT" }
        func show(_ row: [Value]) -> String { row.map { String($0.sqlLiteral.prefix(120)) }.joined(separator: ", ") }
        for (i, (a, b)) in zip(x, y).enumerated() where a != b {
            var detail = ""
            for (u, v) in zip(a, b) where u != v {
                if case .text(let p) = u, case .text(let q) = v {
                    let at = (0..<min(p.count, q.count)).first { p[$0] != q[$0] } ?? min(p.count, q.count)
                    detail = " (TEXT of \(p.count) and \(q.count) bytes, first difference at byte \(at))"
                }
            }
            return "row \(i): pages [\(show(a))] select [\(show(b))]\(detail)"
        }
        return "same"
    }

    @Test(arguments: 0..<12)
    func randomTablesReadAsSelectReadsThem(batch: Int) throws {
        let folder = try TemporaryFolder("decoder-random")
        var tables = 0
        for k in 0..<50 {
            let seed = UInt64(batch * 1000 + k)
            let database = try RandomDatabase.make(at: folder.file("r\(seed).db"), seed: seed, tableCount: 1 + Int(seed % 7))
            defer { try? database.writer?.close() }
            for name in database.tables {
                let reading = try Self.read(database.path, name)
                tables += 1
                let same = Self.sameRows(reading), records = Self.recordsAgree(reading)
                #expect(same, "\(database.summary)\n\(name): \(Self.firstDifference(reading))")
                #expect(records, "\(database.summary)\n\(name): raw records \(reading.recordError ?? "read otherwise")")
            }
        }
        #expect(tables > 150, "\(tables) tables")
    }

    /// Big tables in the smallest and the largest pages: trees several levels deep.
    @Test(arguments: [512, 65536])
    func deepTreesAndBigPages(pageSize: Int) throws {
        let folder = try TemporaryFolder("decoder-deep")
        var settings = RandomDatabase.Settings()
        settings.pageSize = pageSize
        settings.reserved = pageSize == 512 ? 20 : 0
        for seed in UInt64(0)..<3 {
            let database = try RandomDatabase.make(at: folder.file("d\(seed).db"), seed: 77 + seed, tableCount: 3,
                                                   settings: settings, maxRows: 3000)
            for name in database.tables {
                let reading = try Self.read(database.path, name)
                let same = Self.sameRows(reading), records = Self.recordsAgree(reading)
                #expect(same, "\(database.summary)\n\(name): \(Self.firstDifference(reading))")
                #expect(records, "\(database.summary)\n\(name): raw records \(reading.recordError ?? "read otherwise")")
            }
        }
    }

    @Test func realDatabasesReadAsSelectReadsThem() throws {
        for path in realDatabases {
            let connection = try Connection(path: path)
            let tables = try connection.readSchema().tables.filter { $0.kind != .virtual && $0.problem == nil }
            try connection.close()
            for table in tables {
                let reading = try Self.read(path, table.name)
                let same = Self.sameRows(reading)
                #expect(same, "\(path) \(table.name): \(Self.firstDifference(reading))")
            }
        }
    }

    /// A WAL database with a table t(id, v) of `rows` rows, and a writer
    /// connection that keeps its commits in the -wal (no automatic checkpoint).
    static func walTable(in folder: TemporaryFolder, rows: Int) throws -> (String, Connection) {
        let path = folder.file("w.db")
        try makeDatabase(path, "PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v);")
        let writer = try Connection(path: path, mode: .readWrite)
        try writer.execute("PRAGMA wal_autocheckpoint = 0")
        try writer.execute("INSERT INTO t(v) SELECT randomblob(300) FROM (WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < \(rows)) SELECT n FROM i)")
        return (path, writer)
    }

    /// The rows of t (id, v) as `snapshot` decodes them from its pages.
    static func rowsOfT(_ snapshot: SnapshotReader, _ reader: Connection) throws -> [[Value]] {
        let table = try #require(try reader.readSchema().table(named: "t"))
        let layout = try snapshot.layout(table, columns: ["id", "v"])
        var rows: [[Value]] = []
        try snapshot.decoder(layout, claimed: ClaimedPages(pageCount: snapshot.pages.pageCount)).forEachRow {
            rows.append($0.cells.map(\.value))
        }
        return rows
    }

    /// A commit made after the read transaction began is not seen; one made
    /// before is, from the -wal.
    @Test func walFramesOfTheSnapshotOnly() throws {
        let folder = try TemporaryFolder("decoder-wal")
        let (path, writer) = try Self.walTable(in: folder, rows: 500)
        let reader = try Connection(path: path)
        let before = WALIndexHeader.current(reader)
        #expect(before != nil)
        try reader.readTransaction {
            let walIndex = WALIndexHeader.pinned(reader, before: before)
            // After the snapshot: more rows and changed pages.
            try writer.execute("INSERT INTO t(v) VALUES ('late'); UPDATE t SET v = 'changed' WHERE id % 7 = 0")
            let snapshot = try SnapshotReader(reader, walIndex: walIndex)
            #expect(snapshot.pages.seesWholeSnapshot)
            #expect(!snapshot.pages.walPages.isEmpty)
            let rows = try Self.rowsOfT(snapshot, reader)
            #expect(rows == (try reader.rows("SELECT id, v FROM t ORDER BY id")))
            #expect(rows.count == 500)
        }
        // When the snapshot cannot be pinned down, pages in the -wal cannot be read.
        try reader.readTransaction {
            let snapshot = try SnapshotReader(reader, walIndex: nil)
            #expect(!snapshot.pages.seesWholeSnapshot)
            let table = try #require(try reader.readSchema().table(named: "t"))
            #expect(throws: TableLayout.Unsupported.self) { try snapshot.layout(table, columns: ["v"]) }
        }
        try writer.close()
    }

    /// A snapshot begun when every frame of the -wal was already checkpointed
    /// is read by SQLite from the main file alone, and a writer may then
    /// restart the -wal over those frames: the reader reads the main file
    /// too, never the overwritten frames.
    @Test func aSnapshotWhollyCheckpointedIgnoresARestartedWAL() throws {
        let folder = try TemporaryFolder("decoder-wal")
        let (path, writer) = try Self.walTable(in: folder, rows: 2000)
        // Every frame backfilled, the -wal kept (and its frames still there).
        let checkpoint = try writer.rows("PRAGMA wal_checkpoint(PASSIVE)")
        #expect(checkpoint.first?[1] == checkpoint.first?[2])
        let reader = try Connection(path: path)
        let before = WALIndexHeader.current(reader)
        try reader.readTransaction {
            let walIndex = try #require(WALIndexHeader.pinned(reader, before: before))
            #expect(walIndex.wholeInMainFile)
            let snapshot = try SnapshotReader(reader, walIndex: walIndex)
            #expect(snapshot.pages.seesWholeSnapshot)
            // The writer restarts the -wal: its first frames now hold other pages' new versions.
            try writer.execute("UPDATE t SET v = randomblob(300) WHERE id % 3 = 0")
            let rows = try Self.rowsOfT(snapshot, reader)
            #expect(rows.count == 2000)
            #expect(rows == (try reader.rows("SELECT id, v FROM t ORDER BY id")))
        }
        try writer.close()
    }

    /// Reading pages and pinning the -wal down create no file (mapping the
    /// -shm of a database not in WAL mode would create one).
    @Test(arguments: ["DELETE", "WAL"])
    func readingCreatesNoFiles(journal: String) throws {
        let folder = try TemporaryFolder("decoder-files")
        let path = folder.file("x.db")
        try makeDatabase(path, "PRAGMA journal_mode = \(journal); CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'a');")
        #expect(try folder.listing() == ["x.db"])
        let reading = try Self.read(path, "t")
        #expect(reading.fromPages == [[.integer(1), .text("a")]])
        _ = try ContentHasher.hash(path: path)
        #expect(try folder.listing() == ["x.db"])
    }

    // MARK: Damage

    /// Random bytes of random table pages changed: the reader throws or reads
    /// what SELECT reads; it never traps or runs on.
    @Test(arguments: 0..<4)
    func damagedPagesGiveErrors(batch: Int) throws {
        let folder = try TemporaryFolder("decoder-damage")
        var rng = SplitMix64(seed: UInt64(9000 + batch))
        var errors = 0, reads = 0
        for k in 0..<30 {
            var settings = RandomDatabase.Settings.random(&rng)
            settings.wal = false
            settings.pageSize = [512, 1024, 4096].randomElement(using: &rng)!
            if settings.pageSize - settings.reserved < 480 { settings.reserved = 0 }
            let database = try RandomDatabase.make(at: folder.file("m\(k).db"), seed: rng.next(), tableCount: 3,
                                                   settings: settings, maxRows: 400)
            let pages = try sqlite3Scalar(database.path, "SELECT group_concat(pageno) FROM dbstat WHERE name LIKE 't%'")
                .split(separator: ",").compactMap { Int($0) }
            guard !pages.isEmpty else { continue }
            let pageSize = settings.pageSize
            var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: database.path)))
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let page = pages.randomElement(using: &rng)!
                let base = (page - 1) * pageSize
                switch Int.random(in: 0..<4, using: &rng) {
                case 0:  // the page header and cell pointers
                    let at = base + Int.random(in: 0..<min(40, pageSize), using: &rng)
                    bytes[at] = UInt8.random(in: 0...255, using: &rng)
                case 1:  // a child or overflow pointer's high byte
                    let at = base + Int.random(in: 0..<pageSize, using: &rng)
                    bytes[at] = [0x00, 0x7F, 0xFF, bytes[at] ^ 1].randomElement(using: &rng)!
                default:  // anywhere
                    for _ in 0..<Int.random(in: 1...8, using: &rng) {
                        bytes[base + Int.random(in: 0..<pageSize, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                    }
                }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: database.path))
            for name in database.tables {
                guard let reading = try? Self.read(database.path, name) else { continue }
                if reading.fromPages == nil { errors += 1 } else { reads += 1 }
                if reading.fromPages != nil && reading.fromRecords != nil {
                    // (A damaged overflow page past the columns read fails the raw path only.)
                    #expect(Self.recordsAgree(reading), "\(database.summary)\n\(name): raw records read otherwise")
                }
                if reading.fromPages != nil && reading.fromSelect != nil {
                    let same = Self.sameRows(reading)
                    #expect(same, "\(database.summary)\n\(name): \(Self.firstDifference(reading))")
                }
            }
        }
        #expect(errors > 0)
    }

    /// An overflow chain that comes back to a page it passed, or leaves the file.
    @Test func overflowChainsThatLoopOrLeaveTheFile() throws {
        let folder = try TemporaryFolder("decoder-overflow")
        let path = folder.file("o.db")
        try makeDatabase(path, "PRAGMA page_size = 1024; CREATE TABLE t(v); INSERT INTO t VALUES (randomblob(10000));")
        let chain = try sqlite3Scalar(path, "SELECT group_concat(pageno) FROM dbstat WHERE name = 't' AND pagetype = 'overflow'")
            .split(separator: ",").compactMap { Int($0) }
        #expect(chain.count >= 9)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        for (next, kind) in [(UInt32(chain[0]), "loops"), (UInt32(100_000), "outside the file"), (0, "ends early")] {
            var bytes = [UInt8](original)
            let at = (chain[2] - 1) * 1024
            bytes[at] = UInt8(next >> 24); bytes[at + 1] = UInt8(next >> 16 & 0xFF)
            bytes[at + 2] = UInt8(next >> 8 & 0xFF); bytes[at + 3] = UInt8(next & 0xFF)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let reading = try Self.read(path, "t")
            let refusal = reading.refusal ?? ""
            #expect(refusal.contains(kind), "\(refusal)")
        }
    }

    /// A NaN stored as a REAL reads as NULL, as SQLite reads it.
    @Test func storedNaNReadsAsNull() throws {
        let folder = try TemporaryFolder("decoder-nan")
        let path = folder.file("n.db")
        try makeDatabase(path, "CREATE TABLE t(v REAL); INSERT INTO t VALUES (1.5);")
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let pattern: [UInt8] = [0x3F, 0xF8, 0, 0, 0, 0, 0, 0]
        let at = try #require((0...(bytes.count - 8)).last { Array(bytes[$0..<$0 + 8]) == pattern })
        bytes.replaceSubrange(at..<at + 8, with: [0x7F, 0xF8, 0, 0, 0, 0, 0, 1])
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let reading = try Self.read(path, "t")
        let (pages, select) = (reading.fromPages, reading.fromSelect)
        #expect(select == [[.null]])
        #expect(pages == [[.null]])
    }

    // MARK: The low layer on its own

    @Test func recordsAndVarints() throws {
        // Header 4 bytes: size, INTEGER (1 byte), TEXT of 2 bytes, NULL; then the data.
        let record: [UInt8] = [4, 1, 17, 0, 0xFF, 0x68, 0x69]
        let values = try record.withUnsafeBytes { try RecordHeader.values($0, encoding: .utf8) }
        #expect(values == [.integer(-1), .text("hi"), .null])
        // The fields must cover the payload exactly.
        for bad: [UInt8] in [[4, 1, 17, 0, 0xFF, 0x68], [4, 1, 17, 0, 0xFF, 0x68, 0x69, 0], [9, 1], [0x81], [2, 0x81], []] {
            #expect(throws: PageError.self) { try bad.withUnsafeBytes { try RecordHeader.values($0, encoding: .utf8) } }
        }
        // Header size 0: a record of no fields (SQLite reads every column as its default).
        #expect(try [UInt8]([0]).withUnsafeBytes { try RecordHeader.values($0, encoding: .utf8) } == [])
        let nine: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        #expect(nine.withUnsafeBytes { Varint.read($0.baseAddress!, 0, 9)?.value } == UInt64.max)
        #expect(nine.withUnsafeBytes { Varint.read($0.baseAddress!, 0, 8) } == nil)
        #expect(nine.withUnsafeBytes { Varint.read32($0.baseAddress!, 0, 9)?.value } == 0xFFFF_FFFF)
    }

    /// The file format's local payload sizes, against the pages SQLite wrote:
    /// for each payload size, the bytes dbstat counts on overflow pages.
    @Test(arguments: [512, 4096, 65536])
    func localPayloadSizes(pageSize: Int) throws {
        let folder = try TemporaryFolder("decoder-local")
        let path = folder.file("l.db")
        let sizes = [10, 400, 477, 478, 479, 1000, 4000, 4061, 4062, 4063, 10_000, 65_000, 65_501, 70_000, 200_000]
        try makeDatabase(path, "PRAGMA page_size = \(pageSize); CREATE TABLE t(id INTEGER PRIMARY KEY, v); CREATE TABLE w(v PRIMARY KEY) WITHOUT ROWID;"
                         + sizes.enumerated().map { "INSERT INTO t VALUES (\($0.offset + 1), zeroblob(\($0.element))); INSERT INTO w VALUES (zeroblob(\($0.element)) || x'\(String(format: "%02x", $0.offset))');" }.joined())
        for (table, isTable) in [("t", true), ("w", false)] {
            let overflowPages = Int(try sqlite3Scalar(path, "SELECT count(*) FROM dbstat WHERE name = '\(table)' AND pagetype = 'overflow'"))!
            // What the formula predicts: payload = header + data.
            var predicted = 0
            for size in sizes {
                // t: [size, NULL for the rowid alias, v]; w: [size, v].
                let data = isTable ? size : size + 1
                let header = 1 + varintLength(UInt64(12 + 2 * data)) + (isTable ? 1 : 0)
                let payload = header + data
                let local = BTreePage.localSize(payload: payload, usable: pageSize, table: isTable)
                predicted += (payload - local + pageSize - 5) / (pageSize - 4)
            }
            #expect(overflowPages == predicted, "\(table) at \(pageSize)")
            let reading = try Self.read(path, table)
            let same = Self.sameRows(reading)
            #expect(same, "\(table): \(Self.firstDifference(reading))")
        }
    }

    func varintLength(_ v: UInt64) -> Int {
        var n = 1, x = v >> 7
        while x > 0 && n < 9 { n += 1; x >>= 7 }
        return n
    }

    /// UTF-16 text of any bytes, as SQLite converts it to UTF-8.
    @Test func utf16ConversionMatchesSQLite() throws {
        #expect(UTF16Text.matchesLibrary)
        let folder = try TemporaryFolder("decoder-utf16")
        for encoding in ["UTF-16le", "UTF-16be"] {
            let path = folder.file("\(encoding).db")
            var rng = SplitMix64(seed: 5)
            var script = "PRAGMA encoding = '\(encoding)'; CREATE TABLE t(v TEXT);"
            for _ in 0..<300 {
                let count = Int.random(in: 0...12, using: &rng)
                let units: [UInt8] = (0..<count).map { _ in
                    [0x00, 0x41, 0xD8, 0xDB, 0xDC, 0xDF, 0xFF, 0xFE, UInt8.random(in: 0...255, using: &rng)].randomElement(using: &rng)!
                }
                script += "INSERT INTO t VALUES (CAST(x'\(units.map { String(format: "%02x", $0) }.joined())' AS TEXT));"
            }
            try makeDatabase(path, script)
            let reading = try Self.read(path, "t")
            let same = Self.sameRows(reading)
            #expect(same, "\(encoding): \(Self.firstDifference(reading))")
        }
    }

    /// Short-record defaults come out as SQLite reads them, not as an INSERT would store them.
    @Test func addColumnDefaultsReadAsSQLiteReadsThem() throws {
        let folder = try TemporaryFolder("decoder-defaults")
        for encoding in ["UTF-8", "UTF-16le"] {
            let path = folder.file("\(encoding).db")
            var script = "PRAGMA encoding = '\(encoding)'; CREATE TABLE t(x); INSERT INTO t VALUES (1);"
            for (i, dflt) in RandomDatabase.Generator.defaults.enumerated() {
                for type in ["", "REAL", "INTEGER", "TEXT", "NUMERIC", "BLOB"] {
                    script += "ALTER TABLE t ADD COLUMN c\(i)_\(type.isEmpty ? "none" : type) \(type) DEFAULT \(dflt);\n"
                }
            }
            // Statements that fail (non-constant defaults) are skipped by -bail off.
            _ = try? runProcess(sqlite3Binary, ["-batch", path], input: Array(script.utf8))
            let reading = try Self.read(path, "t")
            let same = Self.sameRows(reading), columns = reading.fromSelect?.first?.count ?? 0
            #expect(same, "\(encoding): \(Self.firstDifference(reading))")
            #expect(Self.recordsAgree(reading), "\(encoding): raw records \(reading.recordError ?? "read otherwise")")
            #expect(columns > 100)
        }
    }
}


