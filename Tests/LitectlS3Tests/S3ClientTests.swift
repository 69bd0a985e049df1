// The S3 store against a real S3 API server on loopback (moto), each test in
// its own bucket, with the AWS CLI as an independent client; retries through
// a proxy that injects 503s, stalls and dropped connections; credentials and
// settings resolved as the AWS CLI does.
import Foundation
import Testing
import LitectlCore
import LitectlS3
import TestSupport

@Suite struct S3ClientTests {
    func store(_ server: MotoServer, bucket: String, prefix: String = "repo", endpoint: String? = nil,
               tuning: S3Tuning = S3Tuning()) throws -> S3ObjectStore {
        setenv("AWS_ACCESS_KEY_ID", "test", 1)
        setenv("AWS_SECRET_ACCESS_KEY", "test", 1)
        return try S3ObjectStore(url: "s3://\(bucket)/\(prefix)", options: S3Options(endpoint: endpoint ?? server.endpoint, region: "us-east-1"),
                                 tuning: tuning)
    }

    func aws(_ server: MotoServer, _ arguments: [String], input: [UInt8]? = nil) throws -> ProcessResult {
        try runProcess("/usr/bin/env", ["AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION=us-east-1",
                                        "aws", "--endpoint-url", server.endpoint] + arguments, input: input)
    }

    @Test func objectsRoundTripAndTheAWSCLIAgrees() throws {
        guard let server = MotoServer.shared else { return }
        let bucket = try server.makeBucket()
        let s = try store(server, bucket: bucket)
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        try s.put("packs/ab/one & two", bytes)
        #expect(try s.get("packs/ab/one & two") == bytes)
        #expect(try s.get("packs/ab/one & two", offset: 1000, length: 10) == Array(bytes[1000..<1010]))
        #expect(try s.get("packs/ab/one & two", offset: 99_995, length: 10) == Array(bytes[99_995...]), "a range past the end is cut")
        // The AWS CLI lists and reads what we wrote, and we read what it wrote.
        let listing = try aws(server, ["s3", "ls", "--recursive", "s3://\(bucket)/"])
        #expect(listing.stdout.contains("repo/packs/ab/one & two"), "\(listing.stdout)")
        #expect(try aws(server, ["s3", "cp", "s3://\(bucket)/repo/packs/ab/one & two", "-"]).stdoutBytes == bytes)
        #expect(try aws(server, ["s3", "cp", "-", "s3://\(bucket)/repo/config"], input: Array("hello".utf8)).status == 0)
        #expect(try s.get("config") == Array("hello".utf8))
        #expect(try s.list(prefix: "").map(\.key) == ["config", "packs/ab/one & two"])
        #expect(try s.list(prefix: "packs/").map(\.size) == [100_000])
        try s.delete("config")
        try s.delete("config")  // missing is not an error
        #expect(throws: StoreError.self) { try s.get("config") }
        do { _ = try s.get("config") } catch let e as StoreError {
            #expect(e.kind == .notFound && e.description.hasPrefix("s3://\(bucket)/repo/config: "))
        }
    }

    @Test func listingFollowsContinuationTokens() throws {
        guard let server = MotoServer.shared else { return }
        let bucket = try server.makeBucket()
        let s = try store(server, bucket: bucket, prefix: "")
        for i in 0..<23 { try s.put(String(format: "index/%03d", i), [UInt8(i)]) }
        let keys = try s.client.list(prefix: "index/", maxKeys: 5, what: "t").map(\.key)
        #expect(keys == (0..<23).map { String(format: "index/%03d", $0) })
    }

    @Test func multipartUpload() throws {
        guard let server = MotoServer.shared else { return }
        let bucket = try server.makeBucket()
        var tuning = S3Tuning()
        tuning.multipartThreshold = 6 << 20
        tuning.partSize = 5 << 20
        let s = try store(server, bucket: bucket, tuning: tuning)
        var rng = SplitMix64(seed: 3)
        let bytes = (0..<(12 << 20)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        try s.put("big", bytes)
        #expect(try s.get("big") == bytes)
        let head = try aws(server, ["s3api", "head-object", "--bucket", bucket, "--key", "repo/big"])
        #expect(head.stdout.contains("\"ETag\": \"\\\"") && head.stdout.contains("-3\\\""), "a 3-part upload: \(head.stdout)")
    }

    @Test func clearErrors() throws {
        guard let server = MotoServer.shared else { return }
        var tuning = S3Tuning()
        tuning.attempts = 2
        tuning.backoff = 0.01
        let missing = try store(server, bucket: "no-such-bucket-\(getpid())")
        do { _ = try missing.list(prefix: "") ; Issue.record("listing a missing bucket must fail") } catch let e as StoreError {
            #expect(e.kind == .noSuchContainer && e.description.contains("no such bucket"), "\(e)")
        }
        let closed = try store(server, bucket: try server.makeBucket(), endpoint: "http://127.0.0.1:\(try MotoServerPort.unused())", tuning: tuning)
        do { try closed.put("x", [1]); Issue.record("a closed port must fail") } catch let e as StoreError {
            #expect(e.kind == .unavailable && e.description.contains("connection refused") && !e.description.contains("\n"), "\(e)")
        }
        #expect(throws: StoreError.self) { try S3ObjectStore.parse("s3://A_B/x") }
        #expect(try S3ObjectStore.parse("s3://bucket/a/b/") == ("bucket", "a/b"))
    }

    @Test(arguments: [["--fail-first", "3"], ["--fail-every", "2"], ["--drop-every", "2"], ["--stall-every", "3", "--stall", "3"]])
    func retriesRideOutFaults(_ faults: [String]) throws {
        guard let server = MotoServer.shared else { return }
        let bucket = try server.makeBucket()
        let proxy = try FaultProxy(upstream: server, arguments: faults)
        var tuning = S3Tuning()
        tuning.backoff = 0.05
        tuning.requestTimeout = 1.5
        let s = try store(server, bucket: bucket, endpoint: proxy.endpoint, tuning: tuning)
        let bytes = (0..<50_000).map { UInt8(truncatingIfNeeded: $0) }
        for i in 0..<4 { try s.put("k\(i)", bytes) }
        for i in 0..<4 { #expect(try s.get("k\(i)") == bytes) }
        #expect(try s.list(prefix: "").count == 4)
    }

    @Test func persistentFailureIsOneLine() throws {
        guard let server = MotoServer.shared else { return }
        let proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "1", "--status", "500"])
        var tuning = S3Tuning()
        tuning.backoff = 0.01
        let s = try store(server, bucket: try server.makeBucket(), endpoint: proxy.endpoint, tuning: tuning)
        do { try s.put("x", [1]); Issue.record("must fail") } catch let e as StoreError {
            #expect(e.kind == .unavailable && e.description.contains("HTTP 500") && e.description.contains("after 5 attempts"), "\(e)")
            #expect(!e.description.contains("\n"))
        }
    }

