// The write side of a backup destination: pages gathered into 2 MiB chunks,
// each written with one pwrite; the disk writeback of what was written is
// started at once (Linux sync_file_range) by a thread of its own, so the
// fsync before the rename has little left to do and a busy disk never stalls
// the copy; and, when asked, each chunk is hashed on a second thread while
// SQLite goes on copying, so the manifest's SHA-256 needs no second pass.
// A scratch copy whose pages the caller reads elsewhere may keep only its
// first bytes (`keepOnly`): the rest is hashed, then dropped. The part of the
// hashing that needs no order (a repository backup's page ids, the
// observer's `prepare`) is cut into slices that SQLite's thread takes too
// when it would otherwise wait for a free buffer.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Gathers contiguous writes into chunks and writes each chunk with one
/// `pwrite`, chunks in the order made, so that once `flush` returns the file
/// is what SQLite wrote. When asked to hash, a second thread hashes the
/// chunks in order, and the writes are shared between the two threads: the
/// hasher writes when it has nothing to hash, SQLite's thread when it has no
/// free buffer to fill, so each core does about half of the work whichever
/// is slower here. The first write error sticks: every later call returns it.
final class CoalescedWriter: @unchecked Sendable {
    static let bufferSize = 2 << 20
    static let bufferCount = 4

    let descriptor: Int32
    private let storage: UnsafeMutableRawPointer
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var thread: pthread_t?
    private var writebackThread: pthread_t?
    private var closed = false

    struct Chunk {
        var buffer: Int
        var offset: Int64
        var length: Int
        var hashed = false
        var written = false
        /// Slices of the observer's `prepare`: how many, how many taken, how many done.
        var slices = 0
        var taken = 0
        var done = 0
        /// Its slices were cut short (the observer stopped following): `wrote` gets no prepared output.
        var cut = false
    }

    // Under `mutex`. Chunks are hashed in order and written in order (a
    // rewritten page must land after its first version); a chunk leaves the
    // queue, freeing its buffer, once both are done.
    private var queue: [Chunk] = []
    private var free: [Int]
    private var hashing = false
    private var writing = false
    private var stopping = false
    /// Written since the writeback thread last started writeback: [low, high).
    private var unflushed: (low: Int64, high: Int64)?
    private let writebackWake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var digest: WrittenFileDigest?
    private var failureCode = SQLITE_OK
    /// The observer whose `prepare` runs in slices, its page size, the bytes
    /// of pages a slice covers, and its output for each buffer (`preparedBytes` each).
    private var preparer: (any WrittenPageObserver)?
    private var preparePageSize = 0
    private var sliceBytes = 0
    private var prepared: UnsafeMutableRawPointer?
    private var preparedBytes = 0

    // The calling thread's.
    private var current = 0
    private var start: Int64 = 0
    private var length = 0

    /// Takes ownership of `descriptor` (closed by `finish`).
    init(descriptor: Int32) {
        self.descriptor = descriptor
        storage = UnsafeMutableRawPointer.allocate(byteCount: Self.bufferSize * Self.bufferCount, alignment: 4096)
        free = Array(1..<Self.bufferCount)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
        pthread_cond_init(writebackWake, nil)
    }

    deinit {
        if !closed { close(descriptor) }
        storage.deallocate()
        prepared?.deallocate()
        pthread_mutex_destroy(mutex); mutex.deallocate()
        pthread_cond_destroy(changed); changed.deallocate()
        pthread_cond_destroy(writebackWake); writebackWake.deallocate()
    }

    private func buffer(_ index: Int) -> UnsafeMutableRawPointer { storage + index * Self.bufferSize }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// SQLITE_OK, or the first write error.
    var failure: Int32 { locked { failureCode } }

    /// Bytes from this offset on are not written (`keepOnly`): Int64.max while everything is.
    private(set) var keptBelow = Int64.max
    /// The size the file would have had every write landed (SQLite's thread only).
    private(set) var logicalSize: Int64 = 0

    /// Writes only the first `bytes` of the file from now on; the rest of
    /// every write is dropped (after hashing, when asked). For a copy whose
    /// pages the caller reads from elsewhere: a read of a dropped range
    /// fails (see `CoalescingVFS`). Call before the first write.
    func keepOnly(first bytes: Int64) { keptBelow = bytes }

