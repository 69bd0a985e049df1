// Pairs the columns of a table whose definition changed between A and B
// (kept, renamed, added, dropped), gives the value A's rows hold in an added
// column (B's default, as SQLite gives old rows after ADD COLUMN), and finds
// the ALTER TABLE statements that turn A's definition into B's exactly, when
// there are any (else a patch rebuilds the table). See docs/diff.md.

/// How the columns of one table pair up across a definition change.
public struct ColumnPairing: Sendable {
    public enum Kind: String, Sendable { case kept, renamed, added, dropped }
    public struct Entry: Sendable {
        /// A's name (nil: added) and B's name (nil: dropped).
        public var nameA: String?
        public var nameB: String?
        public var kind: Kind
        /// The name the diff shows: B's, or A's for a dropped column.
        public var name: String { nameB ?? nameA! }
    }
    /// B's content columns in B's order, then A's dropped columns in A's order.
    public var entries: [Entry]

    /// True when every column keeps its name (reordered, retyped or with other
    /// constraints at most): both sides are read by the same names.
    public var keepsNames: Bool { entries.allSatisfy { $0.kind == .kept } }

    /// Pairs `a`'s content columns with `b`'s. Same name (as SQLite matches
    /// names): kept. A column of A that B lacks and a column of B that A
    /// lacks at the same position among all columns, with the same declared
    /// type, NOT NULL, DEFAULT, collation, primary-key position and kind:
    /// renamed (ALTER TABLE ... RENAME COLUMN changes only the name, never
    /// the position or the definition). Any other: dropped, added.
    public static func pair(_ a: Table, _ b: Table) -> ColumnPairing {
        let namesA = Set(a.columns.map { sqlNameKey($0.name) }), namesB = Set(b.columns.map { sqlNameKey($0.name) })
        var renamedFrom: [[UInt8]: String] = [:]   // B's name → A's name
        var renamedA: Set<[UInt8]> = []
        for (i, column) in a.columns.enumerated() where !namesB.contains(sqlNameKey(column.name)) && i < b.columns.count {
            let other = b.columns[i]
            guard !namesA.contains(sqlNameKey(other.name)), column.hidden == .normal, other.hidden == .normal,
                  column.declaredType == other.declaredType, column.notNull == other.notNull,
                  column.defaultSQL == other.defaultSQL, column.collation == other.collation,
                  column.primaryKeyPosition == other.primaryKeyPosition else { continue }
            renamedFrom[sqlNameKey(other.name)] = column.name
            renamedA.insert(sqlNameKey(column.name))
        }
        let byNameA = Dictionary(a.contentColumns.map { (sqlNameKey($0.name), $0.name) }, uniquingKeysWith: { x, _ in x })
        var entries: [Entry] = []
        for column in b.contentColumns {
            let key = sqlNameKey(column.name)
            if let old = byNameA[key] {
                entries.append(Entry(nameA: old, nameB: column.name, kind: .kept))
            } else if let old = renamedFrom[key] {
                entries.append(Entry(nameA: old, nameB: column.name, kind: .renamed))
            } else {
                entries.append(Entry(nameA: nil, nameB: column.name, kind: .added))
            }
        }
        for column in a.contentColumns where !namesB.contains(sqlNameKey(column.name)) && !renamedA.contains(sqlNameKey(column.name)) {
            entries.append(Entry(nameA: column.name, nameB: nil, kind: .dropped))
        }
        return ColumnPairing(entries: entries)
    }

    /// A's primary key in B's names (renamed columns followed), nil when a
    /// key column is dropped.
    public func primaryKeyOfA(_ a: Table) -> [String]? {
        var names: [String] = []
        for column in a.primaryKey {
            guard let entry = entries.first(where: { $0.nameA.map { sameSQLName($0, column.name) } ?? false }),
                  let name = entry.nameB else { return nil }
            names.append(name)
        }
        return names
    }
}

