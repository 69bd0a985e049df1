// Reads one side of a table diff on other threads: they step a statement, or
// decode the table's b-tree pages (in key-ordered parts, several at once), and
// copy rows into compact batches that the merge (on the calling thread) reads
// through `DiffRow` views. Bounded queues of batches keep memory flat; the
// two sides of a table are read at once.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Rows copied out of SQLite: for each column a storage-class tag byte, then
/// 8 bytes (INTEGER, REAL bits) or the TEXT/BLOB bytes; `offsets` holds, per
/// row, where each column starts and where the row ends.
final class RowBatch {
    var bytes: UnsafeMutablePointer<UInt8>
    var byteCapacity: Int
    var byteCount = 0
    var offsets: UnsafeMutablePointer<Int>
    var offsetCapacity: Int
    var offsetCount = 0
    let columns: Int
    var rows = 0

    init(columns: Int, byteCapacity: Int = 1 << 16) {
        self.columns = columns
        self.byteCapacity = byteCapacity
        bytes = .allocate(capacity: byteCapacity)
        offsetCapacity = (columns + 1) * 256
        offsets = .allocate(capacity: offsetCapacity)
    }

    deinit {
        bytes.deallocate()
        offsets.deallocate()
    }

    func reserve(_ extra: Int) {
        guard byteCount + extra > byteCapacity else { return }
        var capacity = byteCapacity * 2
        while capacity < byteCount + extra { capacity *= 2 }
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        grown.update(from: bytes, count: byteCount)
        bytes.deallocate()
        bytes = grown
        byteCapacity = capacity
    }

    func addOffset(_ value: Int) {
        if offsetCount == offsetCapacity {
            let grown = UnsafeMutablePointer<Int>.allocate(capacity: offsetCapacity * 2)
            grown.update(from: offsets, count: offsetCount)
            offsets.deallocate()
            offsets = grown
            offsetCapacity *= 2
        }
        offsets[offsetCount] = value
        offsetCount += 1
    }

    /// Copies the statement's current row.
    func append(_ statement: OpaquePointer) {
        appendColumns(of: statement, from: 0, to: Int32(columns))
        addOffset(byteCount)
        rows += 1
    }

    /// Copies the current row of statements stepped together (a
    /// `WideSelect`'s parts: each after the first repeats the rowid first).
    func append(_ select: WideSelect) {
        for (k, statement) in select.statements.enumerated() {
            appendColumns(of: statement.handle, from: k == 0 ? 0 : 1, to: Int32(sqlite3_column_count(statement.handle)))
        }
        addOffset(byteCount)
        rows += 1
    }

    /// Copies columns `first..<end` of the statement's current row.
    private func appendColumns(of statement: OpaquePointer, from first: Int32, to end: Int32) {
        for i in first..<end {
            addOffset(byteCount)
            let type = sqlite3_column_type(statement, i)
            switch type {
            case SQLITE_INTEGER, SQLITE_FLOAT:
                reserve(9)
                bytes[byteCount] = UInt8(type)
                let bits = type == SQLITE_INTEGER ? UInt64(bitPattern: sqlite3_column_int64(statement, i))
                                                  : sqlite3_column_double(statement, i).bitPattern
                UnsafeMutableRawPointer(bytes + byteCount + 1).storeBytes(of: bits, as: UInt64.self)
                byteCount += 9
            case SQLITE_TEXT, SQLITE_BLOB:
                let pointer: UnsafeRawPointer? = type == SQLITE_BLOB ? sqlite3_column_blob(statement, i)
                    : sqlite3_column_text(statement, i).map { UnsafeRawPointer($0) }
                let length = Int(sqlite3_column_bytes(statement, i))
                reserve(1 + length)
                bytes[byteCount] = UInt8(type)
                if let pointer, length > 0 { (bytes + byteCount + 1).update(from: pointer.assumingMemoryBound(to: UInt8.self), count: length) }
                byteCount += 1 + length
            default:
                reserve(1)
                bytes[byteCount] = UInt8(SQLITE_NULL)
                byteCount += 1
            }
        }
    }

