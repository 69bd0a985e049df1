// A read-only SQLite VFS that serves a database file from pages a Swift
// `ImagePages` hands out, one page at a time, so that SQLite can open a
// database that is not a file on disk (a moment of a repository, read page
// by page from its packs) without a byte of it being written anywhere.
// Writes, truncation and syncs are refused (SQLITE_READONLY), the file is
// immutable to SQLite (no locks, no journal or -wal looked for), and a page
// the source cannot give or cannot vouch for is an I/O error whose cause the
// connection reports (`PageVFS.failure(in:)`), never a page of zeros.
// Temporary files SQLite needs for sorting go to the default VFS.
// See https://www.sqlite.org/vfs.html and https://www.sqlite.org/c3ref/io_methods.html
import CSQLite
import Foundation

/// Pages of one database image, numbered from 1 as SQLite numbers them.
/// Called from whichever thread uses the connection: must be thread-safe.
public protocol ImagePages: AnyObject, Sendable {
    /// The page size, a power of two from 512 to 65,536.
    var pageSize: Int { get }
    /// The number of pages: the file is `pageSize * pageCount` bytes.
    var pageCount: Int { get }
    /// Page `number` (1...pageCount): exactly `pageSize` bytes, checked by
    /// the source against whatever vouches for it; else it throws, and the
    /// read fails with the error's words.
    func page(_ number: Int) throws -> [UInt8]
}

/// The registry of page sources SQLite can open through the VFS, and the VFS.
public enum PageVFS {
    public static let name = "litectl-pages"
    /// pMethods, then the open file's registration (retained).
    static let header = 16

    /// One source, open under a name of its own (`/litectl-pages/N`).
    public final class Registration: @unchecked Sendable {
        public let source: any ImagePages
        /// The file name SQLite opens.
        public let fileName: String
        /// Words for messages (a moment reference, say).
        public let label: String
        private let lock = NSLock()
        private var failure: String?

        init(source: any ImagePages, fileName: String, label: String) {
            self.source = source
            self.fileName = fileName
            self.label = label
        }

        /// The cause of the last read that failed, once: the connection's
        /// error takes it.
        func takeFailure() -> String? { lock.lock(); defer { lock.unlock() }; let f = failure; failure = nil; return f }
        func fail(_ words: String) { lock.lock(); failure = words; lock.unlock() }

        /// The URI that opens this source read-only through the VFS (also
        /// for ATTACH on a connection opened with SQLITE_OPEN_URI).
        public var uri: String { "file:" + fileName + "?vfs=" + PageVFS.name + "&mode=ro&immutable=1" }

        deinit { PageVFS.sources.withLock { _ = $0.removeValue(forKey: fileName) } }
    }

    static let sources = Locked<[String: Weak]>([:])
    static let counter = Locked<Int>(0)

    struct Weak { weak var registration: Registration? }

    /// Makes `source` openable through the VFS while the returned
    /// registration lives (connections that use it keep it).
    public static func register(_ source: any ImagePages, label: String) -> Registration {
        _ = registered
        let n = counter.withLock { value -> Int in value += 1; return value }
        let registration = Registration(source: source, fileName: "/\(name)/\(n)", label: label)
        sources.withLock { $0[registration.fileName] = Weak(registration: registration) }
        return registration
    }

    // MARK: Names
    //
    // A page source may also be reached by a name of its own: the text of a
    // moment reference (`repo:app.db@-1h`, see docs/moments.md). Every read
    // command opens its databases by a path string; once the name is bound,
    // `Connection(path:)` (and ATTACH, and the checks on a file before
    // SQLite opens it, and the -wal/-journal lookups beside it) see the
    // source, never the file system. A string that starts with `repo:` is
    // never a file, bound or not (a local file of that name is reached as
    // `./repo:...`), so a file a hostile folder holds under such a name, or
    // beside it (`repo:app.db@-1h-journal`), is never opened, read or
    // removed.

    /// The prefix of a moment reference: a path string that starts with it
    /// names a page source, never a file.
    public static let referencePrefix = "repo:"

    static let names = Locked<[String: Registration]>([:])

    /// True when `path` names a page source rather than a file: it is bound,
    /// or it has the form of a moment reference.
    public static func namesSource(_ path: String) -> Bool {
        path.hasPrefix(referencePrefix) || names.withLock { $0[path] != nil }
    }

    /// Makes `name` open `registration` wherever a database path is taken,
    /// until `unbind(name)` (the binding keeps the registration alive). A
    /// second binding of one name replaces the first.
    public static func bind(_ registration: Registration, as name: String) {
        names.withLock { $0[name] = registration }
    }

