// Files that appear under their final name only when complete: created
// exclusively with the caller's permission bits, fsynced, renamed, and their
// folder fsynced; every temporary path is registered so that a SIGINT or
// SIGTERM handler can unlink it with async-signal-safe calls only.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The temporary files in flight, in fixed memory that a signal handler may
/// read: `slotCount` slots of `PATH_MAX` bytes, a slot in use when its first
/// byte is not 0.
public enum TemporaryFiles {
    static let slotCount = 64
    static let slotSize = Int(PATH_MAX) + 1
    nonisolated(unsafe) static let slots: UnsafeMutablePointer<CChar> = {
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: slotCount * slotSize)
        p.initialize(repeating: 0, count: slotCount * slotSize)
        return p
    }()
    nonisolated(unsafe) static var lock = pthread_mutex_t()
    nonisolated(unsafe) static var lockReady = false

    /// The folder for scratch files (copies a command deletes when done):
    /// `requested`, else $TMPDIR, else /tmp.
    public static func folder(_ requested: String?) -> String {
        if let requested { return requested }
        if let tmp = getenv("TMPDIR").map({ String(cString: $0) }), !tmp.isEmpty { return tmp }
        return "/tmp"
    }

    /// Registers `path` for removal on SIGINT/SIGTERM; returns its slot.
    static func register(_ path: String) -> Int? {
        let bytes = Array(path.utf8)
        guard bytes.count < slotSize else { return nil }
        return withLock { () -> Int? in
            for i in 0..<slotCount where slots[i * slotSize] == 0 {
                let base = slots + i * slotSize
                for (k, b) in bytes.enumerated().dropFirst() { base[k] = CChar(bitPattern: b) }
                base[bytes.count] = 0
                base[0] = CChar(bitPattern: bytes[0])  // last: the slot becomes visible complete
                return i
            }
            return nil
        }
    }

    static func unregister(_ slot: Int?) {
        guard let slot else { return }
        withLock { slots[slot * slotSize] = 0 }
    }

    private static func withLock<T>(_ body: () -> T) -> T {
        if !lockReady { pthread_mutex_init(&lock, nil); lockReady = true }
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return body()
    }

    /// A scratch file with no name (created and at once unlinked in
    /// `folder`, else $TMPDIR): nothing is left after any exit, SIGKILL
    /// included. Returns its descriptor, or throws naming the folder.
    public static func anonymous(in folder: String? = nil) throws -> Int32 {
        let folder = Self.folder(folder)
        var template = Array((folder + "/.litectl-scratch-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw DatabaseError(code: .cantopen, message: "cannot make a scratch file: \(String(cString: strerror(errno)))", path: folder)
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return fd
    }

    /// Installs handlers for SIGINT, SIGTERM and SIGHUP that unlink every
    /// registered temporary file and exit with status 2 (litectl's "error"
    /// status, which cron scripts test for). Only `unlink` and `_exit` run in
    /// the handler: both are async-signal-safe. During a write into a
    /// database `Interruption` takes the signal over instead (the write
    /// rolls back, then the command exits).
    public static func installSignalCleanup() {
        _ = slots
        Interruption.prepare()
        let handler: @convention(c) (Int32) -> Void = { signal in
            if Interruption.takeOver(signal) { return }
            for i in 0..<TemporaryFiles.slotCount {
                let base = TemporaryFiles.slots + i * TemporaryFiles.slotSize
                if base[0] != 0 { unlink(base) }
            }
            _exit(2)
        }
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            #if canImport(Glibc)
            action.__sigaction_handler.sa_handler = handler
            #else
            action.__sigaction_u.__sa_handler = handler
            #endif
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            sigaction(sig, &action, nil)
        }
        // Past a file-size limit (ulimit -f) a write then fails with EFBIG and is
        // reported like a full disk, instead of the process being killed.
        signal(SIGXFSZ, SIG_IGN)
    }

    /// Removes temporary files that a litectl process left in `folder` when it
    /// was killed with SIGKILL (`.<name>.tmp-<pid>-<n>` whose process is gone).
    /// With `stem`, only those of files named `stem` or `stem.<more>` (a
    /// restore target's, in an application's folder). Returns the paths
    /// removed. Call it holding the folder's lock.
    /// Each removal is asked of the write gate (`owner`: the tree's writer);
    /// what it refuses is left alone.
    @discardableResult
    public static func removeStale(in folder: String, stem: String? = nil, owner: WriteGate.Tree? = nil) -> [String] {
        guard let dir = opendir(folder) else { return [] }
        defer { closedir(dir) }
        var removed: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            guard isStale(name: name, stem: stem) else { continue }
            let path = (folder.hasSuffix("/") ? folder : folder + "/") + name
            guard WriteGate.shared.allows(path, owner: owner) else { continue }
            var info = stat()
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            if unlink(path) == 0 { removed.append(path) }
        }
        return removed
    }

    /// Whether `name` is a temporary file's (`.<stem>.tmp-<pid>-<n>`, of
    /// `stem` or `stem.<more>` when given) whose process is gone.
    static func isStale(name: String, stem: String?) -> Bool {
        guard name.hasPrefix("."), let marker = name.ranges(of: ".tmp-").last else { return false }
        if let stem {
            let base = name[name.index(after: name.startIndex)..<marker.lowerBound]
            guard base == stem || base.hasPrefix(stem + ".") else { return false }
        }
        let parts = name[marker.upperBound...].split(separator: "-")
        guard parts.count >= 2, let pid = Int32(parts[0]), UInt32(parts[1]) != nil, pid > 0, pid != getpid() else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}

