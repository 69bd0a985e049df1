// The migration runner on a chain of real migrations written for these tests
// (a shop: customers, orders, a column type changed by a 12-step rebuild, a
// view, an index, data moved between tables). Oracles: the sqlite3 CLI applying
// the same files by hand gives the same content hash at every version; the
// ledger's checksums are sha256sum's; integrity_check and foreign_key_check
// pass; a failing file leaves the database exactly as the previous version.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

/// The content hash of every table but litectl's ledger (schema included).
func hashWithoutLedger(_ path: String) throws -> String {
    let connection = try Connection(path: path)
    let tables = try connection.readSchema().tables.filter { $0.kind == .ordinary && $0.name != MigrationLedger.tableName }.map(\.name)
    try connection.close()
    var options = ContentHashOptions()
    options.tables = tables
    return try ContentHasher.hash(path: path, options: options).digest
}

@Suite struct MigrationTests {
    @Test func folderNamesAreReadStrictly() throws {
        let folder = try TemporaryFolder("migrate-names")
        let dir = try writeShopMigrations(folder)
        try "notes".write(toFile: dir + "/README.md", atomically: true, encoding: .utf8)
        let migrations = try MigrationFolder.read(dir)
        #expect(migrations.map(\.version) == [1, 2, 3, 4])
        #expect(migrations.map { $0.down != nil } == [true, true, false, true])
        let sum = try runProcess("/usr/bin/sha256sum", [dir + "/0002_orders.sql"]).stdout.prefix(64)
        #expect(migrations[1].up.sha256 == String(sum))

        for (bad, why) in [("2_orders-again.sql", "two migrations"), ("0005-typo.sql", "not a migration file name"),
                           ("0009_x.down.sql", "no up migration"), ("99999999999_big.sql", "not a migration file name")] {
            let path = dir + "/" + bad
            try "SELECT 1;".write(toFile: path, atomically: true, encoding: .utf8)
            #expect { try MigrationFolder.read(dir) } throws: { "\($0)".contains(why) }
            unlink(path)
        }
        _ = FileManager.default.createFile(atPath: dir + "/0007_latin1.sql", contents: Data([0x53, 0xE9, 0x3B]))
        #expect { try MigrationFolder.read(dir) } throws: { "\($0)".contains("not UTF-8") }
    }

    @Test func everyVersionMatchesTheFilesAppliedByHand() throws {
        let folder = try TemporaryFolder("migrate-chain")
        let dir = try writeShopMigrations(folder)
        let db = folder.file("shop.db")
        try makeDatabase(db, "PRAGMA journal_mode=WAL;")
        for target in 1...4 {
            var request = MigrateRequest(database: db, folder: dir)
            request.target = Int64(target)
            request.backup = false
            let outcome = try MigrationRunner.run(request)
            #expect(outcome.applied.count == 1)
            #expect(outcome.toVersion == Int64(target))
            #expect(try hashWithoutLedger(db) == hashWithoutLedger(try shopByHand(folder, count: target)), "version \(target)")
            try expectSound(db)
        }
        // The ledger: one row per file, with sha256sum's checksum.
        let rows = try sqlite3(["-batch", db, "SELECT version, file, sha256 FROM _litectl_migrations ORDER BY version"])
        let expected = try shopMigrations.enumerated().map { i, m in
            "\(i + 1)|\(m.name)|" + String(try runProcess("/usr/bin/sha256sum", [dir + "/" + m.name]).stdout.prefix(64))
        }
        #expect(rows.split(separator: "\n").map(String.init) == expected)
        // Nothing left to do: nothing runs, no backup is made.
        let again = try MigrationRunner.run(MigrateRequest(database: db, folder: dir))
        #expect(again.applied.isEmpty && again.backup == nil)
    }

