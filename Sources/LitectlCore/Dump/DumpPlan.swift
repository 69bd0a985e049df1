// What a dump holds and in which order: the file's settings, the tables with
// the columns (and rowid) each row is written with, then indexes, views and
// triggers. Built once, read-only, from `sqlite_schema` in creation order and
// from SQLite's own introspection (SchemaReader).

/// What to dump.
public struct DumpOptions: Sendable {
    /// Only these tables (with their indexes and triggers; a virtual table with
    /// its shadow tables). Empty: everything.
    public var tables: [String] = []
    /// CREATE statements and the file's settings.
    public var includeSchema = true
    /// Rows.
    public var includeData = true
    /// When values are written in pieces (SQL script).
    var pieces = PieceLimits()
    public init() {}
}

/// The settings of a database file that a dump carries: those SQLite fixes
/// when the file is created (page size, auto_vacuum, text encoding), the two
/// header integers applications set, and the journal mode (WAL is stored in
/// the file; the rollback modes are per connection).
public struct DatabaseSettings: Sendable, Equatable {
    public var pageSize: Int64
    /// 0 none, 1 full, 2 incremental (PRAGMA auto_vacuum).
    public var autoVacuum: Int64
    public var encoding: TextEncoding
    public var userVersion: Int64
    public var applicationID: Int64
    /// Lower case, as PRAGMA journal_mode says it ("wal", "delete", ...).
    public var journalMode: String

    /// PRAGMA auto_vacuum's name for a value.
    public static func autoVacuumName(_ value: Int64) -> String {
        switch value {
        case 1: "FULL"
        case 2: "INCREMENTAL"
        default: "NONE"
        }
    }

    static func read(_ connection: Connection) throws -> DatabaseSettings {
        func integer(_ sql: String) throws -> Int64 {
            if case .integer(let v)? = try connection.scalar(sql) { return v }
            return 0
        }
        var encoding = TextEncoding.utf8
        if case .text(let bytes)? = try connection.scalar("PRAGMA main.encoding") {
            encoding = TextEncoding(rawValue: String(decoding: bytes, as: UTF8.self)) ?? .utf8
        }
        return DatabaseSettings(pageSize: try integer("PRAGMA main.page_size"), autoVacuum: try integer("PRAGMA main.auto_vacuum"),
                                encoding: encoding, userVersion: try integer("PRAGMA main.user_version"),
                                applicationID: try integer("PRAGMA main.application_id"),
                                journalMode: try connection.journalMode())
    }
}

/// One table as a dump writes it.
public struct DumpTable: Sendable {
    public enum Role: Sendable, Equatable {
        /// CREATE TABLE, then its rows.
        case ordinary
        /// CREATE VIRTUAL TABLE; its content travels in its shadow tables (SQL)
        /// or through the table itself (CSV, JSON Lines).
        case virtual
        /// A table a virtual table keeps its content in (`docs_data` of FTS5
        /// `docs`): made by the CREATE VIRTUAL TABLE, refilled row by row.
        case shadow(owner: String)
        /// sqlite_sequence: made by the first AUTOINCREMENT table, refilled after all rows.
        case sequence
        /// sqlite_stat1 or sqlite_stat4: made by `ANALYZE sqlite_schema`, refilled.
        case statistics
    }

    public var name: String
    public var role: Role
    /// The CREATE statement as stored in sqlite_schema.
    public var sql: String?
    /// The columns a row is written with, in table order: all but generated
    /// columns (computed again on insert), and for a virtual table its visible ones.
    public var columns: [String]
    /// The name the rowid is read and written under (`rowid`, `_rowid_` or
    /// `oid`, whichever no column takes), for a rowid table with no INTEGER
    /// PRIMARY KEY: so the rebuilt table keeps every row's rowid. nil when
    /// the rowid is a column already, there is none (WITHOUT ROWID), or all
    /// three names are columns (then the rowids cannot be kept).
    public var rowidAlias: String?
    /// True for a rowid table whose rowid cannot be named (see `rowidAlias`).
    public var rowidUnnamed: Bool
    /// Where in a written row the rowid is (the alias, or the INTEGER PRIMARY
    /// KEY column), so that a damaged b-tree that hands rows out of order is
    /// caught; nil when rows carry no rowid.
    public var rowidPosition: Int?
    /// True when the table holds generated columns (so INSERT needs a column list).
    public var hasGeneratedColumns: Bool

