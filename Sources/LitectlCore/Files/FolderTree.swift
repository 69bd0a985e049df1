// A folder whose files are reached by names relative to it, one component at a
// time with openat(2) and O_NOFOLLOW: a symbolic link inside the tree (a
// repository's `locks/` pointing at another folder, a pack that is a link) is
// never followed, so nothing outside the tree is read, written, listed or
// deleted through it. The tree's root itself is the folder the user named and
// may be reached through links. Writes are whole files, made as every litectl
// writer makes them (temporary file, fsync, rename, folder fsync).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public final class FolderTree: @unchecked Sendable {
    /// The folder as the user named it (in messages).
    public let root: String

    /// One entry of a folder, as `lstat` sees it (a link is neither a file nor a folder).
    public struct Entry: Sendable {
        public var name: String
        public var isFile: Bool
        public var isFolder: Bool
        public var size: Int64
        /// When its content last changed (seconds since 1970).
        public var modified: Double = 0
    }

    public init(root: String) {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
    }

    /// The path of `relative` under the root (for messages and registration).
    public func path(_ relative: String) -> String { relative.isEmpty ? root : root + "/" + relative }

    /// Throws `ENOENT`-like errors as `FolderTree.Failure`, carrying errno.
    public struct Failure: Error, Sendable {
        public var errno: Int32
        public var path: String
        public var message: String
    }

    /// The components of a relative name; refused when empty, absolute or
    /// holding `.`, `..` or empty parts (names come from the format, and from
    /// listings and objects a hostile repository may hold).
    static func components(_ relative: String) throws -> [String] {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard !relative.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." || $0.utf8.contains(0) }) else {
            throw Failure(errno: EINVAL, path: relative, message: "not a valid name inside the folder")
        }
        return parts
    }

    /// A descriptor of the root folder.
    func openRoot() throws -> Int32 {
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("", errno, "cannot open the folder") }
        return fd
    }

    /// A descriptor of the folder `parts` names under the root, each step
    /// refusing a link; with `create`, missing folders are made (mode 0755).
    func openFolder(_ parts: ArraySlice<String>, create: Bool) throws -> Int32 {
        var fd = try openRoot()
        var walked = ""
        for part in parts {
            walked = walked.isEmpty ? part : walked + "/" + part
            var next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 && errno == ENOENT && create {
                if mkdirat(fd, part, 0o755) != 0 && errno != EEXIST {
                    let err = errno; close(fd); throw failure(walked, err, "cannot create the folder")
                }
                next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            if next < 0 {
                let err = errno
                close(fd)
                throw failure(walked, err, "cannot open the folder")
            }
            close(fd)
            fd = next
        }
        return fd
    }

    func failure(_ relative: String, _ err: Int32, _ doing: String) -> Failure {
        // ELOOP and ENOTDIR under O_NOFOLLOW|O_DIRECTORY: a link (or a file) where a folder should be.
        let why = err == ELOOP || err == ENOTDIR ? "is a symbolic link or not a folder; litectl does not follow links inside it"
            : String(cString: strerror(err))
        return Failure(errno: err, path: path(relative), message: "\(doing): \(why)")
    }

    /// A descriptor for reading the file `relative` (never through a link).
    public func openForReading(_ relative: String) throws -> Int32 {
        let parts = try Self.components(relative)
        let folder = try openFolder(parts.dropLast(), create: false)
        defer { close(folder) }
        let fd = openat(folder, parts.last!, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw failure(relative, errno, "cannot read") }
        return fd
    }

    /// The whole file `relative`.
    public func read(_ relative: String) throws -> [UInt8] {
        let fd = try openForReading(relative)
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw failure(relative, errno, "cannot read") }
            if n == 0 { return out }
            out.append(contentsOf: buffer[0..<n])
        }
    }

    /// The entries of the folder `relative` ("" for the root), without `.`
    /// and `..`; nil when the folder does not exist.
    public func entries(_ relative: String) throws -> [Entry]? {
        let fd: Int32
        do {
            fd = try relative.isEmpty ? openRoot() : openFolder(Self.components(relative)[...], create: false)
        } catch let error as Failure where error.errno == ENOENT {
            return nil
        }
        guard let dir = fdopendir(fd) else { let err = errno; close(fd); throw failure(relative, err, "cannot list") }
        defer { closedir(dir) }
        var out: [Entry] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            if name == "." || name == ".." { continue }
            var info = stat()
            guard fstatat(dirfd(dir), name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            let type = info.st_mode & S_IFMT
            out.append(Entry(name: name, isFile: type == S_IFREG, isFolder: type == S_IFDIR, size: Int64(info.st_size),
                             modified: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9))
        }
        return out
    }

    /// Removes the file (or link) `relative`, never what a link points to;
    /// a missing file is not an error. The write gate is asked first.
    public func remove(_ relative: String, owner: WriteGate.Tree?) throws {
        let parts = try Self.components(relative)
        try WriteGate.shared.requireDeletable(path(relative), owner: owner)
        let folder: Int32
        do { folder = try openFolder(parts.dropLast(), create: false) } catch let error as Failure where error.errno == ENOENT {
            return
        }
        defer { close(folder) }
        if unlinkat(folder, parts.last!, 0) != 0 && errno != ENOENT { throw failure(relative, errno, "cannot delete") }
    }

    /// Writes `bytes` as the file `relative` (replacing it), creating its
    /// folders: a hidden temporary file beside it (registered for removal on
    /// a signal), fsynced, renamed, the folder fsynced. The write gate is
    /// asked first, as `owner`. `durable` false skips both fsyncs (a cache's
    /// file, checked whenever it is read, need not survive a crash; it is
    /// still never seen half written under its name).
    public func write(_ relative: String, _ bytes: [UInt8], permissions: mode_t, owner: WriteGate.Tree?, durable: Bool = true) throws {
        let parts = try Self.components(relative)
        try WriteGate.shared.requireWritable(path(relative), what: "a file of the folder", replacing: .always, owner: owner)
        let folder = try openFolder(parts.dropLast(), create: true)
        defer { close(folder) }
        let name = parts.last!
        var attempt = 0
        var temporary = "", fd: Int32 = -1, slot: Int?
        while fd < 0 {
            temporary = ".\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            slot = TemporaryFiles.register(path((parts.dropLast() + [temporary]).joined(separator: "/")))
            fd = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, permissions)
            if fd < 0 {
                let err = errno
                TemporaryFiles.unregister(slot)
                attempt += 1
                if err == EEXIST && attempt < 10 { continue }
                throw failure(relative, err, "cannot create a file")
            }
        }
        defer { TemporaryFiles.unregister(slot) }
        var done = false
        defer { if !done { unlinkat(folder, temporary, 0) } }
        do {
            defer { close(fd) }
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure(relative, errno, "cannot write")
                }
                offset += n
            }
            if fchmod(fd, permissions) != 0 || (durable && fsync(fd) != 0) { throw failure(relative, errno, "cannot write") }
        }
        if renameat(folder, temporary, folder, name) != 0 { throw failure(relative, errno, "cannot rename into place") }
        done = true
        if durable && fsync(folder) != 0 && errno != EINVAL { throw failure(relative, errno, "folder fsync failed") }
    }

    /// Removes the folder `path` and everything in it, depth first, each
    /// entry through its folder's descriptor: a link inside is removed as a
    /// link, never followed; each removal is asked of the write gate (what
    /// it refuses stays, and so does its folder).
    public static func removeAll(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        removeContents(fd, path: path)
        close(fd)
        if WriteGate.shared.allows(path) { rmdir(path) }
    }

    private static func removeContents(_ fd: Int32, path: String) {
        let copy = dup(fd)
        guard copy >= 0, let dir = fdopendir(copy) else { return }
        var names: [(String, Bool)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            if name == "." || name == ".." { continue }
            var info = stat()
            guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            names.append((name, (info.st_mode & S_IFMT) == S_IFDIR))
        }
        closedir(dir)
        for (name, isFolder) in names {
            let child = path + "/" + name
            guard WriteGate.shared.allows(child) else { continue }
            if isFolder {
                let sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard sub >= 0 else { continue }
                removeContents(sub, path: child)
                close(sub)
                unlinkat(fd, name, AT_REMOVEDIR)
            } else {
                unlinkat(fd, name, 0)
            }
        }
    }

    /// Removes the temporary files that killed litectl processes left in the
    /// folder `relative` (see `TemporaryFiles.removeStale`), never through a link.
    public func removeStaleTemporaryFiles(in relative: String, owner: WriteGate.Tree?) {
        guard let entries = try? entries(relative) else { return }
        for entry in entries where entry.isFile && TemporaryFiles.isStale(name: entry.name, stem: nil) {
            try? remove(relative.isEmpty ? entry.name : relative + "/" + entry.name, owner: owner)
        }
    }
}
