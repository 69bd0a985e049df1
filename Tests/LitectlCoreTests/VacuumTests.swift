// `vacuum`, judged by others: the logical hash and sqldiff find the data
// unchanged, integrity_check passes, the pages it gives back are at least the
// free pages `stats` counted (and no more than those plus its unused bytes),
// and a new file appears whole or not at all.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct VacuumTests {
    /// A database with free pages and half-empty pages: rows inserted, then most deleted.
    func makeFragmented(_ path: String, wal: Bool = false, autoVacuum: Int = 0) throws {
        try makeDatabase(path, """
            PRAGMA auto_vacuum=\(autoVacuum);
            CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT);
            CREATE INDEX t_body ON t(body);
            CREATE TABLE u(a, b);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
            INSERT INTO t SELECT i, printf('%.*c', 150 + i % 40, 'v') FROM n;
            INSERT INTO u SELECT id, randomblob(300) FROM t WHERE id % 2 = 0;
            DELETE FROM t WHERE id % 3 <> 0;
            DELETE FROM u WHERE a % 4 = 0;
            \(wal ? "PRAGMA journal_mode=WAL;" : "")
            """)
    }

    /// A rollback-journal database nobody else has open is compacted into a
    /// copy renamed over it (rowids kept); with `inPlace`, or in WAL mode,
    /// VACUUM runs in the file (rowids of u renumbered, as SQLite does).
    @Test(arguments: [(false, false), (false, true), (true, false)])
    func inPlaceKeepsTheDataAndFreesWhatStatsSaidWasFree(wal: Bool, inPlace: Bool) throws {
        let folder = try TemporaryFolder("vacuum")
        let db = folder.file("v.db")
        try makeFragmented(db, wal: wal)
        let copy = try folder.copy(db, as: "before.db")
        let stats = try FileStats.read(path: db)
        #expect(stats.freelistPages > 0)
        let hash = try contentHash(db)

        var request = VacuumRequest(path: db)
        request.inPlace = inPlace
        let report = try Vacuum.run(request)
        let renamed = !wal && !inPlace
        if renamed { #expect(report.inPlaceBecause == nil) }
        if inPlace { #expect(report.inPlaceBecause == "asked to (--in-place)") }
        if wal { #expect(report.inPlaceBecause?.contains("WAL") == true, "\(report.inPlaceBecause ?? "renamed")") }
        #expect(report.before.pageCount == stats.pageCount)
        #expect(report.before.freelistPages == stats.freelistPages)
        #expect(report.after.freelistPages == 0)
        let freed = report.before.pageCount - report.after.pageCount
        let unusedPages = stats.objects.reduce(0) { $0 + $1.unused } / stats.pageSize
        #expect(freed >= stats.freelistPages, "gave back at least the free pages stats counted")
        #expect(freed <= stats.freelistPages + unusedPages, "and no more than those plus the unused bytes on pages")
        #expect(report.after.pageCount == Int64(try sqlite3Scalar(db, "PRAGMA page_count"))!)
        #expect(report.after.fileSize == report.after.pageCount * report.after.pageSize, "the file itself shrank")
        #expect(report.reclaimedBytes == report.before.fileSize + (report.before.walSize ?? 0) - report.after.fileSize - (report.after.walSize ?? 0))
        #expect(report.reclaimedBytes >= stats.freelistPages * stats.pageSize)
        #expect(report.checkpointComplete)

        #expect(try contentHash(db) == hash)
        // t keeps its rowids (INTEGER PRIMARY KEY); u, with neither such a key nor
        // an index, is renumbered by SQLite's VACUUM, and the report says so;
        // VACUUM INTO (the copy renamed over it) keeps them.
        let diff = try runProcess("/usr/bin/sqldiff", ["--table", "t", copy, db])
        #expect(diff.status == 0 && diff.stdout.isEmpty)
        #expect(report.rowidsMayChange == (renamed ? [] : ["u"]))
        #expect(try sqlite3Scalar(db, "SELECT max(rowid) = count(*) FROM u") == (renamed ? "0" : "1"))
        if renamed {
            let same = try runProcess("/usr/bin/sqldiff", ["--table", "u", copy, db])
            #expect(same.status == 0 && same.stdout.isEmpty, "u keeps its rowids")
        }
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")
        #expect(try sqlite3Scalar(db, "PRAGMA journal_mode") == (wal ? "wal" : "delete"))
    }

    @Test func theDryRunWritesNothingAndAgreesWithStats() throws {
        let folder = try TemporaryFolder("vacuum-dry")
        let db = folder.file("v.db")
        try makeFragmented(db)
        let before = try FileFingerprint(db)
        let stats = try FileStats.read(path: db)
        let estimate = try Vacuum.estimate(VacuumRequest(path: db))
        #expect(try FileFingerprint(db) == before)
        #expect(estimate.freelistBytes == stats.freelistPages * stats.pageSize)
        #expect(estimate.unusedBytes == stats.objects.reduce(0) { $0 + $1.unused })
        #expect(estimate.minimumReclaim == estimate.freelistBytes)
        #expect(estimate.space.count >= 1 && estimate.space.allSatisfy(\.isMet))
        let report = try Vacuum.run(VacuumRequest(path: db))
        #expect(report.reclaimedBytes >= estimate.minimumReclaim && report.reclaimedBytes <= estimate.maximumReclaim)
    }

    @Test func intoAFileLeavesTheSourceAndWritesWhole() throws {
        let folder = try TemporaryFolder("vacuum-into")
        let db = folder.file("v.db")
        try makeFragmented(db, wal: true)
        let before = try FileFingerprint(db)
        var request = VacuumRequest(path: db)
        request.into = folder.file("small.db")
        request.pageSize = 8192
        request.autoVacuum = .incremental
        let report = try Vacuum.run(request)
        #expect(try FileFingerprint(db) == before)
        #expect(report.after.pageSize == 8192 && report.after.autoVacuum == .incremental && report.after.freelistPages == 0)
        #expect(report.after.fileSize == FileCheck.size(of: folder.file("small.db")))
        #expect(try contentHash(folder.file("small.db")) == contentHash(db))
        let diff = try runProcess("/usr/bin/sqldiff", [db, folder.file("small.db")])
        #expect(diff.status == 0 && diff.stdout.isEmpty, "VACUUM INTO keeps every rowid")
        #expect(try sqlite3Scalar(folder.file("small.db"), "PRAGMA journal_mode") == "wal", "the copy keeps the journal mode")
        #expect(try sqlite3Scalar(folder.file("small.db"), "PRAGMA integrity_check") == "ok")
        #expect(try folder.listing().filter { $0.hasPrefix(".") }.isEmpty)

        // Never over an existing file without replace; nothing is left behind.
        #expect(throws: DatabaseError.self) { _ = try Vacuum.run(request) }
        request.replace = true
        request.pageSize = nil
        request.autoVacuum = AutoVacuumMode.none
        let again = try Vacuum.run(request)
        #expect(again.after.autoVacuum == .none && again.after.pageSize == 4096)
        #expect(try folder.listing().filter { $0.hasPrefix(".") }.isEmpty)
    }

    @Test func pageSizeAndAutoVacuumInPlaceEvenInWALThenIncremental() throws {
        let folder = try TemporaryFolder("vacuum-settings")
        let db = folder.file("v.db")
        try makeFragmented(db, wal: true)
        let hash = try contentHash(db)
        var request = VacuumRequest(path: db)
        request.pageSize = 16384
        request.autoVacuum = .incremental
        let report = try Vacuum.run(request)
        #expect(report.after.pageSize == 16384 && report.after.autoVacuum == .incremental)
        #expect(try sqlite3Scalar(db, "PRAGMA journal_mode") == "wal")
        #expect(try contentHash(db) == hash)

        // Make free pages, then give back a few of them, then the rest.
        try sqlite3(["-batch", db], input: "DELETE FROM u;")
        let free = Int64(try sqlite3Scalar(db, "PRAGMA freelist_count"))!
        #expect(free > 3)
        var step = VacuumRequest(path: db)
        step.incrementalPages = 3
        let partial = try Vacuum.run(step)
        #expect(partial.mode == .incremental && partial.after.freelistPages == free - 3)
        step.incrementalPages = 0
        #expect(try Vacuum.run(step).after.freelistPages == 0)
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")

        // Without auto_vacuum=incremental, --incremental says what it needs.
        let plain = folder.file("p.db")
        try makeFragmented(plain)
        var wrong = VacuumRequest(path: plain)
        wrong.incrementalPages = 0
        #expect { _ = try Vacuum.run(wrong) } throws: { "\($0)".contains("auto_vacuum is none: --incremental frees pages only with auto_vacuum=incremental") }
    }

    /// A page size change in WAL mode is three steps; when the last (back to
    /// WAL) fails because another connection holds the file, the VACUUM is
    /// kept and the report says the database is now in DELETE mode.
    @Test func aFailedReturnToWALIsReportedNotHidden() throws {
        final class Reader: @unchecked Sendable { var connection: Connection? }
        let folder = try TemporaryFolder("vacuum-wal-back")
        let db = folder.file("v.db")
        try makeFragmented(db, wal: true)
        let hash = try contentHash(db)
        let reader = Reader()
        var request = VacuumRequest(path: db)
        request.pageSize = 8192
        request.busyTimeout = 50
        request.beforeRestoringWAL = { path in
            // A reader arrives between the VACUUM and the switch back: its
            // shared lock keeps the header write of journal_mode=WAL out.
            let connection = try! Connection(path: path, mode: .readOnly)
            try! connection.execute("BEGIN")
            _ = try! connection.scalar("SELECT count(*) FROM t")
            reader.connection = connection
        }
        let report = try Vacuum.run(request)
        try reader.connection?.execute("COMMIT")
        try reader.connection?.close()
        let reason = try #require(report.walNotRestored)
        #expect(reason.contains("locked"), "\(reason)")
        #expect(report.after.journalMode == "delete" && report.after.pageSize == 8192)
        // The oracle: the sqlite3 shell sees the same.
        #expect(try sqlite3Scalar(db, "PRAGMA journal_mode") == "delete")
        #expect(try sqlite3Scalar(db, "PRAGMA page_size") == "8192")
        #expect(try sqlite3Scalar(db, "PRAGMA integrity_check") == "ok")
        #expect(try contentHash(db) == hash)
    }

    @Test func notEnoughSpaceIsRefusedBeforeAnyWrite() throws {
        let folder = try TemporaryFolder("vacuum-space")
        let db = folder.file("v.db")
        try makeFragmented(db)
        let before = try FileFingerprint(db)
        var request = VacuumRequest(path: db)
        request.freeSpace = { _ in 10_000 }
        #expect {
            _ = try Vacuum.run(request)
        } throws: { error in
            guard let error = error as? NotEnoughSpace else { return false }
            return error.need.needed > 2 * 10_000 && "\(error)".contains("not enough free disk space: VACUUM needs about")
                && "\(error)".contains("and 9.8 KiB is free there")
        }
        #expect(try FileFingerprint(db) == before)
        request.into = folder.file("out.db")
        #expect(throws: NotEnoughSpace.self) { _ = try Vacuum.run(request) }
        #expect(try folder.listing() == ["v.db"])
    }

    @Test func realDatabaseFilesKeepTheirHash() throws {
        guard !realDatabaseFiles.isEmpty else { return }
        let folder = try TemporaryFolder("vacuum-real")
        for path in realDatabaseFiles {
            let copy = try folder.copy(path)
            let stats = try FileStats.read(path: copy)
            let report = try Vacuum.run(VacuumRequest(path: copy))
            // The free pages go; the pages in use are packed afresh, which may
            // take a page or so more than before (VACUUM fills pages its own way).
            #expect(report.after.freelistPages == 0)
            #expect(report.after.pageCount <= report.before.pageCount - stats.freelistPages + max(1, stats.pageCount / 100), "\(path)")
            #expect(try contentHash(copy) == contentHash(path), "\(path)")
        }
    }
}