    public static func unbind(_ name: String) {
        names.withLock { _ = $0.removeValue(forKey: name) }
        failures.withLock { _ = $0.removeValue(forKey: name) }
    }

    static let failures = Locked<[String: String]>([:])

    /// Makes `name` fail to open wherever a database path is taken, with
    /// `message` (why its moment could not be opened), until `unbind(name)`:
    /// a command over several databases reports it in its turn, as it does
    /// a missing file, and goes on with the others.
    public static func bind(failure message: String, as name: String) {
        failures.withLock { $0[name] = message }
    }

    /// The source `path` is bound to, nil when it names none.
    public static func source(named path: String) -> Registration? {
        names.withLock { $0[path] }
    }

    /// The source `path` names (see `namesSource`), for a reader: one clear
    /// error when it is a moment reference nobody opened, or when a write is
    /// asked of it.
    static func requireSource(named path: String, writing: Bool = false) throws -> Registration {
        guard let registration = source(named: path) else {
            if let failure = failures.withLock({ $0[path] }) { throw DatabaseError(code: .cantopen, message: failure, path: path) }
            throw DatabaseError(code: .cantopen,
                                message: "a moment of a repository that was not opened (give the repository: --repo URL or --config FILE; a local file of this name is ./\(path))",
                                path: path)
        }
        if writing {
            throw DatabaseError(code: .readonly, message: "a moment of a repository is read-only", path: path)
        }
        return registration
    }

