// The data part of the content hash read straight from b-tree pages: each
// table's tree is split into parts (subtrees), and the parts of all tables
// are hashed by one thread per core. A table's rows are a multiset summed
// modulo 2^256, so parts add up in any order to the sum the statement path
// gets, row for row the same bytes. A table the page reader cannot read (a
// virtual table, a -wal it cannot see, damage) is left to statements.
import Crypto

enum PageHasher {
    /// One part of one table's tree, and what hashing it gave.
    private struct Job {
        var table: Int
        var part: TreePart
    }

    /// What the jobs share between threads (each job's result has its own slot).
    private final class Work: @unchecked Sendable {
        let reader: SnapshotReader
        let layouts: [Int: TableLayout]
        let claimed: [Int: ClaimedPages]
        let jobs: [Job]
        let counter = WorkCounter()
        var sums: UnsafeMutableBufferPointer<UInt256>
        var rows: UnsafeMutableBufferPointer<Int64>
        var errors: UnsafeMutableBufferPointer<PageError?>

        init(reader: SnapshotReader, layouts: [Int: TableLayout], claimed: [Int: ClaimedPages], jobs: [Job]) {
            self.reader = reader
            self.layouts = layouts
            self.claimed = claimed
            self.jobs = jobs
            sums = .allocate(capacity: max(jobs.count, 1))
            sums.initialize(repeating: UInt256())
            rows = .allocate(capacity: max(jobs.count, 1))
            rows.initialize(repeating: 0)
            errors = .allocate(capacity: max(jobs.count, 1))
            errors.initialize(repeating: nil)
        }

        deinit {
            sums.deinitialize().deallocate()
            rows.deinitialize().deallocate()
            errors.deinitialize().deallocate()
        }

        /// Takes jobs until none is left.
        func work(_ worker: Int) {
            var decoder: (table: Int, decoder: RowDecoder)?
            let digester = RowDigester()
            while true {
                let index = counter.take()
                guard index < jobs.count else { return }
                let job = jobs[index]
                guard let layout = layouts[job.table], let claimed = claimed[job.table] else { continue }
                if decoder?.table != job.table {
                    decoder = (job.table, reader.decoder(layout, claimed: claimed))
                }
                var sum = UInt256()
                var count: Int64 = 0
                do {
                    try decoder!.decoder.forEachRow(in: job.part) { row in
                        digester.add(row, to: &sum)
                        count += 1
                    }
                    sums[index] = sum
                    rows[index] = count
                } catch let error as PageError {
                    errors[index] = error
                } catch {
                    errors[index] = PageError(.unsupported, "\(error)")
                }
            }
        }
    }

    /// The multiset sums and row counts of `tables` (by index) that could be
    /// read from pages, and a note for each table that could not.
    static func hash(_ connection: Connection, _ tables: [Table], walIndex: WALIndexHeader?,
                     threads: Int) -> (sums: [Int: (sum: UInt256, rows: Int64)], notes: [String]) {
        guard !tables.isEmpty else { return ([:], []) }
        let reader: SnapshotReader
        do {
            reader = try SnapshotReader(connection, walIndex: walIndex)
        } catch {
            return ([:], ["every table read with statements: \(error)"])
        }
        var notes: [String] = []
        var layouts: [Int: TableLayout] = [:]
        var claimed: [Int: ClaimedPages] = [:]
        var jobs: [Job] = []
        // Enough parts that no thread waits long on another's last one.
        let wanted = threads > 1 ? threads * 8 : 1
        for (i, table) in tables.enumerated() {
            do {
                let layout = try reader.layout(table, columns: table.contentColumns.map(\.name))
                let pages = ClaimedPages(pageCount: reader.pages.pageCount)
                let walker = BTreeWalker(pages: reader.pages, claimed: pages)
                let parts = try walker.split(layout.root, index: layout.withoutRowid, wanted: wanted)
                layouts[i] = layout
                claimed[i] = pages
                jobs.append(contentsOf: parts.map { Job(table: i, part: $0) })
            } catch {
                notes.append("table \(table.name) read with statements: \(error)")
            }
        }
        let work = Work(reader: reader, layouts: layouts, claimed: claimed, jobs: jobs)
        ParallelWork.run(min(threads, max(jobs.count, 1))) { work.work($0) }

        var result: [Int: (sum: UInt256, rows: Int64)] = [:]
        var failed = Set<Int>()
        for (index, job) in jobs.enumerated() {
            if let error = work.errors[index] {
                if failed.insert(job.table).inserted {
                    notes.append("table \(tables[job.table].name) read with statements: \(error)")
                }
                continue
            }
            var entry = result[job.table] ?? (UInt256(), 0)
            entry.sum.add(work.sums[index])
            entry.rows += work.rows[index]
            result[job.table] = entry
        }
        for table in failed { result[table] = nil }
        return (result, notes)
    }

}

/// Adds decoded rows' digests to a sum, as `ContentHasher.hashRows` hashes a
/// statement's row: the column count, then each value tagged, hashed with
/// SHA-256. The bytes are laid out in a buffer reused from row to row, their
/// size counted first, so a row costs no allocation but the digest's. One
/// per thread.
final class RowDigester {
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int

    init() {
        capacity = 4096
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { storage.deallocate() }

    /// Adds the digest of `row` to `sum`.
    func add(_ row: DecodedRow, to sum: inout UInt256) {
        var size = 8
        for cell in row.cells {
            switch cell {
            case .null: size += 1
            case .integer, .real: size += 9
            case .text(let bytes), .blob(let bytes): size += 9 + bytes.count
            }
        }
        if size > capacity {
            storage.deallocate()
            capacity = max(size, capacity * 2)
            storage = .allocate(byteCount: capacity, alignment: 8)
        }
        let out = storage
        var at = 0
        func int(_ v: UInt64) { out.storeBytes(of: v.littleEndian, toByteOffset: at, as: UInt64.self); at += 8 }
        func tagged(_ tag: UInt8, _ bytes: UnsafeRawBufferPointer) {
            out.storeBytes(of: tag, toByteOffset: at, as: UInt8.self)
            at += 1
            int(UInt64(bytes.count))
            if let base = bytes.baseAddress, !bytes.isEmpty { (out + at).copyMemory(from: base, byteCount: bytes.count) }
            at += bytes.count
        }
        int(UInt64(row.cells.count))
        for cell in row.cells {
            switch cell {
            case .null: out.storeBytes(of: 0 as UInt8, toByteOffset: at, as: UInt8.self); at += 1
            case .integer(let v): out.storeBytes(of: 1 as UInt8, toByteOffset: at, as: UInt8.self); at += 1; int(UInt64(bitPattern: v))
            case .real(let d): out.storeBytes(of: 2 as UInt8, toByteOffset: at, as: UInt8.self); at += 1; int(d.bitPattern)
            case .text(let bytes): tagged(3, bytes)
            case .blob(let bytes): tagged(4, bytes)
            }
        }
        var hasher = SHA256()
        hasher.update(bufferPointer: UnsafeRawBufferPointer(start: out, count: at))
        hasher.finalize().withUnsafeBytes { sum.add($0) }
    }
}