    /// Whether `count` bytes at `offset` were dropped (in part or whole) and so cannot be read back.
    func dropped(_ count: Int, at offset: Int64) -> Bool {
        offset + Int64(count) > keptBelow && offset < logicalSize
    }

    /// Computes the file's SHA-256 from its writes (on a second thread when
    /// one can be started); call before the first write.
    func hashWrites(_ expected: WrittenFileDigest) {
        locked {
            digest = expected
            if let observer = expected.observer, observer.preparedStride > 0, expected.pageSize > 0, prepared == nil {
                preparer = observer
                preparePageSize = expected.pageSize
                // 256 KiB of whole pages, at least one page.
                sliceBytes = max(expected.pageSize, (256 << 10) / expected.pageSize * expected.pageSize)
                preparedBytes = Self.bufferSize / expected.pageSize * observer.preparedStride
                prepared = .allocate(byteCount: preparedBytes * Self.bufferCount, alignment: 16)
            }
        }
        if thread == nil, !startHasher() { locked { digest = nil } }
    }

    /// `count` bytes written at `offset`: gathered, or the current chunk is
    /// handed on first when they do not continue it. SQLITE_OK or the sticky error.
    func append(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) -> Int32 {
        logicalSize = max(logicalSize, offset + Int64(count))
        if length > 0 && (offset != start + Int64(length) || length + count > Self.bufferSize) {
            let rc = handOn(); if rc != SQLITE_OK { return rc }
        }
        if count > Self.bufferSize {
            // Larger than a chunk (SQLite writes pages, so not expected): written as it is.
            let rc = flush(); if rc != SQLITE_OK { return rc }
            waitUntilHashed()
            let written = put(bytes, count: count, at: offset)
            return locked {
                digest?.wrote(UnsafeRawBufferPointer(start: bytes, count: count), at: offset)
                if failureCode == SQLITE_OK { failureCode = written }
                return failureCode
            }
        }
        if length == 0 { start = offset }
        (buffer(current) + length).copyMemory(from: bytes, byteCount: count)
        length += count
        return SQLITE_OK
    }

    /// Writes every chunk made so far (the hashing may still be under way).
    /// SQLITE_OK or the sticky error.
    func flush() -> Int32 {
        let rc = handOn(); if rc != SQLITE_OK { return rc }
        return locked {
            while queue.contains(where: { !$0.written }) {
                if !writing, let next = queue.firstIndex(where: { !$0.written }) { writeLocked(next) } else { pthread_cond_wait(changed, mutex) }
            }
            return failureCode
        }
    }

    /// The file is being truncated to `size` (after `flush`).
    func truncated(to size: Int64) {
        logicalSize = size
        waitUntilHashed()
        locked { digest?.truncated(to: size) }
    }

    /// Flushes, stops the hasher and closes the descriptor; SQLITE_OK or the sticky error.
    func finish() -> Int32 {
        let rc = flush()
        let threads = locked { () -> [pthread_t?] in
            stopping = true
            pthread_cond_broadcast(changed)
            pthread_cond_signal(writebackWake)
            return [thread, writebackThread]
        }
        for case let thread? in threads { pthread_join(thread, nil) }
        thread = nil
        writebackThread = nil
        if !closed { close(descriptor); closed = true }
        return rc
    }

    /// The digest state once `finish` has run.
    var writtenDigest: WrittenFileDigest? { locked { digest } }

    /// Hands the current chunk on: written here at once when nothing is
    /// hashed, else queued; then takes a free buffer, writing queued chunks
    /// or taking slices of their `prepare` while none is free.
    private func handOn() -> Int32 {
        guard length > 0 else { return failure }
        var chunk = Chunk(buffer: current, offset: start, length: length)
        length = 0
        if thread == nil {
            let rc = put(buffer(chunk.buffer), count: chunk.length, at: chunk.offset)
            return locked {
                if rc == SQLITE_OK { wroteLocked(chunk.offset, chunk.length) }
                if failureCode == SQLITE_OK { failureCode = rc }
                return failureCode
            }
        }
        return locked {
            if preparer != nil, chunk.offset % Int64(preparePageSize) == 0, chunk.length % preparePageSize == 0 {
                chunk.slices = (chunk.length + sliceBytes - 1) / sliceBytes
            }
            queue.append(chunk)
            pthread_cond_broadcast(changed)
            // Waiting for a buffer: write, or take a slice of the hashing.
            while free.isEmpty {
                if !writing, let next = queue.firstIndex(where: { !$0.written }) {
                    writeLocked(next)
                } else if let next = queue.firstIndex(where: { $0.taken < $0.slices }) {
                    prepareSliceLocked(next)
                } else {
                    pthread_cond_wait(changed, mutex)
                }
            }
            current = free.removeLast()
            return failureCode
        }
    }

