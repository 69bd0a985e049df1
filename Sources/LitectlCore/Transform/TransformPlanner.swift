// Works out the statements of a table rebuild by running them on an empty copy
// of the schema: renames first (SQLite's ALTER TABLE ... RENAME COLUMN, which
// also rewrites indexes, triggers and views), then the new CREATE TABLE, the
// copy, the swap, and the indexes and triggers again. Whatever fails here
// fails before the user's file is touched.

/// The statements and facts `TableTransformer` needs.
struct TransformPlan {
    enum Pairing { case rowid(String), primaryKey([String]), none }
    struct Column {
        var name: String
        var previousName: String
        var changes: [String]
        var generated: Bool
        /// True when the copy may store a different value than the old row
        /// holds: the column's affinity differs, or the table becomes STRICT
        /// (which coerces). With the same affinity SQLite stores a value it
        /// reads back as it was (https://www.sqlite.org/datatype3.html#type_affinity).
        var mayConvert: Bool
    }

    var table: String
    var newTable: String
    var renames: [String] = []
    var create = ""
    var copy = ""
    var drop = ""
    var swap: [String] = []
    var recreate: [String] = []
    /// The new INTEGER PRIMARY KEY whose values become the rowids (the old
    /// rowids are dropped), when the change makes one.
    var rowidsReplacedBy: String?
    /// Indexes whose sqlite_stat1 rows stay valid: the CREATE INDEX indexes
    /// recreated, and automatic (UNIQUE, PRIMARY KEY) indexes that keep their
    /// name and their key columns.
    var statisticsIndexes: [String] = []
    var columns: [Column] = []
    var droppedColumns: [String] = []
    var pairing: Pairing = .none
    var newNotNull: [String] = []
    var keepsAutoincrement = false
    var foreignKeyTables: (before: [String], after: [String]) = ([], [])
    var notes: [String] = []

    /// The rebuild as a script for the sqlite3 shell: the statements the
    /// transform runs, in its order, with the checks it makes as pragmas.
    func script(_ kept: KeptRows) -> [String] {
        var out = ["PRAGMA foreign_keys=OFF", "BEGIN IMMEDIATE"] + renames + [create, copy, drop] + swap + recreate
        out += kept.statements(table: table)
        out += foreignKeyTables.after.map { "PRAGMA foreign_key_check(\(quoteIdentifier($0)))" }
        out += ["PRAGMA quick_check(\(quoteIdentifier(table)))", "COMMIT"]
        return out.map { $0 + ";" }
    }
}

/// Rows of SQLite's own tables that DROP TABLE deletes with the old table
/// and the transform puts back: the AUTOINCREMENT counter (sqlite_sequence)
/// and the planner's statistics (sqlite_stat1) of the table and of its
/// CREATE INDEX indexes (automatic indexes may change with the keys).
struct KeptRows {
    /// sqlite_sequence.seq, when the new table has AUTOINCREMENT too.
    var sequence: Int64?
    /// (idx, stat) of sqlite_stat1 rows; idx nil for the table's own row.
    var statistics: [(index: String?, stat: Value)] = []

    /// Reads them from the old table, before the rebuild.
    static func read(_ connection: Connection, table: String, keepsAutoincrement: Bool,
                     indexes: [String]) throws -> KeptRows {
        var kept = KeptRows()
        func exists(_ name: String) throws -> Bool {
            try connection.scalar("SELECT count(*) FROM main.sqlite_schema WHERE type = 'table' AND name = ?1", [.text(name)]) != .integer(0)
        }
        if keepsAutoincrement, try exists("sqlite_sequence"),
           case .integer(let seq)? = try connection.scalar("SELECT seq FROM main.sqlite_sequence WHERE name = ?1", [.text(table)]) {
            kept.sequence = seq
        }
        if try exists("sqlite_stat1") {
            for row in try connection.rows("SELECT idx, stat FROM main.sqlite_stat1 WHERE tbl = ?1 ORDER BY rowid", [.text(table)]) {
                switch row[0] {
                case .null:
                    kept.statistics.append((nil, row[1]))
                case .text(let bytes):
                    let name = String(decoding: bytes, as: UTF8.self)
                    if indexes.contains(where: { sameSQLName($0, name) }) { kept.statistics.append((name, row[1])) }
                default:
                    continue
                }
            }
        }
        return kept
    }