/// The value SQLite gives the existing rows of a table when `column` of
/// `table` is added with ALTER TABLE ADD COLUMN: its DEFAULT with the
/// column's affinity applied (NULL without a DEFAULT). Found by SQLite
/// itself, in a scratch in-memory database: a row inserted without the
/// column takes the same value ("the value of the new column in every
/// existing row is the default", https://www.sqlite.org/lang_altertable.html).
/// A default SQLite cannot evaluate here is taken as NULL.
func addedColumnValue(_ column: Column) -> Value {
    guard let defaultSQL = column.defaultSQL, let scratch = try? ScratchSchema() else { return .null }
    defer { scratch.close() }
    let type = column.declaredType.isEmpty ? "" : " " + column.declaredType
    if (try? scratch.run("CREATE TABLE litectl_default(litectl_rowid INTEGER PRIMARY KEY, c\(type) DEFAULT \(defaultSQL))")) != nil,
       (try? scratch.run("INSERT INTO litectl_default(litectl_rowid) VALUES(1)")) != nil,
       let value = try? scratch.connection.scalar("SELECT c FROM litectl_default") {
        return value ?? .null
    }
    if let value = try? scratch.connection.scalar("SELECT (\(defaultSQL))") { return value ?? .null }
    return .null
}

/// A scratch in-memory database for trying a database's own schema text:
/// text from a hostile file must not reach past it, so each statement runs
/// alone (text after it is refused, never run), ATTACH is off (no file is
/// ever opened or made: VACUUM INTO and ATTACH need one), and values stay
/// small (a DEFAULT of zeroblob(1e9) fails instead of taking a gigabyte).
final class ScratchSchema {
    let connection: Connection

    init() throws {
        connection = try Connection(inMemory: Connection.defaultBusyTimeout)
        sqlite3_limit(connection.rawHandle, SQLITE_LIMIT_ATTACHED, 0)
        sqlite3_limit(connection.rawHandle, SQLITE_LIMIT_LENGTH, 1 << 24)
        try run("PRAGMA foreign_keys=OFF")
    }

    /// Runs exactly one statement: `sql` must hold nothing after it but blanks and a `;`.
    func run(_ sql: String) throws {
        var statement: OpaquePointer?
        var tailText = ""
        let rc = sql.withCString { text -> Int32 in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v2(connection.rawHandle, text, -1, &statement, &tail)
            if let tail { tailText = String(cString: tail) }
            return rc
        }
        defer { sqlite3_finalize(statement) }
        guard rc == SQLITE_OK, statement != nil,
              tailText.utf8.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D, 0x0C, UInt8(ascii: ";")].contains($0) }),
              sqlite3_stmt_isexplain(statement) == 0 else {
            throw DatabaseError(code: .error, message: "not one statement")
        }
        var step = sqlite3_step(statement)
        while step == SQLITE_ROW { step = sqlite3_step(statement) }
        guard step == SQLITE_DONE else { throw DatabaseError(code: .error, message: "statement failed") }
    }

    func close() { try? connection.close() }
}

/// The top-level parts of a CREATE TABLE statement's parenthesized list (the
/// column definitions, then the table constraints), each as written, without
/// the comma and the surrounding blanks; nil when the text cannot be split.
/// Quotes ('', "", ``, []) and comments are skipped over.
func tableDefinitionParts(_ sql: String) -> [String]? {
    let bytes = Array(sql.utf8)
    var i = 0, depth = 0, start = 0
    var parts: [String] = []
    func part(_ from: Int, _ to: Int) -> String {
        String(decoding: bytes[from..<to], as: UTF8.self).trimmingBlanks()
    }
    while i < bytes.count {
        let c = bytes[i]
        switch c {
        case UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "`"), UInt8(ascii: "["):
            let close = c == UInt8(ascii: "[") ? UInt8(ascii: "]") : c
            i += 1
            while i < bytes.count {
                if bytes[i] == close {
                    if close != UInt8(ascii: "]"), i + 1 < bytes.count, bytes[i + 1] == close { i += 2; continue }
                    break
                }
                i += 1
            }
        case UInt8(ascii: "-") where i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "-"):
            while i < bytes.count && bytes[i] != 0x0A { i += 1 }
        case UInt8(ascii: "/") where i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "*"):
            i += 2
            while i + 1 < bytes.count && !(bytes[i] == UInt8(ascii: "*") && bytes[i + 1] == UInt8(ascii: "/")) { i += 1 }
            i += 1
        case UInt8(ascii: "("):
            depth += 1
            if depth == 1 { start = i + 1 }
        case UInt8(ascii: ")"):
            depth -= 1
            if depth == 0 {
                parts.append(part(start, i))
                return parts
            }
        case UInt8(ascii: ",") where depth == 1:
            parts.append(part(start, i))
            start = i + 1
        default:
            break
        }
        i += 1
    }
    return nil
}

