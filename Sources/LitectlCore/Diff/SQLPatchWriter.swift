// Writes a diff as a SQL script that, run with the plain sqlite3 CLI on A,
// makes A equal to B: one transaction, foreign keys off, triggers dropped
// around the data changes and recreated, changed tables rebuilt, updates that
// move UNIQUE values written as DELETE + INSERT, values written with the exact
// literal writer for A's text encoding (bit-exact REALs, CR/LF and NUL safe).

/// A `DiffConsumer` that writes the patch script to a sink.
public final class SQLPatchWriter: DiffConsumer {
    let sink: ByteSink
    var comparison: SchemaComparison!
    var started = false
    var line: [UInt8] = []
    /// Updates and inserts of the current table, written after its deletes so
    /// that a re-keyed row, a key that changes only in case under NOCASE or
    /// from 1 to 1.0, or a UNIQUE value moving to a new row never conflicts
    /// with a row still to be deleted. A temporary file keeps memory flat.
    var spool: UnsafeMutablePointer<FILE>?
    var spooling = false
    /// Tables whose rows may have moved sqlite_sequence during the patch.
    var touchedAutoincrement = false
    var autoincrementTables: Set<[UInt8]> = []
    /// The current table's UNIQUE guard (see `updated`): the columns of its
    /// UNIQUE indexes, whether every update must count as touching one (a
    /// partial or expression index), and whether updates may be rewritten at all.
    var uniqueColumns: [Bool] = []
    var everyUpdateTouchesUnique = false
    var mayRewriteUpdates = false
    /// Set when the current table's rows were matched by the wrong columns.
    var misreadKey: (used: String, declared: String)?

    public init(sink: ByteSink) { self.sink = sink }

    public var rebuildsChangedTables: Bool { true }
    public var wantsRowidsForKeylessTables: Bool { true }

    func emit(_ text: String) {
        sink.write(Array(text.utf8))
        sink.write([0x0A])
    }

    func flushLine() {
        line.append(0x0A)
        sink.write(line)
        line.removeAll(keepingCapacity: true)
    }