    /// The statements that put them back (values as exact literals, so the
    /// same text serves the transform and `--sql`).
    func statements(table: String) -> [String] {
        func literal(_ value: Value) -> String { value.sqlLiteral }
        var out: [String] = []
        let name = literal(.text(table))
        if let sequence {
            // The copy made a row with the largest rowid copied; the old counter may be higher.
            out.append("UPDATE sqlite_sequence SET seq = \(sequence) WHERE name = \(name) AND seq < \(sequence)")
            out.append("INSERT INTO sqlite_sequence (name, seq) SELECT \(name), \(sequence) WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = \(name))")
        }
        for (index, stat) in statistics {
            out.append("INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES (\(name), \(index.map { literal(.text($0)) } ?? "NULL"), \(literal(stat)))")
        }
        return out
    }
}

enum TransformPlanner {
    static func plan(_ connection: Connection, _ request: TransformRequest) throws -> TransformPlan {
        let path = connection.path
        func fail(_ message: String, sql: String? = nil) -> DatabaseError {
            DatabaseError(code: .error, message: message, path: path, sql: sql)
        }
        let schema = try connection.readSchema()
        guard let table = schema.table(named: request.table) else { throw fail("no such table: \(request.table)") }
        guard table.kind == .ordinary else { throw fail("\(table.name) is a \(table.kind.rawValue) table; only ordinary tables can be transformed") }
        let name = table.name
        var plan = TransformPlan(table: name, newTable: freeName(name + "_litectl_new", in: schema))
        guard !request.changes.isEmpty else { throw fail("nothing to change: give at least one change option") }

        // Column names: a change may name a column by its old or its new name.
        var renamed: [(from: String, to: String)] = []
        var current = table.columns.map(\.name)
        func resolve(_ column: String) throws -> String {
            if let hit = current.first(where: { sameSQLName($0, column) }) { return hit }
            if let rename = renamed.last(where: { sameSQLName($0.from, column) }) { return rename.to }
            throw fail("no such column: \(name).\(column)")
        }
        for case .rename(let from, let to) in request.changes {
            let old = try resolve(from)
            if current.contains(where: { sameSQLName($0, to) }) && !sameSQLName(old, to) {
                throw fail("cannot rename \(name).\(old) to \(to): a column of that name exists")
            }
            plan.renames.append("ALTER TABLE \(quoteIdentifier(name)) RENAME COLUMN \(quoteIdentifier(old)) TO \(quoteIdentifier(to))")
            renamed.append((old, to))
            current = current.map { sameSQLName($0, old) ? to : $0 }
        }

        let replica = try SchemaReplica.make(from: connection)
        let probeUsable = (try? probe(replica, name)) != nil
        let brokenViewsBefore = probeUsable ? [] : brokenViews(replica)
        for sql in plan.renames {
            do { try replica.execute(sql) } catch let error as DatabaseError {
                throw fail("cannot rename the column: \(error.message)", sql: sql)
            }
        }

        // The table, its indexes and triggers as they are after the renames.
        guard case .text(let sqlBytes)? = try replica.scalar("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1", [.text(name)]) else {
            throw fail("cannot read the CREATE TABLE statement of \(name)")
        }
        let tableSQL = String(decoding: sqlBytes, as: UTF8.self)
        let dependents = try replica.rows("""
            SELECT type, name, sql FROM sqlite_schema WHERE tbl_name = ?1 AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY rowid
            """, [.text(name)]).map { row -> (type: String, name: String, sql: String) in
                func text(_ v: Value) -> String { if case .text(let b) = v { return String(decoding: b, as: UTF8.self) } else { return "" } }
                return (text(row[0]), text(row[1]), text(row[2]))
            }

        var definition: TableDefinition
        do { definition = try TableDefinition(parsing: tableSQL) } catch {
            throw fail("cannot transform \(name): \(error)", sql: tableSQL)
        }
        var changes: [[UInt8]: [String]] = [:]
        for (from, to) in renamed { changes[sqlNameKey(to), default: []].append("renamed from \(from)") }
        // Table options last: WITHOUT ROWID needs the primary key a --pk may add.
        let ordered = request.changes.filter { !isTableOption($0) } + request.changes.filter(isTableOption)
        for change in ordered {
            try apply(change, to: &definition, table: name, schema: schema, resolve: resolve, changes: &changes, plan: &plan)
        }

        // The new table on the replica: does SQLite accept it, and what is it?
        plan.create = definition.createStatement(name: plan.newTable)
        do { try replica.execute(plan.create) } catch let error as DatabaseError {
            throw fail("the new definition of \(name) is not valid: \(error.message)", sql: plan.create)
        }
        let replicaSchema = try replica.readSchema()
        guard let newTable = replicaSchema.table(named: plan.newTable), let oldTable = replicaSchema.table(named: name) else {
            throw fail("cannot read back the new definition of \(name)")
        }
        let copied = newTable.columns.filter { !$0.isGenerated && $0.hidden == .normal }.map(\.name)
        let taken = Set((oldTable.columns + newTable.columns).map { sqlNameKey($0.name) })
        let rowidName = ["rowid", "_rowid_", "oid"].first { !taken.contains(sqlNameKey($0)) }
        let oldAlias = oldTable.hasRowidAlias ? oldTable.primaryKey.first?.name : nil
        let newAlias = newTable.hasRowidAlias ? newTable.primaryKey.first?.name : nil
        var copyRowid = false
        if !oldTable.withoutRowid && !newTable.withoutRowid, let rowidName {
            if newAlias == nil {
                copyRowid = true
                plan.pairing = .rowid(rowidName)
            } else if let oldAlias, let newAlias, sameSQLName(oldAlias, newAlias) {
                plan.pairing = .rowid(rowidName)
            } else if let newAlias {
                plan.pairing = .primaryKey([newAlias])
                plan.rowidsReplacedBy = newAlias
                plan.notes.append("rowids now come from the new INTEGER PRIMARY KEY \(newAlias)")
            }
        } else if !newTable.primaryKey.isEmpty {
            plan.pairing = .primaryKey(newTable.primaryKey.map(\.name))
        }
        if table.autoincrement && !newTable.autoincrement {
            plan.notes.append("AUTOINCREMENT is gone with the old primary key; its sqlite_sequence entry is dropped")
        }
        plan.keepsAutoincrement = newTable.autoincrement
        let columnList = copied.map(quoteIdentifier).joined(separator: ", ")
        let rowidPrefix = copyRowid ? rowidName! + ", " : ""
        plan.copy = "INSERT INTO \(quoteIdentifier(plan.newTable)) (\(rowidPrefix)\(columnList)) SELECT \(rowidPrefix)\(columnList) FROM \(quoteIdentifier(name))"
        plan.drop = "DROP TABLE \(quoteIdentifier(name))"
        // legacy_alter_table=ON: the rename must not re-check views that named the
        // dropped table (they name the new one once it is renamed).
        plan.swap = ["PRAGMA legacy_alter_table=ON",
                     "ALTER TABLE \(quoteIdentifier(plan.newTable)) RENAME TO \(quoteIdentifier(name))",
                     "PRAGMA legacy_alter_table=OFF"]
        plan.recreate = dependents.map(\.sql)
        plan.statisticsIndexes = dependents.filter { $0.type == "index" }.map(\.name)
        if newTable.withoutRowid && !oldTable.withoutRowid {
            plan.notes.append("a WITHOUT ROWID table has no rowids: rows are kept by their primary key")
        }
        plan.columns = newTable.columns.filter { $0.hidden == .normal || $0.isGenerated }.map { column in
            let previous = renamed.last { sameSQLName($0.to, column.name) }?.from ?? column.name
            let before = oldTable.columns.first { sameSQLName($0.name, column.name) }
            let mayConvert = before.map {
                affinity(of: $0.declaredType, strict: oldTable.strict) != affinity(of: column.declaredType, strict: newTable.strict)
                    || (newTable.strict && !oldTable.strict)
            } ?? true
            return TransformPlan.Column(name: column.name, previousName: previous,
                                        changes: changes[sqlNameKey(column.name)] ?? [], generated: column.isGenerated,
                                        mayConvert: mayConvert)
        }

        for sql in [plan.copy, plan.drop] + plan.swap {
            do { try replica.execute(sql) } catch let error as DatabaseError {
                throw fail("cannot rebuild \(name): \(error.message)", sql: sql)
            }
        }
        for object in dependents {
            do { try replica.execute(object.sql) } catch let error as DatabaseError {
                throw fail("cannot recreate \(object.type) \(object.name) after the change: \(error.message)", sql: object.sql)
            }
        }
        let automaticBefore = replicaSchema.indexes(on: name).filter(\.isAutomatic)
        for index in try replica.readSchema().indexes(on: name) where index.isAutomatic {
            if automaticBefore.contains(where: { sameSQLName($0.name, index.name) && signature($0) == signature(index) }) {
                plan.statisticsIndexes.append(index.name)
            }
        }
        // ANALYZE files a WITHOUT ROWID table's key (which has no sqlite_schema
        // row) under the table's own name.
        func key(_ table: Table) -> [String] { table.primaryKey.map { "\($0.name) \($0.collation)" } }
        if oldTable.withoutRowid && newTable.withoutRowid && key(oldTable) == key(newTable) {
            plan.statisticsIndexes.append(name)
        }
        if probeUsable {
            do { try probe(replica, name) } catch let error as DatabaseError {
                throw fail("the change would break the schema: \(error.message)")
            }
        } else if let broken = brokenViews(replica).first(where: { !brokenViewsBefore.contains($0) }) {
            throw fail("the change would break view \(broken)")
        }

        // Foreign keys: this table's own and those of tables that refer to it.
        let children = replicaSchema.tables.filter { child in
            !sameSQLName(child.name, plan.newTable) && child.foreignKeys.contains { sameSQLName($0.parentTable, name) }
        }.map(\.name)
        plan.foreignKeyTables = ([name] + children.filter { !sameSQLName($0, name) },
                                 [name] + children.filter { !sameSQLName($0, name) })
        do { _ = try TableTransformer.foreignKeyViolations(replica, plan.foreignKeyTables.after) } catch let error as DatabaseError {
            throw fail("foreign keys would no longer match \(name): \(error.message)")
        }
        return plan
    }

