// Backup runs as library calls (what the executable used to do itself): a
// folder run backs up each source on its own, applies retention after each and
// writes the metrics file; a repository run's settings merge a host config
// with the command line by the documented rules.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct BackupRunTests {
    @Test func aFolderRunBacksUpEachSourceAppliesRetentionAndWritesMetrics() throws {
        let folder = try TemporaryFolder("backup-run")
        let a = folder.file("a.db"), out = folder.file("out"), metrics = folder.file("m.prom")
        try makeDatabase(a, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        var request = BackupRunRequest(sources: [a, folder.file("missing.db")], destination: out)
        request.retention = RetentionPolicy(last: 1)
        request.metricsFile = metrics
        var reported: [String] = []
        let first = try BackupRun.run(request, report: { reported.append($0.source) })
        #expect(reported == [a, folder.file("missing.db")], "each source reported as it finishes, in order")
        #expect(first.results[0].outcome != nil && first.results[1].error?.message == "no such file")
        #expect(first.metricsError == nil)
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("litectl_backup_success{source=\"\(BackupJob.resolvedPath(a))\"} 1"))
        #expect(text.contains("litectl_backup_success{source=\"\(BackupJob.resolvedPath(folder.file("missing.db")))\"} 0"))
        // A second run keeps the newest backup only, and says which it removed.
        request.sources = [a]
        Thread.sleep(forTimeInterval: 1.1)  // a backup's name has a one-second timestamp
        let second = try BackupRun.run(request)
        let kept = try #require(second.results[0].outcome?.backupPath)
        #expect(second.results[0].pruned == [first.results[0].outcome!.backupPath])
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasSuffix(".db") } == [DurableFolder.baseName(of: kept)])
        // The dry run says what would go were a backup made now.
        let preview = try BackupRun.preview(request)
        #expect(preview.map(\.backups) == [[kept]])
        // A missing destination folder: the run does not start.
        #expect(throws: DatabaseError.self) { try BackupRun.run(BackupRunRequest(sources: [a], destination: folder.file("none/"))) }
    }

    @Test func aHostConfigMergesWithTheCommandLine() throws {
        let folder = try TemporaryFolder("backup-run-config")
        try makeDatabase(folder.file("x.db"), "CREATE TABLE t(x);")
        let config = try HostConfig.parse("""
            repository = "repo"
            endpoint = "http://config:9000"
            key_file = "config.key"
            databases = ["*.db", "nothing-*.sqlite"]
            tags = ["host"]
            jobs = 3
            timeout = 7
            verify = "full"
            metrics_file = "config.prom"
            warn_shrink = 50
            [keep]
            daily = 7
            """, path: folder.file("host.toml"))
        var commandLine = RepoBackupSettings()
        commandLine.location.endpoint = "http://cli:9000"
        commandLine.tags = ["cli"]
        commandLine.timeout = 60
        commandLine.shrink.allowEmpty = true
        var s = RepoBackupSettings.merging(config: config, commandLine: commandLine, jobsGiven: false,
                                           allowEmptyGiven: true, warnShrinkGiven: false)
        #expect(s.location.url == folder.file("repo") && s.location.endpoint == "http://cli:9000"
                && s.location.keyFile == folder.file("config.key"))
        #expect(s.sources == [folder.file("x.db")] && s.unmatched == [folder.file("nothing-*.sqlite")])
        #expect(s.tags == ["host", "cli"] && s.jobs == 3 && s.timeout == 7 && s.verify == .full)
        #expect(s.retention == RetentionPolicy(daily: 7) && s.metricsFile == folder.file("config.prom"))
        #expect(s.shrink.allowEmpty && s.shrink.warnFraction == 0.5)
        // Command-line retention and jobs win over the file's.
        commandLine.retention = RetentionPolicy(last: 2)
        commandLine.jobs = 1
        s = RepoBackupSettings.merging(config: config, commandLine: commandLine, jobsGiven: true,
                                       allowEmptyGiven: false, warnShrinkGiven: false)
        #expect(s.retention == RetentionPolicy(last: 2) && s.jobs == 1 && !s.shrink.allowEmpty)
    }
}
