// What `litectl check` reports: findings with a severity, the check that made
// them, the object they concern and, where there is one, the SQL that fixes
// them; and the report for one database file.

/// How serious a finding is. Errors fail the check; warnings fail it only
/// with `--strict`; notes never do.
public enum Severity: String, Sendable, Comparable, CaseIterable {
    case note
    case warning
    case error

    var rank: Int {
        switch self {
        case .note: 0
        case .warning: 1
        case .error: 2
        }
    }

    public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rank < rhs.rank }
}

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

    /// Whether this finding fails the check: an error, or a warning when `strict`.
    public func fails(strict: Bool) -> Bool { severity == .error || (strict && severity == .warning) }

    public init(_ severity: Severity, _ check: CheckKind, object: String?, _ message: String, fix: String? = nil) {
        self.severity = severity
        self.check = check
        self.object = object
        self.message = message
        self.fix = fix
    }
}

/// The outcome of checking one file.
public struct CheckReport: Sendable {
    public var path: String
    public var findings: [Finding]
    /// Set when the file could not be checked at all (missing, not a
    /// database, locked): `check` exits 2 for it.
    public var failure: DatabaseError?

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
    /// check, object, message, fix}].
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
                ])
            })),
        ])
    }
}
