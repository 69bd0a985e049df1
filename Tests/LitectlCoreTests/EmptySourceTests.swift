// A backup's look at its source's schema (is there anything to back up?)
// runs on a connection without a busy handler, like the copy: a writer's
// rollback-journal lock taken between the open and that look is waited for
// up to the lock timeout, never an immediate "database is locked" (which a
// busy writer once caused in a cron-like test run).
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct EmptySourceTests {
    @Test func aLockTakenAfterTheOpenIsWaitedFor() throws {
        let folder = try TemporaryFolder("empty-source-locked")
        let db = folder.file("app.db")
        try makeDatabase(db, "PRAGMA journal_mode=delete; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let source = try HotCopy.openSource(db, timeout: 5)
        defer { try? source.close() }
        // Another process holds EXCLUSIVE for 1.5 s from now.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = ["-c", "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(1.5); c.execute('COMMIT')", db]
        let out = Pipe()
        holder.standardOutput = out
        try holder.run()
        #expect(String(decoding: out.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("locked"))
        let started = Date()
        #expect(throws: Never.self) { try EmptySource.require(source, path: db, policy: SourceShrinkPolicy(), timeout: 10) }
        #expect(Date().timeIntervalSince(started) > 0.5, "it waited for the lock")
        holder.waitUntilExit()
        // With no time to wait, the lock is the error, naming the file.
        let again = Process()
        again.executableURL = holder.executableURL
        again.arguments = holder.arguments
        let out2 = Pipe()
        again.standardOutput = out2
        try again.run()
        _ = out2.fileHandleForReading.availableData
        #expect {
            try EmptySource.require(source, path: db, policy: SourceShrinkPolicy(), timeout: 0)
        } throws: { error in
            guard let error = error as? DatabaseError else { return false }
            return error.code.primary == .busy || error.code.primary == .locked
        }
        again.waitUntilExit()
    }
}
