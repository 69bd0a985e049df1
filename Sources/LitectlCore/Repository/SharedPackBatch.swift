// The pages of several writers at once in shared packs and one index object
// a round (`replicate --dir`'s first copies of many new databases): each
// writer adds its blobs as it reads them, then waits until a round that
// holds its last blob is durable; the first writer to wait for a round
// leads it (after a short window that lets the others reach it): the round's
// last pack and its index object written once for all of them, where each
// database wrote a pack and an index object of its own before. Packs are
// written as they fill (a large database never sits in memory). A page id
// may be in two blobs of a round (two databases with the same page): the
// repository's index allows that (docs/repository.md, "Index objects").
// A round whose pack or index object could not be written fails every
// writer that added to it (each tries again from the start). Part of the
// repository; the caller holds a shared lock while it adds and waits.
import Foundation

final class SharedPackBatch: @unchecked Sendable {
    let repository: Repository
    /// How long a round's leader waits for other writers before it writes the round.
    let window: Double
    private let condition = NSCondition()
    private var assembler: PackAssembler!
    /// The round being filled; rounds before it are written or being written.
    private var round = 0
    /// The rounds durable so far (all up to this one), and those that failed.
    private var durable = -1
    private var failures: [Int: String] = [:]
    private var leading = false
    /// Rounds written (one index object each), for tests and -v.
    private(set) var roundsWritten = 0

    init(repository: Repository, window: Double = 0.05) {
        self.repository = repository; self.window = window
        assembler = makeAssembler()
    }

    private func makeAssembler() -> PackAssembler {
        PackAssembler(repository: repository, closing: .atSize) { [repository] pack in try repository.put(pack.object) }
    }

    /// Adds a blob of `ids.count` whole pages; returns the round that holds it, and the blob's size.
    func add(pages: UnsafeRawBufferPointer, ids: [PageID], pageSize: Int, compressor: ZstdCompressor) throws -> (round: Int, bytes: Int) {
        let blob = try repository.blob(of: pages, compressor: compressor)
        condition.lock(); defer { condition.unlock() }
        let r = round
        do {
            try assembler.add(blob: blob, pageIDs: ids, pageSizeLog2: UInt8(pageSize.trailingZeroBitCount))
        } catch {
            // (A full pack that could not be written: the round's other
            // blobs are lost with it. The round fails; a new one begins.)
            fail(r, error)
            throw error
        }
        return (r, blob.count)
    }

    /// The round in progress fails (under the lock).
    private func fail(_ r: Int, _ error: any Error) {
        failures[r] = (error as? StoreError)?.description ?? "\(error)"
        if r == round {
            assembler = makeAssembler()
            round += 1
        }
        condition.broadcast()
    }

    /// Waits until every round from `first` through `last` is durable
    /// (writing the next round itself when no other writer is); throws when one of them failed.
    func commit(from first: Int, through last: Int) throws {
        condition.lock(); defer { condition.unlock() }
        while true {
            if let failed = failures.keys.filter({ (first...last).contains($0) }).min() {
                throw StoreError(.other, location: repository.location, message: failures[failed]!)
            }
            if durable >= last { return }
            if leading { condition.wait(); continue }
            leading = true
            if round == last {
                // Others that read their pages now join this round.
                condition.unlock()
                Thread.sleep(forTimeInterval: window)
                condition.lock()
            }
            let r = round, closing = assembler!
            assembler = makeAssembler()
            round += 1
            condition.unlock()
            let outcome = Result { () throws -> Void in
                try closing.flush()
                if let index = try closing.sealIndex() {
                    try repository.put(index)
                    // (It names only these base packs, which no follower's
                    // gathering replaces: never read for a follower's packs.)
                    ReplicaCollector.writtenHere.withLock { _ = $0.insert(index.key) }
                }
            }
            condition.lock()
            leading = false
            switch outcome {
            case .success:
                durable = r
                roundsWritten += 1
            case .failure(let error):
                fail(r, error)
                durable = r  // (failed, not pending: later rounds go on)
            }
            // Failures older than a thousand rounds concern no writer any more.
            if failures.count > 64 { failures = failures.filter { $0.key > r - 1000 } }
            condition.broadcast()
        }
    }
}

extension Repository {
    /// (replicate --dir) Stores every page of a new chain's base, 1...`pageCount`
    /// (each read by `page`), into `batch`'s shared packs: each page once
    /// within this database (the repository's index is not read: 10,000
    /// databases would each read every other's index object); returns when
    /// they are durable.
    func storePages(pageCount: UInt32, pageSize: Int, batch: SharedPackBatch, page: (UInt32) throws -> [UInt8]) throws -> StoredPages {
        let perBlob = blobPages(pageSize: pageSize)
        let compressor = ZstdCompressor(level: Repository.blobLevel)
        var seen = Set<PageID>(), ids: [PageID] = [], group: [UInt8] = [], groupIDs: [PageID] = []
        ids.reserveCapacity(Int(pageCount))
        group.reserveCapacity(perBlob * pageSize)
        var rounds: (first: Int, last: Int)?
        var bytes: Int64 = 0
        func flushGroup() throws {
            guard !groupIDs.isEmpty else { return }
            let (r, size) = try group.withUnsafeBytes { try batch.add(pages: $0, ids: groupIDs, pageSize: pageSize, compressor: compressor) }
            rounds = (rounds?.first ?? r, r)
            bytes += Int64(size)
            group.removeAll(keepingCapacity: true)
            groupIDs.removeAll(keepingCapacity: true)
        }
        for p in 1...max(1, pageCount) {
            let content = try page(p)
            guard content.count == pageSize else {
                throw StoreError(.other, location: location, message: "page \(p) is \(content.count) bytes, not \(pageSize)")
            }
            let id = content.withUnsafeBytes { pageID($0) }
            ids.append(id)
            guard seen.insert(id).inserted else { continue }
            group += content
            groupIDs.append(id)
            if groupIDs.count == perBlob { try flushGroup() }
        }
        try flushGroup()
        if let rounds { try batch.commit(from: rounds.first, through: rounds.last) }
        return StoredPages(ids: ids, stored: seen.count, bytesWritten: bytes)
    }
}
