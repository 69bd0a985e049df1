// The repository side of a follower: the chain it extends (the base snapshot
// and the numbered states since, each one exact committed state: page ids,
// digest, -wal position, time), the states recorded into the segment batch
// and shipped as a segment every interval, a fold into a new chain's base
// snapshot, and the period's gatherings. It starts from the repository's own
// record (the newest chain of this database on this host), or from a new
// base snapshot of every page. The WAL loop (WALLoop.swift) reads the
// database and calls it. Part of the replicate capability, built on
// Repository/ (page lists, snapshots, segments, pages stored as a backup
// stores them, sealed objects).

final class ChainWriter {
    let repository: Repository
    let source: String
    let path: String
    let name: String
    let hostname = RepoLock.hostname
    let options: ReplicateOptions
    let pageSize: Int
    let shipper: Shipper
    let status: FollowerStatus
    let report: (ReplicateEvent) -> Void

    /// The chain: its base snapshot's id and time ("" before the start).
    private(set) var chain = ""
    /// The chain's base snapshot (replicate --dir adopts it again after a dormant spell).
    private(set) var base: Snapshot?
    private var baseTime = 0.0
    /// The last state: its number (0: the base), page ids, digest, -wal
    /// position and when it was observed (µs since 1970).
    private(set) var number: UInt64 = 0
    private(set) var ids: [PageID] = []
    private var digest = StateDigest()
    private(set) var position = WALPosition(salt1: 0, salt2: 0, frame: 0, checksum1: 0, checksum2: 0)
    private var lastObserved: UInt64 = 0
    /// Pages stored and named by the chain since the period began: not stored again.
    private(set) var known = KnownPages([PageID]())
    /// The full page list the next fold's list is a delta on.
    private var lastFull: (id: PageID, ids: [PageID])?
    /// Page 1's first 100 bytes (the header facts of fold snapshots).
    var header: [UInt8] = []
    private let batch: SegmentBatch
    private let period: FollowerPeriod

    /// `mayWait`: whether a segment's objects may wait for room in the
    /// shipper's queue (while a resync reads the whole database).
    init(source: String, path: String, repository: Repository, options: ReplicateOptions, pageSize: Int, shipper: Shipper,
         status: FollowerStatus, report: @escaping (ReplicateEvent) -> Void, mayWait: @escaping () -> Bool) {
        self.source = source; self.path = path; name = DurableFolder.baseName(of: path)
        self.repository = repository; self.options = options; self.pageSize = pageSize; self.shipper = shipper
        self.status = status; self.report = report
        batch = SegmentBatch(repository: repository, pageSize: pageSize) { item in shipper.enqueue(item, mayWait: mayWait) }
        period = FollowerPeriod(pageSize: pageSize) { message in report(.problem(database: source, message: message, retrying: false)) }
    }

    // MARK: Starting: the repository's record

    /// (replicate --dir) The repository's record of this database, from one
    /// listing for the whole folder (not one per database).
    var listed: (chainBase: Snapshot?, newest: Snapshot?)?
    /// (replicate --dir) The fleet's shared lock and the batch its new
    /// chains' pages go into (FleetLock.swift, Repository/SharedPackBatch.swift).
    var fleet: (lock: FleetLock, batch: SharedPackBatch)?

    /// The newest chain base of this database on this host, and the newest
    /// of its snapshots (the parent of a new chain).
    func newestOfThisDatabase() throws -> (chainBase: Snapshot?, newest: Snapshot?) {
        if let listed { return listed }
        let snapshots = try repository.snapshots().snapshots.filter { sameBytes($0.hostname, hostname) && sameBytes($0.path, path) }
        return (Repository.chainBases(snapshots).max { ($0.time, $0.id) < ($1.time, $1.id) }, snapshots.max { $0.time < $1.time })
    }

    /// Takes the last state of `base`'s chain as the current one.
    func adopt(_ base: Snapshot) throws {
        guard base.pageSize == pageSize else {
            throw StoreError(.other, location: repository.location, message: "its pages are \(base.pageSize) bytes, the database's \(pageSize)")
        }
        let loaded = try repository.loadChain(base)
        ids = try repository.stateIDs(loaded, upTo: loaded.last)
        digest = loaded.states.last?.digest ?? StateDigest.of(ids)
        position = loaded.states.last?.position ?? base.replica!.position
        lastObserved = loaded.states.last?.observedMicros ?? ReplicaState.micros(base.time)
        number = loaded.last
        chain = base.id
        self.base = base
        baseTime = base.time
        known = KnownPages(ids)
        if let fullID = try repository.fullListID(of: base) {
            lastFull = (fullID, try repository.loadList(fullID.hex))
        }
    }

