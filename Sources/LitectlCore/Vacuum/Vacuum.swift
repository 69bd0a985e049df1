// `litectl vacuum`: compacts a database where it is (a compacted copy built
// beside it and renamed over it when no other process has it open, else
// VACUUM, which SQLite makes atomic through its journal, guarded so that a
// signal or a full disk rolls it back: Files/InPlaceWrite.swift), into a new
// file (VACUUM INTO a hidden temporary file, fsynced and renamed: VACUUM INTO
// itself writes straight to the final name and never syncs), or a step at a
// time (PRAGMA incremental_vacuum), with page size and auto_vacuum changes, a
// disk space check first, and the file's state before and after.
// See https://www.sqlite.org/lang_vacuum.html
// Built on Stats/: the figures before and after, and the dry run's free pages
// and unused bytes, are `litectl stats`' (FileStats).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// PRAGMA auto_vacuum's three settings.
public enum AutoVacuumMode: String, CaseIterable, Sendable {
    case none, full, incremental

    public var value: Int64 {
        switch self {
        case .none: 0
        case .full: 1
        case .incremental: 2
        }
    }

    public init(value: Int64) {
        self = value == 1 ? .full : (value == 2 ? .incremental : .none)
    }
}

/// What to do.
public struct VacuumRequest: Sendable {
    public var path: String
    /// VACUUM INTO this file instead of in place.
    public var into: String?
    /// Replace an existing `into` file.
    public var replace = false
    public var pageSize: Int?
    public var autoVacuum: AutoVacuumMode?
    /// PRAGMA incremental_vacuum(N) instead of VACUUM (0: every free page).
    public var incrementalPages: Int?
    public var busyTimeout = Connection.defaultBusyTimeout
    /// Run VACUUM in the file itself even when a compacted copy could be
    /// renamed over it (`WholeFileReplacement`).
    public var inPlace = false
    /// The free bytes of a folder's file system (tests stand in a small disk).
    var freeSpace: @Sendable (String) -> Int64? = { DiskSpace.available(at: $0) }
    /// Called between an in-place VACUUM that left WAL and the switch back
    /// (tests hold a lock there, as another connection can).
    var beforeRestoringWAL: (@Sendable (String) -> Void)? = nil

    public init(path: String) { self.path = path }
}

/// The state of a database file, as a vacuum report shows it.
public struct FileState: Sendable, Equatable {
    public var path: String
    /// The main file's size in bytes.
    public var fileSize: Int64
    /// The -wal file's size (nil when there is none).
    public var walSize: Int64?
    public var pageSize: Int64
    public var pageCount: Int64
    public var freelistPages: Int64
    public var autoVacuum: AutoVacuumMode
    public var journalMode: String

    static func read(_ connection: Connection, path: String) throws -> FileState {
        func integer(_ sql: String) throws -> Int64 {
            if case .integer(let v)? = try connection.scalar(sql) { return v }
            return 0
        }
        return FileState(path: path, fileSize: FileCheck.size(of: path) ?? 0, walSize: FileCheck.size(of: path + "-wal"),
                         pageSize: try integer("PRAGMA main.page_size"), pageCount: try integer("PRAGMA main.page_count"),
                         freelistPages: try integer("PRAGMA main.freelist_count"),
                         autoVacuum: AutoVacuumMode(value: try integer("PRAGMA main.auto_vacuum")),
                         journalMode: try connection.journalMode())
    }

    /// Bytes in pages that hold something (all pages but the free ones).
    public var bytesInUse: Int64 { (pageCount - freelistPages) * pageSize }
}

/// What a vacuum did.
public struct VacuumReport: Sendable {
    public enum Mode: String, Sendable {
        case vacuum
        case vacuumInto = "vacuum-into"
        case incremental
    }