    /// The image's first `count` bytes (fewer when it is smaller), read
    /// through the source as SQLite would read them.
    static func prefix(of registration: Registration, count: Int) throws -> [UInt8] {
        let size = registration.source.pageSize * registration.source.pageCount
        let n = min(count, size)
        guard n > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: n)
        let rc = bytes.withUnsafeMutableBufferPointer { read(registration, into: $0.baseAddress!, count: n, at: 0) }
        guard rc == SQLITE_OK else {
            throw DatabaseError(code: .ioerr, message: registration.takeFailure() ?? "cannot read the first page", path: registration.label)
        }
        return bytes
    }

    /// The cause of the read that made `db`'s last call fail, when a file of
    /// this VFS failed one (each schema of the connection is looked at).
    static func failure(in db: OpaquePointer) -> String? {
        var index: Int32 = 0
        while let schema = sqlite3_db_name(db, index) {
            index += 1
            var pointer: UnsafeMutableRawPointer?
            guard sqlite3_file_control(db, schema, SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
                  let file = pointer?.assumingMemoryBound(to: sqlite3_file.self),
                  file.pointee.pMethods == UnsafePointer(methods) else { continue }
            if let words = registration(file).takeFailure() { return words }
        }
        return nil
    }

    nonisolated(unsafe) static var base: UnsafeMutablePointer<sqlite3_vfs>?
    nonisolated(unsafe) static let methods: UnsafeMutablePointer<sqlite3_io_methods> = {
        let p = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        p.initialize(to: sqlite3_io_methods())
        return p
    }()

    static func registration(_ file: UnsafeMutablePointer<sqlite3_file>) -> Registration {
        Unmanaged<Registration>.fromOpaque((UnsafeMutableRawPointer(file) + 8).load(as: UnsafeMutableRawPointer.self)).takeUnretainedValue()
    }

    static let ioerrRead = SQLITE_IOERR | (1 << 8)
    static let ioerrShortRead = SQLITE_IOERR | (2 << 8)

    /// Registers the VFS once (not as the default); returns its name.
    static let registered: String = {
        guard let real = sqlite3_vfs_find(nil) else { return "" }
        base = real
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: real.pointee)
        vfs.pointee.iVersion = min(real.pointee.iVersion, 3)
        vfs.pointee.szOsFile = max(Int32(header), real.pointee.szOsFile)
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.pNext = nil
        vfs.pointee.xOpen = { _, zName, file, flags, outFlags in
            guard let file, let real = PageVFS.base else { return SQLITE_CANTOPEN }
            guard flags & SQLITE_OPEN_MAIN_DB != 0, let zName else {
                // A temporary file SQLite wants (a sort, a temporary table):
                // the default VFS's own, in place (szOsFile fits either).
                // Any named file but a main database (a journal) is refused.
                if zName != nil { file.pointee.pMethods = nil; return SQLITE_CANTOPEN }
                return real.pointee.xOpen(real, zName, file, flags, outFlags)
            }
            let fileName = String(cString: zName)
            guard flags & SQLITE_OPEN_READWRITE == 0,
                  let registration = PageVFS.sources.withLock({ $0[fileName]?.registration }) else {
                file.pointee.pMethods = nil
                return flags & SQLITE_OPEN_READWRITE != 0 ? SQLITE_READONLY : SQLITE_CANTOPEN
            }
            (UnsafeMutableRawPointer(file) + 8).storeBytes(of: Unmanaged.passRetained(registration).toOpaque(), as: UnsafeMutableRawPointer.self)
            file.pointee.pMethods = UnsafePointer(PageVFS.methods)
            outFlags?.pointee = SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB
            return SQLITE_OK
        }
        vfs.pointee.xDelete = { _, _, _ in SQLITE_IOERR | (10 << 8) }
        vfs.pointee.xAccess = { _, zName, _, out in
            // Only the sources exist: no journal, no -wal, no -shm.
            let exists = zName.map { name in PageVFS.sources.withLock { $0[String(cString: name)]?.registration != nil } } ?? false
            out?.pointee = exists ? 1 : 0
            return SQLITE_OK
        }
        vfs.pointee.xFullPathname = { _, zName, size, out in
            guard let zName, let out else { return SQLITE_CANTOPEN }
            let length = strlen(zName)
            guard length < Int(size) else { return SQLITE_CANTOPEN }
            memcpy(out, zName, length + 1)
            return SQLITE_OK
        }
        // No loadable extensions through this VFS, whatever the connection says.
        vfs.pointee.xDlOpen = { _, _ in nil }
        var m = sqlite3_io_methods()
        m.iVersion = 1
        m.xClose = { file in
            let raw = (UnsafeMutableRawPointer(file!) + 8).load(as: UnsafeMutableRawPointer.self)
            Unmanaged<Registration>.fromOpaque(raw).release()
            return SQLITE_OK
        }
        m.xRead = { file, buffer, amount, offset in
            let registration = PageVFS.registration(file!)
            return PageVFS.read(registration, into: buffer!.assumingMemoryBound(to: UInt8.self), count: Int(amount), at: Int(offset))
        }
        m.xWrite = { _, _, _, _ in SQLITE_READONLY }
        m.xTruncate = { _, _ in SQLITE_READONLY }
        m.xSync = { _, _ in SQLITE_READONLY }
        m.xFileSize = { file, size in
            let source = PageVFS.registration(file!).source
            size?.pointee = sqlite3_int64(source.pageSize) * sqlite3_int64(source.pageCount)
            return SQLITE_OK
        }
        m.xLock = { _, level in level <= SQLITE_LOCK_SHARED ? SQLITE_OK : SQLITE_READONLY }
        m.xUnlock = { _, _ in SQLITE_OK }
        m.xCheckReservedLock = { _, out in out?.pointee = 0; return SQLITE_OK }
        m.xFileControl = { _, _, _ in SQLITE_NOTFOUND }
        m.xSectorSize = { _ in 4096 }
        m.xDeviceCharacteristics = { _ in SQLITE_IOCAP_IMMUTABLE }
        methods.pointee = m
        guard sqlite3_vfs_register(vfs, 0) == SQLITE_OK else { return "" }
        return name
    }()

    /// Copies `count` bytes at `offset` of the image into `buffer`, page by
    /// page. Past the end: zeros and SQLITE_IOERR_SHORT_READ, as SQLite
    /// expects of a short file. Pages are handed to SQLite exactly as the
    /// source gives them: a header that says WAL is read as it is (an
    /// immutable file is one whole state; SQLite looks for no -wal).
    static func read(_ registration: Registration, into buffer: UnsafeMutablePointer<UInt8>, count: Int, at offset: Int) -> Int32 {
        let source = registration.source
        let size = source.pageSize
        var done = 0
        while done < count {
            let position = offset + done
            let number = position / size + 1
            guard number <= source.pageCount else {
                (buffer + done).initialize(repeating: 0, count: count - done)
                return ioerrShortRead
            }
            let bytes: [UInt8]
            do {
                bytes = try source.page(number)
            } catch {
                registration.fail("\(registration.label): page \(number): \(error)")
                return ioerrRead
            }
            guard bytes.count == size else {
                registration.fail("\(registration.label): page \(number) has \(bytes.count) bytes, not \(size)")
                return ioerrRead
            }
            let within = position % size
            let n = min(size - within, count - done)
            bytes.withUnsafeBufferPointer { (buffer + done).update(from: $0.baseAddress! + within, count: n) }
            done += n
        }
        return SQLITE_OK
    }
}
