// Where the columns a statement would select from a table lie in the table's
// b-tree: the rowid (an INTEGER PRIMARY KEY is the rowid), or a field of the
// record. Records hold every column but VIRTUAL generated ones, in
// declaration order (rowid tables) or as the primary key index orders them,
// key columns first (WITHOUT ROWID). Columns of REAL affinity read stored
// integers as REAL; a record shorter than the table reads the missing
// columns as SQLite's short-record defaults (ColumnDefaults).
// https://www.sqlite.org/fileformat2.html#representation_of_sql_tables

/// How to read chosen columns of one table from its b-tree, as SELECT reads them.
struct TableLayout {
    enum Source: Equatable {
        case rowid
        /// Field `n` of the record.
        case field(Int)
    }

    struct Column {
        var name: String
        var source: Source
        /// Stored INTEGERs read as REAL (OP_RealAffinity).
        var realAffinity: Bool
        var declaredType: String
        var defaultSQL: String?
    }

    var table: String
    var root: UInt32
    /// The b-tree is an index b-tree (entries, no rowids).
    var withoutRowid: Bool
    var columns: [Column]
    var encoding: TextEncoding
    /// How many record fields a row's header is read for (SQLite reads no further).
    var fieldLimit: Int
    let defaults: ColumnDefaults

    /// Why a table cannot be read from its b-tree (the caller reads it with statements).
    struct Unsupported: Error, CustomStringConvertible {
        var description: String
    }

    /// The layout of `table` for the columns `names` (in that order); a name
    /// equal to `rowidName` is the rowid. Throws `Unsupported` for what only
    /// statements can read: virtual tables, tables whose columns could not be
    /// read, a column that is not stored.
    static func make(_ connection: Connection, table: Table, columns names: [String], rowidName: String? = nil,
                     encoding: TextEncoding) throws -> TableLayout {
        guard table.kind != .virtual else { throw Unsupported(description: "virtual table") }
        guard table.problem == nil else { throw Unsupported(description: table.problem ?? "") }
        guard case .integer(let root)? = try connection.scalar(
            "SELECT rootpage FROM main.sqlite_schema WHERE type = 'table' AND name = ?1", [.text(table.name)]),
              root >= 1, root <= Int64(UInt32.max) else {
            throw Unsupported(description: "no b-tree root page")
        }
        // Record field of each column (by position in table.columns).
        var fieldOf: [Int: Int] = [:]
        if table.withoutRowid {
            let cids = try connection.rows("""
                SELECT x.cid FROM pragma_index_list(?1) AS l, pragma_index_xinfo(l.name) AS x
                WHERE l.origin = 'pk' ORDER BY x.seqno
                """, [.text(table.name)])
            for (field, row) in cids.enumerated() {
                guard case .integer(let cid) = row[0], cid >= 0, Int(cid) < table.columns.count else {
                    throw Unsupported(description: "primary key index of unexpected shape")
                }
                fieldOf[Int(cid)] = field
            }
            guard !cids.isEmpty else { throw Unsupported(description: "no primary key index") }
        } else {
            var field = 0
            for (i, column) in table.columns.enumerated() where column.hidden != .generatedVirtual {
                guard column.hidden != .hiddenVirtual else { throw Unsupported(description: "hidden column") }
                fieldOf[i] = field
                field += 1
            }
        }
        // An INTEGER PRIMARY KEY is the rowid exactly when SQLite made no
        // index for the key (asked of SQLite: the schema reader tells only
        // for ordinary tables, and shadow tables have such keys too).
        var rowidAlias = false
        if !table.withoutRowid && table.primaryKey.count == 1 {
            rowidAlias = try connection.scalar("SELECT count(*) FROM pragma_index_list(?1) WHERE origin = 'pk'",
                                               [.text(table.name)]) == .integer(0)
        }
        var columns: [Column] = []
        for name in names {
            if let rowidName, name == rowidName, !table.withoutRowid,
               !table.columns.contains(where: { sameSQLName($0.name, name) }) {
                columns.append(Column(name: name, source: .rowid, realAffinity: false, declaredType: "", defaultSQL: nil))
                continue
            }
            guard let i = table.columns.firstIndex(where: { Array($0.name.utf8) == Array(name.utf8) })
                    ?? table.columns.firstIndex(where: { sameSQLName($0.name, name) }) else {
                throw Unsupported(description: "no column \(name)")
            }
            let column = table.columns[i]
            let source: Source
            if rowidAlias && column.primaryKeyPosition > 0 {
                source = .rowid
            } else if let field = fieldOf[i] {
                source = .field(field)
            } else {
                throw Unsupported(description: "column \(name) is not stored")
            }
            columns.append(Column(name: column.name, source: source,
                                  realAffinity: source != .rowid && columnAffinity(column.declaredType) == .real,
                                  declaredType: column.declaredType, defaultSQL: column.defaultSQL))
        }
        let limit = columns.reduce(0) { limit, column in
            if case .field(let n) = column.source { return max(limit, n + 1) }
            return limit
        }
        return TableLayout(table: table.name, root: UInt32(root), withoutRowid: table.withoutRowid, columns: columns,
                           encoding: encoding, fieldLimit: limit,
                           defaults: ColumnDefaults(encoding: encoding, strict: table.strict))
    }
}

