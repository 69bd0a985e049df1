// The logical content hash behind `litectl hash`: SHA-256 over the schema
// (normalized SQL of every object, user_version, application_id) and the data
// (every row as type-tagged exact values), independent of page layout, so it
// is stable across VACUUM, page size changes and backups. Rows are read
// straight from the b-tree pages where the decoder can (PageHasher, on every
// core), with statements otherwise: the digest is the same either way.
import CSQLite

/// What a content hash covers.
public struct ContentHashOptions: Sendable {
    public var tables: [String] = []
    public var includeSchema = true
    public var includeData = true
    /// Read rows straight from the b-tree pages where possible (the same
    /// digest as statements, faster); false reads every table with statements.
    public var readPages = true
    /// Threads that read pages (0: one per core, at most 8).
    public var threads = 0
    public init() {}
}

/// The hashes of one database.
public struct ContentHash: Sendable {
    public var path: String
    /// The hash of what the options asked for.
    public var digest: String
    /// Per table: the hash of its rows and its row count.
    public var tables: [(name: String, digest: String, rows: Int64)]
    /// Tables whose rows were read with statements rather than from their
    /// pages, with the reason (for -v).
    public var notes: [String] = []
}

/// Computes logical content hashes.
///
/// Encoding, all integers little-endian: every value is a one-byte storage
/// class tag (0 NULL, 1 INTEGER, 2 REAL, 3 TEXT, 4 BLOB) followed by 8 bytes
/// (INTEGER; REAL as its IEEE bit pattern) or an 8-byte length and the bytes
/// (TEXT as UTF-8, BLOB). A row is its column count then its values. The
/// rows of a table form a multiset: each row is hashed on its own and the
/// row digests are added modulo 2^256, so row order and rowids of tables
/// without an INTEGER PRIMARY KEY (which VACUUM may renumber) do not count,
/// while a duplicated row does. A table contributes its name, its column names
/// and declared types, its row count and that sum. Shadow tables of virtual
/// tables are left out (their content is the virtual table's, which is
/// hashed). sqlite_stat1 and sqlite_stat4 count, as tables and rows: diff
/// compares and patches them (they steer the query planner, and the sqlite3
/// shell's .dump keeps them), and two databases are meant to hash alike
/// exactly when diff finds them identical.
public enum ContentHasher {
    public static func hash(path: String, options: ContentHashOptions = ContentHashOptions(),
                            busyTimeout: Int = Connection.defaultBusyTimeout) throws -> ContentHash {
        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        // Read before the transaction begins and right after, to pin down its snapshot's -wal frames.
        let before = options.readPages ? WALIndexHeader.current(connection) : nil
        return try connection.readTransaction {
            try hash(connection, options: options, walIndex: WALIndexHeader.pinned(connection, before: before))
        }
    }

    /// `walIndex`: the wal-index header of the transaction's snapshot (see `WALIndexHeader.pinned`).
    /// `known`: sums and row counts of tables already summed by the caller,
    /// by index into `hashedTables` (all tables must be selected).
    static func hash(_ connection: Connection, options: ContentHashOptions,
                     walIndex: WALIndexHeader? = nil, known: [Int: (sum: UInt256, rows: Int64)] = [:]) throws -> ContentHash {
        let schema = try connection.readSchema()
        var total = SHA256Hasher()
        let wanted = Set(options.tables.map(sqlNameKey))
        func selected(_ name: String) -> Bool { wanted.isEmpty || wanted.contains(sqlNameKey(name)) }
        for name in options.tables where schema.table(named: name) == nil {
            throw DatabaseError(code: .error, message: "no such table: \(name)", path: connection.path)
        }

        if options.includeSchema {
            var out: [UInt8] = []
            appendTagged("schema", to: &out)
            for object in try schemaObjects(connection) where selected(object.table) {
                appendTagged(object.type, to: &out)
                appendTagged(object.name, to: &out)
                appendTagged(normalizeSQL(object.sql), to: &out)
            }
            if wanted.isEmpty {
                for pragma in ["user_version", "application_id"] {
                    appendTagged(pragma, to: &out)
                    let value = try connection.scalar("PRAGMA \(pragma)") ?? .null
                    appendValue(value, to: &out)
                }
            }
            total.update(out)
        }

        var tables: [(name: String, digest: String, rows: Int64)] = []
        var notes: [String] = []
        if options.includeData {
            let chosen = hashedTables(schema).filter { selected($0.name) }
            // Tables the page reader hashed; the others are read with statements.
            precondition(known.isEmpty || wanted.isEmpty, "known sums are by index into every hashed table")
            var fromPages = known
            let rest = chosen.indices.filter { known[$0] == nil }
            if options.readPages && !rest.isEmpty {
                let threads = options.threads > 0 ? options.threads : SnapshotReader.threads()
                let (sums, pageNotes) = PageHasher.hash(connection, rest.map { chosen[$0] }, walIndex: walIndex, threads: threads)
                for (i, sum) in sums { fromPages[rest[i]] = sum }
                notes = pageNotes
            }
            for (i, table) in chosen.enumerated() {
                let header = tableHeader(table)
                let (digest, rows): ([UInt8], Int64)
                if let known = fromPages[i] {
                    (digest, rows) = (known.sum.bytes, known.rows)
                } else {
                    (digest, rows, _) = try hashRows(connection, table)
                }
                tables.append((table.name, hex(digest), rows))
                var out: [UInt8] = []
                appendTagged("table", to: &out)
                out.append(contentsOf: header)
                appendInt(UInt64(bitPattern: rows), to: &out)
                out.append(contentsOf: digest)
                total.update(out)
            }
        }
        return ContentHash(path: connection.path, digest: total.finalizeHex(), tables: tables, notes: notes)
    }

