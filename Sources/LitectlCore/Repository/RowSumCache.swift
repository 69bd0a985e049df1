// A file of row sums per page, which lets the next logical hash of the same
// database skip the pages that did not change: for each page that holds rows
// of a hashed table, its number, its table, its content's SHA-256, and the
// count and sum of its rows' digests (PageRowSums). Entries are in page
// order, so the file is read and written as a stream in step with a scan of
// the database, whatever its size. docs/repository.md ("The row-sum cache")
// specifies the format:
//   "LCRS" u32 version=1 | fingerprint (32) | entries { u32 page | u16 table |
//   page sha256 (32) | u32 rows | sum (32, little-endian) } | u32 count | SHA-256 of all before (32)
// It is only ever a shortcut: a missing, damaged or foreign file (another
// schema, page size or format) is ignored, and the hash is computed in full.
import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum RowSumCache {
    static let magic: [UInt8] = Array("LCRS".utf8)
    static let version: UInt32 = 1
    static let entrySize = 4 + 2 + 32 + 4 + 32
    static let headerSize = 4 + 4 + 32
    static let trailerSize = 4 + 32

    /// Where the sums of the last backup of `path` (on `host`) into the
    /// repository `repository` are kept: `$LITECTL_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/litectl`, else `~/.cache/litectl`, then
    /// `row-sums/<repository id>/<SHA-256 of host and path>`. nil when
    /// LITECTL_CACHE_DIR is set empty (no cache) or there is no home.
    static func location(repository: String, host: String, path: String) -> String? {
        let env = ProcessInfo.processInfo.environment
        let base: String
        if let dir = env["LITECTL_CACHE_DIR"] {
            guard !dir.isEmpty else { return nil }
            base = dir
        } else if let xdg = env["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
            base = xdg + "/litectl"
        } else if let home = env["HOME"], home.hasPrefix("/") {
            base = home + "/.cache/litectl"
        } else {
            return nil
        }
        let key = Hex.encode(Array(SHA256.hash(data: Array((host + "\u{0}" + path).utf8))))
        return base + "/row-sums/" + repository + "/" + key
    }

    struct Entry: Equatable {
        var page: UInt32
        var table: UInt16
        var id: PageID
        var rows: UInt32
        var sum: [UInt8]
    }

    /// Reads a cache file made for `fingerprint`, entry by entry in page order.
    final class Reader {
        private let fd: Int32
        private var buffer = [UInt8](repeating: 0, count: 74 * 1024)
        private var filled = 0, offset = 0
        private var left: Int
        private(set) var next: Entry?

        /// nil when the file is missing, damaged, or made for another fingerprint.
        init?(path: String, fingerprint: [UInt8]) {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            var info = stat()
            let size = fstat(fd, &info) == 0 ? Int(info.st_size) : -1
            guard size >= headerSize + trailerSize, (size - headerSize - trailerSize) % entrySize == 0,
                  Self.checksumMatches(fd, size: size) else { close(fd); return nil }
            var head = [UInt8](repeating: 0, count: headerSize)
            guard pread(fd, &head, headerSize, 0) == headerSize, Array(head[0..<4]) == magic,
                  head[4..<8].withUnsafeBytes({ $0.loadUnaligned(as: UInt32.self).littleEndian }) == version,
                  Array(head[8..<40]) == fingerprint else { close(fd); return nil }
            left = (size - headerSize - trailerSize) / entrySize
            offset = 0; filled = 0
            _ = lseek(fd, off_t(headerSize), SEEK_SET)
            advance()
        }

        deinit { close(fd) }

        /// The SHA-256 trailer against the bytes before it, read once in 64 KiB blocks.
        private static func checksumMatches(_ fd: Int32, size: Int) -> Bool {
            var hasher = SHA256()
            var block = [UInt8](repeating: 0, count: 1 << 16)
            var at = 0
            let body = size - 32
            while at < body {
                let n = block.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, min($0.count, body - at), off_t(at)) }
                guard n > 0 else { return false }
                block.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                at += n
            }
            var stored = [UInt8](repeating: 0, count: 32)
            guard pread(fd, &stored, 32, off_t(body)) == 32 else { return false }
            return Array(hasher.finalize()) == stored
        }

        /// Moves to the next entry (nil at the end).
        func advance() {
            guard left > 0 else { next = nil; return }
            if filled - offset < entrySize {
                let rest = Array(buffer[offset..<filled])
                buffer.replaceSubrange(0..<rest.count, with: rest)
                filled = rest.count; offset = 0
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
                if n > 0 { filled += n }
                guard filled - offset >= entrySize else { next = nil; left = 0; return }
            }
            next = buffer.withUnsafeBytes { raw in
                let at = offset
                return Entry(page: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self).littleEndian,
                             table: raw.loadUnaligned(fromByteOffset: at + 4, as: UInt16.self).littleEndian,
                             id: PageID(bytes: UnsafeRawBufferPointer(rebasing: raw[at + 6..<at + 38])),
                             rows: raw.loadUnaligned(fromByteOffset: at + 38, as: UInt32.self).littleEndian,
                             sum: Array(raw[at + 42..<at + 74]))
            }
            offset += entrySize
            left -= 1
        }

        /// The entry for `page`, if the file has one (pages must be asked in increasing order).
        func entry(for page: UInt32) -> Entry? {
            while let e = next, e.page < page { advance() }
            if let e = next, e.page == page { return e }
            return nil
        }
    }

    /// Writes a new cache file as a temporary file beside `path`, renamed over
    /// it by `commit()`; dropped (never half-written under the name) otherwise.
    /// A killed run's temporary file is removed by the next one.
    final class Writer {
        let path: String
        private let file: TemporaryFile
        private let fd: Int32
        private var buffer: [UInt8] = []
        private var hasher = SHA256()
        private var count: UInt32 = 0
        private var failed = false

        init?(path: String, fingerprint: [UInt8]) {
            self.path = path
            let folder = (path as NSString).deletingLastPathComponent
            let name = (path as NSString).lastPathComponent
            guard (try? DurableFolder.makeFolders(folder)) != nil else { return nil }
            TemporaryFiles.removeStale(in: folder, stem: name)
            guard let file = try? TemporaryFile(in: folder, stem: name, permissions: 0o600) else { return nil }
            self.file = file
            fd = file.descriptor
            buffer.reserveCapacity(1 << 16)
            append(magic)
            var v = version.littleEndian
            withUnsafeBytes(of: &v) { append(Array($0)) }
            append(fingerprint)
        }

        deinit { file.discard() }

        private func append(_ bytes: [UInt8]) {
            buffer.append(contentsOf: bytes)
            if buffer.count >= 1 << 16 { flush() }
        }

        private func flush() {
            guard !buffer.isEmpty else { return }
            hasher.update(data: buffer)
            var at = 0
            while at < buffer.count && !failed {
                let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + at, $0.count - at) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { failed = true } else { at += n }
            }
            buffer.removeAll(keepingCapacity: true)
        }

        func add(_ e: Entry) {
            var bytes = [UInt8]()
            bytes.reserveCapacity(entrySize)
            withUnsafeBytes(of: e.page.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: e.table.littleEndian) { bytes.append(contentsOf: $0) }
            // The id's bytes as PageID(bytes:) reads them: four big-endian words.
            for word in [e.id.a, e.id.b, e.id.c, e.id.d] { withUnsafeBytes(of: word.bigEndian) { bytes.append(contentsOf: $0) } }
            withUnsafeBytes(of: e.rows.littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: e.sum)
            append(bytes)
            count += 1
        }

        /// Finishes the file and renames it into place (fsynced as every
        /// file litectl lands; a file cut short anyway fails its checksum and
        /// is ignored).
        func commit() {
            var n = count.littleEndian
            withUnsafeBytes(of: &n) { append(Array($0)) }
            flush()
            let digest = Array(hasher.finalize())
            var at = 0
            while at < digest.count && !failed {
                let w = digest.withUnsafeBytes { write(fd, $0.baseAddress! + at, $0.count - at) }
                if w <= 0 { failed = true } else { at += w }
            }
            if !failed { try? file.commit(as: path, replace: true) }
        }
    }
}
