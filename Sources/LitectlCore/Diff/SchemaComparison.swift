// Compares the schemas of A and B: which tables are added, dropped, changed in
// shape or the same; which indexes, views and triggers differ (by normalized
// SQL); user_version, application_id and sqlite_sequence. The data pass and
// the patch writer both work from this one comparison.

/// The schema side of a diff, with the filters applied.
public struct SchemaComparison: Sendable {
    public var a: Schema
    public var b: Schema
    public var options: DiffOptions
    /// Tables only in B, only in A, in both with a different definition, and in both alike.
    public var addedTables: [Table] = []
    public var droppedTables: [Table] = []
    public var changedTables: [(a: Table, b: Table)] = []
    public var sameTables: [(a: Table, b: Table)] = []
    /// Indexes of A to drop and of B to create (changed ones appear in both).
    public var indexesToDrop: [Index] = []
    public var indexesToCreate: [Index] = []
    public var viewsToDrop: [View] = []
    public var viewsToCreate: [View] = []
    /// Triggers on the tables in scope.
    public var triggersA: [Trigger] = []
    public var triggersB: [Trigger] = []
    public var userVersion: (a: Int64, b: Int64) = (0, 0)
    public var applicationID: (a: Int64, b: Int64) = (0, 0)
    /// sqlite_sequence rows (name, seq, rowid) of each side, nil when the table is absent.
    public var sequenceA: [[Value]]?
    public var sequenceB: [[Value]]?
    /// The schema changes found (empty with --data-only).
    public var changes: [SchemaChange] = []
    /// A's text encoding: a patch's TEXT literals are written for it.
    public var encodingA: TextEncoding = .utf8
    /// For changed tables that ALTER TABLE turns into B's definition exactly
    /// (by B's name, see `sqlNameKey`): the statements, in order. A patch
    /// alters these in place and rebuilds the other changed tables.
    public var alterations: [[UInt8]: [String]] = [:]

    /// True when every table is in scope (no --table filter): views and
    /// database-wide settings are compared only then.
    public var wholeDatabase: Bool { options.tables.isEmpty }

    static func contentTables(_ schema: Schema, _ options: DiffOptions) -> [Table] {
        let wanted = Set(options.tables.map { sqlNameKey($0) })
        let excluded = Set(options.excluded.map { sqlNameKey($0) })
        return schema.tables.filter { table in
            guard table.kind == .ordinary || table.kind == .virtual || table.isStatistics else { return false }
            let name = sqlNameKey(table.name)
            return (wanted.isEmpty || wanted.contains(name)) && !excluded.contains(name)
        }
    }

