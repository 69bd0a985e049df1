// Which frames of the -wal a read transaction sees. SQLite does not tell a
// reader its snapshot, so it is pinned down from outside: the wal-index
// header (in the -shm, through SQLite's own mapping, xShmMap) is read before
// the transaction begins and again right after its first read. Every commit
// changes that header (its iChange counter, mxFrame, checksums), so when both
// readings are the same no commit came between them, and the snapshot is
// exactly the header's mxFrame: frames 1...mxFrame, the newest frame of each
// page winning. While the transaction lasts those frames cannot be
// overwritten, with one exception: when every frame of the snapshot was
// already checkpointed into the main file (nBackfill, in the -shm's checkpoint
// info, at mxFrame) SQLite may read the snapshot from the main file alone
// (read lock 0), and such a reader does not keep a writer from restarting the
// -wal over those frames. So the checkpoint info is read with the header, and
// a snapshot wholly in the main file is read from there (the checkpointer
// cannot write past it while the transaction lasts).
// https://www.sqlite.org/walformat.html#the_wal_index_file_format
import CSQLite

/// The 48-byte wal-index header, as found in the -shm.
struct WALIndexHeader: Equatable {
    /// The header's bytes, in the host's byte order, as SQLite wrote them.
    let bytes: [UInt8]
    /// Set by `pinned`: every frame of the snapshot is in the main file too
    /// (the checkpoint info's nBackfill had reached mxFrame), so its pages
    /// are read from the main file and the -wal, which a writer may restart
    /// meanwhile, is not read at all.
    private(set) var wholeInMainFile = false

    init(bytes: [UInt8]) { self.bytes = bytes }

    static func == (a: WALIndexHeader, b: WALIndexHeader) -> Bool { a.bytes == b.bytes }

