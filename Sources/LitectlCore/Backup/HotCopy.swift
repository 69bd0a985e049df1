// The hot copy: one committed state of a live database copied into a fresh
// file through SQLite's online backup API (or VACUUM INTO), finishing under a
// continuous writer in WAL and in rollback-journal mode.
// See https://www.sqlite.org/backup.html and https://www.sqlite.org/c3ref/backup_finish.html
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the copy was made.
public enum CopyStrategy: String, Sendable {
    /// WAL source: one read transaction held for the whole copy, so every page
    /// comes from one snapshot and writers are never blocked.
    case walSnapshot = "wal-snapshot"
    /// Rollback source: copied in steps between which writers may commit;
    /// it finished within the restart budget.
    case steps = "steps"
    /// Rollback source: the step budget ran out, so the copy was finished
    /// holding the read lock (writers wait for the duration of the copy).
    case lockedSnapshot = "locked-snapshot"
    /// `VACUUM INTO`: a compacted copy, made in one read transaction.
    case vacuumInto = "vacuum-into"
    /// Rollback source whose journal was hot (an application stopped inside a
    /// write transaction): its last committed state, read from a private copy
    /// of the file and its journal that SQLite rolled back (see HotJournal);
    /// the source was not written.
    case rolledBackCopy = "rolled-back-copy"
}


public struct HotCopyOptions: Sendable {
    /// `VACUUM INTO` instead of the backup API.
    public var vacuum = false
    /// Deadline, in seconds, for BUSY/LOCKED retries on the source.
    public var timeout: Double = 60
    /// Restarts (foreign commits during a stepped copy of a rollback-mode
    /// source) allowed before falling back to a locked snapshot.
    public var restartBudget = 3
    /// Pages per `sqlite3_backup_step` call (nil: about 1% of the database,
    /// at least 256 and at most 16384 pages).
    public var pagesPerStep: Int?
    /// Read the source through mmap (faster; its pages then count in the
    /// process's resident memory, which repository backups keep flat).
    public var memoryMapped = true
    /// Compute the copy's SHA-256 from its writes (`HotCopyResult.digest`).
    public var hashWrites = true
    /// With `hashWrites`: false to follow the writes for `pageObserver`
    /// only, without the file's SHA-256 (the result's digest then has an
    /// empty `sha256`).
    var digestFile = true
    /// With `hashWrites`: told of each page after the first as it is
    /// written, in order; valid only when the result has a digest.
    var pageObserver: (any WrittenPageObserver)?
    /// Start the disk writeback of the copy as it is written, so that the
    /// fsync before its rename has little left to do (off for a scratch copy).
    public var writeback = true
    /// With `hashWrites`, for a WAL source whose snapshot can be read page by
    /// page (`PageFile`): the copy keeps only its first 64 KiB (page 1 as
    /// the backup leaves it), the rest of each write is hashed and dropped,
    /// and the read transaction is left open for the caller, who reads the
    /// pages from `HotCopyResult.sourceSnapshot` and ends it. A scratch copy
    /// then needs neither the disk space nor the writes of a whole database.
    var keepSourceSnapshot = false
    /// With `keepSourceSnapshot`: called once, before the first page is
    /// copied, with the kept snapshot (nil when there is none, and when the
    /// copy fails before that point), so that the caller may start reading it.
    var snapshotKnown: (@Sendable (SourceSnapshot?) -> Void)?

    public init() {}
}

public struct HotCopyResult: Sendable {
    public var strategy: CopyStrategy
    /// Times the stepped copy started over because another process committed.
    public var restarts: Int
    /// The source's journal mode (wal, delete, truncate, persist, ...).
    public var journalMode: String
    /// How long, in seconds, writers to a rollback-mode source had to wait
    /// because this copy held the read lock (0 in WAL mode).
    public var writersBlockedSeconds: Double
    /// Size and SHA-256 of the copy, computed from its writes as they were
    /// made; nil when the writes did not allow it (see `WrittenFileDigest`),
    /// and for `VACUUM INTO`: then the caller hashes the file.
    public var digest: StreamDigest? = nil
    /// With `keepSourceSnapshot`, when it could be done: the source's
    /// snapshot, still open, which the copy's pages came from.
    var sourceSnapshot: SourceSnapshot? = nil
}

