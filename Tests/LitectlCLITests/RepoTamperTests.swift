// A repository altered behind litectl's back: a byte flipped, an object cut
// short, or another valid object of the same kind put in its place, for each
// kind of object (pack, index, page list, snapshot). `verify --read-data`
// exits 1 naming what is damaged, and every restore either rebuilds exactly
// the database its snapshot was taken of (`litectl hash` of the source then)
// or exits 2 writing nothing: never a wrong database.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RepoTamperTests {
    enum Kind: String, CaseIterable, CustomStringConvertible, Sendable {
        case pack = "packs/", index = "index/", list = "lists/", snapshot = "snapshots/"
        var description: String { String(rawValue.dropLast()) }
    }

    enum Damage: String, CaseIterable, CustomStringConvertible, Sendable {
        case flip, truncate, swap
        var description: String { rawValue }
    }

    /// Every object key under `prefix` in the folder repository at `repo`.
    func keys(_ repo: String, _ prefix: String) throws -> [String] {
        let root = URL(fileURLWithPath: repo + "/" + prefix)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
        var out: [String] = []
        for case let url as URL in walker where !url.hasDirectoryPath && !url.lastPathComponent.hasPrefix(".") {
            out.append(prefix + url.path.dropFirst(root.path.count + 1))
        }
        return out.sorted()
    }

    func hash(_ db: String) throws -> String {
        String(try litectl("hash", db).stdout.split(separator: " ").first ?? "")
    }

    @Test(arguments: Kind.allCases, Damage.allCases)
    func aTamperedRepositoryIsFoundAndNeverRestoresAWrongDatabase(_ kind: Kind, _ damage: Damage) throws {
        let folder = try TemporaryFolder("repo-tamper")
        let repo = folder.file("repo"), app = folder.file("app.db"), other = folder.file("other.db")
        try makeDatabase(app, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);
            WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r WHERE i<3000) INSERT INTO t SELECT i, randomblob(120) FROM r;
            """)
        try makeDatabase(other, "CREATE TABLE o(x); INSERT INTO o VALUES ('other');")
        // Small packs, so that there are several of each kind of object.
        func litectl(_ arguments: String...) throws -> ProcessResult {
            try runProcess("/usr/bin/env", ["LITECTL_PACK_SIZE=65536", litectlBinary] + arguments)
        }
        #expect(try litectl("repo", "init", repo).status == 0)
        var expected: [String: String] = [:]  // snapshot id -> logical hash of its source
        func backup(_ db: String) throws {
            let r = try litectl("backup", db, "--repo", repo, "--json")
            #expect(r.status == 0, "\(r.stderr)")
            let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
            let id = try #require((json?["snapshot"] as? [String: Any])?["id"] as? String)
            expected[id] = try hash(db)
        }
        try backup(app)
        _ = try sqlite3([app, "UPDATE t SET v = randomblob(120) WHERE id % 5 = 0"])
        try backup(app)
        try backup(other)

        // The object to alter, and another of its kind to put in its place.
        let all = try keys(repo, kind.rawValue)
        #expect(all.count >= 2, "\(kind): \(all)")
        let key = all[all.count / 2], partner = all.first { $0 != key }!
        let path = repo + "/" + key
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        switch damage {
        case .flip: bytes[bytes.count / 2] ^= 0x40
        case .truncate: bytes = Array(bytes.prefix(bytes.count * 2 / 3))
        case .swap: bytes = try Array(Data(contentsOf: URL(fileURLWithPath: repo + "/" + partner)))
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let id = String(key.split(separator: "/").last!)

        let verify = try litectl("verify", "--repo", repo, "--read-data")
        #expect(verify.status == 1, "\(kind) \(damage): \(verify.status) \(verify.stdout) \(verify.stderr)")
        #expect((verify.stdout + verify.stderr).contains(id), "\(kind) \(damage): the damaged object is named: \(verify.stdout) \(verify.stderr)")

        var refused = 0
        for (snapshot, sourceHash) in expected.sorted(by: { $0.key < $1.key }) {
            let target = folder.file("restored-\(snapshot.prefix(8)).db")
            let r = try litectl("restore", "--repo", repo, snapshot, target)
            if r.status == 0 {
                #expect(try hash(target) == sourceHash, "\(kind) \(damage): snapshot \(snapshot) restored to another database")
            } else {
                refused += 1
                #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1, "\(kind) \(damage): \(r.stderr)")
                #expect(!FileManager.default.fileExists(atPath: target), "\(kind) \(damage): nothing written")
            }
        }
        #expect(refused >= 1, "\(kind) \(damage): the damage affects a snapshot")
        #expect(try folder.listing().allSatisfy { !$0.contains(".tmp-") }, "no temporary file left")
    }
}
