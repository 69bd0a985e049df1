// The host config file of `backup --config`: a full example, relative paths,
// globs and exclusions on real files, and one clear line per mistake.
import XCTest
import LitectlCore
import TestSupport

final class HostConfigTests: XCTestCase {
    func write(_ text: String, in folder: TemporaryFolder) throws -> String {
        let path = folder.file("host.toml")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func testFullExample() throws {
        let folder = try TemporaryFolder("config")
        let path = try write("""
            repository = "s3://backups/hosts/web-1"
            endpoint = "http://127.0.0.1:9000"
            region = "eu-west-1"
            profile = "backup"
            key_file = "repo.key"
            databases = ["/srv/app/*.db", "jobs.sqlite"]
            exclude = ["/srv/app/*-scratch.db"]
            tags = ["web-1", "hourly"]
            jobs = 2
            timeout = 30
            verify = "full"
            metrics_file = "/var/lib/node_exporter/textfile/litectl.prom"

            [keep]
            last = 3
            hourly = 24
            daily = 7
            weekly = 8
            monthly = 12
            """, in: folder)
        let c = try HostConfig.load(path: path)
        XCTAssertEqual(c.repository, "s3://backups/hosts/web-1")
        XCTAssertEqual(c.endpoint, "http://127.0.0.1:9000")
        XCTAssertEqual(c.region, "eu-west-1")
        XCTAssertEqual(c.profile, "backup")
        XCTAssertEqual(c.keyFile, folder.path + "/repo.key")
        XCTAssertEqual(c.databases, ["/srv/app/*.db", folder.path + "/jobs.sqlite"])
        XCTAssertEqual(c.exclude, ["/srv/app/*-scratch.db"])
        XCTAssertEqual(c.tags, ["web-1", "hourly"])
        XCTAssertEqual(c.jobs, 2)
        XCTAssertEqual(c.timeout, 30)
        XCTAssertEqual(c.verify, .full)
        XCTAssertEqual(c.metricsFile, "/var/lib/node_exporter/textfile/litectl.prom")
        XCTAssertEqual(c.keep, RetentionPolicy(last: 3, hourly: 24, daily: 7, weekly: 8, monthly: 12))
    }

    func testMistakesAreOneLineNamingFileLineAndKey() throws {
        let folder = try TemporaryFolder("config")
        let cases: [(String, String)] = [
            ("repository = \"r\"\ndatabases = [\"a.db\"]\ndatabse = [\"b.db\"]\n", "line 3: unknown key databse"),
            ("databases = [\"a.db\"]\n", "missing key repository"),
            ("repository = \"r\"\n", "missing key databases"),
            ("repository = \"r\"\ndatabases = \"a.db\"\n", "line 2: databases must be an array of strings"),
            ("repository = \"r\"\ndatabases = [\"a.db\"]\njobs = 0\n", "line 3: jobs must be 1 or more"),
            ("repository = \"r\"\ndatabases = [\"a.db\"]\n[keep]\ndayly = 7\n", "line 4: unknown key keep.dayly"),
            ("repository = \"r\"\ndatabases = [\"a.db\"]\n[keep]\ndaily = -1\n", "keep.daily must be 0 or more"),
            ("repository = \"r\"\ndatabases = [\"a.db\"]\nverify = \"maybe\"\n", "verify must be quick, full or none"),
            ("repository = \"r\"\ndatabases = [\"a.db\"\n", "line 2"),
            ("repository = \"r\"\ndatabases = [\"a.db\"]\ntimeout = \"soon\"\n", "timeout must be seconds"),
        ]
        for (text, expected) in cases {
            let path = try write(text, in: folder)
            XCTAssertThrowsError(try HostConfig.load(path: path), expected) { error in
                let line = "\(error)"
                XCTAssertTrue(line.hasPrefix(path + ": "), line)
                XCTAssertTrue(line.contains(expected), "\(line) should contain \(expected)")
                XCTAssertFalse(line.contains("\n"), line)
            }
        }
    }

    /// `timeout` reads the duration syntax of the command line too.
    func testTimeoutTakesADuration() throws {
        let folder = try TemporaryFolder("config")
        for (value, seconds) in [("\"1h30m\"", 5400.0), ("\"2.5s\"", 2.5), ("45", 45), ("0.5", 0.5)] {
            let c = try HostConfig.load(path: try write("repository = \"r\"\ndatabases = [\"a.db\"]\ntimeout = \(value)\n", in: folder))
            XCTAssertEqual(c.timeout, seconds, value)
        }
    }

    func testGlobsExclusionsAndDuplicates() throws {
        let folder = try TemporaryFolder("config")
        for name in ["a.db", "b.db", "b-scratch.db", "notes.txt"] {
            FileManager.default.createFile(atPath: folder.file(name), contents: Data())
        }
        let path = try write("""
            repository = "repo"
            databases = ["*.db", "a.db", "missing.db", "nothing-*.sqlite"]
            exclude = ["*-scratch.db"]
            """, in: folder)
        let c = try HostConfig.load(path: path)
        XCTAssertEqual(c.repository, folder.path + "/repo")
        let (paths, unmatched) = c.expandDatabases()
        XCTAssertEqual(paths, [folder.file("a.db"), folder.file("b.db"), folder.file("missing.db")])
        XCTAssertEqual(unmatched, [folder.file("nothing-*.sqlite")])
    }
}
