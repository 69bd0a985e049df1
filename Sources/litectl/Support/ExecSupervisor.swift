// `replicate --exec CMD`: the application as replicate's child, as Litestream's
// -exec runs it. CMD starts once every database is followed; SIGTERM and
// SIGINT go to it; when it exits, what is committed is shipped and replicate
// exits with its status.
import Foundation
import LitectlCore

/// Runs a replicator with a child command beside it.
final class ExecSupervisor: @unchecked Sendable {
    let command: String
    /// How many databases must report `.started` before the child starts.
    let databases: Int
    private let condition = NSCondition()
    private var started = Set<String>()
    private var replicationEnded = false
    private var replicationResult: Result<Bool, any Error> = .success(true)
    private var child: ChildProcess?
    private var stopBeforeStart = false

    init(command: String, sources: [String]) {
        self.command = command
        self.databases = Set(sources.map { BackupJob.resolvedPath($0) }).count
    }

    /// Every event of the replicator passes here first.
    func observe(_ event: ReplicateEvent) {
        guard case .started(let database, _, _, _) = event else { return }
        condition.lock(); started.insert(database); condition.broadcast(); condition.unlock()
    }

    /// SIGTERM or SIGINT: to the child when it runs (replicate stops when it
    /// exits); before it starts, replicate stops and the child never starts.
    /// Returns false when the replicator should be stopped instead.
    func forward(_ signal: Int32) -> Bool {
        condition.lock(); defer { condition.unlock() }
        if let child { child.signal(signal); return true }
        stopBeforeStart = true
        condition.broadcast()
        return false
    }

    /// Follows, runs the child, and returns the exit status: the child's
    /// when it failed; otherwise 0 when everything was shipped, 2 when not.
    func run(_ replicator: Replicator, voice: VoiceOptions) -> Int32 {
        let follow = Thread { [self] in
            let result = Result { try replicator.run() }
            condition.lock(); replicationResult = result; replicationEnded = true; condition.broadcast(); condition.unlock()
        }
        follow.name = "litectl-replicate"
        follow.start()

        // The child starts once every database is followed (Litestream starts
        // -exec once its databases are open): a start that fails (a database
        // not in WAL mode, another follower's lease) never runs it.
        condition.lock()
        while started.count < databases && !replicationEnded && !stopBeforeStart { condition.wait() }
        let startIt = !replicationEnded && !stopBeforeStart
        condition.unlock()
        guard startIt else { return finish(replicator, childStatus: nil, voice: voice) }
        do {
            let process = try ChildProcess(shellCommand: command)
            condition.lock(); child = process; condition.unlock()
            if voice.verbose { printError("started \(command) (pid \(process.pid))") }
        } catch {
            printError(describe(error))
            replicator.stop()
            _ = finish(replicator, childStatus: nil, voice: voice)
            return 2
        }
        let ending = Thread { [self] in
            // Replication that ends while the application runs (every
            // follower's lease taken over) leaves it running, as Litestream
            // does: said once, and the exit status says it at the end.
            condition.lock()
            while !replicationEnded { condition.wait() }
            let endedFirst = child != nil && !childEnded
            condition.unlock()
            if endedFirst { printError("replication ended while \(command) runs; it keeps running") }
        }
        ending.start()
        let exit = child!.wait()
        condition.lock(); childEnded = true; condition.unlock()
        if voice.verbose || (exit.status != 0 && !voice.quiet) {
            printError("\(command) exited with status \(exit.status); shipping what is committed")
        }
        replicator.stop()
        return finish(replicator, childStatus: exit.status, voice: voice)
    }

    private var childEnded = false

    /// Waits for the replicator to end; the status to exit with.
    private func finish(_ replicator: Replicator, childStatus: Int32?, voice: VoiceOptions) -> Int32 {
        condition.lock()
        while !replicationEnded { condition.wait() }
        let result = replicationResult
        condition.unlock()
        var shipped = false
        switch result {
        case .success(let complete): shipped = complete
        case .failure(let error): printError(describe(error))
        }
        if let childStatus, childStatus != 0 { return childStatus }
        return shipped ? 0 : 2
    }
}
