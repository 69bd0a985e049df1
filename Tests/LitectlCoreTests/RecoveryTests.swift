// Tests of Recovery (`litectl recover`). Sound databases (the real corpus,
// random ones of every page size, encoding and WAL state, a generated one)
// must come out with the same logical hash and the same rows, rowids
// included. Damaged copies (flipped bytes in a leaf or an interior page, a
// truncated file, a zeroed page, a broken overflow chain, a damaged
// sqlite_schema page, a freelist pointing into a table, a destroyed header)
// must yield a database that passes integrity_check with every row of every
// undamaged page in it, value for value (where each row lives comes from the
// tests' own page map), a report that names the damage, and at least as many
// correct rows as the .recover of a sqlite3 shell of the same SQLite version
// (skipped when that shell cannot be built).
import Foundation
import XCTest
@testable import LitectlCore
import TestSupport

final class RecoveryTests: XCTestCase {
    // MARK: Sound databases are copied exactly

    func testSoundRealDatabasesAreCopiedExactly() throws {
        guard !realDatabases.isEmpty else { throw XCTSkip("no real databases in ../shared/corpus/real") }
        for path in realDatabases {
            let folder = try TemporaryFolder("recover")
            let out = folder.file("out.db")
            let report = try Recovery.run(RecoveryRequest(source: path, output: out))
            XCTAssertTrue(report.sound, "\(path):\n\(report.lines.joined(separator: "\n"))")
            XCTAssertEqual(report.exitCode, 0)
            XCTAssertEqual(report.lostAndFoundRows, 0)
            XCTAssertEqual(try integrityCheck(out), "ok", path)
            XCTAssertEqual(try ContentHasher.hash(path: out).digest, try ContentHasher.hash(path: path).digest, path)
            try assertSameRows(path, out)
            try assertSameSettings(path, out)
            XCTAssertEqual(try folder.listing(), ["out.db"], "only OUT is left")
        }
    }

    /// Random databases: copied exactly when SQLite finds them sound. A
    /// source that integrity_check faults (a default added by ADD COLUMN
    /// that its column's type does not allow, which the generator makes on
    /// purpose) is reported, and OUT still passes integrity_check.
    func testSoundRandomDatabasesAreCopiedExactly() throws {
        // Sound tables are copied b-tree by b-tree (TreeCopy); the first
        // seeds again with every table salvaged row by row.
        var unsound = 0
        for (seed, rowByRow) in (UInt64(1)...30).map({ ($0, false) }) + (UInt64(1)...12).map({ ($0, true) }) {
            let folder = try TemporaryFolder("recover")
            let source = folder.file("source.db")
            let made = try RandomDatabase.make(at: source, seed: seed * 7919, tableCount: 3)
            let out = folder.file("out.db")
            var request = RecoveryRequest(source: source, output: out)
            request.copiesSoundTrees = !rowByRow
            let report = try Recovery.run(request)
            let sourceSound = try integrityCheck(source) == "ok"
            let context = "\(made.summary)\(rowByRow ? " (row by row)" : "")\n\(report.lines.joined(separator: "\n"))"
            XCTAssertEqual(report.sound, sourceSound, context)
            XCTAssertEqual(try integrityCheck(out), "ok", context)
            if rowByRow { XCTAssertFalse(report.tables.contains { $0.treeCopied }, context) }
            if sourceSound {
                XCTAssertEqual(try ContentHasher.hash(path: out).digest, try ContentHasher.hash(path: source).digest, context)
                try assertSameRows(source, out, context: context)
            } else if !rowByRow {
                unsound += 1
                XCTAssertFalse(report.problems.isEmpty && report.lostAndFoundRows == 0, context)
            }
            if made.writer != nil { XCTAssertGreaterThan(report.walPages, 0, "the -wal's pages were read: \(made.summary)") }
            try made.writer?.close()
        }
        XCTAssertLessThan(unsound, 10, "most random databases are sound")
    }

