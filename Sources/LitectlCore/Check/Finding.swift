// What `litectl check` reports: findings with a severity, the check that made
// them, the object they concern, the SQL that fixes them where there is one
// and a stable fingerprint (what a baseline records); and the report for one
// database file.
import Crypto

// Severity: Output/Severity.swift (shared with `migrate lint`).

/// The checks `litectl check` runs; the raw value is the stable name shown in
/// reports and JSON.
public enum CheckKind: String, Sendable, CaseIterable {
    /// The file could not be opened as a database because it is corrupt.
    case open
    /// `PRAGMA integrity_check` (or `quick_check` with `--quick`).
    case integrity
    /// The file holds no tables: a 0-byte file (which SQLite opens as a valid
    /// empty database) or an empty schema, as a wiped database looks.
    case empty
    /// `PRAGMA foreign_key_check`.
    case foreignKey = "foreign-key"
    /// A foreign key whose child columns have no index.
    case unindexedForeignKey = "unindexed-foreign-key"
    /// An ordinary table without a PRIMARY KEY.
    case noPrimaryKey = "no-primary-key"
    /// An index whose columns are a leading part of another index's.
    case redundantIndex = "redundant-index"
    /// Indexes exist but `sqlite_stat1` is missing, or its row counts are far off.
    case statistics
    /// The freelist takes more of the file than the threshold.
    case freelist
    /// The `-wal` file is larger than the database.
    case walSize = "wal-size"
    /// The rollback journal is hot: a writer stopped inside a transaction, and
    /// the file holds its uncommitted pages until a writer rolls it back (the
    /// checks ran on the last committed state).
    case hotJournal = "hot-journal"
    /// `--expect-user-version`, `--expect-application-id`, `--expect-journal-mode`.
    case expectation
    /// `--expect-schema FILE.sql`: an object that differs from the reference.
    case schema
    /// `--baseline FILE`: an entry of the baseline that no longer matches a finding.
    case baseline

    /// What the check looks at, in a few words (SARIF rule descriptions,
    /// JUnit test cases).
    public var summary: String {
        switch self {
        case .open: "SQLite can open the file as a database"
        case .integrity: "PRAGMA integrity_check (quick_check with --quick) finds no damage"
        case .empty: "the database holds at least one table"
        case .foreignKey: "PRAGMA foreign_key_check finds no row referring to a missing parent row"
        case .unindexedForeignKey: "every foreign key's child columns lead an index"
        case .noPrimaryKey: "every ordinary table has a PRIMARY KEY"
        case .redundantIndex: "no index is a leading part of another index on the same table"
        case .statistics: "sqlite_stat1 exists and its row counts are close to the tables' real ones"
        case .freelist: "free pages stay under --max-free-percent of the file"
        case .walSize: "the -wal file is not larger than the database"
        case .hotJournal: "no rollback journal is hot (no writer stopped inside a transaction)"
        case .expectation: "user_version, application_id and journal_mode are as --expect-* says"
        case .schema: "the schema matches the reference given with --expect-schema"
        case .baseline: "every finding the baseline accepts still occurs"
        }
    }
}

/// How a finding stands against the baseline given with `--baseline`.
public enum BaselineState: String, Sendable {
    /// Not in the baseline: it fails as it would without one.
    case new
    /// In the baseline (same check, object and fingerprint): it never fails.
    case accepted
    /// The baseline holds a finding of the same check and object with another
    /// fingerprint (more orphan rows, another index redundant with it): it
    /// fails as a new one does.
    case changed
    /// A baseline entry that matches no finding of this run (the finding is a
    /// note of the `baseline` check).
    case absent
}

/// One thing `check` found.
public struct Finding: Sendable, Equatable {
    public var severity: Severity
    public var check: CheckKind
    /// The table, index or foreign key concerned; nil for the whole file.
    public var object: String?
    public var message: String
    /// SQL that would fix it, when there is a simple fix.
    public var fix: String?
    /// What tells this finding apart from others of its check and object,
    /// leaving out what changes when unrelated parts of the database change
    /// (page numbers, rowids, row counts of a drift): the fingerprint's input
    /// beside the check and the object (docs/check.md lists them per check).
    public var identity: [String]
    /// How it stands against the baseline, when one was given.
    public var baseline: BaselineState?
    /// For a finding that changed since the baseline: the message recorded there.
    public var recorded: String?

    /// Whether this finding fails the check: an error, or a warning when
    /// `strict`, unless the baseline accepts it.
    public func fails(strict: Bool) -> Bool {
        baseline != .accepted && (severity == .error || (strict && severity == .warning))
    }

    public init(_ severity: Severity, _ check: CheckKind, object: String?, _ message: String, fix: String? = nil,
                identity: [String] = []) {
        self.severity = severity
        self.check = check
        self.object = object
        self.message = message
        self.fix = fix
        self.identity = identity
    }

    /// The stable fingerprint: the first 16 bytes, in lowercase hex, of the
    /// SHA-256 of `litectl-check/1`, the check's name, the object's name (empty
    /// for none) and each `identity` part, each followed by a 0 byte, in UTF-8.
    public var fingerprint: String { Finding.fingerprint(check: check.rawValue, object: object, identity: identity) }

    public static func fingerprint(check: String, object: String?, identity: [String]) -> String {
        var bytes = Array("litectl-check/1".utf8) + [0]
        for part in [check, object ?? ""] + identity { bytes += Array(part.utf8) + [0] }
        return SHA256.hash(data: bytes).prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// The outcome of checking one file.
public struct CheckReport: Sendable {
    public var path: String
    public var findings: [Finding]
    /// Set when the file could not be checked at all (missing, not a
    /// database, locked): `check` exits 2 for it.
    public var failure: DatabaseError?
    /// The checks that ran, in the order they ran, with the seconds each took.
    public var ran: [(check: CheckKind, seconds: Double)] = []
    /// The checks `--skip` left out whole.
    public var skipped: [CheckKind] = []
    /// Seconds the whole check of this file took.
    public var seconds: Double = 0

    public init(path: String, findings: [Finding] = [], failure: DatabaseError? = nil) {
        self.path = path
        self.findings = findings
        self.failure = failure
    }

    /// True when a finding fails the check: an error, or a warning when `strict`.
    public func fails(strict: Bool) -> Bool {
        findings.contains { $0.fails(strict: strict) }
    }

    /// The report as JSON, keys in a fixed order: path, status ("ok",
    /// "findings" or "error"), error (null or the message), findings [{severity,
    /// check, object, message, fix, fingerprint, baseline}] (baseline: null
    /// without `--baseline`, else new, accepted, changed or absent).
    public func json(strict: Bool) -> JSON {
        let status = failure != nil ? "error" : (fails(strict: strict) ? "findings" : "ok")
        return .object([
            ("path", .string(path)),
            ("status", .string(status)),
            ("error", .optional(failure) { .string($0.message) }),
            ("findings", .array(findings.map { finding in
                .object([
                    ("severity", .string(finding.severity.rawValue)),
                    ("check", .string(finding.check.rawValue)),
                    ("object", .optional(finding.object) { .string($0) }),
                    ("message", .string(finding.message)),
                    ("fix", .optional(finding.fix) { .string($0) }),
                    ("fingerprint", .string(finding.fingerprint)),
                    ("baseline", .optional(finding.baseline) { .string($0.rawValue) }),
                ])
            })),
        ])
    }
}