/// A source's read transaction left open after a copy that kept only its
/// first 64 KiB (`HotCopyOptions.keepSourceSnapshot`): its pages, read from
/// the file and the -wal as the transaction sees them. The caller ends the
/// transaction (COMMIT) once done with it.
final class SourceSnapshot: @unchecked Sendable {
    /// Bytes of the copy that are written: page 1 whatever the page size.
    static let keptBytes: Int64 = 65536
    let pages: PageFile
    let walIndex: WALIndexHeader?
    init(pages: PageFile, walIndex: WALIndexHeader?) { self.pages = pages; self.walIndex = walIndex }
}

public enum HotCopy {
    /// Copies the database `source` (opened by the caller) into the existing,
    /// empty file `destination` (a temporary file the caller owns).
    ///
    /// The destination connection runs with `journal_mode=OFF` and
    /// `synchronous=OFF`: the file is thrown away on any failure, and the
    /// caller fsyncs it before giving it its final name.
    public static func copy(from source: Connection, into destination: String, options: HotCopyOptions = HotCopyOptions(),
                            progress: (CopyProgress) -> Void = { _ in }) throws -> HotCopyResult {
        let deadline = Deadline(seconds: options.timeout)
        var told = false
        func tell(_ snapshot: SourceSnapshot?) {
            if !told { told = true; options.snapshotKnown?(snapshot) }
        }
        defer { tell(nil) }
        // We poll for the source's locks ourselves, every millisecond: SQLite's
        // busy handler backs off to 100 ms sleeps, which in rollback mode rarely
        // land in the short gaps between a busy writer's transactions.
        source.setBusyTimeout(0)
        // Read through mmap: the backup API then copies straight from the page cache of the OS.
        if options.memoryMapped { try source.execute("PRAGMA mmap_size=\(Int64(1) << 40)") }
        let journalMode = (try source.scalar("PRAGMA journal_mode")).flatMap { value -> String? in
            if case .text(let bytes) = value { return String(decoding: bytes, as: UTF8.self) } else { return nil }
        }?.lowercased() ?? "unknown"

        if options.vacuum {
            let started = Clock.now()
            try retryingBusy(deadline, path: source.path) {
                let statement = try source.prepare("VACUUM INTO ?")
                try statement.bind(.text(Array(Connection.fileURI(destination).utf8)), at: 1)
                _ = try statement.step()
            }
            let blocked = journalMode == "wal" || source.hotJournal != nil ? 0 : Clock.now() - started
            return HotCopyResult(strategy: source.hotJournal != nil ? .rolledBackCopy : .vacuumInto, restarts: 0,
                                 journalMode: journalMode, writersBlockedSeconds: blocked)
        }

        // The backup API reads each page once: a page cache of 256 KiB (SQLite's
        // default is 2 MB) keeps memory flat. Put back after the copy: what the
        // caller does next on the connection (a sort, for the logical hash)
        // sizes its memory by it.
        let cacheSize = try source.scalar("PRAGMA cache_size")
        try source.execute("PRAGMA cache_size=-256")
        defer { if case .integer(let n)? = cacheSize { try? source.execute("PRAGMA cache_size=\(n)") } }
        // The destination: through the coalescing VFS, no journal, no syncs, one owner.
        var targetHandle: OpaquePointer?
        let vfs = CoalescingVFS.registered
        let openCode = sqlite3_open_v2(Connection.fileURI(destination) + "?mode=rw", &targetHandle,
                                       SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                                       vfs.isEmpty ? nil : vfs)
        defer { sqlite3_close_v2(targetHandle) }
        guard openCode == SQLITE_OK, let target = targetHandle else {
            throw DatabaseError.fromConnection(targetHandle, code: openCode, path: destination)
        }
        // A small page cache (1 MiB): every page passes through it once, so a
        // larger one only pushes the pages out of the CPU's caches before
        // they are written (16 MiB cost about 15% more CPU time on 1 GB).
        let setup = "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA locking_mode=EXCLUSIVE; PRAGMA cache_size=-1024"
        let setupCode = sqlite3_exec(target, setup, nil, nil, nil)
        if setupCode != SQLITE_OK { throw DatabaseError.fromConnection(target, code: setupCode, path: destination, sql: setup) }
        guard let backup = sqlite3_backup_init(target, "main", source.rawHandle, "main") else {
            throw DatabaseError.fromConnection(target, code: sqlite3_errcode(target), path: destination)
        }
        var finished = false
        defer { if !finished { sqlite3_backup_finish(backup) } }

        var restarts = 0
        // A source whose journal was hot is read from a private copy nobody else writes.
        var strategy: CopyStrategy = source.hotJournal != nil ? .rolledBackCopy : journalMode == "wal" ? .walSnapshot : .steps
        var lockedSince: Double?
        var inTransaction = false
        defer { if inTransaction { try? source.execute("ROLLBACK") } }

        func beginSnapshot() throws {
            try retryingBusy(deadline, path: source.path) {
                try source.execute("BEGIN DEFERRED")
                do { _ = try source.scalar("SELECT count(*) FROM sqlite_schema") } catch {
                    try? source.execute("ROLLBACK"); throw error
                }
            }
            inTransaction = true
        }
        let writer = CoalescingVFS.writer(of: target)
        var snapshot: SourceSnapshot?
        if strategy == .walSnapshot {
            // Read before the transaction begins and right after, to pin down its snapshot's -wal frames.
            let walBefore = options.keepSourceSnapshot ? WALIndexHeader.current(source) : nil
            try beginSnapshot()
            if options.keepSourceSnapshot, options.hashWrites, writer != nil {
                let walIndex = WALIndexHeader.pinned(source, before: walBefore)
                if let pages = try? PageFile(source, walIndex: walIndex, cacheChunks: 1), pages.seesWholeSnapshot {
                    snapshot = SourceSnapshot(pages: pages, walIndex: walIndex)
                }
            }
        }
        // Hash the copy as it is written (no second pass over the file), from
        // page 1 as the backup will leave it; checked when the copy is done.
        if !options.writeback { writer?.startsWriteback = false }
        var before = stat()
        let sourceFirstPage = snapshot.flatMap { s in s.pages.page(1).map { [UInt8](UnsafeRawBufferPointer(start: $0, count: s.pages.pageSize)) } }
        if options.hashWrites, let writer, stat(destination, &before) == 0, before.st_size == 0,
           let page = predictedFirstPage(of: source, stored: sourceFirstPage) {
            var digest = WrittenFileDigest(predictedFirstPage: page, hashesFile: options.digestFile)
            digest.observer = options.pageObserver
            writer.hashWrites(digest)
            if snapshot != nil { writer.keepOnly(first: SourceSnapshot.keptBytes) }
        } else {
            snapshot = nil
        }
        tell(snapshot)

        var stepPages = Int32(options.pagesPerStep ?? 256)
        var previousCopied = 0
        var sawFirstStep = false
        while true {
            let requested = Int(stepPages)
            let rc = sqlite3_backup_step(backup, stepPages)
            let total = Int(sqlite3_backup_pagecount(backup))
            let copied = total - Int(sqlite3_backup_remaining(backup))
            // The page count is known once a step has gone through (a step
            // that met a lock reports 0, which used to leave the size at 256
            // pages for the whole copy).
            if !sawFirstStep, options.pagesPerStep == nil, rc == SQLITE_OK || rc == SQLITE_DONE {
                stepPages = Int32(min(16384, max(256, total / 100)))
                sawFirstStep = true
            }
            switch rc {
            case SQLITE_DONE:
                progress(CopyProgress(pagesCopied: total, pageCount: total))
                finished = true
                let finish = sqlite3_backup_finish(backup)
                if finish != SQLITE_OK {
                    throw DatabaseError.fromConnection(target, code: finish, path: destination)
                }
                // A kept snapshot's transaction is the caller's to end.
                if inTransaction && snapshot == nil { try source.execute("COMMIT") }
                inTransaction = false
                let blocked = lockedSince.map { Clock.now() - $0 } ?? 0
                let closeCode = sqlite3_close(target)
                targetHandle = nil
                if closeCode != SQLITE_OK { throw DatabaseError(code: ResultCode(rawValue: closeCode), message: "cannot close the copy", path: destination) }
                // SQLite ignores what closing a file returns: a last chunk that
                // could not be written is reported here.
                if let writer, writer.failure != SQLITE_OK {
                    throw DatabaseError(code: ResultCode(rawValue: writer.failure),
                                        message: "cannot write the copy: \(String(cString: sqlite3_errstr(writer.failure)))", path: destination)
                }
                var info = stat()
                var size = stat(destination, &info) == 0 ? Int64(info.st_size) : -1
                if snapshot != nil, let writer, size >= 0 { size = max(size, writer.logicalSize) }
                let digest = size >= 0 ? writer?.writtenDigest?.result(fileSize: size) : nil
                return HotCopyResult(strategy: strategy, restarts: restarts, journalMode: journalMode,
                                     writersBlockedSeconds: blocked, digest: digest, sourceSnapshot: snapshot)
            case SQLITE_OK:
                // A step that did not end `requested` pages further on: another
                // process committed and the backup started over. (Comparing with
                // the previous position alone misses a copy that restarts at every
                // step and so never gets past page 1: under a writer committing
                // more often than a step takes, it never fell back and ran into
                // --timeout.)
                if copied != previousCopied + requested {
                    restarts += 1
                    if strategy == .steps && restarts >= options.restartBudget {
                        // Finish from one snapshot, holding the read lock: writers wait.
                        try beginSnapshot()
                        strategy = .lockedSnapshot
                        lockedSince = Clock.now()
                    }
                }
                previousCopied = copied
                progress(CopyProgress(pagesCopied: copied, pageCount: total))
            case _ where rc & 0xFF == SQLITE_BUSY || rc & 0xFF == SQLITE_LOCKED:
                if deadline.passed {
                    throw DatabaseError(code: ResultCode(rawValue: rc),
                                        message: DatabaseError.lockedMessage(waited: Clock.now() - deadline.start),
                                        path: source.path)
                }
                usleep(1_000)
            default:
                // The error is on the destination connection for write errors and
                // on the source for read errors (corruption, I/O).
                let sourceCode = sqlite3_errcode(source.rawHandle)
                if sourceCode != SQLITE_OK && sourceCode & 0xFF == rc & 0xFF {
                    throw DatabaseError.fromConnection(source.rawHandle, code: rc, path: source.path)
                }
                // sqlite3_backup_step leaves no message on the destination
                // connection: SQLite's text for the code says what happened.
                throw DatabaseError(code: ResultCode(rawValue: rc),
                                    message: "cannot write the copy: \(String(cString: sqlite3_errstr(rc)))",
                                    path: destination)
            }
        }
    }

