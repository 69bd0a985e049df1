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
    /// The folder, reached without following a link inside it: a `locks/`
    /// or `packs/ab` that is a link to another folder is an error, never a
    /// way to read, list or delete outside the repository.
    let tree: FolderTree
    /// The write gate's token: this store is the one writer in its folder.
    let owner: WriteGate.Tree

    /// A store over the folder `path` (which `repo init` creates). The
    /// folder becomes part of the run's protected set (`WriteGate`).
    public init(path: String) {
        location = path
        root = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        tree = FolderTree(root: root)
        owner = WriteGate.shared.protect(tree: root, what: "the repository \(path)", kind: .repository)
    }

    func path(_ key: String) -> String { root + "/" + key }

    func error(_ key: String, _ err: Int32, _ doing: String) -> StoreError {
        StoreError(Self.kind(err), location: path(key), message: "\(doing): \(String(cString: strerror(err)))")
    }

    static func kind(_ err: Int32) -> StoreError.Kind {
        switch err {
        case ENOENT: .notFound
        case EACCES, EPERM: .denied
        default: .io
        }
    }

    /// The tree's failure as the store's error.
    func translate(_ error: any Error, _ key: String) -> any Error {
        if let failure = error as? FolderTree.Failure {
            return StoreError(Self.kind(failure.errno), location: failure.path, message: failure.message)
        }
        if let refusal = error as? DatabaseError { return StoreError(.denied, location: refusal.path ?? path(key), message: refusal.message) }
        return error
    }

    /// Creates the folder (and its parents) when missing.
    public func createRoot() throws {
        do { try DurableFolder.makeFolders(root, owner: owner) } catch let error as DatabaseError {
            throw StoreError(error.code.primary == .perm ? .denied : .io, location: error.path ?? root, message: error.message)
        }
    }

    public func put(_ key: String, _ bytes: [UInt8]) throws {
        guard DurableFolder.isFolder(root) else {
            throw StoreError(.noSuchContainer, location: location, message: "no such folder")
        }
        do { try tree.write(key, bytes, permissions: 0o644, owner: owner) } catch { throw translate(error, key) }
    }

    public func get(_ key: String) throws -> [UInt8] {
        do { return try tree.read(key) } catch { throw translate(error, key) }
    }

    public func get(_ key: String, offset: Int64, length: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        // (The count read first: `out.count - get(...)` would take the count before the read.)
        let done = try get(key, offset: offset, length: length, into: &out)
        out.removeLast(out.count - done)
        return out
    }

    public func get(_ key: String, offset: Int64, length: Int, into buffer: inout [UInt8]) throws -> Int {
        let fd: Int32
        do { fd = try tree.openForReading(key) } catch { throw translate(error, key) }
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
            let entries: [FolderTree.Entry]?
            do { entries = try tree.entries(relative) } catch { throw translate(error, relative) }
            for entry in entries ?? [] {
                if entry.name.hasPrefix(".") { continue }  // temporary files are hidden
                let key = relative.isEmpty ? entry.name : relative + "/" + entry.name
                if entry.isFolder {
                    if key.hasPrefix(prefix) || prefix.hasPrefix(key + "/") { try walk(key) }
                } else if entry.isFile {
                    if key.hasPrefix(prefix) { out.append(StoredObject(key: key, size: entry.size)) }
                } else if key.hasPrefix(prefix) || prefix.hasPrefix(key + "/") {
                    // A link (or a device, a socket) where the format has files
                    // and folders: never followed, and never taken for nothing.
                    throw StoreError(.other, location: path(key), message: "is a symbolic link or not a plain file; litectl does not follow links inside a repository")
                }
            }
        }
        try walk(folderKey)
        return out.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
    }

    public func delete(_ key: String) throws {
        do { try tree.remove(key, owner: owner) } catch { throw translate(error, key) }
    }

    /// Removes temporary files that killed runs left in the store's folders.
    public func removeStaleTemporaryFiles() {
        for sub in ["", "packs", "index", "lists", "snapshots", "locks"] {
            tree.removeStaleTemporaryFiles(in: sub, owner: owner)
        }
        for entry in (try? tree.entries("packs")) ?? [] where entry.isFolder && entry.name.utf8.count == 2 {
            tree.removeStaleTemporaryFiles(in: "packs/" + entry.name, owner: owner)
        }
    }
}
