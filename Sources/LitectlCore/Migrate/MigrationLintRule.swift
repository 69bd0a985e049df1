// The rules of `litectl migrate lint` and what one finding of them says: an id
// in Atlas's manner (DS destructive, MF data-dependent, BC backward
// incompatible, RB table rebuilds, CN constraints loosened, PR pragmas), a
// severity, the file, statement and object, and the rows the change touches.
// docs/migrate-lint.md documents each rule.

/// One lint rule; the raw value is its stable id.
public enum MigrationLintRule: String, Sendable, CaseIterable {
    case tableDropped = "DS101"
    case columnDropped = "DS102"
    case viewDropped = "DS103"
    case triggerDropped = "DS104"
    case uniqueIndexDropped = "DS105"
    case deleteWithoutWhere = "DS106"
    case updateWithoutWhere = "DS107"
    case notNullViolated = "MF101"
    case uniqueViolated = "MF102"
    case checkViolated = "MF103"
    case foreignKeyViolated = "MF104"
    case typeChangeAltersValues = "MF105"
    case affinityChanged = "MF106"
    case statementFails = "MF107"
    case tableRenamed = "BC101"
    case columnRenamed = "BC102"
    case viewBroken = "BC103"
    case triggerBroken = "BC104"
    case foreignKeyDangling = "BC105"
    case requiredColumnAdded = "BC106"
    case rebuildUnchanged = "RB101"
    case autoincrementRemoved = "RB102"
    case notNullRemoved = "CN101"
    case foreignKeyRemoved = "CN102"
    case pragmaWithoutEffect = "PR101"

    /// A short name, as Atlas's analyzers have.
    public var name: String {
        switch self {
        case .tableDropped: "table-dropped"
        case .columnDropped: "column-dropped"
        case .viewDropped: "view-dropped"
        case .triggerDropped: "trigger-dropped"
        case .uniqueIndexDropped: "unique-index-dropped"
        case .deleteWithoutWhere: "delete-without-where"
        case .updateWithoutWhere: "update-without-where"
        case .notNullViolated: "not-null-violated"
        case .uniqueViolated: "unique-violated"
        case .checkViolated: "check-violated"
        case .foreignKeyViolated: "foreign-key-violated"
        case .typeChangeAltersValues: "type-change-alters-values"
        case .affinityChanged: "affinity-changed"
        case .statementFails: "statement-fails"
        case .tableRenamed: "table-renamed"
        case .columnRenamed: "column-renamed"
        case .viewBroken: "view-broken"
        case .triggerBroken: "trigger-broken"
        case .foreignKeyDangling: "foreign-key-dangling"
        case .requiredColumnAdded: "required-column-added"
        case .rebuildUnchanged: "rebuild-unchanged"
        case .autoincrementRemoved: "autoincrement-removed"
        case .notNullRemoved: "not-null-removed"
        case .foreignKeyRemoved: "foreign-key-removed"
        case .pragmaWithoutEffect: "pragma-without-effect"
        }
    }

    /// What the rule finds, in a few words (SARIF rule descriptions, help).
    public var summary: String {
        switch self {
        case .tableDropped: "a table is dropped (error when it holds rows)"
        case .columnDropped: "a column is dropped (error when it holds non-NULL values)"
        case .viewDropped: "a view is dropped and not re-created"
        case .triggerDropped: "a trigger is dropped, or dropped with its table in a rebuild, and not re-created"
        case .uniqueIndexDropped: "a UNIQUE index or constraint is dropped: the uniqueness is no longer enforced"
        case .deleteWithoutWhere: "a DELETE without WHERE removes every row of a table"
        case .updateWithoutWhere: "an UPDATE without WHERE rewrites every row of a table"
        case .notNullViolated: "NOT NULL is added where rows hold NULL: the migration fails"
        case .uniqueViolated: "UNIQUE (or PRIMARY KEY) is added where rows share a value: the migration fails"
        case .checkViolated: "a CHECK is added that rows violate: the migration fails"
        case .foreignKeyViolated: "a foreign key is added or changed where rows have no parent: the migration fails"
        case .typeChangeAltersValues: "a column's type change alters stored values (their storage class or value)"
        case .affinityChanged: "a column's type affinity changes (no stored value changes, new values will be stored differently)"
        case .statementFails: "a statement fails on the database's real data"
        case .tableRenamed: "a table is renamed: applications that use the old name break"
        case .columnRenamed: "a column is renamed: applications that use the old name break"
        case .viewBroken: "a view no longer compiles: it names a table or column that was dropped or renamed"
        case .triggerBroken: "a trigger no longer compiles: it names a table or column that was dropped or renamed"
        case .foreignKeyDangling: "a foreign key names a parent table or column that no longer exists"
        case .requiredColumnAdded: "a NOT NULL column without a DEFAULT is added: INSERTs that leave it out fail"
        case .rebuildUnchanged: "a table is rebuilt (dropped and re-created) with no change to its definition"
        case .autoincrementRemoved: "a table loses AUTOINCREMENT in a rebuild: rowids of deleted rows may be reused"
        case .notNullRemoved: "a column loses NOT NULL in a rebuild"
        case .foreignKeyRemoved: "a foreign key is removed in a rebuild"
        case .pragmaWithoutEffect: "PRAGMA foreign_keys in a migration file has no effect inside its transaction"
        }
    }
}

/// One finding of `migrate lint`.
public struct MigrationLintFinding: Sendable {
    public var rule: MigrationLintRule
    public var severity: Severity
    /// The migration file, its version, and the statement (1-based) and line
    /// it starts on; nil when the finding is the whole file's (a view broken
    /// by the file, a rebuild over several statements names its DROP TABLE).
    public var file: String
    public var version: Int64
    public var statement: Int?
    public var line: Int?
    /// The object concerned (`table`, `table.column`, an index, view or trigger).
    public var object: String
    /// The rows or values the change touches, where the rule counts them.
    public var count: Int64?
    public var message: String

    /// The stable fingerprint: the first 16 bytes, in lowercase hex, of the
    /// SHA-256 of rule id, file and object (not the line or counts, which
    /// move with edits and data).
    public var fingerprint: String {
        var hasher = SHA256Hasher()
        hasher.update(Array("\(rule.rawValue)\u{0}\(file)\u{0}\(object)".utf8))
        return String(hasher.finalizeHex().prefix(32))
    }

    /// `0003_x.sql:12 (statement 2)` or `0003_x.sql`.
    public var location: String {
        if let statement, let line { return "\(file):\(line) (statement \(statement))" }
        return file
    }

    /// One line: `error DS102 0003_x.sql:2 (statement 1): MESSAGE`.
    public var line1: String { "\(severity.rawValue) \(rule.rawValue) \(location): \(message)" }
}

/// What `migrate lint` found over the pending migrations.
public struct MigrationLintReport: Sendable {
    public var path: String
    public var folder: String
    public var fromVersion: Int64
    public var toVersion: Int64
    /// The files linted, in order, with their versions.
    public var files: [(name: String, version: Int64)]
    /// The files not linted because an earlier one fails on the data.
    public var notLinted: [String]
    public var findings: [MigrationLintFinding]
    public var seconds: Double

    public func count(_ severity: Severity) -> Int { findings.filter { $0.severity == severity }.count }

    /// True when a finding fails the lint: an error, or with `strict` a warning.
    public func fails(strict: Bool) -> Bool {
        findings.contains { $0.severity == .error || (strict && $0.severity == .warning) }
    }
}