    /// Appends a row decoded from the pages: its size is summed first, so
    /// that room is made once per row rather than once per cell.
    func append(_ row: DecodedRow) {
        var size = 0
        for cell in row.cells {
            switch cell {
            case .integer, .real: size += 9
            case .text(let b), .blob(let b): size += 1 + b.count
            case .null: size += 1
            }
        }
        reserve(size)
        reserveOffsets(row.cells.count + 1)
        var at = byteCount
        var slot = offsetCount
        for cell in row.cells {
            offsets[slot] = at
            slot += 1
            switch cell {
            case .integer(let v):
                bytes[at] = UInt8(SQLITE_INTEGER)
                UnsafeMutableRawPointer(bytes + at + 1).storeBytes(of: UInt64(bitPattern: v), as: UInt64.self)
                at += 9
            case .real(let d):
                bytes[at] = UInt8(SQLITE_FLOAT)
                UnsafeMutableRawPointer(bytes + at + 1).storeBytes(of: d.bitPattern, as: UInt64.self)
                at += 9
            case .text(let b):
                bytes[at] = UInt8(SQLITE_TEXT)
                if let base = b.baseAddress, b.count > 0 { (bytes + at + 1).update(from: base.assumingMemoryBound(to: UInt8.self), count: b.count) }
                at += 1 + b.count
            case .blob(let b):
                bytes[at] = UInt8(SQLITE_BLOB)
                if let base = b.baseAddress, b.count > 0 { (bytes + at + 1).update(from: base.assumingMemoryBound(to: UInt8.self), count: b.count) }
                at += 1 + b.count
            case .null:
                bytes[at] = UInt8(SQLITE_NULL)
                at += 1
            }
        }
        offsets[slot] = at
        offsetCount = slot + 1
        byteCount = at
        rows += 1
    }

    /// Appends a copy of `row` (a row of a batch with as many columns).
    func append(_ row: DiffRow) {
        precondition(row.count == columns)
        let start = row.offsets[0], size = row.offsets[row.count] - start
        reserve(size)
        reserveOffsets(columns + 1)
        (bytes + byteCount).update(from: row.bytes + start, count: size)
        let shift = byteCount - start
        for k in 0...columns { offsets[offsetCount + k] = row.offsets[k] + shift }
        offsetCount += columns + 1
        byteCount += size
        rows += 1
    }

    /// Makes room for `extra` more offsets.
    func reserveOffsets(_ extra: Int) {
        guard offsetCount + extra > offsetCapacity else { return }
        var capacity = offsetCapacity * 2
        while capacity < offsetCount + extra { capacity *= 2 }
        let grown = UnsafeMutablePointer<Int>.allocate(capacity: capacity)
        grown.update(from: offsets, count: offsetCount)
        offsets.deallocate()
        offsets = grown
        offsetCapacity = capacity
    }

    /// Empties the batch, keeping its memory.
    func removeAll() {
        byteCount = 0
        offsetCount = 0
        rows = 0
    }

    func row(_ index: Int) -> DiffRow {
        DiffRow(bytes: UnsafePointer(bytes), offsets: UnsafePointer(offsets + index * (columns + 1)), count: columns)
    }
}

/// One row of a diff, read in place from its batch (valid during the callback).
public struct DiffRow {
    let bytes: UnsafePointer<UInt8>
    let offsets: UnsafePointer<Int>
    public let count: Int

    @inline(__always) func start(_ i: Int) -> Int { offsets[i] }

    public func storageClass(at index: Int) -> StorageClass {
        StorageClass(rawValue: Int32(bytes[offsets[index]])) ?? .null
    }

    public func isNull(at index: Int) -> Bool { bytes[offsets[index]] == UInt8(SQLITE_NULL) }

    public func int64(at index: Int) -> Int64 {
        Int64(bitPattern: UnsafeRawPointer(bytes + offsets[index] + 1).loadUnaligned(as: UInt64.self))
    }

    public func double(at index: Int) -> Double {
        Double(bitPattern: UnsafeRawPointer(bytes + offsets[index] + 1).loadUnaligned(as: UInt64.self))
    }

    /// TEXT (UTF-8) or BLOB bytes, borrowed.
    public func bytes(at index: Int) -> UnsafeRawBufferPointer {
        let s = offsets[index] + 1
        return UnsafeRawBufferPointer(start: bytes + s, count: offsets[index + 1] - s)
    }

    /// The row without its first column (a rowid plan's row read as the
    /// row of the same plan without the rowid).
    var droppingFirst: DiffRow { DiffRow(bytes: bytes, offsets: offsets + 1, count: count - 1) }

