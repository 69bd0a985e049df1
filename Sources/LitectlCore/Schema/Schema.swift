// What a database holds, as plain values: tables (rowid, WITHOUT ROWID,
// STRICT, virtual and their shadow tables), columns, indexes, views, triggers
// and foreign keys. `SchemaReader` fills it in from a connection.

/// Every object of one schema (`main`, `temp` or an attached alias).
public struct Schema: Sendable {
    public var schemaName: String
    /// Tables in name order (ordinary, virtual, shadow and internal `sqlite_` ones).
    public var tables: [Table]
    public var indexes: [Index]
    public var views: [View]
    public var triggers: [Trigger]

    public func table(named name: String) -> Table? {
        tables.first { Array($0.name.utf8) == Array(name.utf8) } ?? tables.first { sameSQLName($0.name, name) }
    }

    public func indexes(on table: String) -> [Index] {
        indexes.filter { sameSQLName($0.table, table) }
    }
}

public struct Table: Sendable {
    public enum Kind: String, Sendable {
        /// A table made with CREATE TABLE.
        case ordinary = "table"
        /// A CREATE VIRTUAL TABLE (FTS5, R*Tree, ...).
        case virtual
        /// A table that stores a virtual table's content (`docs_content` of FTS5 `docs`).
        case shadow
        /// SQLite's own tables: sqlite_sequence, sqlite_stat1 and the like.
        case `internal`
    }

    public var name: String
    public var kind: Kind
    public var withoutRowid: Bool
    public var strict: Bool
    /// True when a column is INTEGER PRIMARY KEY AUTOINCREMENT.
    public var autoincrement: Bool
    public var columns: [Column]
    public var foreignKeys: [ForeignKey]
    /// The CREATE statement as stored in sqlite_schema.
    public var sql: String?
    /// A message when the columns could not be read (a virtual table whose
    /// module this SQLite lacks, say).
    public var problem: String?

    public init(name: String, kind: Kind, withoutRowid: Bool, strict: Bool, autoincrement: Bool, columns: [Column],
                foreignKeys: [ForeignKey], sql: String?, problem: String? = nil, hasRowidAlias: Bool = false) {
        self.name = name
        self.kind = kind
        self.withoutRowid = withoutRowid
        self.strict = strict
        self.autoincrement = autoincrement
        self.columns = columns
        self.foreignKeys = foreignKeys
        self.sql = sql
        self.problem = problem
        self.hasRowidAlias = hasRowidAlias
    }

    /// The columns that hold content a user writes: neither generated nor
    /// hidden (a virtual table's hidden columns). What diff and hash compare.
    public var contentColumns: [Column] { columns.filter { $0.hidden == .normal } }

    /// Primary-key columns in key order (empty for a table keyed by rowid only).
    public var primaryKey: [Column] {
        columns.filter { $0.primaryKeyPosition > 0 }.sorted { $0.primaryKeyPosition < $1.primaryKeyPosition }
    }

    /// True for `INTEGER PRIMARY KEY` in a rowid table: that column is the
    /// rowid. Read from SQLite, not guessed from the type: a rowid table's
    /// single-column key is the rowid exactly when SQLite made no index for it
    /// (`INTEGER PRIMARY KEY DESC` and `INT PRIMARY KEY` get one).
    public var hasRowidAlias: Bool
}

public struct Column: Sendable {
    public enum Hidden: Int, Sendable {
        case normal = 0
        /// A hidden column of a virtual table.
        case hiddenVirtual = 1
        /// GENERATED ALWAYS AS (...) VIRTUAL.
        case generatedVirtual = 2
        /// GENERATED ALWAYS AS (...) STORED.
        case generatedStored = 3
    }

    public var name: String
    public var declaredType: String
    public var notNull: Bool
    /// The DEFAULT as SQL text, when there is one.
    public var defaultSQL: String?
    /// 1-based position in the primary key, 0 when not part of it.
    public var primaryKeyPosition: Int
    public var hidden: Hidden
    /// The collating sequence (BINARY unless declared).
    public var collation: String

    public var isGenerated: Bool { hidden == .generatedVirtual || hidden == .generatedStored }
}

public struct ForeignKey: Sendable {
    /// The referenced (parent) table.
    public var parentTable: String
    /// Child columns in this table.
    public var columns: [String]
    /// Parent columns; nil entries mean the parent's primary key.
    public var parentColumns: [String?]
    public var onUpdate: String
    public var onDelete: String
}

public struct Index: Sendable {
    public enum Origin: String, Sendable {
        /// CREATE INDEX.
        case createIndex = "c"
        /// A UNIQUE constraint.
        case unique = "u"
        /// A PRIMARY KEY constraint.
        case primaryKey = "pk"
    }

    public struct Part: Sendable {
        /// The column name, nil for an expression.
        public var name: String?
        /// The table column number; -1 the rowid, -2 an expression.
        public var columnID: Int
        public var descending: Bool
        public var collation: String
        public var isExpression: Bool { columnID == -2 }
    }

    public var name: String
    public var table: String
    public var unique: Bool
    public var origin: Origin
    public var partial: Bool
    /// The key parts in order (not the trailing rowid or primary key).
    public var parts: [Part]
    /// The CREATE INDEX statement; nil for an automatic index.
    public var sql: String?
    /// A message when the index's details could not be read.
    public var problem: String?

    /// True for `sqlite_autoindex_*`, made by SQLite for a UNIQUE or PRIMARY KEY constraint.
    public var isAutomatic: Bool { sql == nil }
    public var hasExpressions: Bool { parts.contains { $0.isExpression } }
}

public struct View: Sendable {
    public var name: String
    public var sql: String
    /// Column names, or empty when the view does not compile here.
    public var columns: [String]
    public var problem: String?
}

public struct Trigger: Sendable {
    public var name: String
    public var table: String
    public var sql: String
}

extension Table {
    /// True for the statistics tables ANALYZE keeps, which are compared,
    /// hashed, dumped and patched like tables without a key (sqldiff compares
    /// sqlite_stat1 too, and the sqlite3 shell's .dump writes them):
    /// sqlite_stat1, and sqlite_stat4 of a SQLite built with
    /// SQLITE_ENABLE_STAT4. Legacy sqlite_stat2/3, which SQLite no longer
    /// reads, are not. See https://www.sqlite.org/fileformat.html#the_sqlite_stat1_table
    public var isStatistics: Bool {
        kind == .internal && (sameSQLName(name, "sqlite_stat1") || sameSQLName(name, "sqlite_stat4"))
    }
}
