// `DatabaseCheck`: one generated database per lint problem gives exactly the
// expected finding (and applying its fix with the sqlite3 CLI clears it);
// copies corrupted in several ways give error findings, never a crash; the
// real databases show no integrity error and exactly the foreign-key
// violations the sqlite3 CLI reports.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DatabaseCheckTests {
    /// The (check, object) pairs of the findings that are not notes.
    func problems(_ report: CheckReport) -> [String] {
        report.findings.filter { $0.severity != .note }.map { "\($0.check.rawValue):\($0.object ?? "-")" }
    }

    func check(_ path: String, _ configure: (inout CheckOptions) -> Void = { _ in }) -> CheckReport {
        var options = CheckOptions()
        configure(&options)
        return DatabaseCheck.check(path: path, options: options)
    }

    /// Applies the finding's fix with the sqlite3 CLI; the finding must then be gone.
    func expectFixClears(_ path: String, _ finding: Finding, leaving remaining: [String] = [],
                         sourceLocation: SourceLocation = #_sourceLocation) throws {
        let fix = try #require(finding.fix, sourceLocation: sourceLocation)
        try sqlite3(["-batch", path, fix])
        #expect(problems(check(path)) == remaining, "after \(fix): \(check(path).findings)", sourceLocation: sourceLocation)
    }

    @Test func soundDatabaseHasNoFindings() throws {
        let folder = try TemporaryFolder("check-sound")
        let db = folder.file("s.db")
        try makeDatabase(db, """
            CREATE TABLE parent(id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE child(id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id), v);
            CREATE INDEX child_parent ON child(parent_id, v);
            INSERT INTO parent VALUES (1, 'a'), (2, 'b');
            INSERT INTO child VALUES (1, 1, 'x'), (2, 2, 'y'), (3, NULL, 'z');
            ANALYZE;
            """)
        let report = check(db)
        #expect(report.failure == nil)
        #expect(report.findings.isEmpty, "\(report.findings)")
        #expect(!report.fails(strict: true))
    }

    @Test func unindexedForeignKey() throws {
        let folder = try TemporaryFolder("check-fk-index")
        let db = folder.file("f.db")
        try makeDatabase(db, """
            CREATE TABLE "order"(id INTEGER PRIMARY KEY);
            CREATE TABLE "line item"(id INTEGER PRIMARY KEY, "order id" INTEGER REFERENCES "order"(id), n);
            INSERT INTO "order" VALUES (1); INSERT INTO "line item" VALUES (1, 1, 2);
            """)
        let report = check(db)
        #expect(problems(report) == ["unindexed-foreign-key:line item"])
        let finding = try #require(report.findings.first)
        #expect(finding.severity == .warning)
        #expect(finding.fix == #"CREATE INDEX "line item_order id_idx" ON "line item"("order id");"#)
        #expect(report.fails(strict: true) && !report.fails(strict: false))
        // The new index has no statistics yet: the next warning says so.
        try expectFixClears(db, finding, leaving: ["statistics:-"])
    }

    @Test func tableWithoutPrimaryKey() throws {
        let folder = try TemporaryFolder("check-pk")
        let db = folder.file("p.db")
        try makeDatabase(db, "CREATE TABLE log(at, message); CREATE TABLE kv(k TEXT PRIMARY KEY, v) WITHOUT ROWID;")
        #expect(problems(check(db)) == ["no-primary-key:log"])
    }

    @Test func redundantIndex() throws {
        let folder = try TemporaryFolder("check-redundant")
        let db = folder.file("r.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, a, b COLLATE NOCASE, c);
            CREATE INDEX t_a ON t(a);
            CREATE INDEX t_ab ON t(a, b);
            CREATE INDEX t_b ON t(b COLLATE BINARY);   -- not covered by t_ab's NOCASE b: different collation
            CREATE INDEX t_c_desc ON t(c DESC);
            CREATE INDEX t_c_part ON t(c) WHERE c > 0; -- partial: never redundant, never covering
            INSERT INTO t VALUES (1, 1, 'x', 1);
            ANALYZE;
            """)
        let report = check(db)
        #expect(problems(report) == ["redundant-index:t_a"], "\(report.findings)")
        try expectFixClears(db, try #require(report.findings.first))

        let twin = folder.file("twin.db")
        try makeDatabase(twin, "CREATE TABLE t(id INTEGER PRIMARY KEY, a); CREATE INDEX i1 ON t(a); CREATE INDEX i2 ON t(a); ANALYZE;")
        #expect(problems(check(twin)) == ["redundant-index:i2"], "one of two twins")
    }

    @Test func statisticsMissingOrStale() throws {
        let folder = try TemporaryFolder("check-stat1")
        let db = folder.file("s.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, a);
            CREATE INDEX t_a ON t(a);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) INSERT INTO t SELECT i, i % 10 FROM n;
            """)
        let missing = check(db)
        #expect(problems(missing) == ["statistics:-"])
        #expect(missing.findings.first?.fix == "ANALYZE;")

        try sqlite3(["-batch", db, "ANALYZE"])
        #expect(problems(check(db)).isEmpty)

        try sqlite3(["-batch", db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO t(a) SELECT i FROM n"])
        let stale = check(db)
        #expect(problems(stale) == ["statistics:t"])
        #expect(stale.findings.first?.message.contains("200") == true)
        #expect(stale.findings.first?.message.contains("1200") == true)
        try expectFixClears(db, try #require(stale.findings.first))
    }

    @Test func freelistThreshold() throws {
        let folder = try TemporaryFolder("check-free")
        let db = folder.file("f.db")
        try makeDatabase(db, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, b);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO t SELECT i, randomblob(1000) FROM n;
            DELETE FROM t WHERE id > 100;
            """)
        let free = Double(try sqlite3Scalar(db, "PRAGMA freelist_count"))!
        let pages = Double(try sqlite3Scalar(db, "PRAGMA page_count"))!
        let percent = free * 100 / pages
        #expect(percent > 25)
        #expect(problems(check(db)) == ["freelist:-"])
        #expect(problems(check(db) { $0.maxFreePercent = percent.rounded(.up) }).isEmpty)
        #expect(problems(check(db) { $0.maxFreePercent = percent.rounded(.down) - 1 }) == ["freelist:-"])
        try expectFixClears(db, try #require(check(db).findings.first))
    }

    @Test func walLargerThanDatabase() throws {
        let folder = try TemporaryFolder("check-wal")
        let db = folder.file("w.db")
        try makeDatabase(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, b);")
        // Keep a writer open with checkpoints off, and copy the file and its -wal meanwhile.
        let writer = try Connection(path: db, mode: .readWrite)
        try writer.execute("PRAGMA wal_autocheckpoint=0")
        try writer.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i, randomblob(2000) FROM n")
        let copy = folder.file("copy.db")
        try FileManager.default.copyItem(atPath: db, toPath: copy)
        try FileManager.default.copyItem(atPath: db + "-wal", toPath: copy + "-wal")
        try writer.close()
        let report = check(copy)
        #expect(problems(report) == ["wal-size:-"], "\(report.findings)")
        #expect(report.findings.first?.severity == .warning)
    }

    @Test func expectations() throws {
        let folder = try TemporaryFolder("check-expect")
        let db = folder.file("e.db")
        try makeDatabase(db, "PRAGMA user_version=7; PRAGMA application_id=1196444487; CREATE TABLE t(id INTEGER PRIMARY KEY);")
        #expect(problems(check(db) { $0.expectUserVersion = 7; $0.expectApplicationID = 1196444487; $0.expectJournalMode = "DELETE" }).isEmpty)
        let failed = check(db) { $0.expectUserVersion = 8; $0.expectApplicationID = 1; $0.expectJournalMode = "wal" }
        #expect(problems(failed) == ["expectation:-", "expectation:-", "expectation:-"])
        #expect(failed.findings.allSatisfy { $0.severity == .error })
        #expect(failed.findings.map(\.message) == ["user_version is 7, expected 8", "application_id is 1196444487, expected 1",
                                                   "journal_mode is delete, expected wal"])
    }

    @Test func foreignKeyViolationsWhateverTheSetting() throws {
        let folder = try TemporaryFolder("check-fk")
        let db = folder.file("v.db")
        try makeDatabase(db, """
            PRAGMA foreign_keys=OFF;
            CREATE TABLE parent(id INTEGER PRIMARY KEY);
            CREATE TABLE child(id INTEGER PRIMARY KEY, pid INTEGER REFERENCES parent(id));
            CREATE INDEX child_pid ON child(pid);
            INSERT INTO parent VALUES (1);
            INSERT INTO child VALUES (1, 1), (2, 5), (3, 6);
            ANALYZE;
            """)
        let report = check(db)
        #expect(problems(report) == ["foreign-key:child"])
        #expect(report.findings.first?.message == "2 rows of child refer to a missing row of parent (rowid 2, 3)")
        #expect(report.fails(strict: false))
    }

    // MARK: Corruption: each a finding, none a crash

    /// A table with an index, built by the sqlite3 CLI.
    func makeIndexed(_ path: String, rows: Int = 3000) throws {
        try makeDatabase(path, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, a, b);
            CREATE INDEX t_a ON t(a);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(rows))
            INSERT INTO t SELECT i, i * 7 % 13, randomblob(60) FROM n;
            ANALYZE;
            """)
    }

    func patch(_ path: String, _ body: (inout Data) -> Void) throws {
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        body(&data)
        try data.write(to: URL(fileURLWithPath: path))
    }

    @Test func indexOutOfStepWithItsTable() throws {
        let folder = try TemporaryFolder("check-index-step")
        let db = folder.file("i.db")
        try makeIndexed(db)
        // Point the index's definition at another column: its entries no longer match the table.
        try sqlite3(["-batch", db], input: "PRAGMA writable_schema=ON; UPDATE sqlite_schema SET sql = 'CREATE INDEX t_a ON t(b)' WHERE name = 't_a';")
        let oracle = try sqlite3Scalar(db, "PRAGMA integrity_check")
        #expect(oracle != "ok")
        let report = check(db)
        let integrity = report.findings.filter { $0.check == .integrity && $0.severity == .error }
        #expect(!integrity.isEmpty)
        #expect(integrity.allSatisfy { $0.object == "t_a" })
        #expect(integrity.contains { $0.message == "row 1 missing from index t_a" })
        // quick_check misses it, as SQLite documents: the reason integrity_check is the default.
        let quick = check(db) { $0.quick = true }
        #expect(!quick.findings.contains { $0.check == .integrity && $0.severity == .error })
        #expect(quick.findings.contains { $0.severity == .note })
    }

    @Test func flippedByteInABTreePage() throws {
        let folder = try TemporaryFolder("check-flip")
        let db = folder.file("b.db")
        try makeIndexed(db)
        let root = Int(try sqlite3Scalar(db, "SELECT rootpage FROM sqlite_schema WHERE name = 't'"))!
        let pageSize = Int(try sqlite3Scalar(db, "PRAGMA page_size"))!
        // The first leaf of t: its page type byte becomes invalid.
        let leaf = Int(try sqlite3Scalar(db, "SELECT min(pageno) FROM dbstat WHERE name = 't' AND pagetype = 'leaf'"))!
        #expect(leaf != root)
        try patch(db) { $0[(leaf - 1) * pageSize] = 0x2A }
        let oracle = try runProcess(sqlite3Binary, ["-batch", db, "PRAGMA integrity_check"])
        #expect(oracle.status != 0 || oracle.stdout != "ok\n")
        let report = check(db)
        #expect(report.failure == nil)
        #expect(report.findings.contains { $0.check == .integrity && $0.severity == .error && $0.message.contains("Page \(leaf)") })
    }

    /// A truncated file cannot be checked: it is an error (exit 2), in the
    /// words every command uses for it, not a finding.
    @Test func truncatedFile() throws {
        let folder = try TemporaryFolder("check-truncate")
        let db = folder.file("t.db")
        try makeIndexed(db)
        let size = try FileManager.default.attributesOfItem(atPath: db)[.size] as! Int
        for keep in [size / 2, size / 2 + 100] {
            let copy = folder.file("t\(keep).db")
            try FileManager.default.copyItem(atPath: db, toPath: copy)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: copy))
            try handle.truncate(atOffset: UInt64(keep))
            try handle.close()
            let report = check(copy)
            #expect(report.failure?.message.hasPrefix("truncated: not a complete SQLite database (its header gives ") == true,
                    "\(String(describing: report.failure))")
            #expect(report.findings.isEmpty, "\(report.findings)")
        }
    }

    @Test func damagedFreelist() throws {
        let folder = try TemporaryFolder("check-freelist")
        let db = folder.file("f.db")
        try makeIndexed(db)
        try sqlite3(["-batch", db, "DELETE FROM t WHERE id > 500"])
        let pageSize = Int(try sqlite3Scalar(db, "PRAGMA page_size"))!
        try patch(db) { data in
            let trunk = Int(data[32]) << 24 | Int(data[33]) << 16 | Int(data[34]) << 8 | Int(data[35])
            precondition(trunk > 0)
            // The trunk's first leaf-page number points past the end of the file.
            let offset = (trunk - 1) * pageSize + 8
            data.replaceSubrange(offset..<offset + 4, with: [0x00, 0x0F, 0x42, 0x3F])
        }
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") != "ok")
        let report = check(db)
        #expect(report.findings.contains { $0.check == .integrity && $0.severity == .error && $0.message.contains("freelist") })
    }

    /// The split integrity check (quick_check plus integrity_check per table,
    /// on several connections) finds what one full integrity_check finds.
    @Test func splitIntegrityCheckFindsWhatTheFullOneFinds() throws {
        let folder = try TemporaryFolder("check-split")
        func split(_ options: inout CheckOptions) {
            options.integrityConnections = 3
            options.parallelIntegrityMinimumBytes = 0
        }
        func integrityErrors(_ report: CheckReport) -> Set<String> {
            Set(report.findings.filter { $0.check == .integrity && $0.severity == .error }.map(\.message))
        }
        // An index out of step, in a table whose name needs quoting, beside other tables.
        let step = folder.file("step.db")
        try makeDatabase(step, #"""
            CREATE TABLE "odd ""name"""(id INTEGER PRIMARY KEY, a, b); CREATE INDEX i ON "odd ""name"""(a);
            CREATE TABLE other(x PRIMARY KEY, y) WITHOUT ROWID; CREATE TABLE third(z);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
            INSERT INTO "odd ""name""" SELECT i, i % 7, i % 5 FROM n;
            INSERT INTO other VALUES (1, 2); INSERT INTO third VALUES (3);
            """#)
        #expect(problems(check(step, split)) == ["no-primary-key:third", "statistics:-"], "sound before the damage")
        try sqlite3(["-batch", step], input: #"PRAGMA writable_schema=ON; UPDATE sqlite_schema SET sql = 'CREATE INDEX i ON "odd ""name"""(b)' WHERE name = 'i';"#)
        let full = integrityErrors(check(step))
        #expect(!full.isEmpty)
        #expect(integrityErrors(check(step, split)) == full)

        // A damaged freelist: only the whole-file pass can see it.
        let freelist = folder.file("free.db")
        try makeIndexed(freelist)
        try sqlite3(["-batch", freelist, "CREATE TABLE second(x); INSERT INTO second VALUES (1); DELETE FROM t WHERE id > 500"])
        let pageSize = Int(try sqlite3Scalar(freelist, "PRAGMA page_size"))!
        try patch(freelist) { data in
            let trunk = Int(data[32]) << 24 | Int(data[33]) << 16 | Int(data[34]) << 8 | Int(data[35])
            let offset = (trunk - 1) * pageSize + 8
            data.replaceSubrange(offset..<offset + 4, with: [0x00, 0x0F, 0x42, 0x3F])
        }
        let fullFree = integrityErrors(check(freelist))
        #expect(fullFree.contains { $0.contains("freelist") })
        #expect(integrityErrors(check(freelist, split)) == fullFree)

        // A flipped page type byte in a leaf of t.
        let flipped = folder.file("flip.db")
        try makeIndexed(flipped)
        try sqlite3(["-batch", flipped, "CREATE TABLE second(x); INSERT INTO second VALUES (1)"])
        let leaf = Int(try sqlite3Scalar(flipped, "SELECT min(pageno) FROM dbstat WHERE name = 't' AND pagetype = 'leaf'"))!
        try patch(flipped) { $0[(leaf - 1) * pageSize] = 0x2A }
        let splitFlipped = integrityErrors(check(flipped, split))
        #expect(splitFlipped.contains { $0.contains("Page \(leaf)") })
        #expect(integrityErrors(check(flipped)).contains { $0.contains("Page \(leaf)") })
    }

    @Test func notADatabaseCannotBeChecked() throws {
        let folder = try TemporaryFolder("check-notdb")
        let text = folder.file("notes.db")
        try String(repeating: "plain text ", count: 200).write(toFile: text, atomically: false, encoding: .utf8)
        let report = check(text)
        #expect(report.failure?.message.contains("not a SQLite database") == true)
        #expect(check(folder.file("missing.db")).failure?.message == "no such file")
    }

    @Test func manyInParallelKeepTheirOrder() throws {
        let folder = try TemporaryFolder("check-parallel")
        var paths: [String] = []
        for i in 0..<8 {
            let db = folder.file("d\(i).db")
            try makeDatabase(db, i % 3 == 0 ? "CREATE TABLE t(a);" : "CREATE TABLE t(id INTEGER PRIMARY KEY);")
            paths.append(db)
        }
        paths.insert(folder.file("missing.db"), at: 4)
        let serial = DatabaseCheck.checkAll(paths: paths, options: CheckOptions(), parallelism: 1)
        let parallel = DatabaseCheck.checkAll(paths: paths, options: CheckOptions(), parallelism: 3)
        #expect(parallel.map(\.path) == paths)
        #expect(parallel.map { problems($0) } == serial.map { problems($0) })
        #expect(parallel[4].failure != nil)
        #expect(parallel.map { problems($0) }[0] == ["no-primary-key:t"])
    }

    @Test(.enabled(if: !realDatabases.isEmpty))
    func realDatabasesHaveNoIntegrityErrors() throws {
        let folder = try TemporaryFolder("check-real")
        for source in TestSupport.realDatabases {
            let db = try folder.copy(source)
            let report = check(db)
            #expect(report.failure == nil)
            #expect(!report.findings.contains { $0.check == .integrity || $0.check == .open }, "\(source): \(report.findings)")
            // Foreign-key findings: exactly the violations the sqlite3 CLI reports.
            let oracle = try sqlite3(["-batch", db, "PRAGMA foreign_key_check"]).split(separator: "\n").count
            let ours = report.findings.filter { $0.check == .foreignKey }
                .map { Int($0.message.prefix { $0.isNumber })! }.reduce(0, +)
            #expect(ours == oracle, "\(source)")
            #expect(report.fails(strict: false) == (oracle > 0))
        }
    }

    // MARK: The release gate (issue 40)

    @Test func anEmptyDatabaseIsAnErrorUnlessAllowed() throws {
        let folder = try TemporaryFolder("check-empty")
        #expect(FileManager.default.createFile(atPath: folder.file("zero.db"), contents: Data()))
        let report = check(folder.file("zero.db"))
        #expect(report.findings.map(\.check) == [.empty] && report.findings[0].severity == .error)
        #expect(report.fails(strict: false))
        let allowed = check(folder.file("zero.db")) { $0.allowEmpty = true }
        #expect(allowed.findings.map(\.severity) == [.note] && !allowed.fails(strict: true))
        try makeDatabase(folder.file("views.db"), "CREATE VIEW v AS SELECT 1;")
        #expect(check(folder.file("views.db")).findings.map { "\($0.severity):\($0.check)" } == ["error:empty"])
    }

    @Test func skipsLeaveOutAWholeCheckOrOneObjectsFindings() throws {
        let folder = try TemporaryFolder("check-skip")
        let db = folder.file("s.db")
        try makeDatabase(db, "CREATE TABLE a(x); CREATE TABLE b(y); CREATE TABLE c(id INTEGER PRIMARY KEY);")
        #expect(problems(check(db)) == ["no-primary-key:a", "no-primary-key:b"])
        #expect(problems(check(db) { $0.skips = [CheckSkip(check: .noPrimaryKey, object: "A")] }) == ["no-primary-key:b"])
        let whole = check(db) { $0.skips = [try! CheckSkip.parse("no-primary-key")] }
        #expect(problems(whole).isEmpty)
        #expect(whole.skipped == [.noPrimaryKey] && !whole.ran.contains { $0.check == .noPrimaryKey })
        #expect(try CheckSkip.parse("redundant-index:idx:with:colons") == CheckSkip(check: .redundantIndex, object: "idx:with:colons"))
        #expect(throws: DatabaseError.self) { try CheckSkip.parse("open") }
        #expect(throws: DatabaseError.self) { try CheckSkip.parse("no-primary-key:") }
    }

    @Test func tablesAFormatDefinesGiveNotesAndTheUsersOwnStillWarn() throws {
        let folder = try TemporaryFolder("check-spec")
        let gpkg = folder.file("g.gpkg")
        try makeDatabase(gpkg, """
            PRAGMA application_id = 0x47504B47;
            CREATE TABLE gpkg_spatial_ref_sys(srs_name TEXT NOT NULL, srs_id INTEGER NOT NULL PRIMARY KEY);
            CREATE TABLE gpkg_contents(table_name TEXT NOT NULL PRIMARY KEY, srs_id INTEGER REFERENCES gpkg_spatial_ref_sys(srs_id));
            CREATE TABLE gpkg_extensions(table_name TEXT, column_name TEXT, extension_name TEXT NOT NULL,
                                         CONSTRAINT ge_tce UNIQUE (table_name, column_name, extension_name));
            CREATE TABLE roads(geom BLOB);
            """)
        let report = check(gpkg)
        #expect(problems(report) == ["no-primary-key:roads"])
        let notes = report.findings.filter { $0.severity == .note }
        #expect(notes.map { "\($0.check.rawValue):\($0.object ?? "-")" }.sorted()
                == ["no-primary-key:gpkg_extensions", "statistics:-", "unindexed-foreign-key:gpkg_contents"], "\(report.findings)")
        #expect(notes.allSatisfy { $0.message.hasSuffix("(the GeoPackage specification defines this table so; not a warning)") && $0.fix == nil })

        let mbtiles = folder.file("t.mbtiles")
        try makeDatabase(mbtiles, """
            CREATE TABLE metadata(name TEXT, value TEXT);
            CREATE TABLE map(zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_id TEXT);
            CREATE TABLE images(tile_data BLOB, tile_id TEXT);
            CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column, map.tile_row AS tile_row,
                images.tile_data AS tile_data FROM map JOIN images ON images.tile_id = map.tile_id;
            CREATE TABLE extra(x);
            """)
        let tiles = check(mbtiles)
        #expect(problems(tiles) == ["no-primary-key:extra"])
        #expect(tiles.findings.filter { $0.severity == .note }.compactMap(\.object).sorted() == ["images", "map", "metadata"])
        // Without its tiles the same metadata table is an ordinary one.
        try sqlite3(["-batch", mbtiles, "DROP VIEW tiles;"])
        #expect(problems(check(mbtiles)) == ["no-primary-key:extra", "no-primary-key:images", "no-primary-key:map", "no-primary-key:metadata"])
    }

    @Test func referenceStatementsSplitAndNormalizeAsSQLiteReadsThem() throws {
        let reference = try ReferenceSchema(path: "ref.sql", text: """
            BEGIN TRANSACTION;
            CREATE TABLE IF NOT EXISTS "t;1"(a TEXT DEFAULT 'x;y', b);  -- a comment; with a semicolon
            CREATE TEMP TRIGGER tr AFTER INSERT ON "t;1" BEGIN UPDATE "t;1" SET b = 1; DELETE FROM "t;1" WHERE 0; END;
            CREATE VIRTUAL TABLE r USING rtree(id, x0, x1);
            CREATE TABLE r_node(nodeno INTEGER PRIMARY KEY, data);
            CREATE TABLE sqlite_stat1(tbl, idx, stat);
            COMMIT;
            """)
        #expect(reference.names == ["t;1", "tr", "r"])
        #expect(ReferenceSchema.normalizedText("CREATE TABLE IF NOT EXISTS [T;1] ( A TEXT DEFAULT 'x;y' , b ) ;")
                == "create table \"t;1\"(a text default 'x;y', b)")
        let folder = try TemporaryFolder("check-reference")
        let db = folder.file("r.db")
        try makeDatabase(db, """
            CREATE TABLE [T;1] ( A text DEFAULT 'x;y' , B ) ;
            CREATE VIRTUAL TABLE r USING rtree(id, x0, x1);
            CREATE TRIGGER tr AFTER INSERT ON "t;1" BEGIN UPDATE "t;1" SET b = 1; DELETE FROM "t;1" WHERE 0; END;
            """)
        let report = check(db) { $0.expectedSchema = reference }
        #expect(report.findings.filter { $0.check == .schema }.isEmpty, "\(report.findings)")
        #expect(report.ran.contains { $0.check == .schema })
        // A string is not a name: DEFAULT 'X;Y' differs from 'x;y'.
        let other = try ReferenceSchema(path: "ref.sql", text: "CREATE TABLE \"t;1\"(a TEXT DEFAULT 'X;Y', b); CREATE VIRTUAL TABLE r USING rtree(id, x0, x1); CREATE TRIGGER tr AFTER INSERT ON \"t;1\" BEGIN UPDATE \"t;1\" SET b = 1; DELETE FROM \"t;1\" WHERE 0; END;")
        #expect(check(db) { $0.expectedSchema = other }.findings.filter { $0.check == .schema }.map(\.message)
                == ["table T;1 differs from the reference schema: column A: DEFAULT 'x;y' here, 'X;Y' in the reference"])
    }
}