    /// The whole row's encoding (for a quick equality test).
    var encoded: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes + offsets[0], count: offsets[count] - offsets[0])
    }

    public func value(at index: Int) -> Value { cell(at: index).value }

    public func cell(at index: Int) -> Cell {
        switch storageClass(at: index) {
        case .null: return .null
        case .integer: return .integer(int64(at: index))
        case .real: return .real(double(at: index))
        case .text: return .text(bytes(at: index))
        case .blob: return .blob(bytes(at: index))
        }
    }
}

/// A bounded single-producer, single-consumer queue of batches.
final class BatchQueue: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var changed = pthread_cond_t()
    private var items: [RowBatch] = []
    /// Batches read by the merge, for the reader to fill again.
    private var spares: [RowBatch] = []
    private let capacity: Int
    private var finished = false
    private var cancelled = false
    /// The reader's error, if it failed.
    private(set) var failure: (any Error)?

    /// `capacity`: the batches that may wait in the queue. Two keep the
    /// reader and the merge both busy (one filled while one is read); more
    /// only cost memory (64 KiB and more each, per part).
    init(capacity: Int = 2) {
        self.capacity = capacity
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&changed, nil)
    }

    deinit {
        pthread_mutex_destroy(&mutex)
        pthread_cond_destroy(&changed)
    }

    /// Adds a batch, waiting while the queue is full; false when cancelled.
    func put(_ batch: RowBatch) -> Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while items.count >= capacity && !cancelled { pthread_cond_wait(&changed, &mutex) }
        if cancelled { return false }
        items.append(batch)
        pthread_cond_broadcast(&changed)
        return true
    }

    /// A batch the reader may fill again, if the merge has given one back.
    func spare() -> RowBatch? {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return spares.popLast()
    }

    /// Gives back a batch whose rows are read (at most two are kept, and
    /// none grown past 128 KiB by a huge row).
    func giveBack(_ batch: RowBatch) {
        guard batch.byteCapacity <= 1 << 17 else { return }
        batch.removeAll()
        pthread_mutex_lock(&mutex)
        if spares.count < 2 { spares.append(batch) }
        pthread_mutex_unlock(&mutex)
    }

    /// Marks the end of the rows (with the reader's error, if any).
    func finish(_ error: (any Error)?) {
        pthread_mutex_lock(&mutex)
        finished = true
        failure = error
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
    }

    /// The next batch, nil at the end; throws the reader's error.
    func take() throws -> RowBatch? {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while items.isEmpty && !finished { pthread_cond_wait(&changed, &mutex) }
        if !items.isEmpty {
            let batch = items.removeFirst()
            pthread_cond_broadcast(&changed)
            return batch
        }
        if let failure { throw failure }
        return nil
    }

    func cancel() {
        pthread_mutex_lock(&mutex)
        cancelled = true
        pthread_cond_broadcast(&changed)
        pthread_mutex_unlock(&mutex)
    }

    /// Waits until the reader has finished (after `cancel`, promptly).
    func waitFinished() {
        pthread_mutex_lock(&mutex)
        while !finished { pthread_cond_wait(&changed, &mutex) }
        pthread_mutex_unlock(&mutex)
    }
}

/// Where a producer puts rows: a batch filled and handed to its part's queue
/// when full. `append` throws `RowStream.Cancelled` once the reader is gone.
final class BatchSink {
    let queue: BatchQueue
    let columns: Int
    private var current: RowBatch

    init(queue: BatchQueue, columns: Int) {
        self.queue = queue
        self.columns = columns
        current = RowBatch(columns: columns)
    }

    @inline(__always)
    private func flushIfFull() throws {
        if current.byteCount >= 1 << 16 || current.rows >= 1024 {
            guard queue.put(current) else { throw RowStream.Cancelled() }
            current = queue.spare() ?? RowBatch(columns: columns)
        }
    }

    /// The statement's current row.
    func append(_ statement: OpaquePointer) throws {
        current.append(statement)
        try flushIfFull()
    }

    /// The current row of statements stepped together.
    func append(_ select: WideSelect) throws {
        current.append(select)
        try flushIfFull()
    }

    /// A row decoded from the pages.
    func append(_ row: DecodedRow) throws {
        // `current` holds the batch for the call: reading the property
        // retained and released it around every row (perf put swift_retain
        // and swift_release at a sixth of the samples of a diff of raw
        // records; without them the diff took 8% less CPU).
        Unmanaged.passUnretained(current)._withUnsafeGuaranteedRef { $0.append(row) }
        try flushIfFull()
    }

    /// Hands over the last batch.
    func flush() throws {
        if current.rows > 0 {
            guard queue.put(current) else { throw RowStream.Cancelled() }
            current = RowBatch(columns: columns)
        }
    }
}