    /// Tables whose rows are content: ordinary and virtual tables, sqlite_sequence,
    /// sqlite_stat1 and sqlite_stat4.
    static func hashedTables(_ schema: Schema) -> [Table] {
        schema.tables.filter { table in
            switch table.kind {
            case .ordinary, .virtual: return table.problem == nil
            case .internal: return sameSQLName(table.name, "sqlite_sequence") || table.isStatistics
            case .shadow: return false
            }
        }.sorted { compareNames($0.name, $1.name) }
    }

    /// Schema objects other than SQLite's own (but for the statistics tables,
    /// whose presence is not implied by the rest), in (type, name) order.
    static func schemaObjects(_ connection: Connection) throws -> [(type: String, name: String, table: String, sql: String)] {
        var result: [(type: String, name: String, table: String, sql: String)] = []
        let statement = try connection.prepare("""
            SELECT type, name, tbl_name, sql FROM sqlite_schema
            WHERE sql IS NOT NULL AND (name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
              OR type = 'table' AND lower(name) IN ('sqlite_stat1', 'sqlite_stat4'))
            """)
        let shadows = Set(try connection.rows("SELECT name FROM pragma_table_list WHERE schema='main' AND type='shadow'")
            .compactMap { if case .text(let b) = $0[0] { return sqlNameKey(String(decoding: b, as: UTF8.self)) } else { return nil } })
        try statement.forEachRow { row in
            let name = row.string(at: 1)
            if shadows.contains(sqlNameKey(name)) { return }
            result.append((row.string(at: 0), name, row.string(at: 2), row.string(at: 3)))
        }
        return result.sorted { $0.type != $1.type ? $0.type < $1.type : compareNames($0.name, $1.name) }
    }

    /// The columns a table's content is made of: for virtual tables the
    /// visible ones, for other tables all but generated columns (which are
    /// computed from the others).
    static func hashRows(_ connection: Connection, _ table: Table) throws -> (digest: [UInt8], rows: Int64, header: [UInt8]) {
        let columns = table.contentColumns
        let header = tableHeader(table)
        let list = columns.isEmpty ? "NULL" : columns.map { quoteIdentifier($0.name) }.joined(separator: ", ")
        let statement = try connection.prepare("SELECT \(list) FROM \(quoteIdentifier(table.name))")
        var sum = UInt256()
        var rows: Int64 = 0
        var buffer: [UInt8] = []
        try statement.forEachRow { row in
            buffer.removeAll(keepingCapacity: true)
            appendInt(UInt64(columns.count), to: &buffer)
            for i in 0..<columns.count { appendCell(row, i, to: &buffer) }
            var hasher = SHA256Hasher()
            hasher.update(buffer)
            sum.add(hasher.finalizeBytes())
            rows += 1
        }
        return (sum.bytes, rows, header)
    }

    /// A table's name, column count, and each column's name and declared type.
    static func tableHeader(_ table: Table) -> [UInt8] {
        let columns = table.contentColumns
        var header: [UInt8] = []
        appendTagged(table.name, to: &header)
        appendInt(UInt64(columns.count), to: &header)
        for column in columns {
            appendTagged(column.name, to: &header)
            appendTagged(column.declaredType, to: &header)
        }
        return header
    }