    @Test func downMigrationsNeedTheirFilesAndUndoTheirWork() throws {
        let folder = try TemporaryFolder("migrate-down")
        let dir = try writeShopMigrations(folder)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        _ = try MigrationRunner.run(request)
        request.target = 3
        let down = try MigrationRunner.run(request)
        #expect(down.applied.map(\.step.direction) == [.down])
        #expect(try hashWithoutLedger(db) == hashWithoutLedger(try shopByHand(folder, count: 3)))
        #expect(try sqlite3Scalar(db, "SELECT max(version) FROM _litectl_migrations") == "3")
        // 0003 has no .down.sql: going below it is refused before anything runs.
        request.target = 1
        let before = try FileFingerprint(db)
        #expect { try MigrationRunner.run(request) } throws: { "\($0)".contains("0003_total_as_real.sql") }
        #expect(try FileFingerprint(db).bytes == before.bytes)
        #expect { try MigrationPlan(migrations: try MigrationFolder.read(dir), current: 3, target: 7, ledger: [:], path: db) }
            throws: { "\($0)".contains("no migration has version 7") }
    }

    @Test func aFailingFileLeavesThePreviousVersionAndNamesItsStatement() throws {
        let folder = try TemporaryFolder("migrate-fail")
        let dir = try writeShopMigrations(folder)
        try """
            CREATE TABLE coupons (code TEXT PRIMARY KEY);
            INSERT INTO coupons VALUES ('A');

            INSERT INTO coupons VALUES ('A');
            """.write(toFile: dir + "/0003_total_as_real.sql", atomically: true, encoding: .utf8)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        var applied: [String] = []
        #expect {
            try MigrationRunner.run(request) { applied.append($0.step.file.name) }
        } throws: { error in
            guard let error = error as? MigrationError else { return false }
            return error.file == "0003_total_as_real.sql" && error.statement == 3 && error.line == 4
                && error.message.contains("UNIQUE constraint failed") && error.sql == "INSERT INTO coupons VALUES ('A');"
                && "\(error)".hasSuffix("the database stays at version 2")
        }
        #expect(applied == ["0001_customers.sql", "0002_orders.sql"])
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "2")
        #expect(try hashWithoutLedger(db) == hashWithoutLedger(try shopByHand(folder, count: 2)))
        try expectSound(db)
    }

    @Test func transactionControlInAFileIsRefusedBeforeItRuns() throws {
        let folder = try TemporaryFolder("migrate-commit")
        let dir = try writeShopMigrations(folder, count: 1)
        try "CREATE TABLE a (x);\nCOMMIT;\nCREATE TABLE b (x);\n".write(toFile: dir + "/0002_commit.sql", atomically: true, encoding: .utf8)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        #expect { try MigrationRunner.run(request) } throws: { error in
            (error as? MigrationError)?.message.hasPrefix("COMMIT is not allowed") == true && (error as? MigrationError)?.line == 2
        }
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "1")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'a'") == "0")
        // SAVEPOINT and ROLLBACK TO stay inside the file's transaction: allowed.
        try """
            SAVEPOINT s; CREATE TABLE a (x); ROLLBACK TO s; RELEASE s;
            CREATE TABLE b (x);
            """.write(toFile: dir + "/0002_commit.sql", atomically: true, encoding: .utf8)
        _ = try MigrationRunner.run(request)
        #expect(try sqlite3Scalar(db, "SELECT group_concat(name) FROM sqlite_schema WHERE name IN ('a', 'b')") == "b")
    }

    @Test func aFileThatOrphansRowsIsRolledBack() throws {
        let folder = try TemporaryFolder("migrate-orphan")
        let dir = try writeShopMigrations(folder, count: 2)
        try "DELETE FROM customers WHERE id = 3;".write(toFile: dir + "/0003_forget.sql", atomically: true, encoding: .utf8)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        #expect { try MigrationRunner.run(request) } throws: { "\($0)".contains("foreign_key_check finds 1 new row without a parent after the file (\"orders\" rowid ") }
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "2")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM customers") == "3")
    }

    /// The check compares which rows have no parent, not how many: a file
    /// that gives an old orphan its parent and orphans another row keeps the
    /// count and still fails.
    @Test func aFileThatFixesOneOrphanAndMakesAnotherIsRolledBack() throws {
        let folder = try TemporaryFolder("migrate-orphan-swap")
        let dir = try writeShopMigrations(folder, count: 2)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        _ = try MigrationRunner.run(request)
        try sqlite3(["-batch", db], input: "INSERT INTO orders (id, customer_id, total) VALUES (10, 99, '1');")
        let orphans = try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check;")
        #expect(orphans == "orders|10|customers|0\n")
        try "INSERT INTO customers (id, name) VALUES (99, 'Zoe');\nDELETE FROM customers WHERE id = 3;\n"
            .write(toFile: dir + "/0003_swap.sql", atomically: true, encoding: .utf8)
        #expect { try MigrationRunner.run(request) } throws: {
            "\($0)".contains("foreign_key_check finds 1 new row without a parent after the file (\"orders\" rowid 3 -> \"customers\")")
        }
        #expect(try sqlite3Scalar(db, "PRAGMA user_version") == "2")
        #expect(try sqlite3(["-batch", db], input: "PRAGMA foreign_key_check;") == orphans)
    }

    /// 0001, 0002 and 0004 applied, then a merged branch brings 0003: a run
    /// from version 4 would pass over it for good, so status reports it as a
    /// problem and migrate refuses to start, naming it. Files below every
    /// recorded version (an adopted database) stay unrecorded, not skipped.
    @Test func aFileNumberedBelowTheVersionThatNeverRanIsAProblem() throws {
        let folder = try TemporaryFolder("migrate-skipped")
        let dir = try writeShopMigrations(folder)
        let late = dir + "/0003_total_as_real.sql"
        let held = try String(contentsOfFile: late, encoding: .utf8)
        unlink(late)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        #expect(try MigrationRunner.run(request).applied.map(\.step.version) == [1, 2, 4])
        try held.write(toFile: late, atomically: true, encoding: .utf8)

        let status = try MigrationStatusReader.read(database: db, folder: dir)
        #expect(status.entries.map(\.state) == [.applied, .applied, .skipped, .applied])
        #expect(status.hasProblems)
        let before = try FileFingerprint(db)
        #expect { try MigrationRunner.run(request) } throws: {
            "\($0)" == "\(db): 0003_total_as_real.sql is numbered below the database's version 4 but never ran (the ledger records later migrations, not it: it came after them, from a merge say); renumber it above 4"
        }
        #expect(try FileFingerprint(db).bytes == before.bytes)
    }

    @Test func editedFilesAreReportedAndRefusedUnlessAccepted() throws {
        let folder = try TemporaryFolder("migrate-edit")
        let dir = try writeShopMigrations(folder, count: 2)
        let db = folder.file("shop.db")
        try makeDatabase(db, "VACUUM;")
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        _ = try MigrationRunner.run(request)
        try (shopMigrations[0].up + "\n-- reformatted\n").write(toFile: dir + "/0001_customers.sql", atomically: true, encoding: .utf8)
        try "CREATE TABLE extra (x);".write(toFile: dir + "/0003_extra.sql", atomically: true, encoding: .utf8)
        let status = try MigrationStatusReader.read(database: db, folder: dir)
        #expect(status.entries.map(\.state) == [.edited, .applied, .pending])
        #expect(status.hasProblems)

        let before = try FileFingerprint(db)
        #expect { try MigrationRunner.run(request) } throws: { error in
            (error as? MigrationRefusal)?.edited.map(\.file) == ["0001_customers.sql"]
        }
        #expect(try FileFingerprint(db).bytes == before.bytes)
        request.acceptEdited = true
        let outcome = try MigrationRunner.run(request)
        #expect(outcome.acceptedEdits.map(\.file) == ["0001_customers.sql"])
        #expect(try MigrationStatusReader.read(database: db, folder: dir).entries.map(\.state) == [.applied, .applied, .applied])

        unlink(dir + "/0002_orders.sql")
        unlink(dir + "/0002_orders.down.sql")
        let gone = try MigrationStatusReader.read(database: db, folder: dir)
        #expect(gone.entries.map(\.state) == [.applied, .missing, .applied])
        #expect(gone.entries[1].file == "0002_orders.sql")
    }

    @Test func anAdoptedDatabaseStartsAboveZero() throws {
        // An application that set user_version itself before using litectl.
        let folder = try TemporaryFolder("migrate-adopt")
        let dir = try writeShopMigrations(folder)
        let db = try shopByHand(folder, count: 2)
        let status = try MigrationStatusReader.read(database: db, folder: dir)
        #expect(status.entries.map(\.state) == [.unrecorded, .unrecorded, .pending, .pending])
        #expect(!status.hasProblems)
        var request = MigrateRequest(database: db, folder: dir)
        request.backup = false
        #expect(try MigrationRunner.run(request).applied.map(\.step.version) == [3, 4])
        #expect(try hashWithoutLedger(db) == hashWithoutLedger(try shopByHand(folder, count: 4)))
        let fewer = try TemporaryFolder("migrate-adopt-fewer")
        let newer = try MigrationStatusReader.read(database: db, folder: try writeShopMigrations(fewer, count: 2))
        #expect(newer.databaseIsNewer && newer.hasProblems)
    }

    @Test func theBackupIsMadeBeforeTheFirstMigrationAndVerifies() throws {
        let folder = try TemporaryFolder("migrate-backup")
        let dir = try writeShopMigrations(folder)
        let db = try shopByHand(folder, count: 1)
        let hashAtOne = try hashWithoutLedger(db)
        let backups = folder.file("backups")
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: false)
        var request = MigrateRequest(database: db, folder: dir)
        request.backupFolder = backups
        let outcome = try MigrationRunner.run(request)
        let backup = try #require(outcome.backup)
        #expect(backup.manifest.userVersion == 1)
        #expect(try hashWithoutLedger(backup.backupPath) == hashAtOne)
        #expect(try sqlite3Scalar(backup.backupPath, "PRAGMA integrity_check") == "ok")
        // litectl verify's check: the SHA-256 in the manifest, then integrity_check.
        let check = try BackupVerifier.verify(backup.backupPath, level: .full)
        #expect(check.passed && check.sha256Matches == true)
    }

    @Test func dryRunDiffsACopyAndLeavesTheDatabaseAlone() throws {
        let folder = try TemporaryFolder("migrate-dry")
        let dir = try writeShopMigrations(folder)
        let db = try shopByHand(folder, count: 2)
        let before = try FileFingerprint(db)
        let sink = MemorySink()
        let temporary = folder.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        var request = MigrateRequest(database: db, folder: dir)
        request.temporaryFolder = temporary
        let outcome = try MigrationRunner.dryRun(request, sink: sink)
        #expect(outcome.applied.map(\.step.version) == [3, 4])
        #expect(outcome.backup == nil)
        #expect(try FileFingerprint(db) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty, "the copies are gone")
        let text = sink.text
        #expect(text.contains("view customer_totals added"), "\(text)")
        #expect(text.contains("table orders changed"), "\(text)")
        #expect(!text.contains(MigrationLedger.tableName))
        // The same diff the sqlite3-made versions give.
        let oracle = MemorySink()
        var options = DiffOptions()
        options.excluded = [MigrationLedger.tableName]
        _ = try DiffEngine.run(pathA: db, pathB: try shopByHand(folder, count: 4), options: options,
                               consumer: DiffReportWriter(sink: oracle, style: .summary))
        #expect(text == oracle.text)
    }
}
