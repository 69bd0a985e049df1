// The baseline of `check --write-baseline FILE` / `check --baseline FILE`: the
// findings a team has accepted, per database, by check, object and stable
// fingerprint, in a versioned JSON file (docs/check.md, "Baseline file
// format"); and matching a run's findings against it: accepted, changed,
// new, and entries that no longer match anything.
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct CheckBaseline: Sendable {
    public static let format = "litectl-check-baseline"
    public static let version = 1

    /// One accepted finding.
    public struct Entry: Sendable, Equatable {
        public var check: String
        public var object: String?
        public var fingerprint: String
        /// What the finding said when it was recorded: shown when it changed
        /// or no longer occurs, never matched on.
        public var severity: String?
        public var message: String?
    }

    /// The entries of one database, named by its path as given to `check`.
    public struct Database: Sendable {
        public var path: String
        public var entries: [Entry]
    }

    public var databases: [Database]

    /// The write gate's rule for `--write-baseline`: an existing file is
    /// replaced only when it is a baseline (or empty).
    public static let replaceRule = ReplaceRule.onlyIf(kind: "a litectl check baseline", matches: { looksLikeBaseline($0) })

    /// Whether `head` (a file's first bytes) starts as a baseline does: `{`
    /// and the `format` member first, whitespace aside. An empty file counts.
    public static func looksLikeBaseline(_ head: [UInt8]) -> Bool {
        let significant = head.prefix(4096).filter { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
        return significant.isEmpty || significant.starts(with: Array(#"{"format":"litectl-check-baseline""#.utf8))
    }

    /// The findings of `reports` that can fail a check (warnings and errors;
    /// not notes, nor the `baseline` check's), per database in the order of
    /// `reports` (a path given twice once), entries sorted by check, object
    /// and fingerprint.
    public init(reports: [CheckReport]) {
        var databases: [Database] = []
        for report in reports where !databases.contains(where: { Array($0.path.utf8) == Array(report.path.utf8) }) {
            let entries = report.findings.filter { $0.severity != .note && $0.check != .baseline }.map { finding in
                Entry(check: finding.check.rawValue, object: finding.object, fingerprint: finding.fingerprint,
                      severity: finding.severity.rawValue, message: finding.message)
            }
            databases.append(Database(path: report.path, entries: entries.sorted { a, b in
                let ka = (Array(a.check.utf8), Array((a.object ?? "").utf8), Array(a.fingerprint.utf8))
                let kb = (Array(b.check.utf8), Array((b.object ?? "").utf8), Array(b.fingerprint.utf8))
                if ka.0 != kb.0 { return ka.0.lexicographicallyPrecedes(kb.0) }
                if (a.object == nil) != (b.object == nil) { return a.object == nil }
                if ka.1 != kb.1 { return ka.1.lexicographicallyPrecedes(kb.1) }
                return ka.2.lexicographicallyPrecedes(kb.2)
            }))
        }
        self.databases = databases
    }

    public init(databases: [Database]) {
        self.databases = databases
    }

    /// The file's JSON, keys in the documented order.
    public var json: JSON {
        .object([
            ("format", .string(Self.format)),
            ("version", .integer(Int64(Self.version))),
            ("databases", .array(databases.map { database in
                .object([
                    ("path", .string(database.path)),
                    ("findings", .array(database.entries.map { entry in
                        .object([
                            ("check", .string(entry.check)),
                            ("object", .optional(entry.object) { .string($0) }),
                            ("fingerprint", .string(entry.fingerprint)),
                            ("severity", .optional(entry.severity) { .string($0) }),
                            ("message", .optional(entry.message) { .string($0) }),
                        ])
                    })),
                ])
            })),
        ])
    }

    /// Writes the baseline to `path` atomically (a temporary file beside it,
    /// fsynced and renamed), replacing only a baseline.
    public func save(to path: String) throws {
        try AtomicFile.write(Array((json.pretty + "\n").utf8), to: path, permissions: 0o644, what: "the baseline file",
                             replacing: Self.replaceRule)
    }

    /// The largest baseline read (a hundred thousand findings is far less).
    static let maximumBytes = 64 << 20

    /// Reads the baseline at `path`. Throws, naming the file, when it cannot
    /// be read or is not a baseline this version understands.
    public static func read(path: String) throws -> CheckBaseline {
        let bytes = try CheckFiles.read(path, limit: maximumBytes, what: "the baseline")
        func bad(_ why: String) -> DatabaseError { DatabaseError(code: .error, message: "not a litectl check baseline: \(why)", path: path) }
        guard let top = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { throw bad("not a JSON object") }
        guard top["format"] as? String == format else { throw bad("its \"format\" is not \"\(format)\"") }
        guard let version = top["version"] as? Int else { throw bad("no \"version\"") }
        guard version == Self.version else {
            throw DatabaseError(code: .error, message: "baseline format version \(version); this litectl reads version \(Self.version)", path: path)
        }
        guard let list = top["databases"] as? [Any] else { throw bad("no \"databases\" array") }
        var databases: [Database] = []
        for (i, item) in list.enumerated() {
            guard let object = item as? [String: Any], let dbPath = object["path"] as? String,
                  let findings = object["findings"] as? [Any] else { throw bad("databases[\(i)] needs \"path\" and \"findings\"") }
            var entries: [Entry] = []
            for (j, f) in findings.enumerated() {
                guard let e = f as? [String: Any], let check = e["check"] as? String, let fingerprint = e["fingerprint"] as? String else {
                    throw bad("databases[\(i)].findings[\(j)] needs \"check\" and \"fingerprint\"")
                }
                let objectName: String?
                let raw = e["object"]
                if raw == nil || raw is NSNull {
                    objectName = nil
                } else if let name = raw as? String {
                    objectName = name
                } else {
                    throw bad("databases[\(i)].findings[\(j)].object is neither a string nor null")
                }
                entries.append(Entry(check: check, object: objectName, fingerprint: fingerprint,
                                     severity: e["severity"] as? String, message: e["message"] as? String))
            }
            databases.append(Database(path: dbPath, entries: entries))
        }
        return CheckBaseline(databases: databases)
    }

    /// The entries each of `paths` (the databases of a run) is checked
    /// against: the database of the same path (as given, byte for byte);
    /// when the run checks one database and the baseline holds one, they go
    /// together whatever their paths (a baseline kept in a repository for a
    /// file built elsewhere).
    public func matcher(for paths: [String], file: String) -> BaselineMatcher {
        var sections: [[UInt8]: [Entry]] = [:]
        let distinct = Set(paths.map { Array($0.utf8) })
        if distinct.count == 1, databases.count == 1, let only = distinct.first {
            sections[only] = databases[0].entries
        } else {
            for database in databases where sections[Array(database.path.utf8)] == nil {
                sections[Array(database.path.utf8)] = database.entries
            }
        }
        return BaselineMatcher(sections: sections, file: file)
    }
}

/// A run's findings against a baseline.
public struct BaselineMatcher: Sendable {
    let sections: [[UInt8]: [CheckBaseline.Entry]]
    /// The baseline file, named in messages.
    public let file: String

    /// `report` with each warning and error marked accepted (an entry of the
    /// same check, object and fingerprint), changed (else an entry of the
    /// same check and object: the entry's message is kept in `recorded`) or
    /// new; each entry is used once. Entries left over become notes of the
    /// `baseline` check (unless `skips` leaves it out). A report of a file
    /// that could not be checked is returned as it is.
    public func apply(_ report: CheckReport, skips: [CheckSkip] = []) -> CheckReport {
        guard report.failure == nil else { return report }
        var report = report
        var entries = sections[Array(report.path.utf8)] ?? []
        var used = Array(repeating: false, count: entries.count)
        // Entries by check and object (bytes; nil apart from ""), in file order.
        func key(_ check: String, _ object: String?) -> [UInt8] {
            Array(check.utf8) + [0] + (object.map { [1] + Array($0.utf8) } ?? [])
        }
        var byObject: [[UInt8]: [Int]] = [:]
        for (j, entry) in entries.enumerated() { byObject[key(entry.check, entry.object), default: []].append(j) }
        var pending: [Int] = []
        for (i, finding) in report.findings.enumerated() where finding.severity != .note {
            let fingerprint = finding.fingerprint
            let candidates = byObject[key(finding.check.rawValue, finding.object)] ?? []
            if let j = candidates.first(where: { !used[$0] && entries[$0].fingerprint == fingerprint }) {
                used[j] = true
                report.findings[i].baseline = .accepted
            } else {
                pending.append(i)
            }
        }
        for i in pending {
            let finding = report.findings[i]
            if let j = (byObject[key(finding.check.rawValue, finding.object)] ?? []).first(where: { !used[$0] }) {
                used[j] = true
                report.findings[i].baseline = .changed
                report.findings[i].recorded = entries[j].message
            } else {
                report.findings[i].baseline = .new
            }
        }
        let skipped = skips.contains { $0.check == .baseline && $0.object == nil }
        if !skipped {
            entries = entries.indices.filter { !used[$0] }.map { entries[$0] }
            for entry in entries {
                let skippedHere = skips.contains { skip in
                    guard skip.check == .baseline, let name = skip.object, let object = entry.object else { return false }
                    return sameSQLName(name, object)
                }
                if skippedHere { continue }
                var text = "the baseline accepts a finding that no longer occurs: [\(entry.check)]"
                if let object = entry.object { text += " \(object):" }
                text += " " + (entry.message ?? "fingerprint \(entry.fingerprint)")
                var note = Finding(.note, .baseline, object: entry.object, text,
                                   identity: [entry.check, entry.fingerprint])
                note.baseline = .absent
                report.findings.append(note)
            }
            report.ran.append((.baseline, 0))
        }
        return report
    }
}

/// Reading the small files `check` takes (a baseline, a reference schema),
/// bounded: a huge file or an endless pipe is refused, not read into memory.
enum CheckFiles {
    static func read(_ path: String, limit: Int, what: String) throws -> [UInt8] {
        let fd = try FileStreams.openForReading(path)
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            throw DatabaseError(code: .cantopen, message: "is a folder, not \(what)", path: path)
        }
        var out: [UInt8] = []
        try FileStreams.readChunks(fd, path: path) { chunk in
            guard out.count + chunk.count <= limit else {
                throw DatabaseError(code: .toobig, message: "\(what) is larger than \(humanBytes(Int64(limit)))", path: path)
            }
            out.append(contentsOf: chunk)
        }
        return out
    }
}