    /// The column names a written row holds, the rowid alias first.
    public var writtenColumns: [String] { (rowidAlias.map { [$0] } ?? []) + columns }
}

/// Everything a dump writes, in order.
public struct DumpPlan: Sendable {
    public var settings: DatabaseSettings
    /// Tables in creation order (sqlite_schema's rowid order).
    public var tables: [DumpTable]
    /// CREATE INDEX statements (not the automatic indexes of constraints), in creation order.
    public var indexes: [String]
    public var views: [String]
    public var triggers: [String]
    /// True when a subset of tables was asked for.
    public var isSubset: Bool
    /// Tables named by the options, as keys (sqlNameKey), to filter
    /// sqlite_sequence and sqlite_stat rows with.
    var selectedKeys: Set<[UInt8]>

    /// The tables a CSV or JSON Lines dump writes one file each for: ordinary
    /// and virtual tables (that SQLite here can read) and SQLite's bookkeeping
    /// tables; not shadow tables, whose content is their virtual table's.
    public var rowFileTables: [DumpTable] {
        tables.filter { table in
            switch table.role {
            case .shadow: return false
            case .virtual: return !table.columns.isEmpty
            default: return true
            }
        }
    }

    /// Reads the plan inside the caller's read transaction.
    static func read(_ connection: Connection, options: DumpOptions) throws -> DumpPlan {
        let settings = try DatabaseSettings.read(connection)
        let schema = try connection.readSchema()
        var detail: [[UInt8]: Table] = [:]
        for table in schema.tables { detail[Array(table.name.utf8)] = table }

        var objects: [(type: String, name: String, table: String, sql: String?)] = []
        let list = try connection.prepare("SELECT type, name, tbl_name, sql FROM main.sqlite_schema ORDER BY rowid")
        try list.forEachRow { row in
            objects.append((row.string(at: 0), row.string(at: 1), row.string(at: 2), row.isNull(at: 3) ? nil : row.string(at: 3)))
        }

        var wanted = Set<[UInt8]>()
        for name in options.tables {
            guard let table = schema.table(named: name) else {
                throw DatabaseError(code: .error, message: "no such table: \(name)", path: connection.path)
            }
            wanted.insert(sqlNameKey(table.name))
        }
        let virtualNames = schema.tables.filter { $0.kind == .virtual }.map(\.name)
        /// The virtual table a shadow table belongs to: the longest `<name>_` prefix.
        func owner(of shadow: String) -> String? {
            virtualNames.filter { sqlNameHasPrefix(shadow, $0 + "_") }.max { $0.utf8.count < $1.utf8.count }
        }
        if !wanted.isEmpty {
            for table in schema.tables where table.kind == .shadow {
                if let owner = owner(of: table.name), wanted.contains(sqlNameKey(owner)) { wanted.insert(sqlNameKey(table.name)) }
            }
        }
        func selected(_ name: String) -> Bool { wanted.isEmpty || wanted.contains(sqlNameKey(name)) }

        var tables: [DumpTable] = []
        var indexes: [String] = [], views: [String] = [], triggers: [String] = []
        for object in objects {
            // Only the first statement of a stored text is parsed when SQLite
            // opens the file; a dump would replay the rest when it is loaded.
            if let sql = object.sql {
                try SchemaStatement.require(sql, object: "\(object.type) \(quoteIdentifier(object.name))", path: connection.path)
            }
            switch object.type {
            case "table":
                guard let table = detail[Array(object.name.utf8)] else { continue }
                let role: DumpTable.Role
                switch table.kind {
                case .ordinary: role = .ordinary
                case .virtual: role = .virtual
                case .shadow:
                    guard let name = owner(of: table.name) else { role = .ordinary; break }
                    role = .shadow(owner: name)
                case .internal:
                    if sameSQLName(table.name, "sqlite_sequence") {
                        role = .sequence
                    } else if table.isStatistics {
                        role = .statistics
                    } else {
                        continue  // sqlite_stat2/3 of old versions: no SQLite makes or reads them now
                    }
                }
                let bookkeeping = role == .sequence || role == .statistics
                guard bookkeeping || selected(table.name) else { continue }
                tables.append(try dumpTable(table, role: role, sql: object.sql, connection: connection))
            case "index":
                if let sql = object.sql, selected(object.table) { indexes.append(sql) }
            case "view":
                if let sql = object.sql, wanted.isEmpty { views.append(sql) }
            case "trigger":
                if let sql = object.sql, selected(object.table) { triggers.append(sql) }
            default:
                continue
            }
        }
        return DumpPlan(settings: settings, tables: tables, indexes: indexes, views: views, triggers: triggers,
                        isSubset: !wanted.isEmpty, selectedKeys: wanted)
    }

