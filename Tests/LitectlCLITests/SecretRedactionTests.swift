// Secrets never reach litectl's output: credentials in an endpoint or
// repository URL are refused, named masked, before anything is sent; and a run
// that fails against a real S3 server (moto, checking credentials) prints
// neither the secret key, the session token nor the passphrase. Every output
// of each run is searched: stdout, stderr (with -v and --json) and the
// metrics files of `backup` and `replicate`.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct SecretRedactionTests {
    static let keyID = "AKIAUSERINFO7KEY", secret = "wJalrXUtnSECRET7userinfo"
    static let token = "IQoJb3JpZ2luTOKEN7session", passphrase = "correct horse battery staple 7"
    static let secrets = [keyID, secret, token, passphrase]

    /// A folder with a database, a config file whose endpoint is `endpoint`
    /// and metrics files named in it and on the command line.
    struct Setup {
        let folder: TemporaryFolder
        init(endpoint: String?, repository: String = "s3://litectl-secrets/repo") throws {
            folder = try TemporaryFolder("secrets")
            try makeDatabase(folder.file("app.db"), "PRAGMA journal_mode=wal; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            var config = "repository = \"\(repository)\"\ndatabases = [\"app.db\"]\nmetrics_file = \"config.prom\"\n"
            if let endpoint { config += "endpoint = \"\(endpoint)\"\n" }
            try config.write(toFile: folder.file("host.toml"), atomically: true, encoding: .utf8)
        }

        /// Runs litectl in the folder with `env` (and LITECTL_PASSPHRASE) in its environment.
        func run(_ arguments: [String], env: [String: String]) throws -> ProcessResult {
            var all = env
            all["LITECTL_PASSPHRASE"] = SecretRedactionTests.passphrase
            return try runProcess("/usr/bin/env", all.map { "\($0)=\($1)" } + [litectlBinary] + arguments, currentDirectory: folder.path)
        }

        /// Everything the run left to read: its stdout and stderr, and the metrics files.
        func outputs(_ result: ProcessResult) -> String {
            let metrics = ["cli.prom", "config.prom", "replicate.prom"].compactMap {
                try? String(contentsOfFile: folder.file($0), encoding: .utf8)
            }
            return ([result.stdout, result.stderr] + metrics).joined(separator: "\n")
        }
    }

    static let credentials = ["AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": secret,
                              "AWS_SESSION_TOKEN": token, "AWS_REGION": "us-east-1"]

    /// The repository commands, each as a run that would reach the store.
    static func commands(repo: String, endpoint: [String]) -> [[String]] {
        [["repo", "init", repo] + endpoint,
         ["backup", "-v", "--json", "app.db", "--repo", repo, "--metrics-file", "cli.prom"] + endpoint,
         ["snapshots", "--json", "--repo", repo] + endpoint,
         ["restore", "--repo", repo, "latest", "restored.db"] + endpoint,
         ["verify", "--json", "--repo", repo] + endpoint,
         ["replicate", "--json", "app.db", "--repo", repo, "--metrics-file", "replicate.prom"] + endpoint]
    }

    func expectNoSecret(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for secret in Self.secrets {
            #expect(!text.contains(secret), "\(what) prints \(secret): \(text)", sourceLocation: sourceLocation)
        }
    }

    /// The issue's case: `--endpoint http://KEY:SECRET@host:1` (nothing listens
    /// there). Refused as a usage error that names the option, masked.
    @Test func anEndpointWithCredentialsIsRefusedMasked() throws {
        let setup = try Setup(endpoint: nil)
        let endpoint = "http://\(Self.keyID):\(Self.secret)@127.0.0.1:1"
        for arguments in Self.commands(repo: "s3://litectl-secrets/repo", endpoint: ["--endpoint", endpoint]) {
            let result = try setup.run(arguments, env: Self.credentials)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("--endpoint http://***@127.0.0.1:1: a URL must not hold credentials"), "\(result.stderr)")
            #expect(result.stderr.contains("AWS_ACCESS_KEY_ID"))
            expectNoSecret(setup.outputs(result), "\(arguments)")
        }
        // A presigned URL's query string: the same.
        let presigned = "http://127.0.0.1:1/?X-Amz-Credential=\(Self.keyID)&X-Amz-Signature=\(Self.secret)&X-Amz-Security-Token=\(Self.token)"
        let result = try setup.run(["snapshots", "--repo", "s3://litectl-secrets/repo", "--endpoint", presigned], env: Self.credentials)
        #expect(result.status == 64 && result.stderr.contains("X-Amz-Signature=***"), "\(result.stderr)")
        expectNoSecret(setup.outputs(result), "a presigned endpoint")
    }

    /// The same URL in a config file (`backup --config`, `replicate --config`),
    /// in AWS_ENDPOINT_URL, and credentials in the repository URL itself.
    @Test func credentialsInAnyURLAreRefusedMasked() throws {
        let endpoint = "http://\(Self.keyID):\(Self.secret)@127.0.0.1:1"
        let setup = try Setup(endpoint: endpoint)
        for arguments in [["backup", "-v", "--json", "--config", "host.toml"], ["replicate", "--json", "--config", "host.toml"]] {
            let result = try setup.run(arguments, env: Self.credentials)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("host.toml: line 4: endpoint http://***@127.0.0.1:1: a URL must not hold credentials"), "\(result.stderr)")
            expectNoSecret(setup.outputs(result), "\(arguments)")
        }

        let plain = try Setup(endpoint: nil)
        var env = Self.credentials
        env["AWS_ENDPOINT_URL"] = endpoint
        for arguments in Self.commands(repo: "s3://litectl-secrets/repo", endpoint: []) {
            let result = try plain.run(arguments, env: env)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("AWS_ENDPOINT_URL: http://***@127.0.0.1:1: a URL must not hold credentials"), "\(result.stderr)")
            expectNoSecret(plain.outputs(result), "AWS_ENDPOINT_URL, \(arguments)")
        }

        for repo in ["s3://\(Self.keyID):\(Self.secret)@litectl-secrets/repo", "https://\(Self.keyID):\(Self.secret)@example.com/repo"] {
            for arguments in Self.commands(repo: repo, endpoint: []) {
                let result = try plain.run(arguments, env: Self.credentials)
                #expect(result.status == 64, "\(arguments): \(result.stderr)")
                let option = arguments[0] == "repo" ? "URL" : "--repo"
                #expect(result.stderr.contains("\(option) \(repo.hasPrefix("s3") ? "s3" : "https")://***@"), "\(result.stderr)")
                expectNoSecret(plain.outputs(result), "\(arguments)")
            }
            var fromEnvironment = Self.credentials
            fromEnvironment["LITECTL_REPO"] = repo
            let result = try plain.run(["snapshots", "--json"], env: fromEnvironment)
            #expect(result.status == 64 && result.stderr.contains("LITECTL_REPO "), "\(result.stderr)")
            expectNoSecret(plain.outputs(result), "LITECTL_REPO")
            let inConfig = try Setup(endpoint: nil, repository: repo)
            let configured = try inConfig.run(["backup", "--config", "host.toml"], env: Self.credentials)
            #expect(configured.status == 2 && configured.stderr.contains("host.toml: line 1: repository "), "\(configured.stderr)")
            expectNoSecret(inConfig.outputs(configured), "repository in a config file")
        }
    }

    /// A run against a real S3 server that checks credentials (moto with
    /// INITIAL_NO_AUTH_ACTION_COUNT=0) with wrong ones, a session token and a
    /// passphrase: every command fails, and none prints a secret. (A guard:
    /// today's main prints none of these either; the refusals above are what it lacked.)
    @Test func aRunWithWrongCredentialsPrintsNoSecret() throws {
        guard let server = try AuthenticatingMoto.start() else { return }
        let setup = try Setup(endpoint: server.endpoint)
        let endpoint = ["--endpoint", server.endpoint]
        var runs = Self.commands(repo: "s3://litectl-secrets/repo", endpoint: endpoint)
        runs += [["backup", "-v", "--json", "--config", "host.toml"], ["replicate", "--json", "--config", "host.toml"]]
        for arguments in runs {
            let result = try setup.run(arguments, env: Self.credentials)
            #expect(result.status == 2, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("access denied") || result.stderr.contains("InvalidAccessKeyId"), "\(arguments): \(result.stderr)")
            expectNoSecret(setup.outputs(result), "\(arguments)")
        }
    }
}

/// moto's S3 server with its IAM checks on from the first request
/// (INITIAL_NO_AUTH_ACTION_COUNT=0: any key it does not know is refused),
/// stopped when the value goes (a watchdog ends it when its stdin closes).
/// nil when moto_server is not installed.
final class AuthenticatingMoto {
    let endpoint: String
    private let process = Process()
    private let input = Pipe()

    static func start() throws -> AuthenticatingMoto? {
        guard let path = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":")
            .map({ $0 + "/moto_server" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        return try AuthenticatingMoto(executable: path)
    }

    private init(executable: String) throws {
        let port = try MotoServer.freePort()
        endpoint = "http://127.0.0.1:\(port)"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", """
            import os, signal, subprocess, sys
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="0")
            p = subprocess.Popen([sys.argv[1], "-H", "127.0.0.1", "-p", sys.argv[2]], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            sys.stdin.read()
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill(); p.wait()
            """, executable, String(port)]
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        if waitUntil(30, { (try? runProcess("/usr/bin/curl", ["-s", "-o", "/dev/null", endpoint]))?.status == 0 }) { return }
        throw POSIXError(.ETIMEDOUT)
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
