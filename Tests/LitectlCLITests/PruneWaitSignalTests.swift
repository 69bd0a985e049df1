// A prune that waits for a shared lock with its own exclusive lock in place
// (docs/repository.md, "Locks") and is stopped by a signal removes its lock
// before it ends: no lock is left behind that would keep every backup out
// until it went stale.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct PruneWaitSignalTests {
    @Test(arguments: [SIGINT, SIGTERM])
    func aWaitingPruneStoppedByASignalLeavesNoLock(_ signal: Int32) throws {
        let folder = try TemporaryFolder("prune-wait-signal")
        let repo = folder.file("repo")
        #expect(try runLitectl(["repo", "init", repo]).status == 0)
        let store = FolderStore(path: repo)
        // A live shared lock (this test process holds it).
        let shared = #"{"hostname":"\#(RepoLock.hostname)","pid":\#(getpid()),"time_unix":\#(Date().timeIntervalSince1970),"exclusive":false,"command":"backup"} x"#
        let sharedKey = "locks/" + String(repeating: "c", count: 64)
        try store.put(sharedKey, Array(shared.utf8))
        let prune = try Child(litectlBinary, ["prune", "--timeout", "60", "--repo", repo], output: folder.file("prune.log"))
        #expect(waitUntil(30, every: 0.05) { ((try? store.list(prefix: "locks/")) ?? []).count == 2 }, "the prune's lock waits in place")
        Thread.sleep(forTimeInterval: 0.7)
        #expect(try store.list(prefix: "locks/").count == 2, "still waiting")
        prune.signal(signal)
        let status = prune.wait()
        #expect(status == 2, "exit status \(status)")
        let said = (try? String(contentsOfFile: folder.file("prune.log"), encoding: .utf8)) ?? ""
        #expect(said.contains("interrupted by"), "\(said)")
        #expect(try store.list(prefix: "locks/").map(\.key) == [sharedKey], "the prune's lock is gone")
    }
}
