// Several databases into one repository in one run (`backup DB... --repo`,
// `backup --config`): one shared lock, the index read once, `jobs` databases
// at a time; a failure of one database does not stop the others.
import Foundation

public struct RepoBatchResult: Sendable {
    public var source: String
    public var outcome: RepoBackupOutcome?
    public var error: String?
    public var corrupt = false
    /// The source was refused as empty (`EmptySource`).
    public var empty = false
}

public enum RepoBackupBatch {
    /// Backs up every source; `report` is called as each finishes (from the
    /// worker threads, one call at a time), and the results return in source order.
    public static func run(_ sources: [String], repository: Repository, template: RepoBackupRequest, jobs: Int,
                           lockTimeout: Double,
                           progress: @escaping @Sendable (String, RepoBackupProgress) -> Void = { _, _ in },
                           report: @escaping @Sendable (RepoBatchResult) -> Void = { _ in }) throws -> (results: [RepoBatchResult], staleLocks: [RepoLockInfo]) {
        let lock = try RepoLock(repository, exclusive: false, command: "backup", timeout: lockTimeout)
        defer { lock.release() }
        if let folder = repository.store as? FolderStore { folder.removeStaleTemporaryFiles() }
        // Temporary copies (and their -wal/-shm) that backups killed with SIGKILL left.
        TemporaryFiles.removeStale(in: TemporaryFiles.folder(template.temporaryFolder), stem: RepoBackup.temporaryStem)
        let index = SharedIndex(try repository.loadIndex())
        let snapshots = try repository.snapshots().snapshots
        let results = ResultBox(count: sources.count)
        let next = Counter()
        let workers = max(1, min(jobs, sources.count))
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while true {
                let i = next.take()
                guard i < sources.count else { return }
                var request = template
                request.source = sources[i]
                var result = RepoBatchResult(source: sources[i])
                do {
                    result.outcome = try RepoBackup.run(request, repository: repository, index: index, snapshots: snapshots, lock: lock,
                                                        rememberPages: sources.count > 1) {
                        progress(sources[i], $0)
                    }
                } catch {
                    result.error = (error as? DatabaseError)?.description ?? "\(error)"
                    result.corrupt = (error as? DatabaseError)?.code.primary == .corrupt
                    result.empty = (error as? DatabaseError)?.code.primary == .empty
                }
                results.set(i, result)
                report(result)
            }
        }
        return (results.all, lock.ignoredStale)
    }

    final class Counter: @unchecked Sendable {
        private var value = 0
        private let lock = NSLock()
        func take() -> Int { lock.lock(); defer { lock.unlock() }; value += 1; return value - 1 }
    }

    final class ResultBox: @unchecked Sendable {
        private var items: [RepoBatchResult?]
        private let lock = NSLock()
        init(count: Int) { items = Array(repeating: nil, count: count) }
        func set(_ i: Int, _ r: RepoBatchResult) { lock.lock(); items[i] = r; lock.unlock() }
        var all: [RepoBatchResult] { lock.lock(); defer { lock.unlock() }; return items.map { $0! } }
    }
}