    public var mode: Mode
    public var before: FileState
    /// The database (in place) or the new file (`--into`) afterwards.
    public var after: FileState
    /// False when a WAL checkpoint after the VACUUM could not finish (a
    /// reader held it back): the file shrinks at a later checkpoint.
    public var checkpointComplete = true
    public var seconds: Double = 0
    /// Tables whose rowids an in-place VACUUM may have renumbered: rowid
    /// tables with neither an INTEGER PRIMARY KEY nor an index (SQLite copies
    /// those with fresh rowids; VACUUM INTO keeps them). Rows that refer to
    /// such rowids (an FTS5 table with content_rowid=rowid, say) would drift.
    public var rowidsMayChange: [String] = []
    /// Why an in-place page size change of a WAL database could not switch
    /// back to WAL after its VACUUM (nil when it did, or had not to): the
    /// VACUUM is kept and the database is left in DELETE journal mode.
    public var walNotRestored: String?
    /// Why a full VACUUM ran in the file itself (nil: a compacted copy was
    /// renamed over it, or it was not a full VACUUM in place).
    public var inPlaceBecause: String?

    /// Bytes given back: the file (and its -wal) before, less after.
    public var reclaimedBytes: Int64 {
        before.fileSize + (before.walSize ?? 0) - after.fileSize - (after.walSize ?? 0)
    }
}

/// What a vacuum would give back, from the page statistics (a dry run).
public struct VacuumEstimate: Sendable {
    public var before: FileState
    /// Bytes on free pages: a VACUUM gives them all back.
    public var freelistBytes: Int64
    /// Unused bytes on b-tree pages (sqlite3_analyzer's "unused"): a VACUUM
    /// packs pages afresh and gives back part of them.
    public var unusedBytes: Int64
    /// Pointer-map pages (auto_vacuum full or incremental).
    public var pointerMapPages: Int64
    /// The least and the most the file would shrink by.
    public var minimumReclaim: Int64
    public var maximumReclaim: Int64
    /// Disk space the real run would need, per file system.
    public var space: [SpaceNeed]
}

public enum Vacuum {
    /// Runs the request. The disk space check comes first (`NotEnoughSpace`);
    /// nothing is written when it fails.
    public static func run(_ request: VacuumRequest) throws -> VacuumReport {
        let started = Clock.now()
        var report: VacuumReport
        if let into = request.into {
            report = try vacuumInto(request, output: into)
        } else {
            report = try inPlace(request)
        }
        report.seconds = Clock.now() - started
        return report
    }

    /// Reads the page statistics (read-only, no file written) and says what a
    /// vacuum would give back and the space it would need.
    public static func estimate(_ request: VacuumRequest) throws -> VacuumEstimate {
        let stats = try FileStats.read(path: request.path, busyTimeout: request.busyTimeout)
        let connection = try Connection(path: request.path, mode: .readOnly, busyTimeout: request.busyTimeout)
        defer { try? connection.close() }
        let before = try connection.readTransaction { try FileState.read(connection, path: request.path) }
        let freelist = stats.freelistPages * stats.pageSize
        let unused = stats.objects.reduce(0) { $0 + $1.unused }
        let pageSize = stats.pageSize
        var minimum = freelist
        var maximum = freelist + unused / pageSize * pageSize
        if request.incrementalPages != nil {
            let pages = min(stats.freelistPages, Int64(request.incrementalPages!) == 0 ? stats.freelistPages : Int64(request.incrementalPages!))
            minimum = before.autoVacuum == .incremental ? pages * pageSize : 0
            maximum = minimum
        } else if request.autoVacuum == AutoVacuumMode.none && before.autoVacuum != .none {
            minimum += stats.pointerMapPages * pageSize
            maximum += stats.pointerMapPages * pageSize
        }
        let space = request.incrementalPages != nil ? [] : try spaceNeeded(request, before: before, connection: connection)
        return VacuumEstimate(before: before, freelistBytes: freelist, unusedBytes: unused, pointerMapPages: stats.pointerMapPages,
                              minimumReclaim: minimum, maximumReclaim: maximum, space: space)
    }

