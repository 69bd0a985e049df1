// SHA-256 through swift-crypto, for backup manifests and content hashes.
import Crypto

/// An incremental SHA-256.
public struct SHA256Hasher {
    var hasher = SHA256()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) { hasher.update(bufferPointer: bytes) }
    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { hasher.update(bufferPointer: $0) } }

    /// The digest as lowercase hex.
    public func finalizeHex() -> String {
        hasher.finalize().map { byte in
            let s = String(byte, radix: 16)
            return byte < 16 ? "0" + s : s
        }.joined()
    }
}

extension SHA256Hasher {
    /// The 32-byte digest.
    public func finalizeBytes() -> [UInt8] { Array(hasher.finalize()) }
}