    /// Runs the next slice of queue[index]'s `prepare` (one with slices left
    /// to take), unlocking around the work; called and returns with `mutex` held.
    /// The chunk stays queued meanwhile: it is hashed only once all its slices are done.
    private func prepareSliceLocked(_ index: Int) {
        let chunk = queue[index]
        queue[index].taken += 1
        let from = chunk.taken * sliceBytes
        let count = min(sliceBytes, chunk.length - from)
        let pages = UnsafeRawBufferPointer(start: buffer(chunk.buffer) + from, count: count)
        let output = prepared! + chunk.buffer * preparedBytes + from / preparePageSize * preparer!.preparedStride
        let (preparer, pageSize) = (preparer!, preparePageSize)
        pthread_mutex_unlock(mutex)
        preparer.prepare(pages, pageSize: pageSize, into: output)
        pthread_mutex_lock(mutex)
        if let i = queue.firstIndex(where: { $0.buffer == chunk.buffer }) { queue[i].done += 1 }
        pthread_cond_broadcast(changed)
    }

    /// Writes queue[index] (the oldest unwritten chunk), unlocking around the
    /// system calls; called and returns with `mutex` held.
    private func writeLocked(_ index: Int) {
        writing = true
        let chunk = queue[index]
        let failed = failureCode != SQLITE_OK
        pthread_mutex_unlock(mutex)
        var rc = SQLITE_OK
        if !failed {
            rc = put(buffer(chunk.buffer), count: chunk.length, at: chunk.offset)
        }
        pthread_mutex_lock(mutex)
        if rc == SQLITE_OK && !failed { wroteLocked(chunk.offset, chunk.length) }
        if rc != SQLITE_OK && failureCode == SQLITE_OK { failureCode = rc }
        // The queue only loses chunks at its head once written: the chunk is still here.
        if let i = queue.firstIndex(where: { $0.buffer == chunk.buffer }) { queue[i].written = true }
        writing = false
        releaseDone()
    }

    /// Frees the buffers of the chunks at the head of the queue that are hashed and written.
    private func releaseDone() {
        while let head = queue.first, head.hashed, head.written {
            free.append(head.buffer)
            queue.removeFirst()
        }
        pthread_cond_broadcast(changed)
    }

    private func waitUntilHashed() {
        locked { while queue.contains(where: { !$0.hashed }) || hashing { pthread_cond_wait(changed, mutex) } }
    }

    private func startHasher() -> Bool {
        var handle = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&handle, nil, { raw in
            Unmanaged<CoalescedWriter>.fromOpaque(raw!).takeRetainedValue().hashChunks()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<CoalescedWriter>.fromOpaque(context).release()
            return false
        }
        thread = handle
        return true
    }

    /// The hasher thread: hashes the queued chunks in order, each once its
    /// slices of `prepare` are done (it takes those left, and waits for
    /// those SQLite's thread runs); with nothing to hash, writes the oldest
    /// unwritten chunk.
    private func hashChunks() {
        pthread_mutex_lock(mutex)
        while true {
            if let next = queue.firstIndex(where: { !$0.hashed }) {
                // Its slices of `prepare` first: those left, then those SQLite's thread took.
                if queue[next].taken < queue[next].slices { prepareSliceLocked(next); continue }
                if queue[next].done < queue[next].slices { pthread_cond_wait(changed, mutex); continue }
                let chunk = queue[next]
                var state = digest
                digest = nil
                hashing = true
                pthread_mutex_unlock(mutex)
                let output = chunk.slices > 0 && !chunk.cut ? UnsafeRawPointer(prepared! + chunk.buffer * preparedBytes) : nil
                state?.wrote(UnsafeRawBufferPointer(start: buffer(chunk.buffer), count: chunk.length), at: chunk.offset, prepared: output)
                let following = state?.followsPages ?? false
                pthread_mutex_lock(mutex)
                digest = state
                hashing = false
                if preparer != nil && !following {
                    // The observer stopped following (a page rewritten, say): no more slices.
                    preparer = nil
                    for i in queue.indices where queue[i].taken < queue[i].slices { queue[i].slices = queue[i].taken; queue[i].cut = true }
                }
                if let i = queue.firstIndex(where: { $0.buffer == chunk.buffer }) { queue[i].hashed = true }
                releaseDone()
            } else if !writing, let next = queue.firstIndex(where: { !$0.written }) {
                writeLocked(next)
            } else if stopping {
                break
            } else {
                pthread_cond_wait(changed, mutex)
            }
        }
        pthread_mutex_unlock(mutex)
    }