    /// The affinity SQLite gives a declared type, by the rules of
    /// https://www.sqlite.org/datatype3.html#determination_of_column_affinity
    /// ("ANY" in a STRICT table has none: values are stored as given).
    static func affinity(of declaredType: String, strict: Bool) -> String {
        let type = declaredType.uppercased()
        if strict && type == "ANY" { return "NONE" }
        if type.contains("INT") { return "INTEGER" }
        if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") { return "TEXT" }
        if type.contains("BLOB") || type.isEmpty { return "BLOB" }
        if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") { return "REAL" }
        return "NUMERIC"
    }

    /// What an index's statistics depend on: its key columns, their order
    /// and collations, and uniqueness.
    static func signature(_ index: Index) -> [String] {
        ["\(index.unique) \(index.origin.rawValue)"] + index.parts.map { "\($0.name ?? "") \($0.descending) \($0.collation)" }
    }

    static func isTableOption(_ change: TransformChange) -> Bool {
        switch change {
        case .strict, .withoutRowid: return true
        default: return false
        }
    }

    /// `ALTER TABLE ... RENAME` in a savepoint that is rolled back: SQLite
    /// re-reads every view and trigger of the schema to do it, so it fails,
    /// naming the object, when any of them refers to something missing.
    static func probe(_ replica: Connection, _ table: String) throws {
        try replica.execute("SAVEPOINT litectl_probe")
        defer { try? replica.execute("ROLLBACK TO litectl_probe; RELEASE litectl_probe") }
        try replica.execute("ALTER TABLE \(quoteIdentifier(table)) RENAME TO \(quoteIdentifier(table + "_litectl_probe"))")
    }

