// Values too large for one statement of a dump's script, written in pieces
// that both the sqlite3 shell and `litectl load` put back together exactly:
// each piece goes into a temporary table, and the row's INSERT takes the value
// as the concatenation of its pieces (group_concat, linear in the value's
// size; appending with `||` in UPDATEs would copy the value once per piece).
// A single literal is bounded by SQLite's SQLITE_MAX_SQL_LENGTH (a statement)
// and SQLITE_MAX_LENGTH (a string or BLOB), 1,000,000,000 bytes by default,
// and hex doubles a BLOB: a 500 MB BLOB has no literal a loader takes.
// https://www.sqlite.org/limits.html

/// How a dump splits values (the defaults; tests make them small).
struct PieceLimits: Sendable {
    /// A TEXT or BLOB value longer than this is written in pieces of at most
    /// this many bytes (2 MiB of hex each).
    var pieceBytes = 1 << 20
    /// Once a row's INSERT is this long, its further TEXT and BLOB values
    /// longer than `smallest` go in pieces too: 2,000 values of 1 MiB each
    /// would make a statement of 4 GB.
    var statementBytes = 4 << 20
    var smallest = 1 << 10
    /// The largest row record a loader builds (nil: the dump connection's
    /// SQLITE_LIMIT_LENGTH, which is SQLite's default, as in the sqlite3 shell).
    var recordBytes: Int? = nil
    /// The longest statement a loader prepares (nil: the dump connection's
    /// SQLITE_LIMIT_SQL_LENGTH, SQLite's default).
    var sqlBytes: Int? = nil
}

/// The temporary table the pieces go through, in the loading connection's
/// `temp` schema (never in the database being loaded).
struct ValuePieces {
    /// The name every dump's piece table starts with.
    static let stem = "litectl_dump_piece"
    /// `stem`, or `stem_N` when a table of the dump has that name: a row's
    /// `INSERT INTO "litectl_dump_piece"` names no schema, and SQLite would
    /// find the temporary table first.
    let name: String

    init(avoiding tables: [String]) {
        let taken = Set(tables.map(sqlNameKey))
        var name = Self.stem, n = 1
        while taken.contains(sqlNameKey(name)) {
            name = "\(Self.stem)_\(n)"
            n += 1
        }
        self.name = name
    }

    var table: String { "temp.\(name)" }
    var create: String { "CREATE TEMP TABLE \(name)(k INTEGER, n INTEGER PRIMARY KEY, v);" }
    var drop: String { "DROP TABLE \(table);" }
    var empty: String { "DELETE FROM \(table);" }

    /// Whether `cell` can be written in pieces into a database of
    /// `encoding`, and read back exactly. In UTF-8 every TEXT and BLOB can:
    /// pieces are BLOBs, group_concat joins their bytes, CAST gives the type.
    /// In UTF-16, group_concat reads each piece as UTF-8 (SQLite converts it)
    /// and the result is converted back: TEXT that is valid UTF-8 without
    /// U+FFFE or U+FFFF survives that (SQLite turns those into U+FFFD), split
    /// between characters; a BLOB's bytes would be taken for UTF-16 text, and
    /// `||` drops the odd last byte of a BLOB there, so a BLOB cannot.
    static func canSplit(_ cell: Cell, encoding: TextEncoding) -> Bool {
        switch cell {
        case .blob: return encoding == .utf8
        case .text(let bytes): return encoding == .utf8 || (isValidUTF8(bytes) && !Value.holdsFFFEorFFFF(bytes))
        default: return false
        }
    }

    /// Writes the statements that put `cell`'s pieces into the table as value
    /// `k`, to `sink`, through `line` (emptied before and after).
    func writePieces(of cell: Cell, k: Int, encoding: TextEncoding, pieceBytes: Int, to sink: ByteSink,
                            line: inout [UInt8]) throws {
        let (bytes, isText): (UnsafeRawBufferPointer, Bool)
        switch cell {
        case .text(let b): (bytes, isText) = (b, true)
        case .blob(let b): (bytes, isText) = (b, false)
        default: preconditionFailure("only TEXT and BLOB values are split")
        }
        var start = 0
        repeat {
            var end = min(bytes.count, start + pieceBytes)
            if isText && encoding != .utf8 {
                // Between characters: each piece is converted on its own.
                while end < bytes.count && end > start && bytes[end] & 0xC0 == 0x80 { end -= 1 }
            }
            let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            line.removeAll(keepingCapacity: true)
            line.append(contentsOf: "INSERT INTO \(table)(k,v) VALUES(\(k),".utf8)
            if isText && encoding != .utf8 {
                try Cell.text(piece).appendSQLLiteral(to: &line, encoding: encoding)
            } else {
                appendHexLiteral(piece, to: &line)
            }
            line.append(contentsOf: ");\n".utf8)
            sink.write(line)
            start = end
        } while start < bytes.count
        line.removeAll(keepingCapacity: true)
    }

    /// The expression that stands for value `k` in the row's INSERT.
    func joined(k: Int, isText: Bool) -> String {
        "(SELECT CAST(group_concat(v,'') AS \(isText ? "TEXT" : "BLOB")) FROM (SELECT v FROM \(table) WHERE k=\(k) ORDER BY n))"
    }

    /// The size of the record SQLite builds for a row of `table` (its header
    /// and body, https://www.sqlite.org/fileformat.html#record_format), which
    /// no SQLite with the default SQLITE_MAX_LENGTH builds above 1,000,000,000
    /// bytes. TEXT counts in the database's encoding; the rowid is not in the
    /// record (an INTEGER PRIMARY KEY is stored as NULL); stored generated
    /// columns, which the loader computes, are not counted.
    static func recordSize(_ row: WideRow, table: DumpTable, encoding: TextEncoding) -> Int {
        var header = 0, body = 0
        let first = table.rowidAlias == nil ? 0 : 1
        for i in first..<table.writtenColumns.count {
            if i == table.rowidPosition {
                header += 1  // the INTEGER PRIMARY KEY, stored as NULL
                continue
            }
            switch row.cell(at: i) {
            case .null:
                header += 1
            case .integer(let v):
                header += 1
                body += v == 0 || v == 1 ? 0 : integerSize(v)
            case .real:
                header += 1
                body += 8
            case .text(let b):
                let n = encoding == .utf8 ? b.count : utf16Length(b)
                header += varintLength(UInt64(n) * 2 + 13)
                body += n
            case .blob(let b):
                header += varintLength(UInt64(b.count) * 2 + 12)
                body += b.count
            }
        }
        // The header's size counts itself.
        let size = varintLength(UInt64(header + 1))
        return header + varintLength(UInt64(header + size)) + body
    }

    static func integerSize(_ v: Int64) -> Int {
        switch v {
        case -128...127: 1
        case -32768...32767: 2
        case -8_388_608...8_388_607: 3
        case -2_147_483_648...2_147_483_647: 4
        case -140_737_488_355_328...140_737_488_355_327: 6
        default: 8
        }
    }

    static func varintLength(_ v: UInt64) -> Int {
        var n = 1, rest = v >> 7
        while rest > 0 && n < 9 { n += 1; rest >>= 7 }
        return n
    }

    /// Bytes of UTF-8 `bytes` as UTF-16 (2 per unit, 4 past U+FFFF).
    static func utf16Length(_ bytes: UnsafeRawBufferPointer) -> Int {
        var n = 0
        for byte in bytes where byte & 0xC0 != 0x80 { n += byte >= 0xF0 ? 4 : 2 }
        return n
    }
}