extension String {
    func trimmingBlanks() -> String {
        let blanks: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D, 0x0C]
        var bytes = Array(utf8)[...]
        while let first = bytes.first, blanks.contains(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, blanks.contains(last) { bytes = bytes.dropLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The ALTER TABLE statements that turn A's definition of a table into B's
/// exactly (the normalized CREATE TABLE text `litectl hash` covers), when
/// SQLite's ALTER TABLE can: renames, then drops, then additions at the end
/// of the column list (ADD COLUMN appends there). Each candidate is tried on
/// A's definition in a scratch in-memory database and kept only when the
/// CREATE TABLE text SQLite leaves is B's; nil: the table must be rebuilt.
/// (RENAME COLUMN writes the new name quoted or not as the statement does, so
/// both spellings are tried.)
func alterationStatements(_ a: Table, _ b: Table, _ pairing: ColumnPairing) -> [String]? {
    guard a.kind == .ordinary, b.kind == .ordinary, !a.isStatistics, let sqlA = a.sql, let sqlB = b.sql,
          a.name == b.name, a.problem == nil, b.problem == nil else { return nil }
    let target = normalizeSQL(sqlB)
    // Added columns must follow every column B keeps, as ADD COLUMN puts them.
    var seenAdded = false
    for entry in pairing.entries where entry.nameB != nil {
        if entry.kind == .added { seenAdded = true } else if seenAdded { return nil }
    }
    // The kept columns in the same relative order on both sides.
    let keptA = a.contentColumns.compactMap { column in
        pairing.entries.first { $0.nameA.map { sameSQLName($0, column.name) } ?? false && $0.nameB != nil }?.nameB
    }
    let keptB = pairing.entries.filter { $0.kind == .kept || $0.kind == .renamed }.map(\.name)
    guard keptA.map(sqlNameKey) == keptB.map(sqlNameKey) else { return nil }
    guard let partsB = tableDefinitionParts(sqlB) else { return nil }
    let table = quoteIdentifier(a.name)
    var fixed: [String] = []
    for entry in pairing.entries where entry.kind == .dropped {
        fixed.append("ALTER TABLE \(table) DROP COLUMN \(quoteIdentifier(entry.nameA!));")
    }
    for entry in pairing.entries where entry.kind == .added {
        guard let index = b.columns.firstIndex(where: { $0.name == entry.nameB! }), index < partsB.count else { return nil }
        fixed.append("ALTER TABLE \(table) ADD COLUMN \(partsB[index]);")
    }
    let renames = pairing.entries.filter { $0.kind == .renamed }
    var candidates: [[String]] = []
    for quoted in [false, true] {
        let spelled = renames.map { entry -> String in
            let new = entry.nameB!
            return "ALTER TABLE \(table) RENAME COLUMN \(quoteIdentifier(entry.nameA!)) TO \(quoted || !isPlainIdentifier(new) ? quoteIdentifier(new) : new);"
        }
        candidates.append(spelled + fixed)
        if renames.isEmpty { break }
    }
    for statements in candidates where !statements.isEmpty {
        // Each statement must be one statement alone: it goes into the patch as written.
        guard let scratch = try? ScratchSchema() else { return nil }
        defer { scratch.close() }
        do {
            try scratch.run(sqlA)
            for statement in statements { try scratch.run(statement) }
            guard case .text(let bytes)? = try scratch.connection.scalar("SELECT sql FROM sqlite_schema WHERE type='table' AND name=?",
                                                                         [.text(Array(a.name.utf8))]) else { continue }
            if normalizeSQL(String(decoding: bytes, as: UTF8.self)) == target { return statements }
        } catch {
            continue
        }
    }
    return nil
}

/// True when `name` needs no quotes: ASCII letters, digits and underscores,
/// not starting with a digit, and not a keyword SQLite reserves.
func isPlainIdentifier(_ name: String) -> Bool {
    guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
    let ok = name.utf8.allSatisfy { b in
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "_")
    }
    return ok && sqlite3_keyword_check(name, Int32(name.utf8.count)) == 0
}

import CSQLite
