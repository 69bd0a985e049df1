// The repository's keys: page ids (SHA-256 of the page, or HMAC-SHA256 under
// the repository's MAC key when it is encrypted, so stored names do not reveal
// content), and AES-256-GCM sealing of every object but `config`.
// The master key is random and stored in `config` wrapped by a key-encryption
// key derived from a key file (HKDF-SHA256) or a passphrase (scrypt).
import Crypto
import _CryptoExtras
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A page's identity in the repository: 32 bytes, compared in byte order.
public struct PageID: Hashable, Comparable, Sendable {
    public var a: UInt64, b: UInt64, c: UInt64, d: UInt64

    public init(a: UInt64, b: UInt64, c: UInt64, d: UInt64) { self.a = a; self.b = b; self.c = c; self.d = d }

    /// From 32 bytes (big-endian words, so that order is byte order).
    public init(bytes: UnsafeRawBufferPointer) {
        func word(_ i: Int) -> UInt64 { UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) }
        self.init(a: word(0), b: word(1), c: word(2), d: word(3))
    }

    public init<D: Sequence>(digest: D) where D.Element == UInt8 {
        let bytes = Array(digest)
        self = bytes.withUnsafeBytes { PageID(bytes: $0) }
    }

    public init?(hex: String) {
        guard let bytes = Hex.decode(hex), bytes.count == 32 else { return nil }
        self.init(digest: bytes)
    }

    public static func < (l: PageID, r: PageID) -> Bool {
        if l.a != r.a { return l.a < r.a }
        if l.b != r.b { return l.b < r.b }
        if l.c != r.c { return l.c < r.c }
        return l.d < r.d
    }

    public var bytes: [UInt8] {
        var out = [UInt8](); out.reserveCapacity(32)
        for w in [a, b, c, d] { for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: w >> UInt64(s))) } }
        return out
    }

    public var hex: String { Hex.encode(bytes) }
}

/// Where the key of an encrypted repository comes from.
public enum RepoSecret: Sendable {
    /// A file's bytes (at least 16; `repo init` makes 32 random bytes when the file does not exist).
    case keyFile(String)
    /// A passphrase, stretched with scrypt.
    case passphrase([UInt8])

    /// The passphrase a passphrase file holds: the bytes of its first line,
    /// up to the first newline (LF) and without it, as they are (no trimming,
    /// no encoding: a CR before the LF is part of the passphrase). Read until
    /// its end, so that the file may be a pipe (`<(pass show repo)`).
    public static func passphrase(file path: String) throws -> RepoSecret {
        try RepoKeyFile.requireSecretFile(path, what: "passphrase file")
        guard let bytes = try? FileStreams.readAll(path) else {
            throw StoreError(.io, location: path, message: "cannot read the passphrase file")
        }
        let line = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).first ?? []
        guard !line.isEmpty else { throw StoreError(.other, location: path, message: "the passphrase file is empty") }
        return .passphrase(Array(line))
    }

    /// The passphrase in `LITECTL_PASSPHRASE` (its UTF-8 bytes), if set and not empty.
    public static func passphraseFromEnvironment(_ environment: [String: String]) -> RepoSecret? {
        guard let words = environment["LITECTL_PASSPHRASE"], !words.isEmpty else { return nil }
        return .passphrase(Array(words.utf8))
    }
}

/// The keys of an open repository; `nil` keys for a plaintext one.
struct RepoKeys: @unchecked Sendable {
    let encryption: SymmetricKey?
    let mac: SymmetricKey?
    let location: String

    static func plain(location: String) -> RepoKeys { RepoKeys(encryption: nil, mac: nil, location: location) }

    init(encryption: SymmetricKey?, mac: SymmetricKey?, location: String) {
        self.encryption = encryption; self.mac = mac; self.location = location
    }