    /// A new chain: pages 1...`pageCount` (each read by `page`), those the
    /// repository lacks stored (as a backup stores them, under a shared
    /// lock), then the list and the base snapshot, observed at `observed`
    /// (µs) with the -wal at `position`.
    func newChain(pageCount: UInt32, observed: UInt64, position at: WALPosition, parent: Snapshot?,
                  page: (UInt32) throws -> [UInt8]) throws {
        let started = Clock.now()
        func pageRead(_ p: UInt32) throws -> [UInt8] {
            let bytes = try page(p)
            if p == 1 { header = Array(bytes.prefix(100)) }
            return bytes
        }
        let stored: Repository.StoredPages
        if let fleet {
            try fleet.lock.enter(timeout: options.lockTimeout)
            defer { fleet.lock.leave() }
            stored = try repository.storePages(pageCount: pageCount, pageSize: pageSize, batch: fleet.batch, page: pageRead)
            try finishChain(stored, observed: observed, position: at, parent: parent, started: started)
            return
        }
        let lock = try RepoLock(repository, exclusive: false, command: "replicate", timeout: options.lockTimeout)
        defer { lock.release() }
        stored = try repository.storePages(pageCount: pageCount, pageSize: pageSize, lock: lock, alone: listed != nil, page: pageRead)
        try finishChain(stored, observed: observed, position: at, parent: parent, started: started)
    }

    /// The base's list and snapshot, once its pages are durable (under the lock still).
    private func finishChain(_ stored: Repository.StoredPages, observed: UInt64, position at: WALPosition, parent: Snapshot?, started: Double) throws {
        ids = stored.ids
        // The list: a delta on the parent's full list when small.
        var full: (id: PageID, ids: [PageID])?
        if let parent, let fullID = try? repository.fullListID(of: parent), let fullIDs = try? repository.loadList(fullID.hex) {
            full = (fullID, fullIDs)
        }
        let (list, isFull) = try repository.sealPageList(ids, deltaOn: full)
        try repository.put(list)
        lastFull = isFull ? (PageID(hex: list.id)!, ids) : full
        position = at
        lastObserved = observed
        var snapshot = makeSnapshot(list: list.id, parent: parent?.id, time: Double(observed) / 1e6, pagesNew: stored.stored, follows: nil)
        snapshot.durationSeconds = Clock.now() - started
        snapshot.bytesAdded = stored.bytesWritten + Int64(list.bytes.count) + Int64(snapshot.encoded().count)
        try repository.put(try repository.sealSnapshot(&snapshot))
        chain = snapshot.id
        base = snapshot
        baseTime = snapshot.time
        number = 0
        digest = StateDigest.of(ids)
        known = KnownPages(ids)
        report(.snapshot(database: source, id: snapshot.id, kind: "base"))
    }

    // MARK: Recording

    /// A state that changed nothing: only its -wal position is kept.
    func moved(to end: WALPosition) { position = end }

    /// Records a state: the ids and digest brought up to date, its new pages
    /// (those the chain does not hold yet) into the batch.
    func record(kind: ReplicaState.Kind, observed: UInt64, position end: WALPosition, transactions: UInt32,
                pageCount: UInt32, changes: [(page: UInt32, id: PageID)], pages: NewPages, always: Bool = false) throws {
        let oldCount = ids.count, newCount = Int(pageCount)
        position = end
        guard always || !changes.isEmpty || newCount != oldCount else { return }
        if newCount < oldCount {
            for p in newCount..<oldCount { digest.remove(UInt32(p + 1), ids[p]) }
            ids.removeLast(oldCount - newCount)
        }
        let zero = PageID(a: 0, b: 0, c: 0, d: 0)
        if newCount > oldCount { ids += [PageID](repeating: zero, count: newCount - oldCount) }
        var grown = 0
        for change in changes {
            let i = Int(change.page) - 1
            if i < oldCount { digest.remove(change.page, ids[i]) } else { grown += 1 }
            ids[i] = change.id
            digest.add(change.page, change.id)
        }
        guard grown == max(0, newCount - oldCount) else {
            throw FollowerRestart(description: "\(source): a state left pages of the grown database unread")
        }
        let n = number + 1
        for change in changes where pages.has(change.page) && known.insert(change.id) {
            try pages.withBytes(of: change.page, pageSize: pageSize) { bytes in
                try addPage(change.page, number: n, id: change.id, bytes: bytes)
                if change.page == 1 { header = Array(bytes.prefix(100)) }
            }
        }
        let observedNow = max(observed, lastObserved)
        let state = ReplicaState(number: n, observedMicros: observedNow, position: end, transactions: transactions, kind: kind,
                                 pageCount: pageCount, changes: changes, digest: digest)
        batch.addState(state)
        number = n
        lastObserved = observedNow
        status.recorded(state)
    }

    /// A page of a resync's next state that the chain does not hold yet
    /// (into the batch as they come: it puts them in blobs past a few MB,
    /// so memory stays flat).
    func addResyncPage(_ page: UInt32, id: PageID, bytes: UnsafeRawBufferPointer) throws {
        if known.insert(id) { try addPage(page, number: number + 1, id: id, bytes: bytes) }
    }

    /// A new page into the batch, and into the spool of the period.
    private func addPage(_ page: UInt32, number: UInt64, id: PageID, bytes: UnsafeRawBufferPointer) throws {
        try batch.addPage(page, number: number, id: id, bytes: bytes)
        period.add(page: page, number: number, id: id, bytes: bytes)
    }

    // MARK: Shipping

