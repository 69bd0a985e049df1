// A table of the recovered database as salvage fills it: where each field of
// the damaged file's records goes (asked of the new database, as the recover
// extension does: PRAGMA table_xinfo, and the primary-key index of a WITHOUT
// ROWID table), the INSERT that writes a row with its rowid, and whether a
// record could be one of this table's rows at all (field count, NULL where
// the rowid alias is, NOT NULL, STRICT types, TEXT affinity), which is how
// pages no b-tree reaches are given back to their table.
// https://www.sqlite.org/fileformat2.html#representation_of_sql_tables
import CSQLite

/// One table of the recovered database, and how records of the damaged file become its rows.
final class SalvageTable {
    struct Column {
        var name: String
        var declaredType: String
        var notNull: Bool
        var defaultSQL: String?
        /// PRAGMA table_xinfo's hidden: 0 ordinary, 2 VIRTUAL generated, 3 STORED generated.
        var hidden: Int
        var affinity: Affinity
    }

    /// Position in the run's list of trees (0 is sqlite_schema).
    let id: Int
    /// The table's name in the new database.
    let name: String
    /// Its root page in the damaged file (0 for a table made for orphan pages).
    let root: UInt32
    let withoutRowid: Bool
    let strict: Bool
    let columns: [Column]
    /// Record field → column (-1: a field no column reads).
    let fieldColumns: [Int]
    /// The INTEGER PRIMARY KEY column (the rowid's alias), if any.
    let rowidAlias: Int?
    /// The name that sets the rowid in an INSERT (rowid tables without an alias).
    let rowidName: String?
    /// A table made for pages whose schema is lost (columns c0, c1, ...).
    let generic: Bool
    private var statement: Statement?
    private let connection: Connection
    /// Why rows cannot be written to this table, when they cannot.
    private(set) var unwritable: String?
    /// Parameter of each column in the INSERT (0: not written: generated columns).
    private let parameters: [Int32]
    private let rowidParameter: Int32
    private let defaults: ColumnDefaults
    private let encoding: TextEncoding
    /// Each column's field in the record (-1: none).
    let fieldOfColumn: [Int]
    /// Per record field, what `accepts` checks.
    let fieldRules: [FieldRule]

    // What happened to the table, for the report.
    var rows = 0
    var lostRows = 0
    var pagesRead = 0
    var damagedPages = 0
    /// Pages no b-tree of it reached, given back to it.
    var pagesAttached = 0
    /// Damage met walking its b-tree (and rows that could not be copied).
    var damaged = false
    /// Rows that read, for a column ALTER TABLE ADD COLUMN added after they
    /// were written, a default their column's type does not allow (the
    /// source's integrity_check reports them): written as the type makes them.
    var alteredRows = 0
    /// Per column: whether its short-record value survives being written.
    private var defaultSurvives: [Int: Bool] = [:]
    /// Rowid ranges of subtrees its walk could not reach: (low, high], nil unbounded.
    var lostRanges: [(low: Int64?, high: Int64?)] = []
    /// Its rows were copied b-tree by b-tree by SQLite (see TreeCopy).
    var treeCopied = false

    /// Forgets what a walk found (before the table is walked again).
    func forgetWalk() {
        rows = 0
        pagesRead = 0
        damagedPages = 0
        damaged = false
        lostRanges = []
    }

    var storedFieldCount: Int { fieldColumns.count }

