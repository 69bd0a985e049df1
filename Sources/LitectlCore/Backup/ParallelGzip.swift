// gzip compression on every core: the file is cut into 4 MiB blocks, each
// compressed on its own into a complete gzip member, and the members are
// written in order. A series of members is a valid gzip file (RFC 1952, 2.2:
// "A gzip file consists of a series of members"); gunzip, zcat and zlib's
// inflate read it as one stream. Memory: two blocks per thread, whatever the
// file size. See https://www.rfc-editor.org/rfc/rfc1952#page-5
import CZlib
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum ParallelGzip {
    static let blockSize = 4 << 20

    /// Threads to compress on: the cores online, at most 8.
    static var defaultThreads: Int { max(1, min(8, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))) }

    /// Compresses the file at `path` into `output` as gzip members of `level`
    /// (1-9) on `threads` threads. Returns the digest of the input (when
    /// `hashInput`) and of the gzip bytes written.
    static func compress(_ path: String, into output: TemporaryFile, level: Int, threads: Int = defaultThreads,
                         hashInput: Bool) throws -> (input: StreamDigest?, output: StreamDigest) {
        let fd = try FileStreams.openForReading(path)
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw DatabaseError(code: .ioerr, message: "cannot read: \(String(cString: strerror(errno)))", path: path)
        }
        let blocks = max(1, (Int(info.st_size) + blockSize - 1) / blockSize)
        let job = Job(input: fd, path: path, output: output, level: level, blocks: blocks, hashInput: hashInput)
        var workers: [pthread_t] = []
        for _ in 1..<max(1, min(threads, blocks)) {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(job).toOpaque()
            if pthread_create(&thread, nil, { raw in
                Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().work()
                return nil
            }, context) == 0 {
                workers.append(thread)
            } else {
                Unmanaged<Job>.fromOpaque(context).release()
            }
        }
        job.work()
        for thread in workers { pthread_join(thread, nil) }
        if let error = job.error { throw error }
        return (hashInput ? StreamDigest(bytes: job.inBytes, sha256: job.inHasher.finalizeHex()) : nil,
                StreamDigest(bytes: job.outBytes, sha256: job.outHasher.finalizeHex()))
    }

    /// The shared state of one compression: which block is next to compress
    /// and next to write, under `mutex`; the output side is touched only by
    /// the thread whose block is next to write.
    final class Job: @unchecked Sendable {
        let input: Int32
        let path: String
        let output: TemporaryFile
        let level: Int
        let blocks: Int
        let hashInput: Bool
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private let turn = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        private var nextBlock = 0
        private var nextToWrite = 0
        private(set) var error: (any Error)?
        var inHasher = SHA256Hasher(), outHasher = SHA256Hasher()
        var inBytes: Int64 = 0, outBytes: Int64 = 0

        init(input: Int32, path: String, output: TemporaryFile, level: Int, blocks: Int, hashInput: Bool) {
            self.input = input; self.path = path; self.output = output
            self.level = level; self.blocks = blocks; self.hashInput = hashInput
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(turn, nil)
        }

        deinit {
            pthread_mutex_destroy(mutex); mutex.deallocate()
            pthread_cond_destroy(turn); turn.deallocate()
        }

        private func locked<T>(_ body: () -> T) -> T {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return body()
        }

        private func fail(_ failure: any Error) {
            locked {
                if error == nil { error = failure }
                pthread_cond_broadcast(turn)
            }
        }

        /// One thread's loop: claim the next block, read and compress it, wait
        /// for its turn, write it.
        func work() {
            var stream = z_stream()
            // memLevel 9: zlib's largest hash table, measurably faster at level 1 on database pages.
            guard deflateInit2_(&stream, Int32(level), Z_DEFLATED, 31, 9, Z_DEFAULT_STRATEGY,
                                zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
                fail(DatabaseError(code: .nomem, message: "zlib: cannot start compression", path: output.path))
                return
            }
            defer { deflateEnd(&stream) }
            let outCapacity = Int(deflateBound(&stream, UInt(ParallelGzip.blockSize)))
            let inBuffer = UnsafeMutableRawPointer.allocate(byteCount: ParallelGzip.blockSize, alignment: 16)
            let outBuffer = UnsafeMutableRawPointer.allocate(byteCount: outCapacity, alignment: 16)
            defer { inBuffer.deallocate(); outBuffer.deallocate() }

            while true {
                let index = locked { () -> Int? in
                    guard error == nil, nextBlock < blocks else { return nil }
                    defer { nextBlock += 1 }
                    return nextBlock
                }
                guard let index else { return }
                do {
                    let count = try read(into: inBuffer, at: Int64(index) * Int64(ParallelGzip.blockSize))
                    deflateReset(&stream)
                    stream.next_in = inBuffer.assumingMemoryBound(to: Bytef.self)
                    stream.avail_in = UInt32(count)
                    stream.next_out = outBuffer.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = UInt32(outCapacity)
                    let rc = deflate(&stream, Z_FINISH)
                    guard rc == Z_STREAM_END else {
                        throw DatabaseError(code: .error, message: "zlib: compression failed (\(rc))", path: output.path)
                    }
                    let produced = UnsafeRawBufferPointer(start: outBuffer, count: outCapacity - Int(stream.avail_out))
                    let myTurn = locked { () -> Bool in
                        while nextToWrite != index && error == nil { pthread_cond_wait(turn, mutex) }
                        return error == nil
                    }
                    guard myTurn else { return }
                    try output.write(produced)
                    outHasher.update(produced)
                    outBytes += Int64(produced.count)
                    if hashInput { inHasher.update(UnsafeRawBufferPointer(start: inBuffer, count: count)) }
                    inBytes += Int64(count)
                    locked {
                        nextToWrite += 1
                        pthread_cond_broadcast(turn)
                    }
                } catch {
                    fail(error)
                    return
                }
            }
        }

        /// Reads the block at `offset` (shorter at the end of the file).
        private func read(into buffer: UnsafeMutableRawPointer, at offset: Int64) throws -> Int {
            var done = 0
            while done < ParallelGzip.blockSize {
                let n = pread(input, buffer + done, ParallelGzip.blockSize - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw DatabaseError(code: .ioerr, message: "read failed: \(String(cString: strerror(errno)))", path: path)
                }
                if n == 0 { break }
                done += n
            }
            return done
        }
    }
}
