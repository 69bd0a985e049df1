// The config file of `litectl backup --config FILE` (TOML): which databases a
// host backs up (paths, globs, exclusions), into which repository, with what
// tags, retention, parallelism and metrics file. Unknown keys are errors, so
// a typo never silently drops a database or a retention rule.
import Foundation
import TOMLKit

public struct HostConfig: Sendable, Equatable {
    public var repository: String
    public var endpoint: String?
    public var region: String?
    public var profile: String?
    public var keyFile: String?
    public var passphraseFile: String?
    public var databases: [String]
    public var exclude: [String] = []
    public var tags: [String] = []
    /// Databases backed up at once (default: the number of cores).
    public var jobs: Int
    public var timeout: Double?
    public var verify: VerifyLevel = .quick
    public var metricsFile: String?
    public var keep = RetentionPolicy()
    /// `allow_empty`, `warn_shrink` (see `SourceShrinkPolicy`).
    public var shrink = SourceShrinkPolicy()

    static let keys: Set<String> = ["repository", "endpoint", "region", "profile", "key_file", "passphrase_file", "databases",
                                    "exclude", "tags", "jobs", "timeout", "verify", "metrics_file", "keep",
                                    "allow_empty", "warn_shrink"]
    static let keepKeys: Set<String> = ["last", "hourly", "daily", "weekly", "monthly"]