    /// The layout of table `name` as created in `db`.
    init(db: Connection, id: Int, name: String, root: UInt32, encoding: TextEncoding, generic: Bool = false) throws {
        self.id = id
        self.name = name
        self.root = root
        self.encoding = encoding
        self.generic = generic
        let info = try db.rows("SELECT name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo(?1)", [.text(name)])
        var columns: [Column] = []
        var primaryKey: [Int] = []
        for row in info {
            guard case .text(let n) = row[0] else { continue }
            let type: String
            if case .text(let t) = row[1] { type = String(decoding: t, as: UTF8.self) } else { type = "" }
            var defaultSQL: String?
            if case .text(let d) = row[3] { defaultSQL = String(decoding: d, as: UTF8.self) }
            var hidden = 0
            if case .integer(let h) = row[5] { hidden = Int(h) }
            var notNull = false
            if case .integer(let v) = row[2] { notNull = v != 0 }
            if case .integer(let pk) = row[4], pk > 0 { primaryKey.append(columns.count) }
            columns.append(Column(name: String(decoding: n, as: UTF8.self), declaredType: type, notNull: notNull,
                                  defaultSQL: defaultSQL, hidden: hidden, affinity: columnAffinity(type)))
        }
        self.columns = columns
        let facts = try db.rows("SELECT wr, strict FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [.text(name)])
        let withoutRowid = facts.first?[0] == .integer(1)
        let strict = facts.first?[1] == .integer(1)
        self.withoutRowid = withoutRowid
        self.strict = strict

        var fields: [Int] = []
        if withoutRowid {
            let order = try db.rows("""
                SELECT x.cid FROM pragma_index_list(?1) AS l, pragma_index_xinfo(l.name) AS x
                WHERE l.origin = 'pk' ORDER BY x.seqno
                """, [.text(name)])
            for row in order {
                if case .integer(let cid) = row[0], cid >= 0, Int(cid) < columns.count { fields.append(Int(cid)) } else { fields.append(-1) }
            }
        } else {
            for (cid, column) in columns.enumerated() where column.hidden != 2 { fields.append(cid) }
        }
        fieldColumns = fields
        var fieldOf = Array(repeating: -1, count: columns.count)
        for (f, cid) in fields.enumerated() where cid >= 0 { fieldOf[cid] = f }
        fieldOfColumn = fieldOf

        // The rowid's alias: a lone INTEGER key for which SQLite made no index.
        var alias: Int?
        if !withoutRowid && primaryKey.count == 1 {
            let indexed = try db.scalar("SELECT count(*) FROM pragma_index_list(?1) WHERE origin = 'pk'", [.text(name)])
            if indexed == .integer(0) { alias = primaryKey[0] }
        }
        rowidAlias = alias
        fieldRules = SalvageTable.rules(columns, fields: fields, alias: alias, strict: strict)
        var rowidName: String?
        if !withoutRowid && alias == nil {
            rowidName = ["rowid", "_rowid_", "oid"].first { candidate in !columns.contains { sameSQLName($0.name, candidate) } }
        }
        self.rowidName = rowidName

        var names: [String] = []
        var parameters = Array(repeating: Int32(0), count: columns.count)
        var next: Int32 = 1
        var rowidParameter: Int32 = 0
        if let rowidName {
            names.append(rowidName)
            rowidParameter = next
            next += 1
        }
        for (cid, column) in columns.enumerated() where column.hidden == 0 {
            names.append(quoteIdentifier(column.name))
            parameters[cid] = next
            next += 1
        }
        self.parameters = parameters
        self.rowidParameter = rowidParameter
        let list = names.joined(separator: ", ")
        let values = (1..<next).map { "?\($0)" }.joined(separator: ", ")
        connection = db
        defaults = ColumnDefaults(encoding: encoding, strict: strict)
        do {
            statement = try db.prepare("INSERT INTO main.\(quoteIdentifier(name))(\(list)) VALUES (\(values))")
        } catch {
            // A table whose INSERT does not compile (a CHECK or generated
            // column calling a function this SQLite lacks, or one that
            // trusted_schema=OFF forbids): its rows go to lost_and_found.
            statement = nil
            unwritable = (error as? DatabaseError)?.message ?? "\(error)"
        }
    }

    // MARK: Matching

    /// True when `record` could be a row of this table: no more fields than
    /// it stores, NULL where the rowid alias is, and every value allowed by
    /// its column (NOT NULL, a STRICT type, no number in a TEXT column, which
    /// TEXT affinity would have turned into text).
    func accepts(_ record: SalvagedRecord) -> Bool {
        guard record.count >= 1, record.count <= storedFieldCount else { return false }
        return fieldRules.withUnsafeBufferPointer { rules in
            for f in 0..<record.count {
                let rule = rules[f]
                guard rule.column >= 0 else { continue }
                let stored = StoredClass(serialType: record.type(f))
                if rule.isAlias {
                    if stored != .null { return false }
                    continue
                }
                if rule.notNull && stored == .null { return false }
                switch rule.strict {
                case .none:
                    if rule.affinity == .text && (stored == .integer || stored == .real) { return false }
                case .any?:
                    break
                case let type?:
                    switch (type, stored) {
                    case (_, .null), (.integer, .integer), (.real, .real), (.real, .integer), (.text, .text), (.blob, .blob): break
                    default: return false
                    }
                }
            }
            return true
        }
    }

    /// What `accepts` checks of one record field, worked out once.
    struct FieldRule {
        enum StrictType { case any, integer, real, text, blob, unknown }
        /// The column it is (-1: none).
        var column: Int
        var isAlias: Bool
        var notNull: Bool
        var affinity: Affinity
        /// The STRICT type its value must have (nil: not STRICT, or a generated column).
        var strict: StrictType?
    }

    private static func rules(_ columns: [Column], fields: [Int], alias: Int?, strict: Bool) -> [FieldRule] {
        fields.map { cid in
            guard cid >= 0 else { return FieldRule(column: -1, isAlias: false, notNull: false, affinity: .blob, strict: nil) }
            let column = columns[cid]
            var type: FieldRule.StrictType?
            if strict && column.hidden == 0 {
                switch asciiUpper(column.declaredType) {
                case "ANY": type = .any
                case "INT", "INTEGER": type = .integer
                case "REAL": type = .real
                case "TEXT": type = .text
                case "BLOB": type = .blob
                default: type = .unknown
                }
            }
            return FieldRule(column: cid, isAlias: cid == alias, notNull: column.notNull, affinity: column.affinity, strict: type)
        }
    }

    /// True when every record field count is exactly the table's.
    func exactlyFits(_ record: SalvagedRecord) -> Bool { record.count == storedFieldCount }

    /// True when `rowid` lies in a subtree the walk could not reach.
    func inLostRange(_ rowid: Int64) -> Bool {
        lostRanges.contains { range in
            (range.low.map { rowid > $0 } ?? true) && (range.high.map { rowid <= $0 } ?? true)
        }
    }

    // MARK: Writing

    enum InsertOutcome {
        case inserted
        /// The new schema refused the row (its message).
        case refused(String)
    }

    /// Inserts `record` (complete) with `rowid`. Throws only on errors that
    /// end the run (a full disk); a constraint is `.refused`.
    func insert(_ record: SalvagedRecord, rowid: Int64) throws -> InsertOutcome {
        guard let statement else { return .refused(unwritable ?? "the table cannot take rows") }
        let handle = statement.handle
        var altered = false
        if rowidParameter > 0 { sqlite3_bind_int64(handle, rowidParameter, rowid) }
        for (cid, column) in columns.enumerated() {
            let parameter = parameters[cid]
            guard parameter > 0 else { continue }
            if cid == rowidAlias {
                sqlite3_bind_int64(handle, parameter, rowid)
                continue
            }
            let field = fieldOfColumn[cid]
            if field >= 0 && field < record.count, let cell = record.cell(field) {
                bindRaw(handle, parameter, cell, encoding: encoding)
            } else {
                // A record written before ADD COLUMN: the value SQLite reads for it.
                let value = (try? defaults.value(cid, declaredType: column.declaredType, defaultSQL: column.defaultSQL)) ?? .null
                if value != .null && !survives(cid, value) { altered = true }
                bindOwned(handle, parameter, value)
            }
        }
        let outcome = try step(statement)
        if case .inserted = outcome, altered { alteredRows += 1 }
        return outcome
    }

    /// True when `value`, written to column `cid`, reads back the same (its
    /// type's affinity or STRICT check leaves it as it is), tried once per
    /// column in a temporary table of the same type.
    private func survives(_ cid: Int, _ value: Value) -> Bool {
        if let known = defaultSurvives[cid] { return known }
        let db = connection
        let column = columns[cid]
        let type = strict ? column.declaredType : quoteIdentifier(column.declaredType)
        var result = false
        do {
            try db.execute("CREATE TEMP TABLE litectl_probe(x \(column.declaredType.isEmpty ? "" : type))\(strict ? " STRICT" : "")")
            defer { try? db.execute("DROP TABLE temp.litectl_probe") }
            let insert = try db.prepare("INSERT INTO temp.litectl_probe(x) VALUES (?1)")
            try insert.bind([value])
            try insert.step()
            result = try db.scalar("SELECT x FROM temp.litectl_probe") == value
        } catch {
            result = false
        }
        defaultSurvives[cid] = result
        return result
    }

    /// Finalizes the INSERT (before the database closes).
    func close() { statement = nil }

    private func step(_ statement: Statement) throws -> InsertOutcome {
        let handle = statement.handle
        let rc = sqlite3_step(handle)
        if rc == SQLITE_DONE {
            sqlite3_reset(handle)
            return .inserted
        }
        let db = connection.rawHandle
        let message = String(cString: sqlite3_errmsg(db))
        sqlite3_reset(handle)
        // What ends the run is the new file failing; a row SQLite refuses
        // (a constraint, a type, a function a CHECK calls failing) does not.
        switch rc & 0xFF {
        case SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_NOTADB,
             SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_INTERRUPT:
            throw DatabaseError.fromConnection(db, code: rc, path: connection.path, sql: statement.sql)
        default:
            return .refused(message)
        }
    }
}

/// Binds a borrowed cell exactly: TEXT in the database's encoding, bytes
/// unconverted (valid until the statement is stepped and reset).
func bindRaw(_ handle: OpaquePointer, _ index: Int32, _ cell: Cell, encoding: TextEncoding) {
    switch cell {
    case .null: sqlite3_bind_null(handle, index)
    case .integer(let v): sqlite3_bind_int64(handle, index, v)
    case .real(let v): sqlite3_bind_double(handle, index, v)
    case .text(let bytes):
        let encodingCode: UInt8
        switch encoding {
        case .utf8: encodingCode = UInt8(SQLITE_UTF8)
        case .utf16le: encodingCode = UInt8(SQLITE_UTF16LE)
        case .utf16be: encodingCode = UInt8(SQLITE_UTF16BE)
        }
        if let base = bytes.baseAddress, bytes.count > 0 {
            if encoding != .utf8 && bytes.count >= 2 && (bytes[0] == 0xFE && bytes[1] == 0xFF || bytes[0] == 0xFF && bytes[1] == 0xFE) {
                // SQLite takes a leading byte-order mark of bound UTF-16 text
                // as a mark (and drops it): one of the database's order goes
                // first, so that the text's own first character is kept.
                let mark: [UInt8] = encoding == .utf16be ? [0xFE, 0xFF] : [0xFF, 0xFE]
                let marked = mark + Array(bytes)
                marked.withUnsafeBytes { raw in
                    _ = sqlite3_bind_text64(handle, index, raw.baseAddress!.assumingMemoryBound(to: CChar.self),
                                            sqlite3_uint64(raw.count), litectl_transient(), encodingCode)
                }
            } else {
                sqlite3_bind_text64(handle, index, base.assumingMemoryBound(to: CChar.self), sqlite3_uint64(bytes.count),
                                    litectl_transient(), encodingCode)
            }
        } else {
            sqlite3_bind_text64(handle, index, "", 0, litectl_transient(), encodingCode)
        }
    case .blob(let bytes):
        if bytes.count == 0 {
            sqlite3_bind_zeroblob(handle, index, 0)
        } else {
            sqlite3_bind_blob64(handle, index, bytes.baseAddress, sqlite3_uint64(bytes.count), litectl_transient())
        }
    }
}

/// Binds an owned value whose TEXT is UTF-8 (SQLite converts it to the
/// database's encoding, as it converted the value it came from).
func bindOwned(_ handle: OpaquePointer, _ index: Int32, _ value: Value) {
    value.withCell { bindRaw(handle, index, $0, encoding: .utf8) }
}

/// ASCII upper case (declared types are compared as SQLite compares them).
func asciiUpper(_ text: String) -> String {
    String(decoding: text.utf8.map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 }, as: UTF8.self)
}
