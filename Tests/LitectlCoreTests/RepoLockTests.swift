// Locks read back whole: the JSON of a lock is found from its end (the random
// letters after it), so a host name with a `}` does not make a live lock
// unreadable, which would count it as stale and let prune run beside it.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct RepoLockTests {
    @Test func aHostNameWithABraceReadsBack() throws {
        let folder = try TemporaryFolder("repo-lock")
        let store = FolderStore(path: folder.file("repo"))
        try store.createRoot()
        let repository = try Repository.initialize(store, secret: nil)
        let body = JSON.object([("hostname", .string("evil}host \"x\"")), ("pid", .integer(Int64(getpid()))),
                                ("time_unix", .number(Date().timeIntervalSince1970)), ("exclusive", .bool(true)),
                                ("command", .string("prune"))]).compact
        _ = try repository.putObject(prefix: "locks", Array(body.utf8) + Array(" abcdefghijklmnop".utf8))
        let locks = try RepoLock.list(repository)
        #expect(locks.count == 1)
        #expect(locks.first?.hostname == "evil}host \"x\"" && locks.first?.command == "prune" && locks.first?.exclusive == true,
                "\(String(describing: locks.first))")
    }
}