    /// The INTEGER PRIMARY KEY column that is a rowid table's rowid, if any:
    /// a single-column key for which SQLite made no index (SchemaReader
    /// answers this for ordinary tables only; shadow tables have them too).
    static func rowidAliasColumn(_ table: Table, connection: Connection) throws -> String? {
        guard !table.withoutRowid, table.primaryKey.count == 1, let key = table.primaryKey.first else { return nil }
        if table.kind == .ordinary { return table.hasRowidAlias ? key.name : nil }
        let count = try connection.scalar("SELECT count(*) FROM pragma_index_list(?1, 'main') WHERE origin = 'pk'", [.text(table.name)])
        return count == .integer(0) ? key.name : nil
    }

    static func dumpTable(_ table: Table, role: DumpTable.Role, sql: String?, connection: Connection) throws -> DumpTable {
        let isVirtual = role == .virtual
        if let problem = table.problem {
            if isVirtual {
                // A module this SQLite lacks: the CREATE is kept, no row can be read.
                return DumpTable(name: table.name, role: role, sql: sql, columns: [], rowidAlias: nil, rowidUnnamed: false,
                                 rowidPosition: nil, hasGeneratedColumns: false)
            }
            throw DatabaseError(code: .error, message: "cannot read the columns of table \(quoteIdentifier(table.name)): \(problem)",
                                path: connection.path)
        }
        let columns = table.columns.filter { isVirtual ? $0.hidden == .normal : !$0.isGenerated }.map(\.name)
        var alias: String? = nil
        var unnamed = false
        var position: Int? = nil
        let rowidTable: Bool
        if isVirtual {
            // A virtual table has a rowid unless it says WITHOUT ROWID; FTS5's is the document id.
            rowidTable = (try? connection.prepare("SELECT rowid FROM \(quoteIdentifier(table.name)) LIMIT 0")) != nil
        } else {
            rowidTable = !table.withoutRowid
        }
        let rowidColumn = isVirtual ? nil : try rowidAliasColumn(table, connection: connection)
        if rowidTable && rowidColumn == nil {
            let taken = Set(table.columns.map { sqlNameKey($0.name) })
            alias = ["rowid", "_rowid_", "oid"].first { !taken.contains(sqlNameKey($0)) }
            unnamed = alias == nil
            if alias != nil && !isVirtual { position = 0 }
        } else if let rowidColumn {
            position = columns.firstIndex { $0 == rowidColumn }
        }
        // sqlite_sequence and the statistics tables: their rowids are SQLite's
        // bookkeeping (no hash, diff or reader sees them), and a refill must not
        // collide with the rows SQLite itself adds as the dump loads.
        if role == .sequence || role == .statistics {
            alias = nil
            unnamed = false
            position = nil
        }
        return DumpTable(name: table.name, role: role, sql: sql, columns: columns, rowidAlias: alias, rowidUnnamed: unnamed,
                         rowidPosition: position, hasGeneratedColumns: table.columns.contains { $0.isGenerated })
    }
}