    func testGeneratedDatabaseIsCopiedExactly() throws {
        let folder = try TemporaryFolder("recover")
        let source = try generated(in: folder, rows: 3000)
        for rowByRow in [false, true] {
            let out = folder.file(rowByRow ? "rows.db" : "trees.db")
            var request = RecoveryRequest(source: source, output: out)
            request.copiesSoundTrees = !rowByRow
            let report = try Recovery.run(request)
            XCTAssertTrue(report.sound, report.lines.joined(separator: "\n"))
            XCTAssertEqual(report.tables.filter(\.treeCopied).map(\.name).sorted(),
                           rowByRow ? [] : ["attachments", "audit", "customers", "events", "order_items"])
            XCTAssertEqual(try ContentHasher.hash(path: out).digest, try ContentHasher.hash(path: source).digest)
            try assertSameRows(source, out)
        }
    }

    func testAnEmptyFileIsAnEmptyDatabase() throws {
        let folder = try TemporaryFolder("recover")
        let source = folder.file("empty.db")
        try makeDatabase(source, "CREATE TABLE t(x); DROP TABLE t;")
        let report = try Recovery.run(RecoveryRequest(source: source, output: folder.file("out.db")))
        XCTAssertTrue(report.sound, report.lines.joined(separator: "\n"))
        XCTAssertEqual(report.rowsRecovered, 0)
    }