    /// Writes what lies below `keptBelow` of `count` bytes at `offset`.
    private func put(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) -> Int32 {
        guard offset < keptBelow else { return SQLITE_OK }
        return Self.writeAll(descriptor, bytes, count: Int(min(Int64(count), keptBelow - offset)), at: offset)
    }

    /// `pwrite` of all `count` bytes; SQLITE_FULL for a full disk or a file-size limit.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawPointer, count: Int, at offset: Int64) -> Int32 {
        var done = 0
        while done < count {
            let n = pwrite(fd, bytes + done, count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                return errno == ENOSPC || errno == EFBIG || errno == EDQUOT ? SQLITE_FULL : SQLITE_IOERR | (3 << 8)  // SQLITE_IOERR_WRITE
            }
            if n == 0 { return SQLITE_FULL }
            done += n
        }
        return SQLITE_OK
    }

    /// Whether to start the disk writeback as data is written (off for a
    /// scratch copy that is read back and deleted: it may never reach the disk).
    /// Set before the first write.
    var startsWriteback = true

    /// Bytes written before the writeback thread is woken.
    static let writebackBatch: Int64 = 8 << 20

    /// Records a range just written (with `mutex` held) and wakes the
    /// writeback thread once a batch has gathered.
    private func wroteLocked(_ offset: Int64, _ length: Int) {
        #if os(Linux)
        guard startsWriteback, Self.syncFileRange != nil else { return }
        let end = offset + Int64(length)
        let range = unflushed.map { (min($0.low, offset), max($0.high, end)) } ?? (offset, end)
        unflushed = range
        if writebackThread == nil { startWritebackThread() }
        if range.1 - range.0 >= Self.writebackBatch { pthread_cond_signal(writebackWake) }
        #endif
    }

    private func startWritebackThread() {
        var handle = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        if pthread_create(&handle, nil, { raw in
            Unmanaged<CoalescedWriter>.fromOpaque(raw!).takeRetainedValue().startWritebacks()
            return nil
        }, context) == 0 {
            writebackThread = handle
        } else {
            Unmanaged<CoalescedWriter>.fromOpaque(context).release()
        }
    }

    /// The writeback thread: starts the disk writeback of each batch written
    /// (`SYNC_FILE_RANGE_WRITE`, 2), which can block while the disk's queue is
    /// full; here that holds up no one. A hint only: errors are ignored, the
    /// fsync before the rename is what makes the copy durable.
    private func startWritebacks() {
        #if os(Linux)
        pthread_mutex_lock(mutex)
        while !stopping {  // at the end the fsync takes over
            if let range = unflushed, range.high - range.low >= Self.writebackBatch {
                unflushed = nil
                pthread_mutex_unlock(mutex)
                _ = Self.syncFileRange?(descriptor, range.low, range.high - range.low, 2)
                pthread_mutex_lock(mutex)
            } else {
                pthread_cond_wait(writebackWake, mutex)
            }
        }
        pthread_mutex_unlock(mutex)
        #endif
    }

    #if os(Linux)
    typealias SyncFileRange = @convention(c) (Int32, Int64, Int64, UInt32) -> Int32
    /// glibc's sync_file_range, a GNU extension that Swift's Glibc module does not declare.
    static let syncFileRange: SyncFileRange? = dlsym(nil, "sync_file_range").map { unsafeBitCast($0, to: SyncFileRange.self) }
    #endif
}