    func spoolLine() throws {
        line.append(0x0A)
        if spool == nil {
            let fd = try TemporaryFiles.anonymous()
            spool = fdopen(fd, "w+")
            guard spool != nil else {
                close(fd)
                throw DatabaseError(code: .ioerr, message: "cannot create a temporary file: \(String(cString: strerror(errno)))")
            }
        }
        let written = line.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, spool) }
        guard written == line.count else { throw DatabaseError(code: .ioerr, message: "cannot write a temporary file") }
        spooling = true
        line.removeAll(keepingCapacity: true)
    }

    deinit { if let spool { fclose(spool) } }

    public func begin(_ diff: SchemaComparison) throws {
        comparison = diff
        autoincrementTables = Set((diff.a.tables + diff.b.tables).filter(\.autoincrement).map { sqlNameKey($0.name) })
        if !diff.changes.isEmpty { start() }
    }

    /// The preamble, written before the first change: foreign keys off, the
    /// transaction, triggers and changed schema objects dropped, new and
    /// rebuilt tables created.
    func start() {
        guard !started else { return }
        started = true
        let c = comparison!
        emit("-- litectl diff: run with sqlite3 on the first database to make it equal to the second.")
        // The shell goes on after a failed statement and would COMMIT what came
        // before it: `.bail on` makes it stop, so the transaction rolls back.
        emit(".bail on")
        emit("PRAGMA foreign_keys=OFF;")
        emit("BEGIN;")
        emit("PRAGMA defer_foreign_keys=ON;")
        for trigger in c.triggersA { emit("DROP TRIGGER IF EXISTS \(quoteIdentifier(trigger.name));") }
        guard !c.options.dataOnly else { return }
        let addedStatistics = c.addedTables.filter(\.isStatistics)
        // DROP TABLE and DROP INDEX delete the statistics rows of what they
        // drop, and ANALYZE those of what it analyzes: the rows of statistics
        // tables the data pass patches are kept aside and put back, so that
        // the pass starts from A's rows as it read them.
        let changesSchema = !c.indexesToDrop.isEmpty || !c.droppedTables.isEmpty || !c.changedTables.isEmpty || !addedStatistics.isEmpty
        let keptStatistics = c.options.schemaOnly || !changesSchema ? [] : c.sameTables.map(\.a).filter(\.isStatistics)
        for table in keptStatistics {
            emit("CREATE TEMP TABLE \(quoteIdentifier("litectl_kept_" + table.name)) AS SELECT rowid AS litectl_rowid, * FROM "
                 + "\(quoteIdentifier("main", table.name));")
        }
        for view in c.viewsToDrop { emit("DROP VIEW IF EXISTS \(quoteIdentifier(view.name));") }
        for index in c.indexesToDrop { emit("DROP INDEX IF EXISTS \(quoteIdentifier(index.name));") }
        for table in c.droppedTables { emit("DROP TABLE \(quoteIdentifier(table.name));") }
        for pair in c.changedTables {
            if let statements = c.alterations[sqlNameKey(pair.b.name)] {
                // Altered in place: its rows stay, and the data pass patches
                // them on every column, new ones included.
                for statement in statements { emit(statement) }
            } else if !c.options.schemaOnly {
                // No ALTER TABLE makes B's definition: rebuilt from B's rows.
                emit("DROP TABLE \(quoteIdentifier(pair.a.name));")
                emit((pair.b.sql ?? "") + ";")
            } else {
                emit("-- table \(pair.b.name): definition changed; --schema-only leaves it (rebuilding needs its data)")
            }
        }
        for table in c.addedTables where !table.isStatistics { emit((table.sql ?? "") + ";") }
        if !addedStatistics.isEmpty {
            // SQLite refuses CREATE TABLE sqlite_stat1; ANALYZE of sqlite_schema
            // (whose statistics SQLite never gathers) makes the statistics
            // tables and fills none, as the sqlite3 shell's .dump does. It makes
            // sqlite_stat4 too when the SQLite running the patch has STAT4:
            // dropped again unless A or B has it.
            if addedStatistics.contains(where: { sameSQLName($0.name, "sqlite_stat4") }) {
                emit("-- sqlite_stat4: ANALYZE makes it only in a SQLite built with SQLITE_ENABLE_STAT4 (without, the patch stops at its first row)")
            }
            emit("ANALYZE sqlite_schema;")
            for name in ["sqlite_stat1", "sqlite_stat4"]
            where c.a.tables.first(where: { sameSQLName($0.name, name) }) == nil && c.b.tables.first(where: { sameSQLName($0.name, name) }) == nil {
                emit("DROP TABLE IF EXISTS \(name);")
            }
        }
        for table in keptStatistics {
            let kept = quoteIdentifier("temp", "litectl_kept_" + table.name)
            let columns = table.columns.map { quoteIdentifier($0.name) }.joined(separator: ",")
            emit("DELETE FROM \(quoteIdentifier("main", table.name));")
            emit("INSERT INTO \(quoteIdentifier("main", table.name))(rowid,\(columns)) SELECT litectl_rowid,\(columns) FROM \(kept);")
            emit("DROP TABLE \(kept);")
        }
    }

    public func beginTable(_ plan: TablePlan) throws {
        uniqueColumns = Array(repeating: false, count: plan.columns.count)
        everyUpdateTouchesUnique = false
        mayRewriteUpdates = false
        let c = comparison!
        misreadKey = plan.onlyInB ? nil : plan.misreadPrimaryKey(c)
        guard !plan.isVirtual, plan.mode != .multiset, !plan.onlyInA, !plan.onlyInB, let table = c.a.table(named: plan.name) else { return }
        // Rewriting an update as DELETE + INSERT keeps the row only when the
        // plan writes every column A's table holds (not so for --data-only
        // across a changed definition: A's other columns would be lost).
        let written = Set(plan.columns.indices.filter { ($0 != 0 || plan.rowidColumn == nil) && plan.inB($0) }
            .map { sqlNameKey(plan.columns[$0]) })
        // An altered table holds B's columns by the time its rows are patched.
        let holds = plan.across == nil ? table : (c.b.table(named: plan.name) ?? table)
        guard Set(holds.contentColumns.map { sqlNameKey($0.name) }) == written else { return }
        mayRewriteUpdates = true
        if plan.across != nil {
            // A's indexes now name B's columns: any UNIQUE one, A's or B's, counts.
            everyUpdateTouchesUnique = (c.a.indexes(on: table.name) + c.b.indexes(on: plan.name)).contains(where: \.unique)
            return
        }
        // The UNIQUE indexes in force during the data changes: A's, less those
        // the patch drops first (B's new ones are made after the data).
        let dropped = Set(c.indexesToDrop.map(\.name))
        var names: Set<[UInt8]> = []
        for index in c.a.indexes(on: table.name) where index.unique && !dropped.contains(index.name) {
            if index.problem != nil || index.partial { everyUpdateTouchesUnique = true }
            for part in index.parts {
                // An expression, the rowid or a generated column depends on other columns.
                guard let name = part.name, part.columnID >= 0,
                      let column = table.columns.first(where: { sameSQLName($0.name, name) }), !column.isGenerated else {
                    everyUpdateTouchesUnique = true
                    continue
                }
                names.insert(sqlNameKey(column.name))
            }
        }
        for i in plan.columns.indices where i != 0 || plan.rowidColumn == nil {
            uniqueColumns[i] = names.contains(sqlNameKey(plan.columns[i]))
        }
    }

    func appendTable(_ plan: TablePlan) {
        line.append(contentsOf: quoteIdentifier(plan.name).utf8)
    }

    func appendColumn(_ plan: TablePlan, _ i: Int) {
        if i == 0, let rowid = plan.rowidColumn {
            line.append(contentsOf: rowid.utf8)
        } else {
            line.append(contentsOf: quoteIdentifier(plan.columns[i]).utf8)
        }
    }

    /// Column `i` of `row` as a literal for A's text encoding; TEXT that has no
    /// exact literal there is an error naming the table, the row and the column.
    func appendCell(_ plan: TablePlan, _ row: DiffRow, _ i: Int) throws {
        do {
            try row.value(at: i).appendSQLLiteral(to: &line, encoding: comparison.encodingA)
        } catch let error as UnrepresentableTextError {
            let key = plan.mode == .multiset ? "a row without a key"
                : "the row " + plan.keyIndexes.map { "\(plan.columns[$0])=\(row.value(at: $0).sqlLiteral)" }.joined(separator: " ")
            let shown = Value.blob(Array(error.bytes.prefix(32))).sqlLiteral + (error.bytes.count > 32 ? "…" : "")
            throw DatabaseError(code: .error, message: "table \(plan.name), \(key): column \(plan.columns[i]) holds TEXT that is "
                                + "not UTF-8 (\(shown)); it cannot be written exactly into the first database, whose text is "
                                + error.encoding.rawValue)
        }
    }

    func appendWhere(_ plan: TablePlan, _ row: DiffRow) throws {
        line.append(contentsOf: " WHERE ".utf8)
        if plan.mode == .multiset && plan.rowidColumn != nil {
            // Rows without a key (their key holds a NULL), read with their rowid.
            appendColumn(plan, 0)
            line.append(UInt8(ascii: "="))
            try appendCell(plan, row, 0)
        } else if plan.mode == .multiset {
            // No key: delete one row holding exactly these values.
            line.append(contentsOf: "rowid = (SELECT rowid FROM ".utf8)
            appendTable(plan)
            line.append(contentsOf: " WHERE ".utf8)
            try appendConditions(plan, row, plan.columns.indices.filter { plan.inB($0) })
            line.append(contentsOf: " LIMIT 1)".utf8)
        } else {
            try appendConditions(plan, row, plan.keyIndexes)
        }
    }

    /// Conditions on more columns than this are written as one comparison
    /// of row values, `(a,b,...) IS (1,2,...)`: SQLite parses `a=1 AND b=2
    /// AND ...` into a tree as deep as the conditions are many, and refuses
    /// one deeper than SQLITE_MAX_EXPR_DEPTH (1,000): a wide primary key, or a
    /// wide table without one, would stop the patch.
    static let rowValueThreshold = 100

    func appendConditions(_ plan: TablePlan, _ row: DiffRow, _ indexes: [Int]) throws {
        if indexes.count > Self.rowValueThreshold {
            // IS is = for every value but NULL, which it matches as IS NULL does.
            line.append(UInt8(ascii: "("))
            for (n, i) in indexes.enumerated() {
                if n > 0 { line.append(UInt8(ascii: ",")) }
                appendColumn(plan, i)
            }
            line.append(contentsOf: ") IS (".utf8)
            for (n, i) in indexes.enumerated() {
                if n > 0 { line.append(UInt8(ascii: ",")) }
                try appendCell(plan, row, i)
            }
            line.append(UInt8(ascii: ")"))
            return
        }
        for (n, i) in indexes.enumerated() {
            if n > 0 { line.append(contentsOf: " AND ".utf8) }
            appendColumn(plan, i)
            if row.isNull(at: i) {
                line.append(contentsOf: " IS NULL".utf8)
            } else {
                line.append(contentsOf: (plan.mode == .multiset ? " IS " : "=").utf8)
                try appendCell(plan, row, i)
            }
        }
    }

    func noteTouched(_ plan: TablePlan) throws {
        if let wrong = misreadKey {
            // Rows paired by the wrong columns, and a WHERE on them, would
            // change rows the patch must not touch.
            throw DatabaseError(code: .error, message: "table \(plan.name): rows were matched by \(wrong.used), not by its primary key "
                                + "\(wrong.declared) (names that differ only in the case of non-ASCII letters); no patch is "
                                + "written rather than a wrong one")
        }
        start()
        if autoincrementTables.contains(sqlNameKey(plan.name)) { touchedAutoincrement = true }
    }

    public func inserted(_ plan: TablePlan, new: DiffRow) throws {
        try noteTouched(plan)
        try appendInsert(plan) { _ in new }
    }

    /// Spools `INSERT INTO table(columns) VALUES(...)`, column i's value taken
    /// from `row(i)`. A multiset plan's rowid is not inserted: the new row
    /// takes a rowid of its own (B's could belong to another row of A).
    func appendInsert(_ plan: TablePlan, _ row: (Int) -> DiffRow) throws {
        line.append(contentsOf: "INSERT INTO ".utf8)
        appendTable(plan)
        line.append(UInt8(ascii: "("))
        let written = plan.columns.indices.filter { ($0 != 0 || plan.rowidColumn == nil || plan.mode != .multiset) && plan.inB($0) }
        for (n, i) in written.enumerated() {
            if n > 0 { line.append(UInt8(ascii: ",")) }
            appendColumn(plan, i)
        }
        line.append(contentsOf: ") VALUES(".utf8)
        for (n, i) in written.enumerated() {
            if n > 0 { line.append(UInt8(ascii: ",")) }
            try appendCell(plan, row(i), i)
        }
        line.append(contentsOf: ");".utf8)
        try spoolLine()
    }

    public func deleted(_ plan: TablePlan, old: DiffRow) throws {
        try noteTouched(plan)
        line.append(contentsOf: "DELETE FROM ".utf8)
        appendTable(plan)
        try appendWhere(plan, old)
        line.append(UInt8(ascii: ";"))
        flushLine()
    }

    /// An update, as `UPDATE ... SET` of the changed columns; or, when it
    /// changes a column of a UNIQUE index, as a DELETE written now with the
    /// table's deletes and an INSERT spooled with its inserts. Updated in
    /// place, rows that swap a UNIQUE value (or pass one along a chain or a
    /// cycle) collide half way; this way every row leaving a value is gone
    /// before any arrives, and what is inserted is part of B, whose UNIQUE
    /// indexes hold. Foreign keys are off, so the DELETE cascades nowhere, and
    /// triggers are dropped. The INSERT keeps A's value in columns the diff
    /// did not compare (--ignore-column), as the UPDATE would.
    public func updated(_ plan: TablePlan, old: DiffRow, new: DiffRow, changed: [Int]) throws {
        // A dropped column's values went with DROP COLUMN.
        let changed = plan.across == nil ? changed : changed.filter { plan.inB($0) }
        guard !changed.isEmpty else { return }
        try noteTouched(plan)
        if mayRewriteUpdates && (everyUpdateTouchesUnique || changed.contains { uniqueColumns[$0] }) {
            try deleted(plan, old: old)
            let changedSet = Set(changed)
            try appendInsert(plan) { changedSet.contains($0) ? new : old }
            return
        }
        line.append(contentsOf: "UPDATE ".utf8)
        appendTable(plan)
        line.append(contentsOf: " SET ".utf8)
        for (n, i) in changed.enumerated() {
            if n > 0 { line.append(UInt8(ascii: ",")) }
            appendColumn(plan, i)
            line.append(UInt8(ascii: "="))
            try appendCell(plan, new, i)
        }
        try appendWhere(plan, old)
        line.append(UInt8(ascii: ";"))
        try spoolLine()
    }

    public func endTable(_ plan: TablePlan, counts: ChangeCounts) throws {
        guard spooling, let spool else { return }
        spooling = false
        fflush(spool)
        rewind(spool)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, spool) }
            if n == 0 { break }
            sink.write(Array(buffer[0..<n]))
        }
        if ferror(spool) != 0 { throw DatabaseError(code: .ioerr, message: "cannot read a temporary file") }
        rewind(spool)
        _ = ftruncate(fileno(spool), 0)
    }

    public func finish(_ summary: DiffSummary) throws {
        let c = comparison!
        let sequenceDiffers = c.wholeDatabase && !c.options.dataOnly && !sequencesEqual(c.sequenceA, c.sequenceB)
        let pragmasDiffer = c.userVersion.a != c.userVersion.b || c.applicationID.a != c.applicationID.b
        if sequenceDiffers || pragmasDiffer { start() }
        guard started else { try sink.flush(); return }
        if c.options.dataOnly {
            for trigger in c.triggersA { emit(trigger.sql + ";") }
        } else {
            for index in c.indexesToCreate { if let sql = index.sql { emit(sql + ";") } }
            for view in c.viewsToCreate { emit(view.sql + ";") }
            for trigger in c.triggersB { emit(trigger.sql + ";") }
        }
        if c.wholeDatabase && !c.options.dataOnly && (sequenceDiffers || touchedAutoincrement) {
            if let rows = c.sequenceB {
                emit("DELETE FROM sqlite_sequence;")
                for row in rows {
                    line.append(contentsOf: "INSERT INTO sqlite_sequence(rowid,name,seq) VALUES(".utf8)
                    try row[2].appendSQLLiteral(to: &line, encoding: c.encodingA)
                    line.append(UInt8(ascii: ","))
                    try row[0].appendSQLLiteral(to: &line, encoding: c.encodingA)
                    line.append(UInt8(ascii: ","))
                    try row[1].appendSQLLiteral(to: &line, encoding: c.encodingA)
                    line.append(contentsOf: ");".utf8)
                    flushLine()
                }
            } else if c.sequenceA != nil {
                emit("DELETE FROM sqlite_sequence;")
            }
        }
        if c.userVersion.a != c.userVersion.b { emit("PRAGMA user_version=\(c.userVersion.b);") }
        if c.applicationID.a != c.applicationID.b { emit("PRAGMA application_id=\(c.applicationID.b);") }
        emit("COMMIT;")
        try sink.flush()
    }

    func sequencesEqual(_ x: [[Value]]?, _ y: [[Value]]?) -> Bool {
        // By content (name, seq): rowids alone do not make a difference.
        func content(_ rows: [[Value]]?) -> [[Value]] { (rows ?? []).map { Array($0.prefix(2)) }.sorted { Value.compare($0[0], $1[0]) < 0 } }
        return content(x) == content(y)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