    /// Where the run needs space: for VACUUM, a temporary copy of the pages in
    /// use in SQLite's temporary folder and as much again in the journal or WAL
    /// beside the database; for VACUUM INTO, the new file.
    static func spaceNeeded(_ request: VacuumRequest, before: FileState, connection: Connection) throws -> [SpaceNeed] {
        // The pages in use, with 5% to spare (pages packed afresh fill a little
        // differently, more so at another page size) and room for page 1.
        let size = before.bytesInUse + before.bytesInUse / 20 + before.pageSize
        if let into = request.into {
            return DiskSpace.needs([(DurableFolder.parent(of: DurableFolder.absolute(into)), size, "the new file")],
                                   freeSpace: request.freeSpace)
        }
        let beside = before.journalMode == "wal" ? "its WAL" : "its rollback journal"
        return DiskSpace.needs([
            (DiskSpace.sqliteTemporaryFolder(configured: try temporaryDirectorySetting(connection)), size,
             "SQLite's temporary copy of the database"),
            (DurableFolder.parent(of: DurableFolder.absolute(request.path)), size, beside),
        ], freeSpace: request.freeSpace)
    }

    /// sqlite3_temp_directory (PRAGMA temp_store_directory), when set.
    static func temporaryDirectorySetting(_ connection: Connection) throws -> String? {
        if case .text(let bytes)? = try connection.scalar("PRAGMA temp_store_directory") {
            return String(decoding: bytes, as: UTF8.self)
        }
        return nil
    }

    static func requireSpace(_ request: VacuumRequest, before: FileState, connection: Connection) throws {
        for need in try spaceNeeded(request, before: before, connection: connection) where !need.isMet {
            throw NotEnoughSpace(path: request.path, need: need)
        }
    }

    static func inPlace(_ request: VacuumRequest) throws -> VacuumReport {
        // The file is this run's target: reading it (the copy's source) does
        // not protect it from the rename that replaces it (WriteGate).
        WriteGate.shared.declareTarget(request.path)
        // A journal a killed writer left is rolled back first.
        try? InPlaceWrite.settle(request.path, busyTimeout: request.busyTimeout)
        var renameRefused: String?
        if request.incrementalPages == nil {
            let replacement = WholeFileReplacement(target: request.path, inPlace: request.inPlace)
            if replacement.byRename {
                if let report = try byRename(request, replacement) { return report }
                renameRefused = "another process opened it while the copy was made"
            }
            renameRefused = renameRefused ?? replacement.inPlaceBecause
        }
        let unchanged = "nothing changed, \(DurableFolder.baseName(of: request.path)) is as it was"
        let connection = try Connection(path: request.path, mode: .readWrite, busyTimeout: request.busyTimeout)
        defer { try? connection.close() }
        let before = try FileState.read(connection, path: request.path)
        var report = VacuumReport(mode: request.incrementalPages != nil ? .incremental : .vacuum, before: before, after: before)
        report.inPlaceBecause = renameRefused
        if let pages = request.incrementalPages {
            guard before.autoVacuum == .incremental else {
                throw DatabaseError(code: .error, message: "auto_vacuum is \(before.autoVacuum.rawValue): --incremental frees pages only with auto_vacuum=incremental (--auto-vacuum incremental sets it, with a full VACUUM)",
                                    path: request.path)
            }
            try InPlaceWrite.run(connection, target: request.path, consequence: unchanged) {
                try connection.execute("PRAGMA main.incremental_vacuum(\(pages))")
            }
        } else {
            try requireSpace(request, before: before, connection: connection)
            report.rowidsMayChange = try renumberedTables(connection)
            let wal = before.journalMode == "wal"
            let pageSizeChanges = request.pageSize.map { Int64($0) != before.pageSize } ?? false
            // "The page size cannot be changed in WAL mode": leave it for the VACUUM, then come back.
            if wal && pageSizeChanges { try connection.execute("PRAGMA main.journal_mode=DELETE") }
            if let pageSize = request.pageSize { try connection.execute("PRAGMA main.page_size=\(pageSize)") }
            if let mode = request.autoVacuum { try connection.execute("PRAGMA main.auto_vacuum=\(mode.value)") }
            do {
                try InPlaceWrite.run(connection, target: request.path, consequence: unchanged) {
                    try connection.execute("VACUUM main")
                }
            } catch {
                if wal && pageSizeChanges { try? connection.execute("PRAGMA main.journal_mode=WAL") }
                throw error
            }
            if wal && pageSizeChanges {
                request.beforeRestoringWAL?(request.path)
                // The VACUUM is done and kept: a failure to come back to WAL
                // (another connection holding a lock, say) is reported, not thrown.
                do {
                    var mode = ""
                    if case .text(let bytes)? = try connection.scalar("PRAGMA main.journal_mode=WAL") {
                        mode = String(decoding: bytes, as: UTF8.self).lowercased()
                    }
                    if mode != "wal" { report.walNotRestored = "SQLite kept journal mode \(mode)" }
                } catch let error as DatabaseError {
                    report.walNotRestored = error.message
                }
            }
        }
        if report.before.journalMode == "wal" {
            // The VACUUM went into the WAL: checkpoint it, so the file itself shrinks.
            let result = try connection.rows("PRAGMA main.wal_checkpoint(TRUNCATE)")
            report.checkpointComplete = result.first?.first == .integer(0)
        }
        report.after = try FileState.read(connection, path: request.path)
        try requireSettings(request, report.after, path: request.path)
        return report
    }

