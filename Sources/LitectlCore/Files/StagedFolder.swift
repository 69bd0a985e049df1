// A folder of files that appears under its final name complete or not at all
// (a dump folder):
// written as a hidden `.<name>.tmp-<pid>-<n>` folder beside it, every file and
// the folder fsynced, then renamed into place (an existing folder, with
// --force, is swapped out atomically with renameat2(RENAME_EXCHANGE) where the
// file system has it). A run killed midway leaves only the hidden folder,
// which the next dump into the same place removes once its process is gone.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class StagedFolder {
    /// The folder as the user named it.
    let finalPath: String
    /// The hidden folder the files are written in.
    let path: String
    private var committed = false
    let filePermissions: mode_t
    /// Whether a plain file of that name is one this kind of folder holds
    /// (a dump's `schema.sql`, `*.csv`, `*.jsonl`): only such files are ever
    /// removed from an old folder it replaces.
    let isOwnFile: @Sendable (String) -> Bool

    /// Checks `finalPath` (a missing name, or an empty folder; with `replace`,
    /// a folder holding only plain files `isOwnFile` accepts), asks the write
    /// gate, removes what killed runs left beside it, and makes the hidden folder.
    init(finalPath: String, replace: Bool, isOwnFile: @escaping @Sendable (String) -> Bool) throws {
        self.isOwnFile = isOwnFile
        var trimmed = finalPath
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        self.finalPath = trimmed
        let parent = DurableFolder.parent(of: trimmed)
        let base = DurableFolder.baseName(of: trimmed)
        guard DurableFolder.isFolder(parent) else {
            throw DatabaseError(code: .cantopen, message: "no such folder: \(parent)", path: finalPath)
        }
        if DurableFolder.exists(trimmed) {
            guard DurableFolder.isFolder(trimmed) else {
                throw DatabaseError(code: .cantopen, message: "exists and is not a folder", path: finalPath)
            }
            if !replace && !StagedFolder.isEmptyFolder(trimmed) {
                throw DatabaseError(code: .cantopen, message: "exists and is not empty; not overwritten (--force replaces it)", path: finalPath)
            }
            if replace, let other = StagedFolder.firstForeignEntry(trimmed, isOwnFile: isOwnFile) {
                throw DatabaseError(code: .cantopen,
                                    message: "holds \(other.replacingNewlines()), which a dump does not write; not replaced (--force replaces only a dump's folder)",
                                    path: finalPath)
            }
            // Each file it holds is replaced: none may be protected.
            for name in StagedFolder.names(in: trimmed) {
                try WriteGate.shared.requireWritable(trimmed + "/" + name, what: "a file of the folder", replacing: .always)
            }
        }
        try WriteGate.shared.requireWritable(folder: trimmed)
        StagedFolder.removeStale(in: parent, stem: base)
        filePermissions = DurableFolder.newFilePermissions
        var made: String? = nil
        for _ in 0..<10 {
            let candidate = (parent == "/" ? "" : parent) + "/.\(base).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            if mkdir(candidate, 0o777) == 0 {
                made = candidate
                WriteGate.shared.own(candidate)
                WriteGate.shared.own(folder: candidate)
                break
            }
            if errno != EEXIST {
                throw DatabaseError(code: .cantopen, message: "cannot create a folder: \(String(cString: strerror(errno)))", path: parent)
            }
        }
        guard let made else { throw DatabaseError(code: .cantopen, message: "cannot create a temporary folder", path: parent) }
        path = made
    }

    deinit { discard() }

    /// Writes a new file `name` in the hidden folder through `body`, which
    /// gets a sink; fsyncs and closes it. The file is removed on a signal.
    func writeFile(_ name: String, _ body: (ByteSink) throws -> Void) throws {
        let filePath = path + "/" + name
        let slot = TemporaryFiles.register(filePath)
        defer { TemporaryFiles.unregister(slot) }
        let fd = open(filePath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, filePermissions)
        guard fd >= 0 else {
            throw DatabaseError(code: .cantopen, message: "cannot create: \(String(cString: strerror(errno)))", path: finalPath + "/" + name)
        }
        defer { close(fd) }
        let sink = FileDescriptorSink(descriptor: fd)
        try body(sink)
        try? sink.flush()
        if let failure = sink.failure {
            // A full disk (or file-size limit) is said as such.
            throw DatabaseError(code: failure == ENOSPC || failure == EFBIG || failure == EDQUOT ? .full : .ioerr,
                                message: "cannot write: \(String(cString: strerror(failure)))", path: finalPath + "/" + name)
        }
        if fsync(fd) != 0 {
            throw DatabaseError(code: .ioerr, message: "fsync failed: \(String(cString: strerror(errno)))", path: finalPath + "/" + name)
        }
    }

    /// fsyncs the hidden folder and gives it the final name.
    func commit() throws {
        try DurableFolder.sync(parentOf: path + "/x")
        if DurableFolder.exists(finalPath) && !StagedFolder.isEmptyFolder(finalPath) {
            if StagedFolder.exchange(path, finalPath) {
                // The old content now sits under the hidden name.
                committed = true
                StagedFolder.removeTree(path)
            } else {
                // No atomic exchange here: move the old folder aside under a
                // hidden name a later run removes, then rename.
                let aside = DurableFolder.parent(of: finalPath) + "/.\(DurableFolder.baseName(of: finalPath)).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
                guard rename(finalPath, aside) == 0 else {
                    throw DatabaseError(code: .ioerr, message: "cannot move the old folder aside: \(String(cString: strerror(errno)))", path: finalPath)
                }
                guard rename(path, finalPath) == 0 else {
                    let err = errno
                    _ = rename(aside, finalPath)
                    throw DatabaseError(code: .ioerr, message: "cannot rename into place: \(String(cString: strerror(err)))", path: finalPath)
                }
                committed = true
                StagedFolder.removeTree(aside)
            }
        } else {
            // rename(2) replaces an empty folder, and makes a missing name appear whole.
            guard rename(path, finalPath) == 0 else {
                throw DatabaseError(code: .ioerr, message: "cannot rename into place: \(String(cString: strerror(errno)))", path: finalPath)
            }
            committed = true
        }
        try DurableFolder.sync(parentOf: finalPath)
    }

    /// Removes the hidden folder and what is in it (no-op after commit).
    func discard() {
        guard !committed else { return }
        committed = true
        StagedFolder.removeTree(path)
    }

    static func isEmptyFolder(_ path: String) -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = entryName(entry)
            if name != "." && name != ".." { return false }
        }
        return true
    }

    /// The first entry of `path` that a dump does not write (anything but
    /// plain files named schema.sql, *.csv or *.jsonl), nil when there is
    /// none. --force replaces only such folders: the old one is removed file
    /// by file afterwards, which a subfolder would stop (leaving it hidden
    /// beside the new one for good), and a folder of other things (a home
    /// folder named by mistake) is not the user's dump to throw away.
    static func firstForeignEntry(_ path: String, isOwnFile: (String) -> Bool) -> String? {
        guard let dir = opendir(path) else { return path }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = entryName(entry)
            if name == "." || name == ".." { continue }
            var info = stat()
            let plainFile = lstat(path + "/" + name, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
            if !plainFile { return "\(name) (not a plain file)" }
            if !isOwnFile(name) { return name }
        }
        return nil
    }

    private static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
    }

    /// The names in the folder `path` (without `.` and `..`).
    static func names(in path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = entryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes a folder of plain files (what a dump writes) and the folder:
    /// never through a link (the folder is opened with O_NOFOLLOW, a link in
    /// it is removed as a link), and each removal asked of the write gate.
    static func removeTree(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        for name in names(in: path) where WriteGate.shared.allows(path + "/" + name) {
            var info = stat()
            guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0, (info.st_mode & S_IFMT) != S_IFDIR else { continue }
            unlinkat(fd, name, 0)
        }
        if WriteGate.shared.allows(path) { rmdir(path) }
    }

    /// Removes hidden `.<stem>.tmp-<pid>-<n>` folders in `folder` whose process is gone.
    static func removeStale(in folder: String, stem: String) {
        guard let dir = opendir(folder) else { return }
        var doomed: [String] = []
        let prefix = ".\(stem).tmp-"
        while let entry = readdir(dir) {
            let name = entryName(entry)
            guard name.hasPrefix(prefix) else { continue }
            let parts = name.dropFirst(prefix.count).split(separator: "-")
            guard parts.count == 2, let pid = Int32(parts[0]), UInt32(parts[1]) != nil, pid > 0, pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { doomed.append((folder == "/" ? "" : folder) + "/" + name) }
        }
        closedir(dir)
        for path in doomed where DurableFolder.isFolder(path) { removeTree(path) }
    }

    /// Swaps two paths atomically with Linux's renameat2(RENAME_EXCHANGE),
    /// looked up at run time (Swift's Glibc module does not declare it);
    /// false when it is missing or the file system refuses.
    static func exchange(_ a: String, _ b: String) -> Bool {
        #if os(Linux)
        typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(nil, "renameat2") else { return false }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        let renameExchange: UInt32 = 1 << 1
        return renameat2(AT_FDCWD, a, AT_FDCWD, b, renameExchange) == 0
        #else
        return false
        #endif
    }
}