/// A temporary file in a destination folder, created exclusively with given
/// permission bits, removed on error or signal, renamed into place when done.
public final class TemporaryFile {
    public let path: String
    public private(set) var descriptor: Int32
    private var slot: Int?
    /// SQLite may make `-journal` and `-wal` files beside a database it writes
    /// (VACUUM INTO does): they are removed with the file.
    private var companionSlots: [Int?] = []
    static let companions = ["-journal", "-wal", "-shm"]
    private var committed = false
    /// The protected tree this file is written in by its one writer, if any.
    private let owner: WriteGate.Tree?

    /// Creates `folder/.<stem>.tmp-<pid>-<random>` with `O_CREAT|O_EXCL` and
    /// mode `permissions`, then `fchmod`s it to exactly `permissions` (the umask
    /// can only narrow, never widen; the fchmod makes it exact).
    ///
    /// The write gate (`WriteGate`) is asked first: inside a protected tree
    /// only its `owner` makes files. `O_NOFOLLOW`: a name that is a symbolic
    /// link is never opened through.
    public init(in folder: String, stem: String, permissions: mode_t, owner: WriteGate.Tree? = nil) throws {
        self.owner = owner
        var attempt = 0
        while true {
            let name = ".\(stem).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let candidate = (folder.hasSuffix("/") ? folder : folder + "/") + name
            try WriteGate.shared.requireWritable(candidate, what: "a temporary file", replacing: .never, owner: owner)
            let slot = TemporaryFiles.register(candidate)
            let fd = open(candidate, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, permissions)
            if fd >= 0 {
                path = candidate
                descriptor = fd
                self.slot = slot
                companionSlots = TemporaryFile.companions.map { TemporaryFiles.register(candidate + $0) }
                WriteGate.shared.own(candidate)
                break
            }
            let err = errno
            TemporaryFiles.unregister(slot)
            attempt += 1
            if err == EEXIST && attempt < 10 { continue }
            throw DatabaseError(code: .cantopen, message: "cannot create a file in the folder: \(String(cString: strerror(err)))",
                                path: folder)
        }
        if fchmod(descriptor, permissions) != 0 {
            let err = errno
            discard()
            throw DatabaseError(code: .ioerr, message: "cannot set permissions: \(String(cString: strerror(err)))", path: path)
        }
    }

    /// Flushes the file's data to disk.
    public func sync() throws {
        if fsync(descriptor) != 0 {
            throw DatabaseError(code: .ioerr, message: "fsync failed: \(String(cString: strerror(errno)))", path: path)
        }
    }

    /// fsyncs, renames to `finalPath` (same folder) and fsyncs the folder.
    /// With `replace` false an existing `finalPath` is never overwritten.
    /// The write gate is asked again for `finalPath` (it may have changed
    /// since the writer first asked): `replace` false is `ReplaceRule.never`;
    /// a writer whose rule is finer asks the gate itself first.
    public func commit(as finalPath: String, replace: Bool = false) throws {
        try WriteGate.shared.requireWritable(finalPath, what: "the output", replacing: replace ? .always : .never, owner: owner)
        try sync()
        if !replace {
            // link() fails with EEXIST instead of replacing; then drop the temporary name.
            if link(path, finalPath) != 0 {
                let err = errno
                throw DatabaseError(code: .cantopen, message: err == EEXIST ? "already exists; not overwritten"
                                    : "cannot create: \(String(cString: strerror(err)))", path: finalPath)
            }
            unlink(path)
        } else if rename(path, finalPath) != 0 {
            throw DatabaseError(code: .ioerr, message: "cannot rename into place: \(String(cString: strerror(errno)))", path: finalPath)
        }
        committed = true
        WriteGate.shared.own(finalPath)
        releaseAll()
        try DurableFolder.sync(parentOf: finalPath)
    }

    /// Removes the temporary file (no-op after commit).
    public func discard() {
        if !committed {
            unlink(path)
            committed = true
        }
        releaseAll()
    }

    /// Removes SQLite's companions of the temporary file, ends the signal
    /// cleanup registrations and closes the descriptor.
    private func releaseAll() {
        for (suffix, companion) in zip(TemporaryFile.companions, companionSlots) {
            unlink(path + suffix)
            TemporaryFiles.unregister(companion)
        }
        companionSlots = []
        TemporaryFiles.unregister(slot); slot = nil
        if descriptor >= 0 { close(descriptor); descriptor = -1 }
    }