    init(a: Schema, b: Schema, connectionA: Connection, connectionB: Connection, options: DiffOptions) throws {
        self.a = a
        self.b = b
        self.options = options
        if case .text(let bytes) = try connectionA.scalar("PRAGMA encoding") ?? .null {
            encodingA = TextEncoding(rawValue: String(decoding: bytes, as: UTF8.self)) ?? .utf8
        }
        for name in options.tables where a.table(named: name) == nil && b.table(named: name) == nil {
            throw DatabaseError(code: .error, message: "no such table in either database: \(name)")
        }
        let tablesA = Self.contentTables(a, options), tablesB = Self.contentTables(b, options)
        let byNameB = Dictionary(tablesB.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
        let byNameA = Dictionary(tablesA.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
        for table in tablesA {
            if let other = byNameB[sqlNameKey(table.name)] {
                // SQLite makes the statistics tables itself; they cannot be rebuilt.
                if normalizeSQL(table.sql ?? "") == normalizeSQL(other.sql ?? "") && table.name == other.name
                    || table.isStatistics {
                    sameTables.append((table, other))
                } else {
                    changedTables.append((table, other))
                }
            } else {
                droppedTables.append(table)
            }
        }
        addedTables = tablesB.filter { byNameA[sqlNameKey($0.name)] == nil }
        for pair in changedTables {
            if let statements = alterationStatements(pair.a, pair.b, ColumnPairing.pair(pair.a, pair.b)) {
                alterations[sqlNameKey(pair.b.name)] = statements
            }
        }
        let scope = Set((tablesA + tablesB).map { sqlNameKey($0.name) })

        // Indexes with SQL (automatic ones follow their table's definition).
        let indexesA = a.indexes.filter { $0.sql != nil && scope.contains(sqlNameKey($0.table)) }
        let indexesB = b.indexes.filter { $0.sql != nil && scope.contains(sqlNameKey($0.table)) }
        // (A table altered in place keeps its indexes: they are compared as a same table's.)
        let rebuilt = Set((changedTables.map { $0.b.name } + addedTables.map(\.name)).map { sqlNameKey($0) })
            .subtracting(alterations.keys)
        let dropped = Set(droppedTables.map { sqlNameKey($0.name) })
        let indexByNameB = Dictionary(indexesB.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
        let indexByNameA = Dictionary(indexesA.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
        for index in indexesA {
            let other = indexByNameB[sqlNameKey(index.name)]
            let same = other.map { normalizeSQL($0.sql ?? "") == normalizeSQL(index.sql ?? "") } ?? false
            if !same {
                changes.append(SchemaChange(objectType: "index", name: index.name, operation: other == nil ? .dropped : .changed,
                                            details: [], oldSQL: index.sql, newSQL: other?.sql))
            }
            // Indexes of dropped or rebuilt tables go with their table.
            if !same && !dropped.contains(sqlNameKey(index.table)) && !rebuilt.contains(sqlNameKey(index.table)) {
                indexesToDrop.append(index)
            }
        }
        for index in indexesB {
            let other = indexByNameA[sqlNameKey(index.name)]
            let same = other.map { normalizeSQL($0.sql ?? "") == normalizeSQL(index.sql ?? "") } ?? false
            if other == nil {
                changes.append(SchemaChange(objectType: "index", name: index.name, operation: .added, details: [],
                                            oldSQL: nil, newSQL: index.sql))
            }
            if !same || rebuilt.contains(sqlNameKey(index.table)) { indexesToCreate.append(index) }
        }

        // INSTEAD OF triggers hang on views: compared (and dropped and made
        // again around the data changes) with the views, on a whole-database diff.
        let excludedViews = Set(options.excluded.map { sqlNameKey($0) })
        let viewsOfA = wholeDatabase ? Set(a.views.map { sqlNameKey($0.name) }).subtracting(excludedViews) : []
        let viewsOfB = wholeDatabase ? Set(b.views.map { sqlNameKey($0.name) }).subtracting(excludedViews) : []
        triggersA = a.triggers.filter { scope.contains(sqlNameKey($0.table)) || viewsOfA.contains(sqlNameKey($0.table)) }
        triggersB = b.triggers.filter { scope.contains(sqlNameKey($0.table)) || viewsOfB.contains(sqlNameKey($0.table)) }
        Self.compareNamed(triggersA.map { ($0.name, $0.sql) }, triggersB.map { ($0.name, $0.sql) }, type: "trigger", into: &changes)

        if wholeDatabase {
            let excluded = Set(options.excluded.map { sqlNameKey($0) })
            let viewsA = a.views.filter { !excluded.contains(sqlNameKey($0.name)) }
            let viewsB = b.views.filter { !excluded.contains(sqlNameKey($0.name)) }
            let viewByNameB = Dictionary(viewsB.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
            let viewByNameA = Dictionary(viewsA.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
            viewsToDrop = viewsA.filter { v in viewByNameB[sqlNameKey(v.name)].map { normalizeSQL($0.sql) != normalizeSQL(v.sql) } ?? true }
            viewsToCreate = viewsB.filter { v in viewByNameA[sqlNameKey(v.name)].map { normalizeSQL($0.sql) != normalizeSQL(v.sql) } ?? true }
            Self.compareNamed(viewsA.map { ($0.name, $0.sql) }, viewsB.map { ($0.name, $0.sql) }, type: "view", into: &changes)

            userVersion = (try Self.pragma(connectionA, "user_version"), try Self.pragma(connectionB, "user_version"))
            applicationID = (try Self.pragma(connectionA, "application_id"), try Self.pragma(connectionB, "application_id"))
            for (name, pair) in [("user_version", userVersion), ("application_id", applicationID)] where pair.a != pair.b {
                changes.append(SchemaChange(objectType: "pragma", name: name, operation: .changed,
                                            details: ["\(pair.a) → \(pair.b)"], oldSQL: nil, newSQL: nil))
            }
            sequenceA = try Self.sequence(connectionA, a)
            sequenceB = try Self.sequence(connectionB, b)
        }

        for table in addedTables {
            changes.append(SchemaChange(objectType: "table", name: table.name, operation: .added, details: [], oldSQL: nil, newSQL: table.sql))
        }
        for table in droppedTables {
            changes.append(SchemaChange(objectType: "table", name: table.name, operation: .dropped, details: [], oldSQL: table.sql, newSQL: nil))
        }
        for pair in changedTables {
            changes.append(SchemaChange(objectType: "table", name: pair.b.name, operation: .changed,
                                        details: Self.tableDetails(pair.a, pair.b), oldSQL: pair.a.sql, newSQL: pair.b.sql))
        }
        changes.sort { $0.objectType != $1.objectType ? $0.objectType > $1.objectType : compareNames($0.name, $1.name) }
        if options.dataOnly { changes = [] }
    }

    static func pragma(_ connection: Connection, _ name: String) throws -> Int64 {
        if case .integer(let v) = try connection.scalar("PRAGMA \(name)") ?? .null { return v }
        return 0
    }

    static func sequence(_ connection: Connection, _ schema: Schema) throws -> [[Value]]? {
        guard schema.table(named: "sqlite_sequence") != nil else { return nil }
        return try connection.rows("SELECT name, seq, rowid FROM sqlite_sequence ORDER BY rowid")
    }

    static func compareNamed(_ a: [(String, String)], _ b: [(String, String)], type: String, into changes: inout [SchemaChange]) {
        let byNameB = Dictionary(b.map { (sqlNameKey($0.0), $0) }, uniquingKeysWith: { x, _ in x })
        let byNameA = Dictionary(a.map { (sqlNameKey($0.0), $0) }, uniquingKeysWith: { x, _ in x })
        for (name, sql) in a {
            if let other = byNameB[sqlNameKey(name)] {
                if normalizeSQL(other.1) != normalizeSQL(sql) {
                    changes.append(SchemaChange(objectType: type, name: name, operation: .changed, details: [], oldSQL: sql, newSQL: other.1))
                }
            } else {
                changes.append(SchemaChange(objectType: type, name: name, operation: .dropped, details: [], oldSQL: sql, newSQL: nil))
            }
        }
        for (name, sql) in b where byNameA[sqlNameKey(name)] == nil {
            changes.append(SchemaChange(objectType: type, name: name, operation: .added, details: [], oldSQL: nil, newSQL: sql))
        }
    }

    /// What differs between two definitions of a table, column by column.
    static func tableDetails(_ a: Table, _ b: Table) -> [String] {
        var details: [String] = []
        if a.name != b.name { details.append("renamed \(a.name) → \(b.name)") }
        // Renamed columns are paired as the diff pairs them (see `ColumnPairing`).
        var renamed: [[UInt8]: String] = [:]   // A's name → B's name
        for entry in ColumnPairing.pair(a, b).entries where entry.kind == .renamed {
            renamed[sqlNameKey(entry.nameA!)] = entry.nameB!
            details.append("column \(entry.nameA!) renamed to \(entry.nameB!)")
        }
        let columnsB = Dictionary(b.columns.map { (sqlNameKey($0.name), $0) }, uniquingKeysWith: { x, _ in x })
        let namesA = Set(a.columns.map { sqlNameKey(renamed[sqlNameKey($0.name)] ?? $0.name) })
        for column in a.columns {
            guard let other = columnsB[sqlNameKey(renamed[sqlNameKey(column.name)] ?? column.name)] else {
                details.append("column \(column.name) dropped"); continue
            }
            func change(_ what: String, _ x: String, _ y: String) {
                if x != y { details.append("column \(column.name) \(what) \(x) → \(y)") }
            }
            change("type", column.declaredType.isEmpty ? "(none)" : column.declaredType,
                   other.declaredType.isEmpty ? "(none)" : other.declaredType)
            change("NOT NULL", column.notNull ? "yes" : "no", other.notNull ? "yes" : "no")
            change("default", column.defaultSQL ?? "(none)", other.defaultSQL ?? "(none)")
            change("collation", column.collation, other.collation)
            change("primary key position", String(column.primaryKeyPosition), String(other.primaryKeyPosition))
            change("generated", String(describing: column.hidden), String(describing: other.hidden))
        }
        for column in b.columns where !namesA.contains(sqlNameKey(column.name)) {
            details.append("column \(column.name) added (\(column.declaredType.isEmpty ? "no type" : column.declaredType))")
        }
        let orderA = a.columns.map { sqlNameKey(renamed[sqlNameKey($0.name)] ?? $0.name) }.filter { columnsB[$0] != nil }
        let orderB = b.columns.map { sqlNameKey($0.name) }.filter { namesA.contains($0) }
        if orderA != orderB { details.append("columns reordered") }
        if a.withoutRowid != b.withoutRowid { details.append(b.withoutRowid ? "now WITHOUT ROWID" : "no longer WITHOUT ROWID") }
        if a.strict != b.strict { details.append(b.strict ? "now STRICT" : "no longer STRICT") }
        if a.autoincrement != b.autoincrement { details.append(b.autoincrement ? "now AUTOINCREMENT" : "no longer AUTOINCREMENT") }
        if a.foreignKeys.count != b.foreignKeys.count { details.append("foreign keys \(a.foreignKeys.count) → \(b.foreignKeys.count)") }
        if details.isEmpty { details.append("definition changed") }
        return details
    }
}
