// docs/repository.md is complete enough for a second implementation: a reader
// written from it alone (Tests/Fixtures/repo-v3/spec_reader.py, in Python)
// rebuilds every snapshot of the committed version-3 fixtures (plain, key
// file, passphrase) byte for byte as litectl's restore does and decodes a lock
// litectl takes; the page's worked example is that reader's output on the
// fixtures, word for word. The sqlite3 CLI judges the rebuilt databases.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct RepositorySpecTests {
    static let fixtures = packageRoot + "/Tests/Fixtures/repo-v3"
    static let reader = fixtures + "/spec_reader.py"
    static let spec = packageRoot + "/docs/repository.md"

    /// Runs the reader; its exit status 3 means python3's cryptography
    /// package or the zstd command is missing (.ci/run installs both).
    func runReader(_ arguments: [String]) throws -> ProcessResult {
        let r = try runProcess("/usr/bin/env", ["python3", Self.reader] + arguments)
        #expect(r.status != 3, "the spec reader cannot run here: \(r.stderr)")
        return r
    }

    /// A copy of the fixtures, so that nothing a test does reaches the committed ones.
    func fixtureCopy(_ folder: TemporaryFolder) throws -> String {
        let target = folder.file("repo-v3")
        try FileManager.default.copyItem(atPath: Self.fixtures, toPath: target)
        return target
    }

    @Test(arguments: ["plain", "keyfile", "passphrase"])
    func theSpecsReaderRebuildsEverySnapshotAsRestoreDoes(repo: String) throws {
        let folder = try TemporaryFolder("repo-spec")
        let root = try fixtureCopy(folder)
        let arguments = switch repo {
        case "keyfile": ["--key-file", root + "/keyfile.key"]
        case "passphrase": ["--passphrase-file", root + "/passphrase.txt"]
        default: [String]()
        }
        let out = folder.file("by-spec")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let r = try runReader(["restore", root + "/" + repo, out] + arguments)
        try #require(r.status == 0, "\(r.stderr)")
        let rebuilt = try r.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(rebuilt.count == (repo == "plain" ? 2 : 1))

        let secretValue: RepoSecret? = switch repo {
        case "keyfile": .keyFile(root + "/keyfile.key")
        case "passphrase": .passphrase(Array("correct horse battery staple".utf8))
        default: nil
        }
        let repository = try Repository.open(FolderStore(path: root + "/" + repo), secret: secretValue)
        #expect(repository.version == 3)
        let listed = try repository.snapshots()
        #expect(listed.damaged.isEmpty)
        #expect(listed.snapshots.map(\.id) == rebuilt.map { $0["snapshot"] as? String ?? "" }, "the same snapshots, in time order")
        for (snapshot, spec) in zip(listed.snapshots, rebuilt) {
            let byLitectl = folder.file("\(snapshot.id).litectl.db")
            _ = try RepoRestore.run(RepoRestoreRequest(snapshot: snapshot, target: byLitectl), repository: repository)
            let bySpec = try #require(spec["file"] as? String)
            #expect(FileManager.default.contents(atPath: bySpec) == FileManager.default.contents(atPath: byLitectl),
                    "\(repo) \(snapshot.shortID): the spec's reader and litectl's restore rebuild the same bytes")
            #expect(try sqlite3Scalar(bySpec, "PRAGMA integrity_check") == "ok")
            #expect(try sqlite3Scalar(bySpec, "SELECT count(*) FROM note") == "40")
            #expect(try ContentHasher.hash(path: bySpec).digest == snapshot.logicalHash)
        }
        if repo == "plain" {
            // The first state, then the second (one row edited).
            let bodies = try rebuilt.map { try sqlite3Scalar(try #require($0["file"] as? String), "SELECT body FROM note WHERE id = 7") }
            #expect(bodies == ["note 07: the quick brown fox jumps over the lazy dog", "note 07: edited"])
        }
    }

    @Test func theWorkedExampleIsTheSpecsReaderOnTheFixtures() throws {
        let folder = try TemporaryFolder("repo-spec-example")
        let r = try runReader(["example", try fixtureCopy(folder)])
        try #require(r.status == 0, "\(r.stderr)")
        let page = try String(contentsOfFile: Self.spec, encoding: .utf8)
        let begin = "<!-- BEGIN WORKED EXAMPLE -->\n", end = "<!-- END WORKED EXAMPLE -->"
        let start = try #require(page.range(of: begin)), stop = try #require(page.range(of: end))
        let inPage = String(page[start.upperBound..<stop.lowerBound])
        if inPage != r.stdout {
            // Name the first line that differs rather than printing both whole.
            let a = inPage.split(separator: "\n", omittingEmptySubsequences: false)
            let b = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let n = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
            Issue.record("""
                docs/repository.md's worked example differs from what the spec's reader prints \
                (python3 Tests/Fixtures/repo-v3/spec_reader.py example Tests/Fixtures/repo-v3), \
                first at its line \(n + 1): page \(n < a.count ? "\"\(a[n])\"" : "(ends)"), \
                reader \(n < b.count ? "\"\(b[n])\"" : "(ends)")
                """)
        }
        // The derivations it shows name the code's info strings (which the
        // reader, having opened the fixtures with them, has proven).
        for info in ["litectl key file", "litectl repository encryption", "litectl repository page id"] {
            #expect(r.stdout.contains("\"\(info)\")"), "\(info)")
            #expect(page.contains("`\(info)`"), "the Keys section names \(info)")
        }
    }

    @Test func theSpecsReaderDecodesALockLitectlTakes() throws {
        let folder = try TemporaryFolder("repo-spec-lock")
        let root = try fixtureCopy(folder)
        let repository = try Repository.open(FolderStore(path: root + "/keyfile"), secret: .keyFile(root + "/keyfile.key"))
        let lock = try RepoLock(repository, exclusive: true, command: "prune", timeout: 5)
        defer { lock.release() }
        let r = try runReader(["lock", root + "/keyfile", lock.key, "--key-file", root + "/keyfile.key"])
        try #require(r.status == 0, "\(r.stderr)")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(body["hostname"] as? String == RepoLock.hostname)
        #expect((body["pid"] as? NSNumber)?.int32Value == getpid())
        #expect(body["exclusive"] as? Bool == true)
        #expect(body["command"] as? String == "prune")
        let age = Date().timeIntervalSince1970 - ((body["time_unix"] as? NSNumber)?.doubleValue ?? 0)
        #expect(age >= 0 && age < 600)
    }
}