    /// A full VACUUM of a file no other process has open: VACUUM INTO a
    /// hidden file beside it (which keeps rowids), renamed over it with its
    /// owner, group and mode. A signal or an error before the rename leaves
    /// the file as it was (the copy goes). Nil when another process opened
    /// or wrote the file meanwhile: it is then vacuumed in place.
    static func byRename(_ request: VacuumRequest, _ replacement: WholeFileReplacement) throws -> VacuumReport? {
        let folder = DurableFolder.parent(of: request.path)
        let stem = DurableFolder.baseName(of: request.path)
        let source = try Connection(path: request.path, mode: .readOnly, busyTimeout: request.busyTimeout)
        defer { try? source.close() }
        let before = try source.readTransaction { try FileState.read(source, path: request.path) }
        var besideRequest = request
        besideRequest.into = request.path
        try requireSpace(besideRequest, before: before, connection: source)
        TemporaryFiles.removeStale(in: folder, stem: stem)
        let file = try TemporaryFile(in: folder, stem: stem, permissions: try DurableFolder.permissions(of: request.path))
        defer { file.discard() }
        var state: FileState
        do {
            state = try compact(source, before: before, request: request, into: file, reportedAs: request.path)
        } catch {
            throw InPlaceWrite.failure(error, target: request.path, consequence: "nothing changed, \(stem) is as it was")
        }
        try source.close()
        guard try replacement.swap(file, busyTimeout: request.busyTimeout) else { return nil }
        state.path = request.path
        state.fileSize = FileCheck.size(of: request.path) ?? state.fileSize
        state.walSize = nil
        return VacuumReport(mode: .vacuum, before: before, after: state)
    }