    @Test func refusedCredentialsAreOneLineAndNotRetried() throws {
        guard let server = MotoServer.shared else { return }
        let proxy = try FaultProxy(upstream: server, arguments: ["--fail-every", "1", "--status", "403"])
        let s = try store(server, bucket: try server.makeBucket(), endpoint: proxy.endpoint)
        do { _ = try s.get("config"); Issue.record("must fail") } catch let e as StoreError {
            #expect(e.kind == .denied && e.description.contains("access denied") && e.description.contains("InvalidAccessKeyId"), "\(e)")
            #expect(!e.description.contains("\n") && !e.description.contains("attempts"))
        }
        // Through the command line too: one line, exit 2.
        let r = try runProcess("/usr/bin/env", ["AWS_ACCESS_KEY_ID=wrong", "AWS_SECRET_ACCESS_KEY=wrong", litectlBinary, "snapshots",
                                                "--repo", "s3://\(try server.makeBucket())/r", "--endpoint", proxy.endpoint])
        #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("access denied"), "\(r.stderr)")
    }

    @Test func settingsResolveLikeTheAWSCLI() throws {
        let folder = try TemporaryFolder("aws")
        try FileManager.default.createDirectory(atPath: folder.file(".aws"), withIntermediateDirectories: true)
        try """
            [default]
            aws_access_key_id = DEFAULTKEY
            aws_secret_access_key = defaultsecret
            [backup]
            aws_access_key_id = BACKUPKEY
            aws_secret_access_key = backupsecret
            aws_session_token = backuptoken
            """.write(toFile: folder.file(".aws/credentials"), atomically: true, encoding: .utf8)
        try """
            [default]
            region = eu-central-1
            [profile backup]
            region = ap-south-1
            endpoint_url = http://minio.local:9000/
            """.write(toFile: folder.file(".aws/config"), atomically: true, encoding: .utf8)
        let home = folder.path
        var s = try AWSSettings.resolve(S3Options(), environment: [:], home: home, location: "t")
        #expect(s.credentials == AWSCredentials(accessKeyID: "DEFAULTKEY", secretAccessKey: "defaultsecret"))
        #expect(s.region == "eu-central-1" && s.endpoint == nil)
        s = try AWSSettings.resolve(S3Options(), environment: ["AWS_PROFILE": "backup"], home: home, location: "t")
        #expect(s.credentials.sessionToken == "backuptoken" && s.region == "ap-south-1" && s.endpoint == "http://minio.local:9000")
        s = try AWSSettings.resolve(S3Options(endpoint: "http://127.0.0.1:1", region: "us-west-2", profile: "backup"),
                                    environment: ["AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "envsecret", "AWS_REGION": "sa-east-1"],
                                    home: home, location: "t")
        #expect(s.credentials.accessKeyID == "ENVKEY" && s.credentials.sessionToken == nil)
        #expect(s.region == "us-west-2" && s.endpoint == "http://127.0.0.1:1", "options win over the environment and the files")
        s = try AWSSettings.resolve(S3Options(), environment: ["AWS_REGION": "sa-east-1", "AWS_ENDPOINT_URL": "https://s3.example"], home: home, location: "t")
        #expect(s.region == "sa-east-1" && s.endpoint == "https://s3.example")
        #expect(throws: StoreError.self) { try AWSSettings.resolve(S3Options(), environment: [:], home: folder.file("nowhere"), location: "t") }
        #expect(throws: StoreError.self) { try AWSSettings.resolve(S3Options(endpoint: "minio:9000"), environment: [:], home: home, location: "t") }
    }
}

enum MotoServerPort {
    /// A port nothing listens on.
    static func unused() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
