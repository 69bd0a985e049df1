// R*Tree virtual tables (rtree, rtree_i32; GeoPackage's spatial indexes are
// such tables). Their data lives in three shadow tables, salvaged like any
// table; but shadow rows copied from a damaged file may no longer form a
// tree, and SQLite then cannot use the table (rtreecheck() and, since
// SQLite 3.44, integrity_check report it). So the virtual table's schema row
// is written only after the rows: when the salvaged shadow rows pass the
// checks of rtreecheck(), as they were (an exact copy); else the tree is
// built again through the module from the entries its leaf nodes still hold,
// and the report says how many entries were lost. The recover extension
// copies shadow rows as they are; this goes further so that OUT stays sound.
// https://www.sqlite.org/rtree.html

extension RecoveryRun {
    /// An R*Tree whose schema row waits for its shadow tables' rows.
    struct RTreePlan {
        var entry: SchemaEntry
        var sql: String
        var shape: RTreeShape
        /// The columns the module gives each shadow table (by suffix): it
        /// reads them by name, and `_node` by rowid.
        var columns: [String: [ShadowColumn]]
    }

    /// A column of a shadow table: its name (upper case), and whether it is
    /// the rowid's alias (INTEGER PRIMARY KEY).
    struct ShadowColumn: Equatable {
        var name: String
        var rowidAlias: Bool
    }

    static let shadowSuffixes = ["_node", "_rowid", "_parent"]

    /// The columns of table `table` in `db`'s main schema (none when it does not exist).
    static func shadowColumns(_ db: Connection, _ table: String) throws -> [ShadowColumn] {
        let rows = try db.rows("SELECT name, type, pk FROM pragma_table_info(?1, 'main')", [.text(Array(table.utf8))])
        let keys = rows.filter { if case .integer(let pk) = $0[2] { return pk > 0 } else { return false } }.count
        return rows.map { row in
            var name = "", type = ""
            if case .text(let bytes) = row[0] { name = asciiUpper(String(decoding: bytes, as: UTF8.self)) }
            if case .text(let bytes) = row[1] { type = asciiUpper(String(decoding: bytes, as: UTF8.self)) }
            return ShadowColumn(name: name, rowidAlias: keys == 1 && row[2] == .integer(1) && type == "INTEGER")
        }
    }

    /// The modules whose tables are checked and rebuilt (as SQLite names them, upper case).
    static let rtreeModules: Set<String> = ["RTREE", "RTREE_I32"]

    /// True when this SQLite has the rtree module.
    static let rtreeAvailable: Bool = {
        guard let probe = try? Connection(inMemory: Connection.defaultBusyTimeout) else { return false }
        defer { try? probe.close() }
        return (try? probe.execute("CREATE VIRTUAL TABLE temp.litectl_probe USING rtree(id, x0, x1)")) != nil
    }()

    /// The plan for the R*Tree `sql` declares (tried in a private in-memory
    /// database, which tells its shape); nil when its module is not rtree
    /// or rtree_i32, or this SQLite lacks it. Throws when the module refuses
    /// the declaration: SQLite could not use such a table.
    func rtreePlan(_ entry: SchemaEntry, sql: String, name: String, module: String) throws -> RTreePlan? {
        let upper = asciiUpper(module)
        guard RecoveryRun.rtreeModules.contains(upper), RecoveryRun.rtreeAvailable else { return nil }
        let probe = try Connection(inMemory: Connection.defaultBusyTimeout)
        defer { try? probe.close() }
        do {
            // One CREATE VIRTUAL TABLE statement of module rtree (virtualTableDeclaration checked it).
            try probe.execute(sql)
        } catch let error as DatabaseError {
            throw DatabaseError(code: error.code, message: "the R*Tree module refuses its declaration (\(error.message)); its shadow tables are kept as ordinary tables")
        }
        var columns: [String: [ShadowColumn]] = [:]
        for suffix in RecoveryRun.shadowSuffixes { columns[suffix] = try RecoveryRun.shadowColumns(probe, name + suffix) }
        guard case .integer(let all)? = try probe.scalar("SELECT count(*) FROM pragma_table_info(?1)", [.text(Array(name.utf8))]),
              let rowidColumns = columns["_rowid"]?.count, rowidColumns >= 2 else {
            throw DatabaseError(code: .error, message: "the R*Tree module made it with no shadow tables")
        }
        let auxiliary = rowidColumns - 2
        let coordinates = Int(all) - 1 - auxiliary
        guard coordinates >= 2, coordinates % 2 == 0 else {
            throw DatabaseError(code: .error, message: "the R*Tree module made it with \(coordinates) coordinates")
        }
        return RTreePlan(entry: entry, sql: sql, shape: RTreeShape(dimensions: coordinates / 2, integer: upper == "RTREE_I32", auxiliary: auxiliary),
                         columns: columns)
    }