extension TableLayout {
    /// True when every record reads as the same row under both layouts: the
    /// same columns from the same fields (or the rowid), with the same
    /// affinity, the same short-record defaults (declared type and DEFAULT,
    /// compared as bytes: Swift's == would take NFC and NFD spellings for
    /// one), the same STRICT flag and text encoding. Then two equal records
    /// are two equal rows, and only records that differ need decoding.
    func decodesAlike(_ other: TableLayout) -> Bool {
        guard withoutRowid == other.withoutRowid, encoding == other.encoding, fieldLimit == other.fieldLimit,
              defaults.strict == other.defaults.strict, columns.count == other.columns.count else { return false }
        return zip(columns, other.columns).allSatisfy { x, y in
            x.source == y.source && x.realAffinity == y.realAffinity
                && Array(x.declaredType.utf8) == Array(y.declaredType.utf8)
                && x.defaultSQL.map { Array($0.utf8) } == y.defaultSQL.map { Array($0.utf8) }
        }
    }
}

/// SQLite's column affinities.
enum Affinity {
    case blob, text, numeric, integer, real
}

/// The affinity of a declared type, by SQLite's rules (sqlite3AffinityType):
/// "INT" anywhere gives INTEGER; else "CHAR", "CLOB" or "TEXT" TEXT; else
/// "BLOB" or no type BLOB; else "REAL", "FLOA" or "DOUB" REAL; else NUMERIC.
/// The substrings are looked for in that order of precedence, ASCII case-folded.
/// https://www.sqlite.org/datatype3.html#determination_of_column_affinity
func columnAffinity(_ declaredType: String) -> Affinity {
    if declaredType.isEmpty { return .blob }
    var affinity = Affinity.numeric
    var h: UInt32 = 0
    func code(_ s: String) -> UInt32 { s.utf8.reduce(0) { $0 << 8 | UInt32($1) } }
    let char = code("char"), clob = code("clob"), text = code("text"), blob = code("blob")
    let real = code("real"), floa = code("floa"), doub = code("doub"), int = code("int")
    for byte in declaredType.utf8 {
        h = h << 8 | UInt32(asciiLower(byte))
        if h == char || h == clob || h == text {
            affinity = .text
        } else if h == blob && (affinity == .numeric || affinity == .real) {
            affinity = .blob
        } else if (h == real || h == floa || h == doub) && affinity == .numeric {
            affinity = .real
        } else if h & 0x00FF_FFFF == int {
            return .integer
        }
    }
    return affinity
}