    /// Hands the states recorded since the last cut to the shipper as one
    /// segment; every `mergeEvery` segments (or sooner when the spool is
    /// large), has the period's segments gathered on a thread of its own.
    func cut() throws {
        guard let unit = try batch.cut(chain: chain, hostname: hostname, path: path) else {
            shipGathering(wait: false)
            return
        }
        period.shipped(unit, index: batch.lastIndex, packs: batch.takePacks())
        shipGathering(wait: false)
        guard !period.isGathering,
              period.segments.count >= max(2, options.mergeEvery) || period.spoolSize >= FollowerPeriod.spoolLimit else { return }
        startGathering()
    }

    /// Has the period's segments gathered, and starts a new period. `last`: a stop's.
    private func startGathering(last: Bool = false) {
        period.gather(repository: repository, chain: chain, hostname: hostname, path: path, pagesAdded: batch.pagesAdded, last: last)
        known = KnownPages(ids)
    }

    /// Starts a period: the next gathering covers the segments from here.
    /// The pages known to be stored become those of the last state (a page
    /// that goes back to an older content is stored again): memory stays
    /// the database's size, not the chain's hour of changes.
    private func newPeriod() {
        known = KnownPages(ids)
        period.restart(pagesAdded: batch.pagesAdded)
    }

    /// Hands a finished gathering's objects to the shipper as one unit (with `wait`, once it is done).
    private func shipGathering(wait: Bool) {
        for item in period.takeGathering(wait: wait) ?? [] { shipper.enqueue(item) }
    }

    /// At a stop, every commit recorded: the period's segments are gathered
    /// (a gathering under way first), so that the chain a stop leaves has no
    /// more segments for a restore to read than it needs. A gathering reads
    /// no object: it takes about a second for a minute of 160 commits a second.
    func finishPeriod() {
        shipGathering(wait: true)
        startGathering(last: true)
        if !period.isGathering {
            // No gathering to make: the packs the last one replaced go now.
            shipper.enqueue(.tidy)
        }
        shipGathering(wait: true)
    }

    /// A full snapshot of the last state (its page list a delta on the last
    /// full one when small), which becomes the base of a new chain; the
    /// chain it closes is gathered into one segment and one index object.
    func fold() throws {
        try cut()
        // The chain closes: its segments and index objects are gathered
        // into one each by the shipper, those of this period with them.
        shipGathering(wait: true)
        newPeriod()
        let started = Clock.now()
        let (sealedList, becomesFull) = try repository.sealPageList(ids, deltaOn: lastFull)
        if becomesFull { lastFull = (PageID(hex: sealedList.id)!, ids) }
        var snapshot = makeSnapshot(list: sealedList.id, parent: chain, time: Double(lastObserved) / 1e6, pagesNew: 0,
                                    follows: ReplicaInfo.Follows(chain: chain, state: number, firstTime: baseTime, lastTime: Double(lastObserved) / 1e6))
        snapshot.durationSeconds = Clock.now() - started
        snapshot.bytesAdded = Int64(sealedList.bytes.count + snapshot.encoded().count)
        let sealedSnapshot = try repository.sealSnapshot(&snapshot)
        shipper.enqueue(.begin)
        shipper.enqueue(.put(sealedList, role: .list))
        shipper.enqueue(.put(sealedSnapshot, role: .snapshot))
        shipper.enqueue(.closeChain(chain))
        shipper.enqueue(.end(ShippedUnit(kind: .fold, chain: snapshot.id, snapshot: snapshot.id)))
        chain = snapshot.id
        base = snapshot
        baseTime = snapshot.time
        number = 0
        known = KnownPages(ids)
        newPeriod()
    }

    /// A snapshot of the current ids (the base of a chain).
    private func makeSnapshot(list: String, parent: String?, time: Double, pagesNew: Int, follows: ReplicaInfo.Follows?) -> Snapshot {
        var facts: [(String, JSON)] = []
        if header.count >= DatabaseHeader.size, let h = try? DatabaseHeader(bytes: Array(header.prefix(DatabaseHeader.size))) {
            facts += [("application_id", .integer(Int64(h.applicationID))), ("auto_vacuum", .integer(Int64(h.autoVacuum))),
                      ("reserved_bytes", .integer(Int64(h.reservedBytes))), ("schema_format", .integer(Int64(h.schemaFormat))),
                      ("sqlite_version", .string(h.sqliteVersion)), ("text_encoding", .string(h.textEncodingName ?? "unknown")),
                      ("user_version", .integer(Int64(h.userVersion)))]
        }
        facts.append(("journal_mode", .string("wal")))
        facts.sort { $0.0 < $1.0 }
        return Snapshot(database: name, path: path, hostname: hostname, time: time, tags: options.tags, pageSize: pageSize,
                        pageCount: ids.count, list: list, parent: parent, databaseSHA256: nil, pagesSHA256: PagesDigest.of(ids),
                        logicalHash: "", header: facts, pagesNew: pagesNew, bytesAdded: 0, durationSeconds: 0, strategy: "replicate",
                        verification: "skipped", replica: ReplicaInfo(position: position, follows: follows))
    }
}
