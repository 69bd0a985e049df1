// Follows one database into the repository, in three parts: the WAL loop
// (WALLoop.swift: the -wal read at each poll, under read marks), the chain
// writer (ChainWriter.swift: the states recorded, segments cut every
// interval, folds, the period's gatherings) and the shipper
// (Shipper.swift: the objects written, on a thread of its own). It starts
// from the repository's own record (the newest chain of this database on
// this host), so a follower killed at any moment resumes with no gap and no
// duplicate. It never writes to the database. Part of the replicate
// capability, built on Repository/.
import Foundation

/// Stop and fold requests, shared between the replicator's threads.
final class FollowerControl: @unchecked Sendable {
    private let lock = NSLock()
    private var stop = false
    private var fold = false

    var stopRequested: Bool { lock.lock(); defer { lock.unlock() }; return stop }
    func requestStop() { lock.lock(); stop = true; lock.unlock() }
    func requestFold() { lock.lock(); fold = true; lock.unlock() }
    func takeFold() -> Bool { lock.lock(); defer { lock.unlock() }; let f = fold; fold = false; return f }
}

/// A failure after which the follower starts again from the repository (reopening the database).
struct FollowerRestart: Error, CustomStringConvertible { var description: String }

final class DatabaseFollower {
    let source: String
    let path: String
    let repository: Repository
    let options: ReplicateOptions
    /// This database's lease in the repository (the Replicator renews it):
    /// the shipper writes nothing while it is not held; taken over, the follower stops.
    let lease: FollowerLease?
    let control: FollowerControl
    let status: FollowerStatus
    let report: (ReplicateEvent) -> Void

    /// What may wait to be shipped before the follower lets its mark go
    /// (`stall`): 16 MB (LITECTL_REPLICATE_QUEUE_BYTES, at least 64 KiB,
    /// lets a test reach it within seconds).
    static let queueLimit = Int(ProcessInfo.processInfo.environment["LITECTL_REPLICATE_QUEUE_BYTES"] ?? "").map { max(1 << 16, $0) } ?? 16 << 20

    init(source: String, repository: Repository, options: ReplicateOptions, lease: FollowerLease? = nil, control: FollowerControl,
         status: FollowerStatus, report: @escaping (ReplicateEvent) -> Void) {
        self.source = source
        path = FilePaths.resolved(source)
        self.repository = repository; self.options = options; self.lease = lease; self.control = control; self.status = status; self.report = report
    }

    /// Follows until a stop is requested; returns whether every state
    /// recorded was shipped. Throws (after shipping what it recorded) when it
    /// must start again from the repository. The session (read marks,
    /// shipper, chain writer, WAL loop) is made here and lives for this run.
    func run() throws -> Bool {
        let marks = try ReadMarks(path: source)
        let pageSize: Int
        do { pageSize = try marks.pageSize() } catch { marks.close(); throw error }
        let shipper = Shipper(repository: repository, database: source, lease: lease, limit: Self.queueLimit, shipped: { [status, report, source] unit, bytes in
            status.shipped(unit, bytes: bytes)
            report(.shipped(ReplicateEvent.Shipment(database: source, unit: unit, bytes: bytes)))
        }, problem: { [status, report, source] message, retrying in
            status.noteError()
            report(.problem(database: source, message: message, retrying: retrying))
        })
        let shipping = NamedThread("litectl-ship") { shipper.run() }
        let resyncing = Locked(false)
        let control = self.control
        let chain = ChainWriter(source: source, path: path, repository: repository, options: options, pageSize: pageSize, shipper: shipper,
                                status: status, report: report, mayWait: { !control.stopRequested && resyncing.withLock { $0 } })
        let loop = WALLoop(source: source, marks: marks, pageSize: pageSize, options: options, control: control, lease: lease,
                           chain: chain, shipper: shipper, status: status, resyncing: resyncing, report: report)
        func finish() -> Bool {
            shipper.finish(giveUpAt: Clock.now() + options.stopTimeout)
            return shipping.wait() && !shipper.failed
        }
        do {
            try loop.follow()
        } catch {
            marks.close()
            _ = finish()
            throw error
        }
        // Every commit is recorded: the read mark goes, and the period's
        // segments are gathered.
        marks.close()
        chain.finishPeriod()
        return finish()
    }
}
