// A moment of a database in a repository, open for reading without a byte
// of it restored: the newest committed state at or before WHEN (the one
// `restore --at WHEN` gives, chosen by the same selectors), its page map
// built from its page list and its chain's segments, served to SQLite
// through PageVFS (a read-only VFS) page by page from the packs.
// Built on Repository/: snapshots, chains, the index and blob reads.
import Foundation

/// How a moment reads its pages.
public struct MomentOptions: Sendable {
    /// The most bytes of pages kept in memory (shared by a moment and the ones `refreshed` gives).
    public var cacheBytes = 32 << 20
    /// A folder to keep fetched blobs in across runs (made when missing; BlobFolder).
    public var cacheFolder: String? = nil
    /// Whether runs of consecutive pages fetch the next ones ahead.
    public var readAhead = true
    public init() {}
}

/// Why a moment cannot be opened, as one line naming the reference.
public struct MomentError: Error, CustomStringConvertible, Sendable {
    public var reference: String
    public var message: String
    public var description: String { "\(reference): \(message)" }
}

public final class Moment: @unchecked Sendable {
    public let reference: MomentReference
    /// Opens read-only with `Connection(pages:)` (or ATTACH of its `uri`).
    public let registration: PageVFS.Registration
    /// The state's time (seconds since 1970): its snapshot's, or when its chain observed it.
    public let time: Double
    /// The snapshot it comes from (a chain's base for a replicated state).
    public let snapshotID: String
    /// The chain state (0: the snapshot itself).
    public let state: UInt64
    public let pageSize: Int
    /// Page n's id at n - 1 (two moments share the ids of unchanged pages).
    public let pageIDs: [PageID]
    /// What choosing the state noted (its chain's segments gone: the newest
    /// snapshot instead), as `restore` says it.
    public internal(set) var notes: [String] = []
    let repository: Repository
    let options: MomentOptions
    let pages: MomentPages

    /// What was read from the store for pages so far: ranged reads of packs
    /// and their bytes, by this moment and those sharing its cache (the
    /// index, lists and segments read to open it are not counted).
    public var fetched: (requests: Int, bytes: Int64) { pages.fetcher.fetched }

    private init(reference: MomentReference, time: Double, snapshotID: String, state: UInt64, pageSize: Int,
                 pageIDs: [PageID], repository: Repository, options: MomentOptions, pages: MomentPages) {
        self.reference = reference
        self.time = time
        self.snapshotID = snapshotID
        self.state = state
        self.pageSize = pageSize
        self.pageIDs = pageIDs
        self.repository = repository
        self.options = options
        self.pages = pages
        registration = PageVFS.register(pages, label: reference.text)
    }

    /// The newest committed state of `reference.database` at or before WHEN:
    /// the state `restore --at WHEN` gives (the same selectors choose it).
    /// A moment before the first state, in the future, or of a database the
    /// repository does not hold throws a `MomentError` (one line naming the
    /// reference); a WHEN that does not read, a `ValidationErrorText`.
    /// `now`: the time relative WHENs count back from (the wall clock when nil).
    public static func open(_ reference: MomentReference, repository: Repository, options: MomentOptions = .init(),
                            now: Double? = nil) throws -> Moment {
        return try open(reference, repository: repository, options: options, now: now,
                        fetcher: try MomentFetcher(repository: repository, options: options), index: nil)
    }

    /// Several moments of one repository, opened together (a run's): they
    /// share one page cache, of `options.cacheBytes` for each of them, and
    /// the index read to open the first. Pages are content-addressed, so a
    /// page two of them hold (the same id: the same bytes, checked) is
    /// fetched once: a diff of two moments fetches the interior pages their
    /// b-trees share once, not once per side.
    ///
    /// `failed`: when given, a reference that cannot be opened (a
    /// `MomentError`: no such database, a moment before its first state) is
    /// handed to it and left out, and the others are opened; when nil, it
    /// is thrown.
    public static func open(_ references: [MomentReference], repository: Repository, options: MomentOptions = .init(),
                            now: Double? = nil, failed: ((MomentReference, MomentError) -> Void)? = nil) throws -> [Moment] {
        // (No moment: no fetcher, so no cache folder made.)
        guard !references.isEmpty else { return [] }
        var pooled = options
        let (total, overflow) = options.cacheBytes.multipliedReportingOverflow(by: max(1, references.count))
        pooled.cacheBytes = overflow ? Int.max : total
        let fetcher = try MomentFetcher(repository: repository, options: pooled)
        let now = now ?? Clock.wall()
        var index: RepoIndex?
        var moments: [Moment] = []
        for reference in references {
            do {
                let moment = try open(reference, repository: repository, options: options, now: now, fetcher: fetcher, index: index)
                index = moment.pages.map.index
                moments.append(moment)
            } catch let error as MomentError where failed != nil {
                failed?(reference, error)
            }
        }
        return moments
    }

    /// The moment `latest` is now, sharing this one's cache (pages it holds
    /// are not fetched again); nil when nothing newer was shipped.
    public func refreshed() throws -> Moment? {
        let latest = MomentReference(database: reference.database, when: "latest", text: reference.text)
        let next = try Moment.open(latest, repository: repository, options: options, now: nil, fetcher: pages.fetcher, index: pages.map.index)
        return next.snapshotID == snapshotID && next.state == state ? nil : next
    }

