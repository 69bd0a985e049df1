// The vocabulary of a diff: what to compare (options), how each table's rows
// are matched (plan), the schema changes found, and the callbacks through
// which the engine reports them to a writer.

/// What `DiffEngine` compares.
public struct DiffOptions: Sendable {
    /// Only these tables (empty: all).
    public var tables: [String] = []
    /// Never these tables.
    public var excluded: [String] = []
    /// `TABLE.COLUMN` pairs left out of comparisons.
    public var ignoredColumns: [String] = []
    public var schemaOnly = false
    public var dataOnly = false
    /// Key columns for tables without a primary key (table name → columns).
    public var keys: [String: [String]] = [:]
    /// Match rows of tables without a primary key by rowid (as sqldiff does).
    public var matchRowid = false
    /// Skip the key ranges whose b-tree pages are byte-identical in both
    /// files (see `SharedPages`); false reads every row.
    public var skipSharedPages = true
    /// Decode rows straight from the b-tree pages where a table's tree order
    /// is the merge's key order (see `DiffPages`); false reads every table
    /// with statements. The result is the same.
    public var readPages = true
    /// Where both sides of a table are read from their pages and a record
    /// reads as the same row on either side, compare rows as raw records
    /// and decode only those that differ (see `RecordStream`); false decodes
    /// every row. The result is the same.
    public var compareRecords = true
    /// Threads that read each side's pages (0: half the cores, at least 1, at most 4).
    public var threadsPerSide = 0
    /// Compare a table whose columns were renamed, added or dropped on all
    /// its columns (see `AcrossColumns`); false: on the columns both sides
    /// name alike (what a --data-only patch, which changes no schema, writes).
    var compareAcrossColumns = true
    public init() {}
}

/// How the rows of one table are matched between A and B.
public enum MatchMode: String, Sendable {
    /// By the declared primary key (or `--key`).
    case key
    /// By rowid.
    case rowid
    /// No key: rows compared as a multiset of whole rows.
    case multiset
}

/// How one table's rows are read and compared.
public struct TablePlan: Sendable {
    public var name: String
    /// The selected columns, in order; the first is the rowid when `rowidColumn` is set.
    /// (In a multiset plan the rowid is read only to address A's rows: it is
    /// neither compared nor inserted. Rows whose key holds a NULL are diffed so.)
    public var columns: [String]
    /// Indexes into `columns` of the matching key, in key order.
    public var keyIndexes: [Int]
    /// Indexes into `columns` that are compared (not ignored, not key).
    public var comparedIndexes: [Int]
    public var mode: MatchMode
    /// The name the rowid is selected under ("rowid", "_rowid_" or "oid"), when selected.
    public var rowidColumn: String?
    /// True when the table exists only in B (every row is an insert).
    public var onlyInB = false
    /// True when the table exists only in A (every row is a delete).
    public var onlyInA = false
    /// True for a virtual table.
    public var isVirtual = false
    /// True when the key came from `--key` (it may repeat; rows are paired in order).
    public var userKey = false
    /// For a table whose columns changed other than in order, type or
    /// constraints (renamed, added, dropped): what each column is on each side.
    public var across: AcrossColumns?
    /// Which side a statement reading `across` columns selects for (see `reading(_:)`).
    var readSide: DiffSide?

    /// The plan as read from one side: `across` columns by that side's names,
    /// the others as the value that side's rows are taken to hold.
    func reading(_ side: DiffSide) -> TablePlan {
        guard across != nil else { return self }
        var plan = self
        plan.readSide = side
        return plan
    }

    /// True when column `i` exists in B (a patch can write it).
    public func inB(_ i: Int) -> Bool { across?.namesB[i] != nil || across == nil }
    /// True when column `i` exists in A.
    public func inA(_ i: Int) -> Bool { across?.namesA[i] != nil || across == nil }
}

public enum DiffSide: Sendable { case a, b }

/// The columns of a table compared across a change of its columns: per
/// plan column, its name in A and in B (nil: not on that side), and the
/// value a side without it is taken to hold (an added column: B's DEFAULT,
/// as SQLite gives A's rows on ADD COLUMN; a dropped column: NULL).
public struct AcrossColumns: Sendable {
    public var namesA: [String?]
    public var namesB: [String?]
    public var absentValues: [Value]
    public var pairing: ColumnPairing
}

extension TablePlan {
    /// For a plan that matches by the declared primary key: the key columns
    /// it uses and the declared ones, when they are not the same names byte
    /// for byte. Columns named 'É' and 'é' are two columns to SQLite, and a
    /// plan that took one for the other would address the wrong rows.
    func misreadPrimaryKey(_ comparison: SchemaComparison) -> (used: String, declared: String)? {
        guard mode == .key, !userKey, let table = comparison.b.table(named: name) ?? comparison.a.table(named: name) else { return nil }
        let used = keyIndexes.map { columns[$0] }, declared = table.primaryKey.map(\.name)
        guard used.map({ Array($0.utf8) }) != declared.map({ Array($0.utf8) }) else { return nil }
        return (used.joined(separator: ", "), declared.joined(separator: ", "))
    }
}

/// Counts of row changes in one table.
public struct ChangeCounts: Sendable, Equatable {
    public var inserted = 0
    public var deleted = 0
    public var updated = 0
    public var total: Int { inserted + deleted + updated }
    public init() {}
}

/// One difference in the schema.
public struct SchemaChange: Sendable {
    public enum Operation: String, Sendable { case added, dropped, changed }
    /// "table", "index", "view", "trigger" or "pragma".
    public var objectType: String
    public var name: String
    public var operation: Operation
    /// What changed, in words (columns added, types changed, ...).
    public var details: [String]
    public var oldSQL: String?
    public var newSQL: String?
}

/// Receives what the engine finds, in order: `begin` once, then for each
/// table `beginTable`, its row changes, `endTable`, and `finish` once.
/// DiffRow views are valid only during the call.
public protocol DiffConsumer: AnyObject {
    /// True when the consumer wants shape-changed tables as "B's rows all
    /// inserted" (a rebuild) rather than compared on their common columns.
    var rebuildsChangedTables: Bool { get }
    /// True when tables without a key that differ as multisets should then be
    /// matched by rowid (so that a patch reproduces B's rowids too).
    var wantsRowidsForKeylessTables: Bool { get }
    func begin(_ diff: SchemaComparison) throws
    func beginTable(_ plan: TablePlan) throws
    func inserted(_ plan: TablePlan, new: DiffRow) throws
    func deleted(_ plan: TablePlan, old: DiffRow) throws
    func updated(_ plan: TablePlan, old: DiffRow, new: DiffRow, changed: [Int]) throws
    func endTable(_ plan: TablePlan, counts: ChangeCounts) throws
    func finish(_ summary: DiffSummary) throws
}

/// The outcome of a diff.
public struct DiffSummary: Sendable {
    public var schemaChanges: [SchemaChange] = []
    public var tables: [(name: String, counts: ChangeCounts)] = []
    /// Tables read with statements rather than from their pages, and why (for -v).
    public var notes: [String] = []
    public var identical: Bool { schemaChanges.isEmpty && tables.allSatisfy { $0.counts.total == 0 } }
    public init() {}
}