    /// Writes all of `bytes` at the current offset.
    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                let err = errno
                throw DatabaseError(code: err == ENOSPC || err == EFBIG || err == EDQUOT ? .full : .ioerr,
                                    message: "write failed: \(String(cString: strerror(err)))", path: path)
            }
            offset += n
        }
    }

    deinit { discard() }
}

public enum DurableFolder {
    /// The permission bits a new file of the user's gets (0666 less the
    /// umask), as a shell redirection would create it: dumps, loaded
    /// databases. (umask can only be read by setting it, at once put back.)
    public static var newFilePermissions: mode_t {
        let mask = umask(0)
        umask(mask)
        return 0o666 & ~mask
    }

    /// fsyncs the folder holding `path`, so a rename in it survives a crash.
    public static func sync(parentOf path: String) throws {
        let folder = parent(of: path)
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw DatabaseError(code: .ioerr, message: "cannot open folder to fsync: \(String(cString: strerror(errno)))", path: folder)
        }
        defer { close(fd) }
        if fsync(fd) != 0 && errno != EINVAL {
            throw DatabaseError(code: .ioerr, message: "folder fsync failed: \(String(cString: strerror(errno)))", path: folder)
        }
    }

    /// Removes the file (or link: never what it points to) at `path`, after
    /// the write gate said yes (`owner`: the protected tree's writer); a
    /// missing file is not an error.
    public static func remove(_ path: String, owner: WriteGate.Tree? = nil) throws {
        try WriteGate.shared.requireDeletable(path, owner: owner)
        if unlink(path) != 0 && errno != ENOENT {
            throw DatabaseError(code: .ioerr, message: "cannot remove: \(String(cString: strerror(errno)))", path: path)
        }
    }

    /// Makes the folder `path` itself (mode `permissions`, less the umask)
    /// when it does not exist, after the write gate said yes; never its
    /// parents (a cache folder is made only where the user named it). An
    /// existing folder is not an error.
    public static func makeFolder(_ path: String, permissions: mode_t, owner: WriteGate.Tree? = nil) throws {
        try WriteGate.shared.requireWritable(folder: path, owner: owner)
        if mkdir(path, permissions) != 0 && errno != EEXIST {
            let err = errno
            throw DatabaseError(code: err == EACCES ? .perm : .cantopen,
                                message: "cannot create the folder: \(String(cString: strerror(err)))", path: path)
        }
    }

    /// Makes the folder `path` and its missing parents (mode 0755, less the
    /// umask), as `mkdir -p` does, after the write gate said yes.
    public static func makeFolders(_ path: String, owner: WriteGate.Tree? = nil) throws {
        try WriteGate.shared.requireWritable(folder: path, owner: owner)
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o755) != 0 && errno != EEXIST {
                let err = errno
                throw DatabaseError(code: err == EACCES ? .perm : .cantopen,
                                    message: "cannot create the folder: \(String(cString: strerror(err)))", path: built)
            }
        }
    }

    /// `path` made absolute, with `.` and `..` parts and doubled slashes
    /// taken out by name alone (no link is resolved: for paths that do not
    /// exist yet).
    public static func normalized(_ path: String) -> String {
        var parts: [Substring] = []
        for part in absolute(path).split(separator: "/") {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The folder part of `path` ("." when there is none).
    public static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    /// The last component of `path`.
    public static func baseName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// The permission bits of the file at `path`.
    public static func permissions(of path: String) throws -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw DatabaseError(code: .cantopen, message: String(cString: strerror(errno)), path: path)
        }
        return info.st_mode & 0o777
    }

    /// True when `path` is an existing folder.
    public static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// `path` made absolute against the working folder (not resolving links).
    public static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var rel = Substring(path)
        while rel.hasPrefix("./") { rel = rel.dropFirst(2) }
        return (cwd == "/" ? "" : cwd) + "/" + rel
    }
}

/// Small whole files written as every litectl writer writes: a temporary file
/// beside the target, fsynced, renamed, the folder fsynced, after the write
/// gate said yes.
public enum AtomicFile {
    /// Writes `bytes` to `path`. `what` names the output in a refusal ("the
    /// metrics file"); `replacing` says when an existing file may be replaced.
    public static func write(_ bytes: [UInt8], to path: String, permissions: mode_t, what: String,
                             replacing: ReplaceRule, owner: WriteGate.Tree? = nil) throws {
        try WriteGate.shared.requireWritable(path, what: what, replacing: replacing, owner: owner)
        let file = try TemporaryFile(in: DurableFolder.parent(of: path), stem: DurableFolder.baseName(of: path),
                                     permissions: permissions, owner: owner)
        defer { file.discard() }
        try bytes.withUnsafeBytes { try file.write($0) }
        try file.commit(as: path, replace: true)
    }
}