    static func open(_ reference: MomentReference, repository: Repository, options: MomentOptions, now: Double?,
                     fetcher: MomentFetcher, index known: RepoIndex?) throws -> Moment {
        let now = now ?? Clock.wall()
        func fail(_ message: String) -> MomentError { MomentError(reference: reference.text, message: message) }
        let point: PointInTime
        do { point = try PointInTime.parse(reference.when, now: now) } catch let error as ValidationErrorText {
            throw ValidationErrorText("\(reference.text): WHEN \(error.description)")
        }
        let snapshots = try repository.snapshots().snapshots
        let database = reference.database
        func fits(_ s: Snapshot) -> Bool {
            sameBytes(s.database, database) || sameBytes(s.path, database) || sameBytes(s.path, FilePaths.resolved(database))
        }
        let ofDatabase = snapshots.filter(fits)
        guard let first = ofDatabase.min(by: { $0.time < $1.time }) else {
            var names: [String] = []
            for s in snapshots where !names.contains(where: { sameBytes($0, s.database) }) { names.append(s.database) }
            let held = names.isEmpty ? "it holds none" : "it holds " + names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.joined(separator: ", ")
            throw fail("the repository \(repository.location) holds no database \(database) (\(held))")
        }
        let selected: RestorePoint
        var notes: [String] = []
        do {
            switch point {
            case .latest:
                selected = try ReplicaSelector.select("latest", from: snapshots, database: database, at: nil, repository: repository, note: { notes.append($0) })
            case .snapshot(let id):
                selected = try ReplicaSelector.select(id, from: snapshots, database: database, at: nil, repository: repository)
                if case .snapshot(let s) = selected, !fits(s) {
                    throw fail("snapshot \(s.shortID) is of \(s.database) (\(s.path) on \(s.hostname)), not of \(database)")
                }
            case .time(let t):
                guard t <= now + 1 else {
                    throw fail("\(Timestamp.iso8601(t)) is in the future (now is \(Timestamp.iso8601(now))); a moment is a state already committed")
                }
                guard t >= first.time else {
                    throw fail("no state of \(database) at or before \(Timestamp.iso8601(t)): its first is of \(Timestamp.iso8601(first.time))")
                }
                selected = try ReplicaSelector.select("latest", from: snapshots, database: database, at: t, repository: repository, note: { notes.append($0) })
            }
        } catch let error as StoreError where error.kind == .notFound || error.location == repository.location {
            throw fail(error.message)
        }
        let request = try selected.request(target: "", repository: repository)
        let snapshot = request.snapshot
        let ids: [PageID]
        if let stateIDs = request.pageIDs {
            ids = stateIDs  // checked against the state's digest by stateIDs
        } else {
            ids = try repository.readPageList(of: snapshot)
            if let recorded = snapshot.pagesSHA256, !Array(PagesDigest.of(ids).utf8).elementsEqual(Array(recorded.utf8)) {
                throw StoreError(.other, location: repository.location, message: RepoRestore.listMismatch(snapshot, repository: repository, rebuilt: false))
            }
        }
        guard ids.count == snapshot.pageCount || request.pageIDs != nil else {
            throw StoreError(.other, location: repository.location, message: "snapshot \(snapshot.shortID) says \(snapshot.pageCount) pages, its page list holds \(ids.count)")
        }
        // The index read to open the moment before serves again while it locates every page.
        var map: StatePages?
        if let known { map = try? repository.pageMap(ids: ids, pageSize: snapshot.pageSize, index: known) }
        let located = try map ?? repository.pageMap(ids: ids, pageSize: snapshot.pageSize, index: try repository.loadIndex())
        var stateNumber: UInt64 = 0, base = snapshot.id
        if case .state(let chain, let s) = selected { stateNumber = s.number; base = chain.base.id }
        let pages = MomentPages(ids: ids, pageSize: snapshot.pageSize, map: located, fetcher: fetcher)
        let moment = Moment(reference: reference, time: selected.time, snapshotID: base, state: stateNumber,
                            pageSize: snapshot.pageSize, pageIDs: ids, repository: repository, options: options, pages: pages)
        moment.notes = notes
        // Page 1 fetched now: a repository that cannot give it fails here, and
        // its header must say the page size the state records.
        if !ids.isEmpty {
            let first = try pages.page(1)
            let raw = Int(first[16]) << 8 | Int(first[17])
            guard first.starts(with: Array("SQLite format 3\0".utf8)), (raw == 1 ? 65536 : raw) == snapshot.pageSize else {
                throw StoreError(.other, location: repository.location, message: "page 1 of \(reference.text) is not a database header of \(snapshot.pageSize)-byte pages")
            }
            // The header's page count, when valid (its change counter equals
            // its version-valid-for number), is the one SQLite believes: it
            // must be the state's, or SQLite would read past the moment's end.
            func word(_ at: Int) -> Int { first[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
            if word(24) == word(92), word(28) != 0, word(28) != ids.count {
                throw StoreError(.other, location: repository.location, message: "page 1 of \(reference.text) says \(word(28)) pages, its state has \(ids.count)")
            }
        }
        return moment
    }
}
