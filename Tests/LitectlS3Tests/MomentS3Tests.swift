// Moments (Moments/) over S3: a run replicated into moto's S3 server on
// loopback, encrypted, opened at random moments straight from the bucket
// (ranged GETs of its packs) reads as the file `litectl restore --at` of
// the same WHEN writes, page for page and row for row.
import Foundation
import Testing
import LitectlCore
import LitectlS3
import TestSupport

@Suite struct MomentS3Tests {
    @Test func aMomentInS3IsTheStateRestoreGives() throws {
        guard let server = MotoServer.shared else { return }
        let folder = try TemporaryFolder("moments-s3")
        let bucket = try server.makeBucket()
        let url = "s3://\(bucket)/repo"
        let env = ["AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"]
        let options = ["--endpoint", server.endpoint, "--key-file", folder.file("key")]
        let r = try MomentRun.run(db: folder.file("app.db"), url: url, options: options, env: env, folder: folder, seed: 5)
        try #require(r.status == 0, "\(r.stdout) \(r.stderr)")
        setenv("AWS_ACCESS_KEY_ID", "test", 1)
        setenv("AWS_SECRET_ACCESS_KEY", "test", 1)
        let store = try S3ObjectStore(url: url, options: S3Options(endpoint: server.endpoint, region: "us-east-1"))
        let repository = try Repository.open(store, secret: .keyFile(folder.file("key")))
        let snapshots = try repository.snapshots().snapshots
        let from = snapshots.map(\.time).min()!
        var to = snapshots.map(\.time).max()!
        for base in Repository.chainBases(snapshots) { to = max(to, try repository.loadChain(base).lastTime) }
        var rng = SplitMix64(seed: 11)
        var whens = (0..<6).map { _ in String(format: "%.3f", from + Double(rng.next() % 1_000_000) / 1_000_000 * (to - from + 0.5)) }
        whens.append("latest")
        for (i, when) in whens.enumerated() {
            let target = folder.file("at-\(i).db")
            let restore = try MomentRun.litectl(["restore", "latest", "--db", "app.db"] + (when == "latest" ? [] : ["--at", when])
                                                + [target, "--repo", url] + options, env: env)
            try #require(restore.status == 0, "\(restore.stderr)")
            let moment = try Moment.open(MomentReference(database: "app.db", when: when), repository: repository)
            if let difference = try MomentRun.difference(moment.registration, restored: target) {
                Issue.record("\(when): \(difference)")
            }
            #expect(moment.fetched.requests > 0 && moment.fetched.bytes > 0)
        }
    }
}