    /// Writes each R*Tree's schema row (its shadow rows passing the
    /// checks), or builds it again from its salvaged entries.
    func finishRTrees() throws {
        for plan in rtreePlans {
            let name = plan.entry.name
            let (data, missing) = try readShadowTables(of: plan)
            let problem = missing ?? data.problem()
            guard let why = problem else {
                try out.addVirtualTable(name: name, sql: plan.sql)
                rtreeResults.append(.init(name: name, entries: data.entryCount, entriesLost: 0, rebuilt: false, problem: nil))
                continue
            }
            let (entries, notFound) = data.entries()
            for table in tables.values where isShadow(table.name, of: name) { table.close() }
            try out.db.execute("SAVEPOINT litectl_rtree")
            do {
                for shadow in ["_node", "_rowid", "_parent"] {
                    if try out.hasObject(name + shadow) { try out.db.execute("DROP TABLE main.\(quoteIdentifier(name + shadow))") }
                }
                try out.createVirtualTable(plan.sql, modules: RecoveryRun.rtreeModules)
                let refused = try insert(entries, into: name, shape: plan.shape)
                try out.db.execute("RELEASE litectl_rtree")
                let lost = notFound + refused
                rtreeResults.append(.init(name: name, entries: entries.count - refused, entriesLost: lost, rebuilt: true, problem: why))
                problems.append("R*Tree \(name) was damaged (\(why)): built again from the \(entries.count - refused) entries "
                                + "its nodes still hold\(lost > 0 ? "; \(lost) entries are lost" : "")")
            } catch {
                try out.db.execute("ROLLBACK TO litectl_rtree; RELEASE litectl_rtree")
                failures.append(.init(type: "table", name: name,
                                      message: "R*Tree damaged (\(why)) and not built again (\(describe(error))): its shadow tables are kept as ordinary tables"))
            }
        }
    }

    /// True when `table` is one of the shadow tables of R*Tree `name`.
    func isShadow(_ table: String, of name: String) -> Bool {
        ["_node", "_rowid", "_parent"].contains { sameSQLName(table, name + $0) }
    }

    /// The rows salvage wrote to the R*Tree's shadow tables in the new
    /// database, and why they cannot be the tree's as they are when a shadow
    /// table is missing or not shaped as the module makes it (its rows are
    /// then left out).
    private func readShadowTables(of plan: RTreePlan) throws -> (data: RTreeSalvage, problem: String?) {
        let name = plan.entry.name, shape = plan.shape
        var data = RTreeSalvage(shape: shape)
        var problem: String?
        for suffix in RecoveryRun.shadowSuffixes {
            let table = name + suffix
            let columns = try RecoveryRun.shadowColumns(out.db, table)
            let expected = plan.columns[suffix] ?? []
            guard columns.count == expected.count else {
                problem = problem ?? (columns.isEmpty ? "its table \(table) is lost" : "its table \(table) has \(columns.count) columns, not \(expected.count)")
                continue
            }
            // Declared types may differ (GDAL writes its own); names and the
            // rowid's alias may not. Rows of a table that differs are still
            // read, by position, for a rebuild.
            if columns != expected { problem = problem ?? "its table \(table) is not shaped as the module makes it" }
            // The first column is the rowid's alias in the module's tables;
            // rowid is read too, so that a table whose first column is not
            // the alias still gives its keys.
            let statement = try out.db.prepare("SELECT rowid, * FROM main.\(quoteIdentifier(table))")
            try statement.forEachRow { row in
                guard case .integer(let key) = row.value(at: 0) else { return }
                switch suffix {
                case "_node":
                    if case .blob(let bytes) = row.value(at: 2) { data.nodes[key] = bytes } else { data.badNodes += 1 }
                case "_rowid":
                    data.rowids[key] = (row.value(at: 2), (0..<shape.auxiliary).map { row.value(at: 3 + $0) })
                default:
                    data.parents[key] = row.value(at: 2)
                }
            }
        }
        return (data, problem)
    }

    /// Inserts `entries` into the new R*Tree `name`; returns how many the
    /// module refused (a constraint).
    private func insert(_ entries: [RTreeEntry], into name: String, shape: RTreeShape) throws -> Int {
        let count = 1 + shape.dimensions * 2 + shape.auxiliary
        let statement = try out.db.prepare("INSERT INTO main.\(quoteIdentifier(name)) VALUES (\((1...count).map { "?\($0)" }.joined(separator: ", ")))")
        var refused = 0
        for entry in entries {
            var values: [Value] = [.integer(entry.rowid)]
            for pattern in entry.coordinates {
                values.append(shape.integer ? .integer(Int64(Int32(bitPattern: pattern))) : .real(Double(Float(bitPattern: pattern))))
            }
            values += entry.auxiliary
            try statement.bind(values)
            do {
                _ = try statement.step()
            } catch let error as DatabaseError where error.primaryCode == .constraint || error.primaryCode == .mismatch {
                refused += 1
            }
            statement.reset()
        }
        return refused
    }
}