    /// The two working keys from the master key.
    init(master: SymmetricKey, location: String) {
        encryption = HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Array("litectl repository encryption".utf8), outputByteCount: 32)
        mac = HKDF<SHA256>.deriveKey(inputKeyMaterial: master, info: Array("litectl repository page id".utf8), outputByteCount: 32)
        self.location = location
    }

    var encrypted: Bool { encryption != nil }

    func pageID(_ page: UnsafeRawBufferPointer) -> PageID {
        // Read in place: no array per page (this runs once for every page backed up).
        if let mac {
            return HMAC<SHA256>.authenticationCode(for: page, using: mac).withUnsafeBytes { PageID(bytes: $0) }
        }
        return SHA256.hash(data: page).withUnsafeBytes { PageID(bytes: $0) }
    }

    /// nonce ‖ ciphertext ‖ tag, or the bytes as they are.
    func seal(_ bytes: [UInt8]) throws -> [UInt8] {
        guard let encryption else { return bytes }
        guard let combined = try AES.GCM.seal(bytes, using: encryption).combined else {
            throw StoreError(.other, location: location, message: "cannot encrypt")
        }
        return Array(combined)
    }

    func open(_ bytes: [UInt8], what: String) throws -> [UInt8] {
        guard let encryption else { return bytes }
        do {
            return Array(try AES.GCM.open(AES.GCM.SealedBox(combined: bytes), using: encryption))
        } catch {
            throw StoreError(.other, location: what, message: "cannot decrypt: the object is damaged (authentication failed)")
        }
    }
}

/// How `config` records the wrapped master key.
struct KeyWrapping: Sendable, Equatable {
    /// "keyfile" (HKDF-SHA256) or "scrypt".
    var kdf: String
    var salt: [UInt8]
    var n = 0, r = 0, p = 0
    var wrappedKey: [UInt8]

    static let scryptN = 1 << 15, scryptR = 8, scryptP = 1

    /// A new random master key, wrapped under `secret`.
    static func create(secret: RepoSecret) throws -> (KeyWrapping, SymmetricKey) {
        let master = SymmetricKey(size: .bits256)
        var salt = [UInt8](repeating: 0, count: 32)
        for i in salt.indices { salt[i] = UInt8.random(in: 0...255) }
        var wrapping = KeyWrapping(kdf: "keyfile", salt: salt, wrappedKey: [])
        if case .passphrase = secret { wrapping.kdf = "scrypt"; wrapping.n = scryptN; wrapping.r = scryptR; wrapping.p = scryptP }
        let kek = try wrapping.keyEncryptionKey(secret)
        let rawMaster = master.withUnsafeBytes { Array($0) }
        wrapping.wrappedKey = Array(try AES.GCM.seal(rawMaster, using: kek).combined!)
        return (wrapping, master)
    }

    func keyEncryptionKey(_ secret: RepoSecret) throws -> SymmetricKey {
        switch (kdf, secret) {
        case ("keyfile", .keyFile(let path)):
            let bytes = try RepoKeyFile.read(path)
            return HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: bytes), salt: salt,
                                          info: Array("litectl key file".utf8), outputByteCount: 32)
        case ("scrypt", .passphrase(let words)):
            return try KDF.Scrypt.deriveKey(from: words, salt: salt, outputByteCount: 32, rounds: n, blockSize: r, parallelism: p)
        case ("keyfile", _):
            throw StoreError(.denied, location: "", message: "the repository is encrypted with a key file: give --key-file")
        case ("scrypt", _):
            throw StoreError(.denied, location: "", message: "the repository is encrypted with a passphrase: give --passphrase-file or LITECTL_PASSPHRASE")
        default:
            throw StoreError(.other, location: "", message: "unknown key derivation \(kdf)")
        }
    }

    /// The master key, or a clear error when `secret` is not the repository's.
    func unwrap(_ secret: RepoSecret, location: String) throws -> SymmetricKey {
        let kek: SymmetricKey
        do { kek = try keyEncryptionKey(secret) } catch var error as StoreError {
            if error.location.isEmpty { error.location = location }
            throw error
        }
        guard let box = try? AES.GCM.SealedBox(combined: wrappedKey),
              let raw = try? AES.GCM.open(box, using: kek) else {
            throw StoreError(.denied, location: location, message: "wrong key: the repository's key cannot be unlocked with the given \(kdf == "scrypt" ? "passphrase" : "key file")")
        }
        return SymmetricKey(data: raw)
    }
}