    static func brokenViews(_ replica: Connection) -> [String] {
        guard let views = try? replica.rows("SELECT name FROM sqlite_schema WHERE type = 'view'") else { return [] }
        return views.compactMap { row in
            guard case .text(let b) = row[0] else { return nil }
            let view = String(decoding: b, as: UTF8.self)
            return (try? replica.prepare("SELECT * FROM \(quoteIdentifier(view)) LIMIT 0")) == nil ? view : nil
        }
    }

    static func freeName(_ base: String, in schema: Schema) -> String {
        var candidate = base
        var n = 1
        while schema.table(named: candidate) != nil || schema.indexes.contains(where: { sameSQLName($0.name, candidate) })
                || schema.views.contains(where: { sameSQLName($0.name, candidate) }) {
            n += 1
            candidate = base + String(n)
        }
        return candidate
    }

    /// A type name as CREATE TABLE takes it: words, then optionally one or two
    /// signed numbers in parentheses (https://www.sqlite.org/syntax/type-name.html).
    /// The text goes into the new CREATE TABLE as written, so nothing else may.
    static func isTypeName(_ text: String) -> Bool {
        let tokens = tokenizeSQL(text)
        var i = 0
        while i < tokens.count, let word = tokens[i].keyword, !TableDefinition.constraintStarts.contains(word) { i += 1 }
        guard i > 0 else { return false }
        if i == tokens.count { return true }
        guard tokens[i].isPunctuation("("), tokens.last?.isPunctuation(")") == true else { return false }
        let inside = tokens[(i + 1)..<(tokens.count - 1)]
        var numbers = 0
        var expectNumber = true
        var j = inside.startIndex
        while j < inside.endIndex {
            let token = inside[j]
            if expectNumber {
                if token.isPunctuation("+") || token.isPunctuation("-") { j += 1; continue }
                guard token.kind == .number else { return false }
                numbers += 1
                expectNumber = false
            } else {
                guard token.isPunctuation(","), numbers == 1 else { return false }
                expectNumber = true
            }
            j += 1
        }
        return !expectNumber && numbers >= 1
    }