    func testOutputIsNeverOverwrittenWithoutReplace() throws {
        let folder = try TemporaryFolder("recover")
        let source = try generated(in: folder, rows: 200)
        let out = folder.file("out.db")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: out))
        XCTAssertThrowsError(try Recovery.run(RecoveryRequest(source: source, output: out))) { error in
            XCTAssertTrue("\(error)".contains("already exists"), "\(error)")
        }
        XCTAssertEqual(try String(contentsOfFile: out, encoding: .utf8), "keep me")
        var request = RecoveryRequest(source: source, output: out)
        request.replace = true
        XCTAssertTrue(try Recovery.run(request).sound)
        XCTAssertEqual(try integrityCheck(out), "ok")
        XCTAssertEqual(try folder.listing(), ["gen.db", "out.db"])
    }

    func testNotADatabaseIsAnError() throws {
        let folder = try TemporaryFolder("recover")
        let source = folder.file("text.db")
        try Data(String(repeating: "not a database at all\n", count: 400).utf8).write(to: URL(fileURLWithPath: source))
        XCTAssertThrowsError(try Recovery.run(RecoveryRequest(source: source, output: folder.file("out.db"))))
        XCTAssertEqual(try folder.listing(), ["text.db"], "no OUT, no temporary file")
    }

    /// A table whose CHECK fails with an error rather than a constraint
    /// (load_extension, which the new database does not allow): the run goes
    /// on, and the rows are kept, value for value, in lost_and_found.
    func testRowsATableCannotTakeGoToLostAndFound() throws {
        let folder = try TemporaryFolder("recover")
        let source = folder.file("check.db")
        try makeDatabase(source, """
            CREATE TABLE t(a INTEGER, b TEXT);
            INSERT INTO t VALUES (1, 'one'), (2, x'00ff'), (3, NULL);
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = 'CREATE TABLE t(a INTEGER CHECK (load_extension(a) IS NULL), b TEXT)' WHERE name = 't';
            """)
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let context = report.lines.joined(separator: "\n")
        XCTAssertEqual(report.exitCode, 1, context)
        XCTAssertEqual(report.tables.first { $0.name == "t" }?.lostAndFoundRows, 3, context)
        XCTAssertEqual(report.lostAndFoundRows, 3, context)
        XCTAssertEqual(try integrityCheck(out), "ok")
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT count(*) FROM t"), "0")
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT count(*) FROM lost_and_found WHERE reason LIKE 'refused by the new schema: %'"), "3")
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT group_concat(id || ':' || quote(c0) || ':' || quote(c1), ' ') FROM (SELECT * FROM lost_and_found ORDER BY id)"),
                       "1:1:'one' 2:2:X'00FF' 3:3:NULL")
    }

    /// A row wider than a table can be (here 1995 columns on a page no
    /// b-tree reaches) keeps its first SalvagedRecord.maxColumns values in
    /// lost_and_found rather than ending the run.
    func testAWideRowOnAnOrphanPageKeepsItsFirstColumns() throws {
        let folder = try TemporaryFolder("recover")
        let source = folder.file("wide.db")
        let width = 1995
        let columns = (0..<width).map { "c\($0)" }.joined(separator: ", ")
        let values = (0..<width).map { String($0 * 3) }.joined(separator: ", ")
        try makeDatabase(source, """
            CREATE TABLE keep(x);
            INSERT INTO keep VALUES ('kept');
            CREATE TABLE wide(\(columns));
            INSERT INTO wide VALUES (\(values));
            PRAGMA writable_schema = ON;
            DELETE FROM sqlite_schema WHERE name = 'wide';
            """)
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: source, output: out))
        let context = report.lines.joined(separator: "\n")
        XCTAssertEqual(report.exitCode, 1, context)
        XCTAssertEqual(report.lostAndFoundRows, 1, context)
        XCTAssertEqual(try integrityCheck(out), "ok")
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT x FROM keep"), "kept")
        let last = SalvagedRecord.maxColumns - 1
        XCTAssertEqual(try sqlite3Scalar(out, "SELECT nfield || ' ' || c0 || ' ' || c1 || ' ' || c\(last) FROM lost_and_found"),
                       "\(width) 0 3 \(last * 3)")
    }

    // MARK: Damage

    /// One way of damaging a copy, with the pages it damages.
    struct Damage {
        var name: String
        /// Pages whose rows may be lost.
        var pages: Set<UInt32>
        /// Tables whose schema row is lost (their rows come back as recovered_root_ROOT).
        var schemaLost: Set<String> = []
        /// The rows a recovery of the undamaged original copies exactly, by table.
        var reproducible: [String: Set<RowKey>]?
        var apply: (String) throws -> Void
    }

    func testDamagedRealDatabases() throws {
        guard !realDatabases.isEmpty else { throw XCTSkip("no real databases in ../shared/corpus/real") }
        var ours = 0, theirs = 0
        for path in realDatabases {
            let folder = try TemporaryFolder("recover-real")
            let original = try withFreelist(folder.copy(path, as: "original.db"))
            let counts = try runDamages(original: original, in: folder)
            ours += counts.ours
            theirs += counts.theirs
        }
        if recoverShell != nil { print("recover: \(ours) correct rows; the shell's .recover: \(theirs)") }
    }

    func testDamagedGeneratedDatabase() throws {
        let folder = try TemporaryFolder("recover-gen")
        let original = try withFreelist(generated(in: folder, rows: 3000))
        _ = try runDamages(original: original, in: folder)
    }

    func testDamagedRandomDatabases() throws {
        for seed in UInt64(1)...4 {
            let folder = try TemporaryFolder("recover-random")
            var settings = RandomDatabase.Settings()
            settings.pageSize = [1024, 4096, 512, 8192][Int(seed) % 4]
            let made = try RandomDatabase.make(at: folder.file("original.db"), seed: seed * 104_729, tableCount: 4,
                                               settings: settings, maxRows: 400)
            _ = try runDamages(original: try withFreelist(made.path), in: folder, context: made.summary)
        }
    }

    /// A destroyed header (the first 100 bytes zeroed): the page size is found
    /// from the pages, and the rows come back.
    func testDestroyedHeader() throws {
        let folder = try TemporaryFolder("recover")
        let original = try generated(in: folder, rows: 2000, pageSize: 1024)
        let damaged = try folder.copy(original, as: "damaged.db")
        try patch(damaged, at: 0, Array(repeating: 0, count: 100))
        let out = folder.file("out.db")
        let report = try Recovery.run(RecoveryRequest(source: damaged, output: out))
        XCTAssertEqual(report.pageSize, 1024)
        XCTAssertFalse(report.sound)
        XCTAssertEqual(try integrityCheck(out), "ok")
        try assertRecovered(original: original, out: out, damage: Damage(name: "header", pages: [], apply: { _ in }), report: report)
    }

    // MARK: The damage scenarios

    /// Applies every damage to its own copy of `original` and checks each
    /// recovery; returns the correct rows recovered by litectl and by the shell.
    func runDamages(original: String, in folder: TemporaryFolder, context: String = "") throws -> (ours: Int, theirs: Int) {
        let map = try PageMap.read(original)
        var damages: [Damage] = []
        var rng = SplitMix64(seed: 0xD00D)
        let userTables = map.trees.values.filter { $0.type == "table" && $0.name != "sqlite_schema" }.sorted { $0.name < $1.name }
        let pageSize = map.pageSize

        // Flipped cell pointers in a leaf of the table with the most leaves.
        if let table = userTables.max(by: { $0.leaves.count < $1.leaves.count }), table.leaves.count >= 2 {
            let leaf = table.leaves[table.leaves.count / 2]
            damages.append(Damage(name: "flipped bytes in leaf \(leaf) of \(table.name)", pages: [leaf]) { path in
                try self.flipCellPointers(path, page: leaf, pageSize: pageSize, rng: &rng)
            })
            damages.append(Damage(name: "zeroed leaf \(leaf) of \(table.name)", pages: [leaf]) { path in
                try self.patch(path, at: Int(leaf - 1) * pageSize, Array(repeating: 0, count: pageSize))
            })
        }
        // Flipped child pointers in an interior page (no row lives there in a rowid table).
        if let table = userTables.filter({ !$0.interior.isEmpty }).max(by: { $0.leaves.count < $1.leaves.count }) {
            let interior = table.interior[0]
            damages.append(Damage(name: "flipped bytes in interior page \(interior) of \(table.name)", pages: [interior]) { path in
                try self.flipCellPointers(path, page: interior, pageSize: pageSize, rng: &rng, childPointers: true)
            })
            damages.append(Damage(name: "zeroed interior page \(interior) of \(table.name)", pages: [interior]) { path in
                try self.patch(path, at: Int(interior - 1) * pageSize, Array(repeating: 0, count: pageSize))
            })
        }
        // A truncated file: the last third of its pages gone.
        let keep = Int(map.pageCount) * 2 / 3
        damages.append(Damage(name: "truncated to \(keep) pages", pages: Set((UInt32(keep) + 1)...max(map.pageCount, UInt32(keep) + 1))) { path in
            try FileHandle(forWritingTo: URL(fileURLWithPath: path)).truncate(atOffset: UInt64(keep * pageSize))
        })
        // A broken overflow chain: the first overflow page's next pointer points out of the file.
        if let (tree, pages) = userTables.lazy.compactMap({ t in t.rows.values.first { $0.count >= 3 }.map { (t, $0) } }).first {
            let first = pages[1]
            damages.append(Damage(name: "broken overflow chain of a row of \(tree.name) at page \(first)", pages: [first]) { path in
                try self.patch(path, at: Int(first - 1) * pageSize, self.bigEndian(map.pageCount + 1000))
            })
        }
        // A damaged sqlite_schema page: its rows' tables lose their schema.
        if let schemaTree = map.trees["sqlite_schema"] {
            let page = schemaTree.leaves.first { $0 != 1 } ?? 1
            let lost = try schemaNames(original, onPages: [page], map: map)
            if page == 1 {
                damages.append(Damage(name: "flipped bytes in sqlite_schema page 1", pages: [1], schemaLost: lost) { path in
                    try self.flipCellPointers(path, page: 1, pageSize: pageSize, rng: &rng)
                })
            } else {
                damages.append(Damage(name: "zeroed sqlite_schema page \(page)", pages: [page], schemaLost: lost) { path in
                    try self.patch(path, at: Int(page - 1) * pageSize, Array(repeating: 0, count: pageSize))
                })
            }
        }
        // The freelist pointing into a table: a trunk's leaf entry, and the header's first trunk.
        if let table = userTables.first(where: { !$0.leaves.isEmpty }), let trunk = map.freelistTrunks.first {
            let leaf = table.leaves[0]
            damages.append(Damage(name: "freelist trunk \(trunk) naming leaf \(leaf) of \(table.name)", pages: []) { path in
                // Its first leaf entry (made to be one when the trunk names none).
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                let at = Int(trunk - 1) * pageSize + 4
                let count = UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
                try self.patch(path, at: at, self.bigEndian(max(count, 1)) + self.bigEndian(leaf))
            })
            damages.append(Damage(name: "header's freelist trunk pointing to leaf \(leaf) of \(table.name)", pages: []) { path in
                try self.patch(path, at: 32, self.bigEndian(leaf))
            })
        }

        // What a recovery of the undamaged original reproduces (a source that
        // integrity_check faults may hold rows no INSERT can write back).
        let baselinePath = folder.file("baseline.db")
        try? FileManager.default.removeItem(atPath: baselinePath)
        _ = try Recovery.run(RecoveryRequest(source: original, output: baselinePath))
        var reproducible: [String: Set<RowKey>] = [:]
        let baseline = try Connection(path: baselinePath)
        let source = try Connection(path: original)
        for tree in map.trees.values where tree.type == "table" && tree.name != "sqlite_schema" {
            guard try isOrdinaryTable(source, tree.name) else { continue }
            let expected = try tableRows(source, tree.name)
            let copied = try tableRows(baseline, tree.name)
            reproducible[tree.name] = Set(expected.keys.filter { copied[$0] == expected[$0] })
        }

        var ours = 0, theirs = 0
        for var damage in damages {
            // Tables whose schema row is on a damaged page lose their name.
            damage.schemaLost.formUnion(try schemaNames(original, onPages: damage.pages, map: map))
            damage.reproducible = reproducible
            let damaged = folder.file("damaged.db"), out = folder.file("out.db")
            for path in [damaged, out, folder.file("shell.db")] { try? FileManager.default.removeItem(atPath: path) }
            try FileManager.default.copyItem(atPath: original, toPath: damaged)
            try damage.apply(damaged)
            let report = try Recovery.run(RecoveryRequest(source: damaged, output: out))
            let label = "\(DurableFolder.baseName(of: original)) \(context): \(damage.name)"
            XCTAssertEqual(report.exitCode, 1, "\(label): damage is reported\n\(report.lines.joined(separator: "\n"))")
            XCTAssertFalse(report.damagedPages.isEmpty && report.problems.isEmpty && !report.schemaDamaged, "\(label): says what")
            XCTAssertEqual(try integrityCheck(out), "ok", label)
            let correct = try assertRecovered(original: original, out: out, damage: damage, report: report, label: label)
            ours += correct
            if let shell = recoverShell {
                let shellOut = folder.file("shell.db")
                // The shell's script is applied as far as SQLite takes it (it
                // writes infinities as Inf, and rows STRICT refuses).
                let sql = try runProcess(shell, [damaged, ".recover"])
                try runProcess(sqlite3Binary, [shellOut], input: Array(sql.stdout.utf8))
                let theirCorrect = try correctRows(original: original, in: shellOut, schemaLost: [])
                XCTAssertGreaterThanOrEqual(correct, theirCorrect, "\(label): at least as many rows as the shell's .recover")
                theirs += theirCorrect
            }
        }
        return (ours, theirs)
    }

    /// Checks that every row of `original` on an undamaged page is in `out`,
    /// value for value, and that few rows are there that `original` lacks.
    /// Returns the number of correct rows in `out`.
    @discardableResult
    func assertRecovered(original: String, out: String, damage: Damage, report: RecoveryReport, label: String = "") throws -> Int {
        let map = try PageMap.read(original)
        let source = try Connection(path: original)
        let target = try Connection(path: out)
        var correct = 0
        var affected = 0
        for tree in map.trees.values where tree.type == "table" && tree.name != "sqlite_schema" {
            guard try isOrdinaryTable(source, tree.name) else { continue }
            let rows = try tableRows(source, tree.name)
            // A table whose schema row was on a damaged page is either made
            // again (its row survived) or comes back as recovered_root_ROOT.
            let exists = try target.scalar("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                                           [.text(tree.name)]) == .integer(1)
            let lostSchema = damage.schemaLost.contains(tree.name) && !exists
            let recoveredName = lostSchema ? "recovered_root_\(tree.root)" : tree.name
            var theirs: [RowKey: [Value]] = [:]
            if lostSchema {
                if try target.scalar("SELECT count(*) FROM sqlite_schema WHERE name = ?1", [.text(recoveredName)]) == .integer(1) {
                    theirs = try genericRows(target, recoveredName)
                }
                if damage.pages.contains(tree.root) {
                    // The root is lost too: the rows are under the highest page left of their b-tree.
                    for row in try target.rows("SELECT name FROM sqlite_schema WHERE name LIKE 'recovered_root_%'") {
                        guard case .text(let n) = row[0] else { continue }
                        theirs.merge(try genericRows(target, String(decoding: n, as: UTF8.self))) { a, _ in a }
                    }
                }
            } else if exists {
                theirs = try tableRows(target, tree.name)
            }
            var missing: [String] = []
            for (key, values) in rows {
                if let reproducible = damage.reproducible, reproducible[tree.name]?.contains(key) != true { continue }
                let pages = tree.rows[key] ?? []
                let onDamaged = pages.isEmpty || pages.contains { damage.pages.contains($0) }
                if onDamaged { affected += 1 }
                let found = theirs[key]
                if lostSchema {
                    // A WITHOUT ROWID table whose schema is lost is kept in lost_and_found.
                    if !onDamaged && found == nil && !tree.withoutRowid { missing.append("\(key) on pages \(pages)") }
                    if found != nil { correct += 1 }
                    continue
                }
                if found == values { correct += 1 }
                if !onDamaged && found != values {
                    missing.append("\(key) on pages \(pages): \(found.map { "\($0)" } ?? "missing"), expected \(values)")
                }
            }
            if !missing.isEmpty {
                XCTFail("\(label): \(missing.count) rows of \(tree.name) on undamaged pages are not in \(recoveredName) as they were: "
                        + missing.sorted().prefix(3).joined(separator: "; "))
                keepFailure(original: original, damage: damage, label: label)
            }
            if !lostSchema {
                let extra = theirs.filter { rows[$0.key] != $0.value }.count
                XCTAssertLessThanOrEqual(extra, max(8, affected), "\(label): \(tree.name) holds few rows the original lacks")
            }
        }
        return correct
    }

    /// Rows of `out`'s tables that are exactly rows of `original` (same key, same values).
    func correctRows(original: String, in out: String, schemaLost: Set<String>) throws -> Int {
        let source = try Connection(path: original)
        let target = try Connection(path: out)
        var correct = 0
        for row in try source.rows("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'") {
            guard case .text(let n) = row[0] else { continue }
            let name = String(decoding: n, as: UTF8.self)
            guard try isOrdinaryTable(source, name),
                  try target.scalar("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1", [.text(name)]) == .integer(1)
            else { continue }
            let expected = try tableRows(source, name)
            guard let found = try? tableRows(target, name) else { continue }
            correct += found.filter { expected[$0.key] == $0.value }.count
        }
        return correct
    }

    // MARK: Helpers

    /// With LITECTL_KEEP_FAILURES=DIR, keeps a failing case's original and damaged copy there.
    func keepFailure(original: String, damage: Damage, label: String) {
        guard let folder = ProcessInfo.processInfo.environment["LITECTL_KEEP_FAILURES"] else { return }
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let short = (label.split(separator: "\n").first.map(String.init) ?? label).prefix(40) + "-" + damage.name.prefix(60)
        let stem = folder + "/" + short.map { $0.isLetter || $0.isNumber ? $0 : "_" }.map(String.init).joined()
        try? FileManager.default.removeItem(atPath: stem + ".original.db")
        try? FileManager.default.removeItem(atPath: stem + ".damaged.db")
        try? FileManager.default.copyItem(atPath: original, toPath: stem + ".original.db")
        try? FileManager.default.copyItem(atPath: DurableFolder.parent(of: original) + "/damaged.db", toPath: stem + ".damaged.db")
    }

    /// Rows of `table` by key: the rowid (rowid tables) or the primary key values.
    func tableRows(_ db: Connection, _ table: String) throws -> [RowKey: [Value]] {
        let quoted = quoteIdentifier(table)
        let withoutRowid = try db.scalar("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [.text(table)]) == .integer(1)
        var result: [RowKey: [Value]] = [:]
        if withoutRowid {
            let keys = try db.rows("""
                SELECT i.name FROM pragma_index_list(?1) AS l, pragma_index_info(l.name) AS i
                WHERE l.origin = 'pk' ORDER BY i.seqno
                """, [.text(table)]).compactMap { row -> String? in
                    if case .text(let n) = row[0] { return quoteIdentifier(String(decoding: n, as: UTF8.self)) }
                    return nil
                }
            let statement = try db.prepare("SELECT \(keys.joined(separator: ", ")), * FROM \(quoted)")
            while try statement.step() {
                let all = statement.values()
                result[.key(Array(all.prefix(keys.count)))] = Array(all.dropFirst(keys.count))
            }
        } else {
            let columns = try db.rows("SELECT name FROM pragma_table_xinfo(?1)", [.text(table)]).compactMap { row -> String? in
                if case .text(let n) = row[0] { return String(decoding: n, as: UTF8.self) }
                return nil
            }
            let rowid = ["rowid", "_rowid_", "oid"].first { r in !columns.contains { $0.lowercased() == r } } ?? "rowid"
            let statement = try db.prepare("SELECT \(rowid), * FROM \(quoted)")
            while try statement.step() {
                let all = statement.values()
                guard case .integer(let id) = all[0] else { continue }
                result[.rowid(id)] = Array(all.dropFirst())
            }
        }
        return result
    }

    func genericRows(_ db: Connection, _ table: String) throws -> [RowKey: [Value]] {
        var result: [RowKey: [Value]] = [:]
        let statement = try db.prepare("SELECT rowid, * FROM \(quoteIdentifier(table))")
        while try statement.step() {
            let all = statement.values()
            if case .integer(let id) = all[0] { result[.rowid(id)] = Array(all.dropFirst()) }
        }
        return result
    }

    func isOrdinaryTable(_ db: Connection, _ name: String) throws -> Bool {
        try db.scalar("SELECT type FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [.text(name)]) == .text("table")
    }

    func assertSameRows(_ a: String, _ b: String, context: String = "") throws {
        let source = try Connection(path: a)
        let target = try Connection(path: b)
        for row in try source.rows("SELECT name FROM sqlite_schema WHERE type = 'table'") {
            guard case .text(let n) = row[0] else { continue }
            let name = String(decoding: n, as: UTF8.self)
            guard try isOrdinaryTable(source, name) else { continue }
            let expected = try tableRows(source, name)
            let found = try tableRows(target, name)
            XCTAssertEqual(found.count, expected.count, "\(a) \(name) \(context)")
            for (key, values) in expected where found[key] != values {
                XCTFail("\(a) \(name) \(context): row \(key) is \(String(describing: found[key])), expected \(values)")
                break
            }
        }
    }

    func assertSameSettings(_ a: String, _ b: String) throws {
        for pragma in ["page_size", "encoding", "auto_vacuum", "user_version", "application_id", "journal_mode"] {
            XCTAssertEqual(try sqlite3Scalar(b, "PRAGMA \(pragma)"), try sqlite3Scalar(a, "PRAGMA \(pragma)"), "\(a): \(pragma)")
        }
    }

    func integrityCheck(_ path: String) throws -> String {
        try sqlite3Scalar(path, "PRAGMA integrity_check")
    }

    /// A database made by scripts/bench/generate.py (every table kind, blobs that overflow).
    func generated(in folder: TemporaryFolder, rows: Int, pageSize: Int = 4096) throws -> String {
        let path = folder.file("gen.db")
        let result = try runProcess("/usr/bin/python3", [packageRoot + "/scripts/bench/generate.py", path, "--rows", "\(rows)",
                                                           "--blob-every", "20", "--page-size", "\(pageSize)"])
        guard result.status == 0 else { throw XCTSkip("generate.py failed: \(result.stderr)") }
        return path
    }

    /// `path`, given free pages when it has none (a table made and dropped).
    func withFreelist(_ path: String) throws -> String {
        if try sqlite3Scalar(path, "PRAGMA freelist_count") == "0" {
            try sqlite3(["-batch", path], input: """
                PRAGMA journal_mode = DELETE;
                CREATE TABLE litectl_filler(x); INSERT INTO litectl_filler SELECT zeroblob(3000) FROM generate_series(1, 12);
                DROP TABLE litectl_filler;
                """)
        }
        return path
    }

    func schemaNames(_ path: String, onPages pages: Set<UInt32>, map: PageMap) throws -> Set<String> {
        let db = try Connection(path: path)
        var names = Set<String>()
        for row in try db.rows("SELECT rowid, name, type FROM sqlite_schema") {
            guard case .integer(let id) = row[0], case .text(let n) = row[1], row[2] == .text("table") else { continue }
            if map.trees["sqlite_schema"]?.rows[.rowid(id)]?.contains(where: { pages.contains($0) }) == true {
                names.insert(String(decoding: n, as: UTF8.self))
            }
        }
        return names
    }

    func patch(_ path: String, at offset: Int, _ bytes: [UInt8]) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: Data(bytes))
    }

    func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// XORs the high bytes of three cell pointers (or child pointers) of a page.
    func flipCellPointers(_ path: String, page: UInt32, pageSize: Int, rng: inout SplitMix64, childPointers: Bool = false) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let base = Int(page - 1) * pageSize
        let header = base + (page == 1 ? 100 : 0)
        let leaf = bytes[header] == 0x0D || bytes[header] == 0x0A
        let count = Int(bytes[header + 3]) << 8 | Int(bytes[header + 4])
        let pointers = header + (leaf ? 8 : 12)
        for _ in 0..<min(3, max(count, 1)) {
            let i = Int(rng.next() % UInt64(max(count, 1)))
            let pointer = pointers + 2 * i
            if childPointers {
                let cell = base + (Int(bytes[pointer]) << 8 | Int(bytes[pointer + 1]))
                bytes[cell + 2] ^= UInt8(1 + rng.next() % 255)
                bytes[cell + 3] ^= UInt8(1 + rng.next() % 255)
            } else {
                bytes[pointer] ^= UInt8(1 + rng.next() % 15) << 4 | UInt8(rng.next() % 16)
            }
        }
        if childPointers { bytes[header + 10] ^= UInt8(1 + rng.next() % 255) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }
}
