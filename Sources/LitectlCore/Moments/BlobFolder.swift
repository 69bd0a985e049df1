// The optional folder (`--cache-dir`) where the blobs a moment fetched are
// kept across runs: each file a blob's bytes as its pack holds them (still
// compressed, and still sealed in an encrypted repository), named by a digest
// of the page ids it holds, so any moment of any repository that names those
// pages finds it. A file is only ever served after every page it gives was
// checked against its id (a corrupted or swapped file is dropped and the blob
// fetched again); the folder is bounded (oldest-used files removed first) and
// safe to delete at any time, and runs sharing it never see a half-written
// file. Built on Repository/ (page ids). See docs/moments.md.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

final class BlobFolder: @unchecked Sendable {
    /// The bound when the caller gives none: 1 GiB (docs/moments.md).
    static let defaultLimit: Int64 = 1 << 30
    /// The file that marks the folder as a cache (https://bford.info/cachedir/):
    /// backup tools skip it.
    static let tagName = "CACHEDIR.TAG"
    static let tag = "Signature: 8a477f597d28d172789f06886806bc55\n# This file marks a cache folder of litectl (moments' blobs, --cache-dir).\n# It and everything beside it may be deleted at any time.\n"

    let tree: FolderTree
    /// The most bytes of blob files the folder holds once a run has written to it.
    let limit: Int64
    private let lock = NSLock()
    /// Bytes of blob files in the folder, as this run counts them (nil until it first writes).
    private var used: Int64?
    /// False once a write failed (a full disk): the run goes on without writing.
    private var writable = true

    /// Opens the folder `path`, making it (only it, never its parents: mode
    /// 0700) when it does not exist, and marks it as a cache. A path that is
    /// not a folder, or one the run may not write (a repository's folder, a
    /// database it reads), is an error naming it.
    init(path: String, limit: Int64 = BlobFolder.defaultLimit) throws {
        self.limit = max(0, limit)
        try DurableFolder.makeFolder(path, permissions: 0o700)
        tree = FolderTree(root: path)
        do {
            let tagged = (try? tree.read(Self.tagName)).map { $0.elementsEqual(Self.tag.utf8) } ?? false
            if !tagged { try tree.write(Self.tagName, Array(Self.tag.utf8), permissions: 0o600, owner: nil) }
        } catch let error as FolderTree.Failure {
            throw DatabaseError(code: .cantopen, message: "not a cache folder litectl can use: \(error.message)", path: path)
        }
    }

    /// A blob's name: the SHA-256 of the page size and the ids of its slots
    /// (an unnamed slot as 32 zero bytes), in hex, under a folder of its
    /// first two digits ("ab/abcd...").
    static func name(ids: [PageID?], pageSize: Int) -> String {
        var hasher = SHA256Hasher()
        hasher.update(Array("litectl blob 1\0".utf8))
        let header = [UInt64(pageSize).bigEndian, UInt64(ids.count).bigEndian]
        header.withUnsafeBytes { hasher.update($0) }
        for id in ids {
            let words: [UInt64] = id.map { [$0.a.bigEndian, $0.b.bigEndian, $0.c.bigEndian, $0.d.bigEndian] } ?? [0, 0, 0, 0]
            words.withUnsafeBytes { hasher.update($0) }
        }
        let hex = hasher.finalizeHex()
        return String(hex.prefix(2)) + "/" + hex
    }

    /// Whether `name` is one this folder makes (two hex digits, a slash, 64 hex digits).
    static func isBlobName(_ folder: String, _ file: String) -> Bool {
        func hex(_ s: String, _ n: Int) -> Bool { s.utf8.count == n && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) } }
        return hex(folder, 2) && hex(file, 64) && file.hasPrefix(folder)
    }

    /// The path of a blob's file (in messages).
    func path(_ name: String) -> String { tree.path(name) }

    /// The bytes of the blob file `name`, marked as just used; nil when
    /// there is none, or it cannot be read, or it is not `length` bytes
    /// long (when given: such a file, cut, grown or swapped, is removed
    /// unread) -- the blob is then fetched again.
    func get(_ name: String, length: Int? = nil) -> [UInt8]? {
        guard let fd = try? tree.openForReading(name) else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        guard info.st_size <= 1 << 30, length == nil || info.st_size == length! else {
            drop(name)  // cut, grown or swapped: never read whole
            return nil
        }
        var out = [UInt8](repeating: 0, count: Int(info.st_size))
        var offset = 0
        while offset < out.count {
            let n = out.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            offset += n
        }
        // Its time says when it was last used: the oldest go first when the folder is full.
        _ = futimens(fd, nil)
        return out
    }

    /// Keeps `bytes` (a blob checked page by page) as the file `name`, then
    /// keeps the folder within its bound. Best effort: a write that fails
    /// (a full disk) ends the run's writes, never the run.
    func put(_ name: String, _ bytes: [UInt8]) {
        guard bytes.count <= limit / 8 else { return }
        lock.lock()
        let go = writable
        lock.unlock()
        guard go else { return }
        do {
            try tree.write(name, bytes, permissions: 0o600, owner: nil, durable: false)
        } catch {
            lock.lock(); writable = false; lock.unlock()
            return
        }
        lock.lock()
        if used == nil { used = files().reduce(0) { $0 + $1.size } } else { used! += Int64(bytes.count) }
        let over = used! > limit
        lock.unlock()
        if over { trim() }
    }

    /// Removes the file `name` (a blob that failed its check).
    func drop(_ name: String) { try? tree.remove(name, owner: nil) }

    /// The blob files in the folder (and, on the way, the temporary files
    /// of killed runs removed).
    private func files() -> [(name: String, size: Int64, modified: Double)] {
        var out: [(name: String, size: Int64, modified: Double)] = []
        for folder in (try? tree.entries("")) ?? [] where folder.isFolder {
            guard let entries = try? tree.entries(folder.name) else { continue }
            tree.removeStaleTemporaryFiles(in: folder.name, owner: nil)
            for file in entries where file.isFile && Self.isBlobName(folder.name, file.name) {
                out.append((name: folder.name + "/" + file.name, size: file.size, modified: file.modified))
            }
        }
        return out
    }

    /// Removes the least recently used blob files until the folder holds
    /// three quarters of its bound. Runs sharing the folder may trim at
    /// once: a file another removed is simply gone.
    private func trim() {
        let all = files().sorted { $0.modified < $1.modified }
        var total = all.reduce(0) { $0 + $1.size }
        let goal = limit / 4 * 3
        for file in all where total > goal {
            drop(file.name)
            total -= file.size
        }
        lock.lock(); used = total; lock.unlock()
    }
}