    static func appendCell(_ row: Row, _ i: Int, to out: inout [UInt8]) {
        switch row.storageClass(at: i) {
        case .null: out.append(0)
        case .integer: out.append(1); appendInt(UInt64(bitPattern: row.int64(at: i)), to: &out)
        case .real: out.append(2); appendInt(row.double(at: i).bitPattern, to: &out)
        case .text:
            let bytes = row.bytes(at: i)
            out.append(3); appendInt(UInt64(bytes.count), to: &out); out.append(contentsOf: bytes)
        case .blob:
            let bytes = row.bytes(at: i)
            out.append(4); appendInt(UInt64(bytes.count), to: &out); out.append(contentsOf: bytes)
        }
    }

    static func appendValue(_ value: Value, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(0)
        case .integer(let v): out.append(1); appendInt(UInt64(bitPattern: v), to: &out)
        case .real(let d): out.append(2); appendInt(d.bitPattern, to: &out)
        case .text(let b): out.append(3); appendInt(UInt64(b.count), to: &out); out.append(contentsOf: b)
        case .blob(let b): out.append(4); appendInt(UInt64(b.count), to: &out); out.append(contentsOf: b)
        }
    }

    static func appendTagged(_ text: String, to out: inout [UInt8]) {
        appendValue(.text(text), to: &out)
    }

    /// `v`'s 8 bytes, little-endian.
    @inline(__always)
    static func appendInt(_ v: UInt64, to out: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        bytes.withUnsafeBytes { appendHexDigits($0, to: &out) }
        return String(decoding: out, as: UTF8.self).lowercased()
    }
}

/// Names in a fixed order: by their UTF-8 bytes, case-folded for ASCII only
/// as SQLite folds names (`sqlNameKey`), then exactly.
func compareNames(_ a: String, _ b: String) -> Bool {
    let la = sqlNameKey(a), lb = sqlNameKey(b)
    if la != lb { return compareBytes(la, lb) < 0 }
    return compareBytes(Array(a.utf8), Array(b.utf8)) < 0
}

/// SQL text with runs of whitespace outside quotes collapsed to one space and
/// trimmed, so that re-indenting a CREATE statement does not count as a change.
/// Quoted text ('..', "..", `..`, [..]) is kept exactly.
public func normalizeSQL(_ sql: String) -> String {
    var out: [UInt8] = []
    var quote: UInt8? = nil
    var pendingSpace = false
    for byte in sql.utf8 {
        if let q = quote {
            out.append(byte)
            if byte == q { quote = nil }
            continue
        }
        switch byte {
        case 0x20, 0x09, 0x0A, 0x0D, 0x0C:
            pendingSpace = !out.isEmpty
        default:
            if pendingSpace { out.append(0x20); pendingSpace = false }
            out.append(byte)
            switch byte {
            case UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "`"): quote = byte
            case UInt8(ascii: "["): quote = UInt8(ascii: "]")
            default: break
            }
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// A 256-bit unsigned integer, for the multiset sum of row digests: four
/// little-endian limbs held inline (this is added to once per row, so it
/// must not be an array, whose every write checks uniqueness and bounds).
struct UInt256 {
    private var l0: UInt64 = 0, l1: UInt64 = 0, l2: UInt64 = 0, l3: UInt64 = 0

    mutating func add(_ digest: [UInt8]) {
        digest.withUnsafeBytes { add($0) }
    }

    /// Adds a 32-byte digest read as a little-endian number, modulo 2^256.
    @inline(__always)
    mutating func add(_ digest: UnsafeRawBufferPointer) {
        precondition(digest.count >= 32, "a digest is 32 bytes")
        add(UInt64(littleEndian: digest.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
            UInt64(littleEndian: digest.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
            UInt64(littleEndian: digest.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
            UInt64(littleEndian: digest.loadUnaligned(fromByteOffset: 24, as: UInt64.self)))
    }

    /// Adds another sum, modulo 2^256 (sums of parts of a multiset add up).
    mutating func add(_ other: UInt256) {
        add(other.l0, other.l1, other.l2, other.l3)
    }

    @inline(__always)
    private mutating func add(_ a: UInt64, _ b: UInt64, _ c: UInt64, _ d: UInt64) {
        var carry: UInt64 = 0
        func limb(_ x: inout UInt64, _ y: UInt64) {
            let (s1, o1) = x.addingReportingOverflow(y)
            let (s2, o2) = s1.addingReportingOverflow(carry)
            x = s2
            carry = (o1 ? 1 : 0) + (o2 ? 1 : 0)
        }
        limb(&l0, a); limb(&l1, b); limb(&l2, c); limb(&l3, d)
    }

    /// The 32 bytes, least significant limb first, each little-endian.
    var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for limb in [l0, l1, l2, l3] { ContentHasher.appendInt(limb, to: &out) }
        return out
    }
}
