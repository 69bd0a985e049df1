// R*Tree virtual tables (rtree, rtree_i32; GeoPackage's spatial indexes are
// such tables). Their data lives in three shadow tables, salvaged like any
// table; but shadow rows copied from a damaged file may no longer form a
// tree, and SQLite then cannot use the table (rtreecheck() and, since
// SQLite 3.44, integrity_check report it). So the virtual table's schema row
// is written only after the rows: when the salvaged shadow rows pass the
// checks of rtreecheck(), as they were (an exact copy); else the tree is
// built again through the module from the entries its leaf nodes still hold,
// and the report says how many entries were lost (an entry the module
// refuses, a box whose minimum exceeds its maximum, goes to lost_and_found). The recover extension
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
            // The shadow tables as salvage made them, and whether they are shaped as the module makes them.
            var present: [String: String] = [:]
            var problem: String?
            for suffix in RecoveryRun.shadowSuffixes {
                let columns = try RecoveryRun.shadowColumns(out.db, name + suffix)
                let expected = plan.columns[suffix] ?? []
                if columns.count == expected.count { present[suffix] = name + suffix }
                // Declared types may differ (GDAL writes its own); names and the rowid's alias may not.
                if columns != expected {
                    problem = problem ?? (columns.isEmpty ? "its table \(name + suffix) is lost"
                                          : "its table \(name + suffix) is not shaped as the module makes it")
                }
            }
            if problem == nil {
                let data = try RTreeSalvage(db: out.db, schema: "main", shape: plan.shape,
                                            node: present["_node"], rowid: present["_rowid"], parent: present["_parent"])
                problem = try data.problem()
                if problem == nil {
                    do { try out.addVirtualTable(name: name, sql: plan.sql) } catch {
                        failures.append(.init(type: "table", name: name, message: describe(error)))
                        continue
                    }
                    rtreeResults.append(.init(name: name, entries: try data.count(present["_rowid"]), entriesLost: 0, entriesInLostAndFound: 0,
                                              rebuilt: false, problem: nil))
                    continue
                }
            }
            try rebuild(plan, present: present, why: problem ?? "")
        }
    }

    /// Builds R*Tree `plan` again through its module from the entries its
    /// salvaged shadow tables (`present`, by suffix) still hold: they are
    /// copied to temporary tables, dropped, the virtual table made (which
    /// makes new ones), and the entries inserted. (OUT is written without a
    /// journal, so nothing here may count on a rollback: every check that
    /// can refuse comes before the first change.)
    private func rebuild(_ plan: RTreePlan, present: [String: String], why: String) throws {
        let name = plan.entry.name
        for suffix in RecoveryRun.shadowSuffixes {
            let type = try out.db.scalar("SELECT type FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE", [.text(Array((name + suffix).utf8))])
            guard type == nil || type == .text(Array("table".utf8)) else {
                failures.append(.init(type: "table", name: name, message: "R*Tree damaged (\(why)) and not built again: "
                                      + "another object is named \(name + suffix); its shadow tables are kept as ordinary tables"))
                return
            }
        }
        if try out.hasObject(name) {
            failures.append(.init(type: "table", name: name, message: "an object named \(name) already exists"))
            return
        }
        for table in tables.values where isShadow(table.name, of: name) { table.close() }
        var staged: [String: String] = [:]
        for (suffix, table) in present.sorted(by: { $0.key < $1.key }) {
            staged[suffix] = try stage(table, as: "litectl_rtree" + suffix)
        }
        for suffix in RecoveryRun.shadowSuffixes {
            if try out.hasObject(name + suffix) { try out.db.execute("DROP TABLE main.\(quoteIdentifier(name + suffix))") }
        }
        do {
            try out.createVirtualTable(plan.sql, modules: RecoveryRun.rtreeModules)
        } catch {
            // Not expected (the module took the same statement in the probe, and every name is free).
            for table in staged.values { try out.db.execute("DROP TABLE \(quoteIdentifier("temp", table))") }
            failures.append(.init(type: "table", name: name, message: "R*Tree damaged (\(why)) and not built again "
                                  + "(\(describe(error))): its entries are lost"))
            return
        }
        let data = try RTreeSalvage(db: out.db, schema: "temp", shape: plan.shape,
                                    node: staged["_node"], rowid: staged["_rowid"], parent: staged["_parent"])
        let target = quoteIdentifier("main", name)
        let count = 1 + plan.shape.dimensions * 2 + plan.shape.auxiliary
        let insert = try out.db.prepare("INSERT INTO \(target) VALUES (\((1...count).map { "?\($0)" }.joined(separator: ", ")))")
        let exists = try out.db.prepare("SELECT 1 FROM \(target) WHERE rowid = ?1")
        let remove = try out.db.prepare("DELETE FROM \(target) WHERE rowid = ?1")
        // Entries the module refuses (a box whose minimum exceeds its
        // maximum, after a flipped bit): kept in lost_and_found, never
        // dropped (the shell's `.recover` copies them into a tree that
        // rtreecheck() fails).
        var refused: [(entry: RTreeEntry, values: [Value], why: String)] = []
        try data.forEachEntry { entry in
            var values: [Value] = [.integer(entry.rowid)]
            for pattern in entry.coordinates {
                values.append(plan.shape.integer ? .integer(Int64(Int32(bitPattern: pattern))) : .real(Double(Float(bitPattern: pattern))))
            }
            values += entry.auxiliary
            if let dimension = data.invalidDimension(entry) {
                refused.append((entry, values, "the minimum of its dimension \(dimension + 1) exceeds the maximum"))
                return
            }
            try exists.bind([.integer(entry.rowid)])
            let present = try exists.step()
            exists.reset()
            if present {
                // A second copy of the entry: the one _rowid confirms wins.
                guard entry.confirmed else { return }
                try remove.bind([.integer(entry.rowid)])
                try remove.step()
                remove.reset()
            }
            try insert.bind(values)
            do {
                try insert.step()
            } catch let error as DatabaseError where error.primaryCode == .constraint || error.primaryCode == .mismatch {
                refused.append((entry, values, error.message))
            }
            insert.reset()
        }
        // One row per refused entry the tree does not hold (a copy _rowid
        // confirms first), under the root page of the tree's _node table.
        let root = tables.values.first { sameSQLName($0.name, name + "_node") }?.root ?? 0
        var elsewhere: Set<Int64> = []
        for item in refused.filter({ $0.entry.confirmed }) + refused.filter({ !$0.entry.confirmed }) {
            try exists.bind([.integer(item.entry.rowid)])
            let present = try exists.step()
            exists.reset()
            guard !present, elsewhere.insert(item.entry.rowid).inserted else { continue }
            try lost.add(root: root, page: 0, cell: item.entry.cell, rowid: item.entry.rowid, values: item.values,
                         reason: "an entry of R*Tree \(name) (cell \(item.entry.cell) of node \(item.entry.node)) "
                             + "its module refuses: \(item.why)")
        }
        let kept = try out.db.scalar("SELECT count(*) FROM \(target)")
        let entries: Int
        if case .integer(let n)? = kept { entries = Int(n) } else { entries = 0 }
        let lostEntries = try data.unmappedEntries(notIn: name, elsewhere: elsewhere)
        for table in staged.values { try out.db.execute("DROP TABLE \(quoteIdentifier("temp", table))") }
        rtreeResults.append(.init(name: name, entries: entries, entriesLost: lostEntries, entriesInLostAndFound: elsewhere.count,
                                  rebuilt: true, problem: why))
        var outcome = "built again from the \(entries) entries its nodes still hold"
        if !elsewhere.isEmpty { outcome += "; \(elsewhere.count) entries its module refuses are in lost_and_found" }
        if lostEntries > 0 { outcome += "; \(lostEntries) entries are lost" }
        problems.append("R*Tree \(name) was damaged (\(why)): \(outcome)")
    }

    /// Copies `table` (main) to a new temporary table named `stem`: its
    /// rowid as the key, then its columns but the first (the key's alias
    /// in the module's tables), as RTreeSalvage reads it. Returns its name.
    private func stage(_ table: String, as stem: String) throws -> String {
        let columns = try out.db.rows("SELECT name FROM pragma_table_info(?1, 'main') ORDER BY cid", [.text(Array(table.utf8))]).compactMap { row -> String? in
            if case .text(let bytes) = row[0] { return String(decoding: bytes, as: UTF8.self) }
            return nil
        }
        var name = stem
        var n = 0
        while try out.db.scalar("SELECT count(*) FROM temp.sqlite_schema WHERE name = ?1", [.text(Array(name.utf8))]) != .integer(0) {
            n += 1
            name = "\(stem)_\(n)"
        }
        let rest = columns.dropFirst()
        let definition = (["k INTEGER PRIMARY KEY"] + rest.indices.map { "v\($0)" }).joined(separator: ", ")
        try out.db.execute("CREATE TEMP TABLE \(quoteIdentifier(name))(\(definition))")
        let selected = (["rowid"] + rest.map { quoteIdentifier($0) }).joined(separator: ", ")
        try out.db.execute("INSERT INTO \(quoteIdentifier("temp", name)) SELECT \(selected) FROM \(quoteIdentifier("main", table))")
        return name
    }

    /// True when `table` is one of the shadow tables of R*Tree `name`.
    func isShadow(_ table: String, of name: String) -> Bool {
        RecoveryRun.shadowSuffixes.contains { sameSQLName(table, name + $0) }
    }
}