    /// Page 1 of the copy as the backup API will leave it: the source's page 1
    /// as stored in its file, with the fields the backup and the commit set
    /// (sqlite3_backup_step in backup.c, pager_write_changecounter in pager.c):
    /// the database size in pages (offset 28), the schema cookie and the change
    /// counter of a fresh file incremented from 0 (offsets 40, 24 and 92), and
    /// the writing library's version number (offset 96). Read from the file, it
    /// misses a page 1 still in a `-wal` file or changed by a commit before the
    /// first step: the prediction then fails its check and costs a read pass.
    /// The page is read through SQLite's own file handle: opening and closing
    /// the file ourselves would drop the POSIX locks SQLite holds on it.
    /// `stored` is the source's page 1 when the caller has read it (from a
    /// pinned snapshot, -wal included).
    static func predictedFirstPage(of source: Connection, stored: [UInt8]? = nil) -> [UInt8]? {
        guard case .integer(let pageSize)? = try? source.scalar("PRAGMA page_size"),
              case .integer(let pageCount)? = try? source.scalar("PRAGMA page_count"),
              (512...65536).contains(pageSize), pageCount >= 1 else { return nil }
        var page = [UInt8](repeating: 0, count: Int(pageSize))
        if let stored {
            guard stored.count == page.count else { return nil }
            page = stored
        } else {
            var pointer: UnsafeMutableRawPointer?
            guard sqlite3_file_control(source.rawHandle, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
                  let file = pointer?.assumingMemoryBound(to: sqlite3_file.self), let methods = file.pointee.pMethods else { return nil }
            let rc = page.withUnsafeMutableBytes { methods.pointee.xRead(file, $0.baseAddress, Int32(pageSize), 0) }
            guard rc == SQLITE_OK else { return nil }
        }
        func put32(_ offset: Int, _ value: UInt32) {
            for i in 0..<4 { page[offset + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32(i))) }
        }
        put32(24, 1)
        put32(28, UInt32(truncatingIfNeeded: pageCount))
        put32(40, 1)
        put32(92, 1)
        put32(96, UInt32(bitPattern: sqlite3_libversion_number()))
        return page
    }

    /// Runs `body`, retrying while it fails with BUSY or LOCKED, until `deadline`.
    static func retryingBusy<T>(_ deadline: Deadline, path: String, _ body: () throws -> T) throws -> T {
        while true {
            do { return try body() } catch var error as DatabaseError where error.code.primary == .busy || error.code.primary == .locked {
                if deadline.passed {
                    error.message = DatabaseError.lockedMessage(waited: Clock.now() - deadline.start)
                    throw error
                }
                usleep(1_000)
            }
        }
    }

    /// Opens `path` read-only, retrying a lock held by another process every
    /// millisecond until `timeout` seconds have passed.
    public static func openSource(_ path: String, timeout: Double) throws -> Connection {
        try retryingBusy(Deadline(seconds: timeout), path: path) {
            try Connection(path: path, mode: .readOnly, busyTimeout: 0)
        }
    }
}
