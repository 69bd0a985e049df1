// A repository in a folder: each object a file under its key, written to a
// temporary file, fsynced, renamed and its folder fsynced, so a file under a
// final name is always whole.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public final class FolderStore: ObjectStore, @unchecked Sendable {
    public let location: String
    let root: String

    /// A store over the folder `path` (which `repo init` creates).
    public init(path: String) {
        location = path
        root = path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    func path(_ key: String) -> String { root + "/" + key }

    func error(_ key: String, _ err: Int32, _ doing: String) -> StoreError {
        let kind: StoreError.Kind = switch err {
        case ENOENT: .notFound
        case EACCES, EPERM: .denied
        default: .io
        }
        return StoreError(kind, location: path(key), message: "\(doing): \(String(cString: strerror(err)))")
    }

    /// Creates the folder (and its parents) when missing.
    public func createRoot() throws {
        var built = root.hasPrefix("/") ? "" : "."
        for part in root.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o755) != 0 && errno != EEXIST {
                throw StoreError(errno == EACCES ? .denied : .io, location: built, message: "cannot create the folder: \(String(cString: strerror(errno)))")
            }
        }
    }

    public func put(_ key: String, _ bytes: [UInt8]) throws {
        let target = path(key)
        let folder = DurableFolder.parent(of: target)
        if !DurableFolder.isFolder(folder) {
            guard DurableFolder.isFolder(root) else {
                throw StoreError(.noSuchContainer, location: location, message: "no such folder")
            }
            var built = root
            for part in key.split(separator: "/").dropLast() {
                built += "/" + part
                if mkdir(built, 0o755) != 0 && errno != EEXIST { throw error(key, errno, "cannot create a folder") }
            }
        }
        do {
            let file = try TemporaryFile(in: folder, stem: DurableFolder.baseName(of: target), permissions: 0o644)
            defer { file.discard() }
            try bytes.withUnsafeBytes { try file.write($0) }
            try file.commit(as: target, replace: true)
        } catch let e as DatabaseError {
            throw StoreError(.io, location: target, message: e.message)
        }
    }

    public func get(_ key: String) throws -> [UInt8] {
        guard let bytes = FileBytes.read(path(key)) else { throw error(key, errno, "cannot read") }
        return bytes
    }

    public func get(_ key: String, offset: Int64, length: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        // (The count read first: `out.count - get(...)` would take the count before the read.)
        let done = try get(key, offset: offset, length: length, into: &out)
        out.removeLast(out.count - done)
        return out
    }

    public func get(_ key: String, offset: Int64, length: Int, into buffer: inout [UInt8]) throws -> Int {
        let fd = open(path(key), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error(key, errno, "cannot read") }
        defer { close(fd) }
        if buffer.count < length { buffer += [UInt8](repeating: 0, count: length - buffer.count) }
        var done = 0
        while done < length {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, length - done, off_t(offset) + off_t(done)) }
            if n < 0 { if errno == EINTR { continue }; throw error(key, errno, "cannot read") }
            if n == 0 { break }
            done += n
        }
        return done
    }

    public func list(prefix: String) throws -> [StoredObject] {
        guard DurableFolder.isFolder(root) else { throw StoreError(.noSuchContainer, location: location, message: "no such folder") }
        // The folder that holds every key with this prefix.
        let folderKey = prefix.contains("/") ? String(prefix[..<prefix.lastIndex(of: "/")!]) : ""
        var out: [StoredObject] = []
        func walk(_ relative: String) throws {
            let full = relative.isEmpty ? root : root + "/" + relative
            guard let dir = opendir(full) else {
                if errno == ENOENT { return }
                throw error(relative, errno, "cannot list")
            }
            defer { closedir(dir) }
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
                if name == "." || name == ".." || name.hasPrefix(".") { continue }  // temporary files are hidden
                let key = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(root + "/" + key, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    if key.hasPrefix(prefix) || prefix.hasPrefix(key + "/") { try walk(key) }
                } else if (info.st_mode & S_IFMT) == S_IFREG, key.hasPrefix(prefix) {
                    out.append(StoredObject(key: key, size: Int64(info.st_size)))
                }
            }
        }
        try walk(folderKey)
        return out.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
    }

    public func delete(_ key: String) throws {
        if unlink(path(key)) != 0 && errno != ENOENT { throw error(key, errno, "cannot delete") }
    }

    /// Removes temporary files that killed runs left in the store's folders.
    public func removeStaleTemporaryFiles() {
        for sub in ["", "packs", "index", "lists", "snapshots", "locks"] {
            TemporaryFiles.removeStale(in: sub.isEmpty ? root : root + "/" + sub)
        }
        guard let dir = opendir(root + "/packs") else { return }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
            if name.count == 2 { TemporaryFiles.removeStale(in: root + "/packs/" + name) }
        }
    }
}