    static func vacuumInto(_ request: VacuumRequest, output: String) throws -> VacuumReport {
        let folder = DurableFolder.parent(of: output)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder: \(folder)", path: output)
        }
        if DurableFolder.exists(output) && !request.replace {
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (--force replaces it)", path: output)
        }
        try SeparateOutput.require(output, apartFrom: request.path, what: "the database being vacuumed")
        let source = try Connection(path: request.path, mode: .readOnly, busyTimeout: request.busyTimeout)
        defer { try? source.close() }
        let before = try source.readTransaction { try FileState.read(source, path: request.path) }
        try requireSpace(request, before: before, connection: source)
        let stem = DurableFolder.baseName(of: output)
        TemporaryFiles.removeStale(in: folder, stem: stem)
        let file = try TemporaryFile(in: folder, stem: stem, permissions: try DurableFolder.permissions(of: request.path))
        do {
            var state = try compact(source, before: before, request: request, into: file, reportedAs: output)
            try file.commit(as: output, replace: request.replace)
            state.path = output
            state.fileSize = FileCheck.size(of: output) ?? state.fileSize
            state.walSize = nil
            return VacuumReport(mode: .vacuumInto, before: before, after: state)
        } catch {
            file.discard()
            throw error
        }
    }

    /// VACUUM INTO `file` from `source`, with the page size, auto_vacuum
    /// and journal mode the request and the source call for; returns the
    /// new file's state (checked against the request: `requireSettings`).
    static func compact(_ source: Connection, before: FileState, request: VacuumRequest, into file: TemporaryFile,
                        reportedAs output: String) throws -> FileState {
        // The new file's page size and auto_vacuum: VACUUM INTO takes the
        // connection's pending ones (read-only connections keep them too);
        // what it does not take is set on the new file below.
        if let pageSize = request.pageSize { try source.execute("PRAGMA main.page_size=\(pageSize)") }
        if let mode = request.autoVacuum, (mode == .none) != (before.autoVacuum == .none) {
            try? source.execute("PRAGMA main.auto_vacuum=\(mode.value)")
        }
        let statement = try source.prepare("VACUUM main INTO ?1")
        try statement.bind(.text(Array(Connection.fileURI(file.path).utf8)), at: 1)
        _ = try statement.step()

        let copy = try Connection(path: file.path, mode: .readWrite, busyTimeout: request.busyTimeout)
        var state = try FileState.read(copy, path: file.path)
        let pageSizeOff = request.pageSize.map { Int64($0) != state.pageSize } ?? false
        if let mode = request.autoVacuum, mode != state.autoVacuum {
            try copy.execute("PRAGMA main.auto_vacuum=\(mode.value)")
            // Between full and incremental the header changes at once; from or to none it takes a VACUUM.
            if (mode == .none) != (state.autoVacuum == .none) && !pageSizeOff { try copy.execute("VACUUM main") }
        }
        if pageSizeOff, let pageSize = request.pageSize {
            try copy.execute("PRAGMA main.page_size=\(pageSize)")
            try copy.execute("VACUUM main")
        }
        if before.journalMode == "wal" && state.journalMode != "wal" {
            try copy.execute("PRAGMA main.journal_mode=WAL")
        }
        state = try FileState.read(copy, path: file.path)
        try copy.close()
        try requireSettings(request, state, path: output)
        return state
    }

    /// Rowid tables with neither an INTEGER PRIMARY KEY nor an index: SQLite's
    /// VACUUM gives their rows new rowids (vacuum.c copies them with the
    /// transfer optimization, which keeps rowids only for tables with an index
    /// or under VACUUM INTO). See https://www.sqlite.org/lang_vacuum.html
    static func renumberedTables(_ connection: Connection) throws -> [String] {
        let schema = try connection.readSchema()
        return schema.tables.filter { table in
            table.kind == .ordinary && table.problem == nil && !table.withoutRowid && !table.hasRowidAlias
                && schema.indexes(on: table.name).isEmpty
        }.map(\.name).sorted { compareNames($0, $1) }
    }

    /// Fails when SQLite did not apply a requested page size or auto_vacuum
    /// (it ignores a page size that is not a power of two from 512 to 65536).
    static func requireSettings(_ request: VacuumRequest, _ state: FileState, path: String) throws {
        if let pageSize = request.pageSize, Int64(pageSize) != state.pageSize {
            throw DatabaseError(code: .error, message: "SQLite kept page size \(state.pageSize) instead of \(pageSize)", path: path)
        }
        if let mode = request.autoVacuum, mode != state.autoVacuum {
            throw DatabaseError(code: .error, message: "SQLite kept auto_vacuum \(state.autoVacuum.rawValue) instead of \(mode.rawValue)", path: path)
        }
    }
}
