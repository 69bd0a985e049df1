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
            var buffer: [UInt8] = []
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
                        PageHasher.encode(row, into: &buffer)
                        var hasher = SHA256()
                        buffer.withUnsafeBytes { hasher.update(bufferPointer: $0) }
                        hasher.finalize().withUnsafeBytes { sum.add($0) }
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

    /// A row's bytes for its digest, as `ContentHasher.hashRows` makes them
    /// from a statement: the column count, then each value tagged.
    static func encode(_ row: DecodedRow, into out: inout [UInt8]) {
        out.removeAll(keepingCapacity: true)
        ContentHasher.appendInt(UInt64(row.cells.count), to: &out)
        for cell in row.cells {
            switch cell {
            case .null: out.append(0)
            case .integer(let v): out.append(1); ContentHasher.appendInt(UInt64(bitPattern: v), to: &out)
            case .real(let d): out.append(2); ContentHasher.appendInt(d.bitPattern, to: &out)
            case .text(let bytes):
                out.append(3); ContentHasher.appendInt(UInt64(bytes.count), to: &out); out.append(contentsOf: bytes)
            case .blob(let bytes):
                out.append(4); ContentHasher.appendInt(UInt64(bytes.count), to: &out); out.append(contentsOf: bytes)
            }
        }
    }
}