/// The rows of one side of a table diff, produced on other threads and read
/// in order by the merge. The rows come in parts (one part for statements;
/// key-ordered pieces of the b-tree for the page reader), each with its own
/// bounded queue; `threads` threads produce them, thread k the parts k,
/// k + threads, ..., so up to `threads` parts are read at once while the
/// merge takes them in order. Memory stays flat: each queue holds a few
/// batches. The connection (or page reader) of a side is used by these
/// threads alone until `close` returns.
final class RowStream: @unchecked Sendable {
    struct Cancelled: Error {}

    let columns: Int
    private let queues: [BatchQueue]
    private let produce: (Int, BatchSink) throws -> Void
    private var part = 0
    var batch: RowBatch?
    var index = 0

    convenience init(_ select: WideSelect) throws {
        try self.init(columns: select.columnCount, segmentCount: 1) { _ in select }
    }

    /// One part: `segmentCount` segments of `columns` columns, each a
    /// statement (or several stepped together, for a row wider than SQLite
    /// returns at once) reset and bound by `segment` (called on the reader thread).
    convenience init(columns: Int, segmentCount: Int, segment: @escaping (Int) throws -> WideSelect) throws {
        try self.init(columns: columns, parts: 1, threads: 1) { _, sink in
            for i in 0..<segmentCount {
                let select = try segment(i)
                defer { select.reset() }
                if !select.isSplit {
                    let statement = select.statements[0], handle = statement.handle
                    while try statement.step() { try sink.append(handle) }
                    continue
                }
                while try select.step() { try sink.append(select) }
            }
        }
    }

    /// Starts `threads` threads that produce `parts` parts: `produce(part,
    /// sink)` puts part `part`'s rows into `sink`, in order.
    init(columns: Int, parts: Int, threads: Int, produce: @escaping (Int, BatchSink) throws -> Void) throws {
        self.columns = columns
        self.produce = produce
        queues = (0..<max(parts, 1)).map { _ in BatchQueue() }
        let threads = max(1, min(threads, queues.count))
        for first in 0..<threads {
            final class Start {
                let stream: RowStream, first: Int, step: Int
                init(_ stream: RowStream, _ first: Int, _ step: Int) { self.stream = stream; self.first = first; self.step = step }
            }
            var thread = pthread_t()
            let context = Unmanaged.passRetained(Start(self, first, threads)).toOpaque()
            let rc = pthread_create(&thread, nil, { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                start.stream.run(from: start.first, step: start.step)
                return nil
            }, context)
            if rc != 0 {
                Unmanaged<Start>.fromOpaque(context).release()
                // The parts of this thread and of those never started end with the error.
                let error = DatabaseError(code: .error, message: "cannot start a reader thread (error \(rc))")
                for k in first..<threads {
                    for part in stride(from: k, to: queues.count, by: threads) { queues[part].finish(error) }
                }
                return
            }
            pthread_detach(thread)
        }
    }

    /// Produces parts `from`, `from + step`, ... Every one of them is
    /// finished whatever happens, so that `close` never waits forever.
    private func run(from first: Int, step: Int) {
        var stopped = false
        for part in stride(from: first, to: queues.count, by: step) {
            if stopped { queues[part].finish(nil); continue }
            let sink = BatchSink(queue: queues[part], columns: columns)
            do {
                try produce(part, sink)
                try sink.flush()
                queues[part].finish(nil)
            } catch is Cancelled {
                queues[part].finish(nil)
                stopped = true
            } catch {
                queues[part].finish(error)
                stopped = true
            }
        }
    }

    /// Moves to the next row; false at the end.
    func next() throws -> Bool {
        if let batch, index + 1 < batch.rows {
            index += 1
            return true
        }
        if let spent = batch, part < queues.count {
            // Its rows are read: the reader fills it again (fresh batches cost
            // page faults and zeroed pages in the kernel, for every batch).
            queues[part].giveBack(spent)
        }
        batch = nil
        while part < queues.count {
            if let next = try queues[part].take() {
                batch = next
                index = 0
                if next.rows > 0 { return true }
            } else {
                part += 1
            }
        }
        return false
    }

    var row: DiffRow { batch!.row(index) }

    /// Stops the readers and waits for them, so that statements can be
    /// finalized and the connection used again.
    func close() {
        for queue in queues { queue.cancel() }
        for queue in queues { queue.waitFinished() }
    }
}
