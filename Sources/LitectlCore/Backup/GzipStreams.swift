// gzip streams of backups over FileStreams' chunked reads: `backup --gzip`
// compresses the checked copy in independent members on every core
// (ParallelGzip), `verify` and `restore` decompress one member or several,
// each hashing what it reads and writes.
import CZlib
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension FileStreams {
    /// Compresses the file at `path` into `output` as gzip (`level` 1-9), in
    /// independent members compressed on every core (`ParallelGzip`).
    /// Returns the digests of the input and of the gzip bytes written.
    public static func gzip(_ path: String, into output: TemporaryFile, level: Int) throws -> (input: StreamDigest, output: StreamDigest) {
        let (input, gz) = try ParallelGzip.compress(path, into: output, level: level, hashInput: true)
        return (input!, gz)
    }

    /// Decompresses the gzip file at `path` (one member or several) into
    /// `output`. Returns the digests of the gzip input and of the bytes
    /// written. A truncated or damaged stream, or bytes after the last member
    /// that are not a member, fail with `.corrupt`.
    public static func gunzip(_ path: String, into output: TemporaryFile) throws -> (input: StreamDigest, output: StreamDigest) {
        let fd = try openForReading(path)
        defer { close(fd) }
        var stream = z_stream()
        guard inflateInit2_(&stream, 31, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw DatabaseError(code: .nomem, message: "zlib: cannot start decompression", path: path)
        }
        defer { inflateEnd(&stream) }
        var inHasher = SHA256Hasher(), outHasher = SHA256Hasher()
        var inBytes: Int64 = 0, outBytes: Int64 = 0
        // A gzip file is a series of members (RFC 1952, 2.2; litectl writes
        // one per 4 MiB block): after each member's end, the next begins.
        var atMemberEnd = false
        let outBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { outBuffer.deallocate() }
        try readChunks(fd, path: path) { chunk in
            inHasher.update(chunk)
            inBytes += Int64(chunk.count)
            stream.next_in = UnsafeMutablePointer(mutating: chunk.baseAddress!.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = UInt32(chunk.count)
            while stream.avail_in > 0 {
                if atMemberEnd {
                    inflateReset(&stream)
                    atMemberEnd = false
                }
                stream.next_out = outBuffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = UInt32(chunkSize)
                let rc = inflate(&stream, Z_NO_FLUSH)
                guard rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR else {
                    throw DatabaseError(code: .corrupt, message: "not a valid gzip file (zlib error \(rc))", path: path)
                }
                let produced = UnsafeRawBufferPointer(rebasing: outBuffer[0..<(chunkSize - Int(stream.avail_out))])
                if produced.count > 0 {
                    try output.write(produced)
                    outHasher.update(produced)
                    outBytes += Int64(produced.count)
                }
                if rc == Z_STREAM_END { atMemberEnd = true }
                if rc == Z_BUF_ERROR && produced.isEmpty { break }
            }
        }
        guard atMemberEnd else {
            throw DatabaseError(code: .corrupt, message: "truncated gzip file", path: path)
        }
        return (StreamDigest(bytes: inBytes, sha256: inHasher.finalizeHex()),
                StreamDigest(bytes: outBytes, sha256: outHasher.finalizeHex()))
    }
}