    /// A DEFAULT as the grammar allows it: one literal (a signed number, a
    /// string, a blob, NULL, TRUE, FALSE, CURRENT_TIME, CURRENT_DATE,
    /// CURRENT_TIMESTAMP) or an expression in parentheses
    /// (https://www.sqlite.org/lang_createtable.html#dfltval).
    static func isDefaultValue(_ text: String) -> Bool {
        var tokens = tokenizeSQL(text)[...]
        guard let first = tokens.first else { return false }
        if first.isPunctuation("(") {
            return closingParenthesis(Array(tokens), from: 0) == tokens.count - 1
        }
        if first.isPunctuation("+") || first.isPunctuation("-") {
            tokens = tokens.dropFirst()
            return tokens.count == 1 && tokens.first!.kind == .number
        }
        guard tokens.count == 1 else { return false }
        switch first.kind {
        case .number, .string: return true
        case .word: return ["NULL", "TRUE", "FALSE", "CURRENT_TIME", "CURRENT_DATE", "CURRENT_TIMESTAMP"].contains(first.keyword!)
        default: return false
        }
    }

    static func apply(_ change: TransformChange, to definition: inout TableDefinition, table: String, schema: Schema,
                      resolve: (String) throws -> String, changes: inout [[UInt8]: [String]], plan: inout TransformPlan) throws {
        func fail(_ message: String) -> DatabaseError { DatabaseError(code: .error, message: message, path: nil) }
        func column(_ name: String) throws -> Int {
            let resolved = try resolve(name)
            guard let i = definition.columnIndex(resolved) else { throw fail("no such column: \(table).\(name) (dropped?)") }
            return i
        }
        func note(_ i: Int, _ text: String) { changes[sqlNameKey(definition.columns[i].name), default: []].append(text) }
        switch change {
        case .rename:
            break   // done before, with ALTER TABLE ... RENAME COLUMN
        case .type(let name, let type):
            guard isTypeName(type) else {
                throw fail("--type takes a type name such as INTEGER, TEXT or VARCHAR(20), not \(type)")
            }
            let i = try column(name)
            let old = definition.columns[i].type
            definition.columns[i].type = type
            definition.columns[i].original = nil
            note(i, "type \(old.isEmpty ? "(none)" : old) → \(type)")
        case .drop(let name):
            let i = try column(name)
            let dropped = definition.columns[i].name
            definition.columns.remove(at: i)
            for other in definition.columns {
                for constraint in other.constraints where tokensMention(constraint.tokens[...], dropped, includingStrings: false) {
                    throw fail("cannot drop \(table).\(dropped): column \(other.name) uses it (\(constraint.text))")
                }
            }
            for constraint in definition.constraints where tokensMention(constraint.tokens[...], dropped, includingStrings: false) {
                throw fail("cannot drop \(table).\(dropped): a table constraint uses it (\(constraint.text))")
            }
            plan.droppedColumns.append(dropped)
        case .setDefault(let name, let sql):
            guard isDefaultValue(sql) else {
                throw fail("--default takes a literal (0, -1.5, 'text', x'00', NULL, TRUE, CURRENT_TIMESTAMP) or an expression in parentheses, not \(sql)")
            }
            let i = try column(name)
            _ = definition.columns[i].remove(.defaultValue)
            definition.columns[i].append(.defaultValue, "DEFAULT \(sql)")
            note(i, "default \(sql)")
        case .dropDefault(let name):
            let i = try column(name)
            guard definition.columns[i].remove(.defaultValue) else { throw fail("\(table).\(definition.columns[i].name) has no default") }
            note(i, "no default")
        case .notNull(let name):
            let i = try column(name)
            if !definition.columns[i].constraints.contains(where: { $0.kind == .notNull }) {
                _ = definition.columns[i].remove(.null)
                definition.columns[i].append(.notNull, "NOT NULL")
                plan.newNotNull.append(definition.columns[i].name)
            }
            note(i, "NOT NULL")
        case .nullable(let name):
            let i = try column(name)
            _ = definition.columns[i].remove(.notNull)
            note(i, "nullable")
        case .collate(let name, let collation):
            let i = try column(name)
            _ = definition.columns[i].remove(.collate)
            definition.columns[i].append(.collate, "COLLATE \(quoteIdentifier(collation))")
            note(i, "collate \(collation)")
        case .primaryKey(let names):
            let indexes = try names.map(column)
            let wanted = indexes.map { definition.columns[$0].name }
            for i in definition.columns.indices { _ = definition.columns[i].remove(.primaryKey) }
            definition.constraints.removeAll { $0.kind == .primaryKey }
            let text = "PRIMARY KEY (\(wanted.map(quoteIdentifier).joined(separator: ", ")))"
            definition.constraints.insert(ConstraintSegment(kind: .primaryKey, text: text, tokens: tokenizeSQL(text), columns: wanted), at: 0)
            for i in indexes { note(i, "primary key") }
        case .addForeignKey(let name, let parent, let parentColumn):
            let i = try column(name)
            guard let parentTable = schema.table(named: parent) ?? (sameSQLName(parent, table) ? schema.table(named: table) : nil) else {
                throw fail("no such table: \(parent) (in the foreign key for \(table).\(name))")
            }
            var text = "FOREIGN KEY (\(quoteIdentifier(definition.columns[i].name))) REFERENCES \(quoteIdentifier(parentTable.name))"
            if let parentColumn {
                guard parentTable.columns.contains(where: { sameSQLName($0.name, parentColumn) }) else {
                    throw fail("no such column: \(parentTable.name).\(parentColumn)")
                }
                text += " (\(quoteIdentifier(parentColumn)))"
            }
            definition.constraints.append(ConstraintSegment(kind: .foreignKey, text: text, tokens: tokenizeSQL(text),
                                                            columns: [definition.columns[i].name]))
            note(i, "foreign key → \(parentTable.name)\(parentColumn.map { "(\($0))" } ?? "")")
        case .dropForeignKey(let name):
            let i = try column(name)
            let target = definition.columns[i].name
            var found = definition.columns[i].remove(.references)
            let before = definition.constraints.count
            definition.constraints.removeAll { $0.kind == .foreignKey && $0.columns.contains { sameSQLName($0, target) } }
            found = found || definition.constraints.count != before
            guard found else { throw fail("\(table).\(target) has no foreign key") }
            note(i, "foreign key dropped")
        case .columnOrder(let names):
            var ordered: [ColumnDefinition] = []
            for name in names {
                let i = try column(name)
                if ordered.contains(where: { sameSQLName($0.name, definition.columns[i].name) }) {
                    throw fail("--column-order names \(name) twice")
                }
                ordered.append(definition.columns[i])
            }
            ordered += definition.columns.filter { column in !ordered.contains { sameSQLName($0.name, column.name) } }
            definition.columns = ordered
        case .strict(let on):
            definition.options.removeAll { $0 == "STRICT" }
            if on { definition.options.append("STRICT") }
        case .withoutRowid:
            guard definition.hasPrimaryKey else {
                throw fail("a WITHOUT ROWID table needs a PRIMARY KEY: add --pk")
            }
            if !definition.options.contains("WITHOUT ROWID") { definition.options.insert("WITHOUT ROWID", at: 0) }
        }
    }
}