    private func u32(_ at: Int) -> UInt32 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: at, as: UInt32.self) }
    }

    var isInitialized: Bool { bytes[12] == 1 }
    /// The last frame of the newest commit.
    var maxFrame: UInt32 { u32(16) }
    /// The database's size in pages at that commit.
    var pageCount: UInt32 { u32(20) }
    var pageSize: Int {
        let raw = Int(bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 14, as: UInt16.self) })
        return (raw & 0xFE00) + ((raw & 1) << 16)
    }
    /// The -wal's two salts, as the bytes of the -wal header and of every valid frame header hold them.
    var salts: ArraySlice<UInt8> { bytes[32..<40] }

    /// The current header of `connection`'s main database, nil when it is
    /// not in WAL mode, has no -shm mapped, or the header is being written.
    /// Read like SQLite reads it: both copies, equal.
    ///
    /// Only a connection whose pager has the -wal open (WAL mode, after a
    /// first read) is asked: mapping the -shm of any other would create the
    /// file (SQLite's xShmMap opens it when it is not open).
    static func current(_ connection: Connection) -> WALIndexHeader? {
        guard let (region, file) = mappedRegion(connection), let methods = file.pointee.pMethods else { return nil }
        for _ in 0..<16 {
            let first = [UInt8](UnsafeRawBufferPointer(start: region, count: 48))
            methods.pointee.xShmBarrier?(file)
            let second = [UInt8](UnsafeRawBufferPointer(start: region + 48, count: 48))
            if first == second {
                let header = WALIndexHeader(bytes: first)
                return header.isInitialized ? header : nil
            }
        }
        return nil
    }

    /// The header of the snapshot that `connection`'s read transaction sees,
    /// when it can be pinned down: `before` was read before the transaction
    /// began, and is still the current header. Call first thing in the
    /// transaction (after its first read): a commit by another connection
    /// in between makes it nil.
    static func pinned(_ connection: Connection, before: WALIndexHeader?) -> WALIndexHeader? {
        guard let before, var now = current(connection), now == before,
              let backfilled = backfilledFrames(connection),
              // A restart of the -wal rewrites the header before it resets nBackfill.
              let again = current(connection), again == before else { return nil }
        now.wholeInMainFile = backfilled >= now.maxFrame
        return now
    }

    /// The checkpoint info's nBackfill: frames 1...nBackfill are in the main file too.
    private static func backfilledFrames(_ connection: Connection) -> UInt32? {
        guard let (region, file) = mappedRegion(connection) else { return nil }
        file.pointee.pMethods.pointee.xShmBarrier?(file)
        let value = region.loadUnaligned(fromByteOffset: 96, as: UInt32.self)
        file.pointee.pMethods.pointee.xShmBarrier?(file)
        return value
    }

    /// The checkpoint info now (nBackfill and the five read marks), as a
    /// diagnosis names it; nil when the -shm is not mapped.
    static func checkpointInfo(_ connection: Connection) -> (backfilled: UInt32, marks: [UInt32])? {
        guard let (region, file) = mappedRegion(connection) else { return nil }
        file.pointee.pMethods.pointee.xShmBarrier?(file)
        return (region.loadUnaligned(fromByteOffset: 96, as: UInt32.self),
                (0..<5).map { region.loadUnaligned(fromByteOffset: 100 + 4 * $0, as: UInt32.self) })
    }

    /// Region 0 of the -shm of `connection`'s main database (header and
    /// checkpoint info) and the file whose methods map it; nil when not in
    /// WAL mode or not mapped (see `current`).
    private static func mappedRegion(_ connection: Connection) -> (UnsafeMutableRawPointer, UnsafeMutablePointer<sqlite3_file>)? {
        guard !connection.isImmutable, case .text(let mode)? = try? connection.scalar("PRAGMA main.journal_mode"),
              mode.map(asciiLower) == Array("wal".utf8) else { return nil }
        var wal: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(connection.rawHandle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK,
              let wal, wal.pointee.pMethods != nil else { return nil }
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(connection.rawHandle, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
              let file, let methods = file.pointee.pMethods, methods.pointee.iVersion >= 2,
              let map = methods.pointee.xShmMap else { return nil }
        var region: UnsafeMutableRawPointer?
        // bExtend = 0: map the existing region 0, never create or grow it.
        let rc = withUnsafeMutablePointer(to: &region) { pointer in
            pointer.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 1) {
                map(file, 0, 32768, 0, UnsafeMutablePointer(mutating: $0))
            }
        }
        guard rc == SQLITE_OK, let region else { return nil }
        return (region, file)
    }

    /// For each page, the byte offset in the -wal of the data of its newest
    /// frame among frames 1...maxFrame; nil when a frame header does not
    /// carry this header's salts (the -wal is not what the index describes)
    /// or cannot be read.
    func frames(in wal: UnsafeMutablePointer<sqlite3_file>, pageSize: Int) -> [UInt32: Int]? {
        guard pageSize == self.pageSize, let xRead = wal.pointee.pMethods?.pointee.xRead else { return nil }
        var map: [UInt32: Int] = [:]
        let frameSize = 24 + pageSize
        // Frame headers are read a batch of frames at a time (one read per batch).
        let batch = max(1, (1 << 20) / frameSize)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: batch * frameSize, alignment: 8)
        defer { buffer.deallocate() }
        let salts = Array(self.salts)
        var frame = 1
        let last = Int(maxFrame)
        while frame <= last {
            let count = min(batch, last - frame + 1)
            let offset = 32 + (frame - 1) * frameSize
            guard xRead(wal, buffer, Int32(count * frameSize), sqlite3_int64(offset)) == SQLITE_OK else { return nil }
            for k in 0..<count {
                let header = buffer + k * frameSize
                for s in 0..<8 where header.load(fromByteOffset: 8 + s, as: UInt8.self) != salts[s] { return nil }
                var page: UInt32 = 0
                for b in 0..<4 { page = page << 8 | UInt32(header.load(fromByteOffset: b, as: UInt8.self)) }
                map[page] = offset + k * frameSize + 24
            }
            frame += count
        }
        return map
    }
}