public enum RepoKeyFile {
    /// Reads a key file (at least 16 bytes).
    static func read(_ path: String) throws -> [UInt8] {
        try requireSecretFile(path, what: "key file")
        guard let bytes = FileBytes.read(path) else {
            throw StoreError(.io, location: path, message: "cannot read the key file: \(String(cString: strerror(errno)))")
        }
        guard bytes.count >= 16 else { throw StoreError(.other, location: path, message: "a key file must hold at least 16 bytes") }
        return bytes
    }

    /// Creates `path` with 32 random bytes, mode 0600, unless it exists. Returns true when made.
    @discardableResult
    public static func createIfMissing(_ path: String) throws -> Bool {
        if DurableFolder.exists(path) { return false }
        var key = [UInt8](repeating: 0, count: 32)
        for i in key.indices { key[i] = UInt8.random(in: 0...255) }
        try AtomicFile.write(key, to: path, permissions: 0o600, what: "the key file", replacing: .never)
        return true
    }

    /// The rules for a key or passphrase file (docs/safety.md): it is never
    /// a SQLite database, a -wal or a rollback journal (whose bytes change
    /// with every write: every snapshot would be lost at the first one), nor
    /// a file the run reads as something else (a source, its config file);
    /// once read it is protected, so no output of the run writes over it.
    /// Whether it lies inside a folder repository is checked where the
    /// repository is opened (`Repository.requireKeyOutside`).
    static func requireSecretFile(_ path: String, what: String) throws {
        if let role = WriteGate.shared.protectedRole(of: path), !role.hasPrefix("the repository's") {
            throw StoreError(.denied, location: path, message: "is \(role); a \(what) must be a file of its own")
        }
        // Only a regular file is sniffed: a pipe (`<(pass show repo)`) is read once, as the secret.
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
           let head = try? FileCheck.readPrefix(of: path, count: 16), let kind = sqliteFileKind(head) {
            throw StoreError(.denied, location: path, message: "is \(kind), not a \(what): its bytes change with every write, and the repository's key with them")
        }
        if let repository = enclosingRepository(of: path) {
            throw StoreError(.denied, location: path,
                             message: "lies inside the repository \(repository); keep the \(what) outside it (a key kept with the data it locks protects nothing)")
        }
        WriteGate.shared.protect(file: path, what: "the repository's \(what)")
    }

    /// The folder of a litectl repository (one holding a `config` object of
    /// the repository format) that `path` lies in, at any depth, or nil.
    static func enclosingRepository(of path: String) -> String? {
        guard var folder = SameFileRule.resolvedExistingPath(path) ?? SameFileRule.resolvedMissingPath(path) else { return nil }
        let marker = Array("\"format\": \"\(Repository.format)\"".utf8)
        while folder != "/" && !folder.isEmpty {
            folder = DurableFolder.parent(of: folder)
            let config = (folder == "/" ? "" : folder) + "/config"
            var info = stat()
            guard stat(config, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
                  let head = try? FileCheck.readPrefix(of: config, count: 512) else { continue }
            if head.indices.contains(where: { head[$0...].starts(with: marker) }) { return folder }
        }
        return nil
    }

    /// "a SQLite database", "a SQLite -wal file" or "a SQLite rollback
    /// journal" when `head` starts as one does, else nil.
    static func sqliteFileKind(_ head: [UInt8]) -> String? {
        if head.starts(with: Array("SQLite format 3".utf8) + [0]) { return "a SQLite database" }
        if head.starts(with: [0x37, 0x7f, 0x06, 0x82]) || head.starts(with: [0x37, 0x7f, 0x06, 0x83]) { return "a SQLite -wal file" }
        if head.starts(with: [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]) { return "a SQLite rollback journal" }
        return nil
    }
}

/// Whole small files.
enum FileBytes {
    static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { return out }
            out.append(contentsOf: buffer[0..<n])
        }
    }
}