    public static func load(path: String) throws -> HostConfig {
        WriteGate.shared.protect(file: path, what: "the config file this run reads")
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DatabaseError(code: .cantopen, message: "cannot read the config file", path: path)
        }
        return try parse(String(decoding: data, as: UTF8.self), path: path)
    }

    public static func parse(_ text: String, path: String) throws -> HostConfig {
        func fail(_ message: String, key: String? = nil) -> DatabaseError {
            if let key, let line = lineOf(key: key, in: text) {
                return DatabaseError(code: .misuse, message: "line \(line): \(message)", path: path)
            }
            return DatabaseError(code: .misuse, message: message, path: path)
        }
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            throw DatabaseError(code: .misuse, message: "line \(error.source.begin.line): \(error.description)", path: path)
        }
        for key in table.keys where !keys.contains(key) { throw fail("unknown key \(key)", key: key) }
        let folder = DurableFolder.parent(of: DurableFolder.absolute(path))
        func resolve(_ p: String) -> String { p.hasPrefix("/") || p.contains("://") ? p : folder + "/" + p }
        func string(_ key: String) throws -> String? {
            guard let value = table[key] else { return nil }
            guard let s = value.string else { throw fail("\(key) must be a string", key: key) }
            return s
        }
        func strings(_ key: String) throws -> [String]? {
            guard let value = table[key] else { return nil }
            guard let array = value.array else { throw fail("\(key) must be an array of strings", key: key) }
            return try array.map { item in
                guard let s = item.string else { throw fail("\(key) must be an array of strings", key: key) }
                return s
            }
        }
        func count(_ value: TOMLValueConvertible?, _ name: String, key: String) throws -> Int? {
            guard let value else { return nil }
            guard let n = value.int else { throw fail("\(name) must be an integer", key: key) }
            guard n >= 0 else { throw fail("\(name) must be 0 or more", key: key) }
            return n
        }
        guard let repository = try string("repository") else { throw fail("missing key repository (a folder or s3://BUCKET/PREFIX)") }
        guard let databases = try strings("databases") else {
            throw fail("missing key databases (paths and globs of the databases to back up)", key: "databases")
        }
        guard !databases.isEmpty else {
            throw fail("databases is empty: name at least one path or glob of a database to back up", key: "databases")
        }
        var config = HostConfig(repository: repository.hasPrefix("s3://") ? repository : resolve(repository),
                                databases: databases.map(resolve), jobs: max(1, ProcessInfo.processInfo.activeProcessorCount))
        // Credentials in a URL would be printed with it: refused, named masked.
        if let problem = URLRedaction.credentialProblem(repository), repository.contains("://") {
            throw fail("repository \(problem)", key: "repository")
        }
        config.endpoint = try string("endpoint")
        if let endpoint = config.endpoint, let problem = URLRedaction.credentialProblem(endpoint) {
            throw fail("endpoint \(problem)", key: "endpoint")
        }
        config.region = try string("region")
        config.profile = try string("profile")
        config.keyFile = try string("key_file").map(resolve)
        config.passphraseFile = try string("passphrase_file").map(resolve)
        if config.keyFile != nil && config.passphraseFile != nil { throw fail("give key_file or passphrase_file, not both", key: "passphrase_file") }
        config.exclude = (try strings("exclude") ?? []).map(resolve)
        config.tags = try strings("tags") ?? []
        if let jobs = try count(table["jobs"], "jobs", key: "jobs") {
            guard jobs >= 1 else { throw fail("jobs must be 1 or more", key: "jobs") }
            config.jobs = jobs
        }
        if let value = table["timeout"] {
            guard let t = value.double ?? value.int.map(Double.init) ?? value.string.flatMap({ try? DurationText.seconds($0) }), t >= 0, t <= DurationText.longest else {
                throw fail("timeout must be seconds (90) or a duration string (\"5m\", \"1h30m\"), 0 or more", key: "timeout")
            }
            config.timeout = t
        }
        if let v = try string("verify") {
            guard let level = VerifyLevel(rawValue: v) else { throw fail("verify must be quick, full or none", key: "verify") }
            config.verify = level
        }
        config.metricsFile = try string("metrics_file").map(resolve)
        if let value = table["allow_empty"] {
            guard let allow = value.bool else { throw fail("allow_empty must be true or false", key: "allow_empty") }
            config.shrink.allowEmpty = allow
        }
        if let value = table["warn_shrink"] {
            guard let percent = value.double ?? value.int.map(Double.init), (0...100).contains(percent) else {
                throw fail("warn_shrink must be a percentage, 0 to 100", key: "warn_shrink")
            }
            config.shrink.warnFraction = percent / 100
        }
        if let value = table["keep"] {
            guard let keep = value.table else { throw fail("keep must be a table ([keep])", key: "keep") }
            for key in keep.keys where !keepKeys.contains(key) { throw fail("unknown key keep.\(key) (last, hourly, daily, weekly, monthly)", key: key) }
            config.keep = RetentionPolicy(last: try count(keep["last"], "keep.last", key: "last") ?? 0,
                                          hourly: try count(keep["hourly"], "keep.hourly", key: "hourly") ?? 0,
                                          daily: try count(keep["daily"], "keep.daily", key: "daily") ?? 0,
                                          weekly: try count(keep["weekly"], "keep.weekly", key: "weekly") ?? 0,
                                          monthly: try count(keep["monthly"], "keep.monthly", key: "monthly") ?? 0)
        }
        return config
    }

    /// The first line that sets `key` (for messages; TOMLKit keeps no positions of values).
    static func lineOf(key: String, in text: String) -> Int? {
        for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.hasPrefix(key), trimmed.dropFirst(key.count).drop(while: { $0 == " " || $0 == "\t" }).hasPrefix("=") { return n + 1 }
        }
        return nil
    }

    /// The databases: globs expanded (sorted), a plain path kept as given even
    /// when missing (its backup then fails with a clear error), exclusions
    /// applied, the same file named twice kept once. `unmatched` are the globs
    /// that matched nothing.
    public func expandDatabases() -> (paths: [String], unmatched: [String]) {
        var paths: [String] = [], unmatched: [String] = []
        var seen = Set<String>()
        for pattern in databases {
            var found: [String] = []
            if pattern.contains(where: { "*?[".contains($0) }) {
                var g = glob_t()
                defer { globfree(&g) }
                if glob(pattern, 0, nil, &g) == 0 {
                    for i in 0..<Int(g.gl_pathc) { if let p = g.gl_pathv[i] { found.append(String(cString: p)) } }
                }
                found = found.filter { !DurableFolder.isFolder($0) }.sorted()
                if found.isEmpty { unmatched.append(pattern); continue }
            } else {
                found = [pattern]
            }
            for path in found where !exclude.contains(where: { fnmatch($0, path, 0) == 0 }) {
                if seen.insert(FilePaths.resolved(path)).inserted { paths.append(path) }
            }
        }
        return (paths, unmatched)
    }
}
