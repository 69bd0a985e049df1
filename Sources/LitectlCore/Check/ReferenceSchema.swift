// `check --expect-schema FILE.sql`: the CREATE statements of a reference
// schema, normalized (whitespace, comments, quoting, keyword and name case,
// IF NOT EXISTS and TEMP, the order of objects), and the differences between
// a database's schema and them, one finding per object: drift detection.
// The statements are compared as text; only to say which columns of a table
// differ is a reference CREATE TABLE run, alone, in a private in-memory
// database.
import CSQLite
import Crypto

/// The schema a database must have, read from a file of CREATE statements
/// (what `sqlite3 DB .schema` prints).
public struct ReferenceSchema: Sendable {
    /// One object the reference creates.
    struct Object: Sendable {
        /// table, index, view or trigger.
        var type: String
        var name: String
        /// The statement as written.
        var sql: String
        /// True for CREATE VIRTUAL TABLE.
        var virtual: Bool
        var normalized: [String]
    }

    public let path: String
    let objects: [Object]

    /// The names of the objects compared, in the file's order.
    public var names: [String] { objects.map(\.name) }

    /// `sql` normalized as the comparison sees it, shown as SQL.
    public static func normalizedText(_ sql: String) -> String { render(normalize(tokenizeSQL(sql))[...]) }

    /// The largest reference file read (a schema of 100,000 tables is far less).
    static let maximumBytes = 64 << 20

    /// Statements a schema file may hold besides CREATE: what `.schema` and
    /// `.dump` wrap around it. Anything else (INSERT, DROP, ALTER, ...) makes
    /// the file something other than a schema, and is refused.
    static let ignoredStatements: Set<String> = ["BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "PRAGMA", "ANALYZE"]

    /// Shadow-table suffixes of the virtual tables SQLite ships (R*Tree,
    /// FTS3/4, FTS5): a reference table `V_SUFFIX` beside a reference virtual
    /// table `V` is the virtual table's, made by it, and not compared.
    static let shadowSuffixes = ["_node", "_rowid", "_parent", "_content", "_segments", "_segdir", "_docsize", "_stat",
                                 "_data", "_idx", "_config"]

    /// Reads and parses the reference at `path`. Throws (naming the file) when
    /// it cannot be read, is not UTF-8, holds a statement that is not a CREATE,
    /// or creates one name twice.
    public static func load(path: String) throws -> ReferenceSchema {
        let bytes = try CheckFiles.read(path, limit: maximumBytes, what: "the reference schema")
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw DatabaseError(code: .error, message: "the reference schema is not UTF-8 text", path: path)
        }
        return try ReferenceSchema(path: path, text: text)
    }

    /// Parses `text`, the reference's CREATE statements.
    public init(path: String, text: String) throws {
        self.path = path
        var objects: [Object] = []
        var seen = Set<[UInt8]>()
        for (number, statement) in Self.statements(text).enumerated() {
            let tokens = tokenizeSQL(statement)
            guard let first = tokens.first else { continue }
            let word = first.keyword ?? ""
            if Self.ignoredStatements.contains(word) { continue }
            guard word == "CREATE", let object = Self.object(statement, tokens) else {
                let shown = statement.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(60)
                throw DatabaseError(code: .error,
                                    message: "statement \(number + 1) (\(shown)) is not a CREATE statement: a reference schema holds the CREATE statements of the schema (as `sqlite3 DB .schema` prints them)",
                                    path: path)
            }
            if sqlNameHasPrefix(object.name, "sqlite_") { continue }
            if !seen.insert(sqlNameKey(object.name)).inserted {
                throw DatabaseError(code: .error, message: "it creates \(object.name) twice", path: path)
            }
            objects.append(object)
        }
        // The shadow tables of the reference's own virtual tables.
        let virtual = objects.filter(\.virtual).map(\.name)
        objects.removeAll { object in
            object.type == "table" && !object.virtual && virtual.contains { v in
                Self.shadowSuffixes.contains { sameSQLName(object.name, v + $0) }
            }
        }
        self.objects = objects
    }

    /// The statements of `text`, split at semicolons outside quotes and
    /// comments, a trigger's body (BEGIN ... END) kept whole.
    static func statements(_ text: String) -> [String] {
        let tokens = tokenizeSQL(text)
        let bytes = Array(text.utf8)
        func sqlText(_ text: String, _ tokens: [SQLToken], _ first: Int, _ last: Int) -> String {
            String(decoding: bytes[tokens[first].start..<tokens[last].end], as: UTF8.self)
        }
        var out: [String] = []
        var start = 0
        var i = 0
        var inTrigger = false
        while i < tokens.count {
            if i == start {
                // CREATE [TEMP|TEMPORARY] TRIGGER
                inTrigger = tokens[i].isKeyword("CREATE")
                    && (tokens.dropFirst(i + 1).prefix(2).contains { $0.isKeyword("TRIGGER") })
            }
            if tokens[i].isPunctuation(";") {
                let endsTrigger = i > start && tokens[i - 1].isKeyword("END")
                if !inTrigger || endsTrigger {
                    if i > start { out.append(sqlText(text, tokens, start, i - 1)) }
                    start = i + 1
                }
            }
            i += 1
        }
        if start < tokens.count { out.append(sqlText(text, tokens, start, tokens.count - 1)) }
        return out
    }

    /// The object a CREATE statement makes: its type and name.
    static func object(_ sql: String, _ tokens: [SQLToken]) -> Object? {
        var i = 1
        var virtual = false
        while i < tokens.count, ["TEMP", "TEMPORARY", "UNIQUE", "VIRTUAL"].contains(tokens[i].keyword ?? "") {
            if tokens[i].isKeyword("VIRTUAL") { virtual = true }
            i += 1
        }
        guard i < tokens.count, let type = tokens[i].keyword, ["TABLE", "INDEX", "VIEW", "TRIGGER"].contains(type) else { return nil }
        i += 1
        if i + 2 < tokens.count, tokens[i].isKeyword("IF"), tokens[i + 1].isKeyword("NOT"), tokens[i + 2].isKeyword("EXISTS") { i += 3 }
        if i + 2 < tokens.count, tokens[i + 1].isPunctuation(".") { i += 2 }
        guard i < tokens.count, tokens[i].kind != .punctuation, tokens[i].kind != .number,
              let name = tokens[i].identifierValue else { return nil }
        return Object(type: type.lowercased(), name: name, sql: sql, virtual: virtual, normalized: normalize(tokens))
    }

    /// The statement's tokens, normalized: names (bare or quoted) and
    /// keywords as `n:` and the name with ASCII letters folded to lower case;
    /// strings `s:` as written (a blob literal's hex in upper case); numbers
    /// `#:` in lower case; punctuation `p:`. TEMP/TEMPORARY, IF NOT EXISTS,
    /// a `main.` before the name and a last `;` are left out, as SQLite leaves
    /// them out of sqlite_schema.
    static func normalize(_ tokens: [SQLToken]) -> [String] {
        var tokens = tokens
        if tokens.last?.isPunctuation(";") == true { tokens.removeLast() }
        var out: [String] = []
        var i = 0
        var afterType = false
        var inBody = false
        while i < tokens.count {
            let token = tokens[i]
            if i > 0 && i < 4 && (token.isKeyword("TEMP") || token.isKeyword("TEMPORARY")) { i += 1; continue }
            if afterType {
                afterType = false
                if i + 2 < tokens.count, token.isKeyword("IF"), tokens[i + 1].isKeyword("NOT"), tokens[i + 2].isKeyword("EXISTS") {
                    i += 3
                    if i + 2 < tokens.count, tokens[i + 1].isPunctuation("."), tokens[i].identifierValue.map({ sameSQLName($0, "main") }) == true { i += 2 }
                    continue
                }
                if i + 2 < tokens.count, tokens[i + 1].isPunctuation("."), token.identifierValue.map({ sameSQLName($0, "main") }) == true { i += 2; continue }
            }
            if !inBody, i < 5, ["TABLE", "INDEX", "VIEW", "TRIGGER"].contains(token.keyword ?? "") { afterType = true }
            if token.kind == .punctuation && token.text != "." { inBody = true }
            switch token.kind {
            case .word, .quotedIdentifier:
                out.append("n:" + String(decoding: (token.identifierValue ?? token.text).utf8.map(asciiLower), as: UTF8.self))
            case .string:
                out.append("s:" + ((token.text.first == "x" || token.text.first == "X") ? token.text.uppercased() : token.text))
            case .number:
                out.append("#:" + token.text.lowercased())
            case .punctuation:
                out.append("p:" + token.text)
            }
            i += 1
        }
        return out
    }

    /// Normalized tokens as readable SQL (names that need quotes quoted).
    static func render(_ normalized: ArraySlice<String>) -> String {
        var out = ""
        for token in normalized {
            let kind = token.prefix(2), value = String(token.dropFirst(2))
            var piece: String
            switch kind {
            case "n:":
                let plain = value.utf8.first.map { !($0 >= 0x30 && $0 <= 0x39) } == true
                    && value.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
                piece = plain ? value : quoteIdentifier(value)
            default:
                piece = value
            }
            let glued = kind == "p:" && [")", ",", ".", ";"].contains(value)
            if !out.isEmpty && !glued && !out.hasSuffix("(") && !out.hasSuffix(".") { out += " " }
            if kind == "p:" && value == "(" && out.hasSuffix(" ") { out.removeLast() }
            out += piece
        }
        return out
    }

    static func digest(_ normalized: [String]) -> String {
        var bytes: [UInt8] = []
        for token in normalized { bytes += Array(token.utf8) + [0] }
        return SHA256.hash(data: bytes).prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    // MARK: Comparing

    /// The database's objects as the reference has them: ordinary and
    /// virtual tables, indexes made with CREATE INDEX, views and triggers;
    /// SQLite's own `sqlite_` tables, virtual tables' shadow tables and the
    /// indexes UNIQUE and PRIMARY KEY constraints make are left out on both
    /// sides (the statements that make them say so already).
    static func databaseObjects(_ schema: Schema) -> [Object] {
        var out: [Object] = []
        func add(_ type: String, _ name: String, _ sql: String?, virtual: Bool = false) {
            guard let sql, !sqlNameHasPrefix(name, "sqlite_") else { return }
            out.append(Object(type: type, name: name, sql: sql, virtual: virtual, normalized: normalize(tokenizeSQL(sql))))
        }
        for table in schema.tables where table.kind == .ordinary || table.kind == .virtual {
            add("table", table.name, table.sql, virtual: table.kind == .virtual)
        }
        for index in schema.indexes { add("index", index.name, index.sql) }
        for view in schema.views { add("view", view.name, view.sql) }
        for trigger in schema.triggers { add("trigger", trigger.name, trigger.sql) }
        return out
    }

    /// One error finding of the `schema` check per object that differs:
    /// missing from the database, not in the reference, of another type, or
    /// defined otherwise. Objects in name order (bytes, names folded).
    func differences(from schema: Schema) -> [Finding] {
        let shadow = Set(schema.tables.filter { $0.kind == .shadow }.map { sqlNameKey($0.name) })
        var mine: [[UInt8]: Object] = [:], reference: [[UInt8]: Object] = [:]
        for object in Self.databaseObjects(schema) { mine[sqlNameKey(object.name)] = object }
        for object in objects where !shadow.contains(sqlNameKey(object.name)) { reference[sqlNameKey(object.name)] = object }
        let names = Set(mine.keys).union(reference.keys).sorted { $0.lexicographicallyPrecedes($1) }
        var findings: [Finding] = []
        var scratch: Connection?
        for name in names {
            let expected = reference[name]
            let actual = mine[name]
            switch (expected, actual) {
            case let (expected?, nil):
                findings.append(Finding(.error, .schema, object: expected.name,
                                        "\(expected.type) \(expected.name) is in the reference schema but not in the database",
                                        identity: ["missing", expected.type, Self.digest(expected.normalized)]))
            case let (nil, actual?):
                findings.append(Finding(.error, .schema, object: actual.name,
                                        "\(actual.type) \(actual.name) is in the database but not in the reference schema",
                                        identity: ["unexpected", actual.type, Self.digest(actual.normalized)]))
            case let (expected?, actual?):
                if expected.type != actual.type || expected.virtual != actual.virtual {
                    let kind = { (o: Object) in o.virtual ? "virtual table" : o.type }
                    findings.append(Finding(.error, .schema, object: actual.name,
                                            "\(actual.name) is a \(kind(actual)) in the database, a \(kind(expected)) in the reference schema",
                                            identity: ["type", kind(actual), kind(expected)]))
                } else if expected.normalized != actual.normalized {
                    var details: [String] = []
                    if actual.type == "table" && !actual.virtual, let table = schema.table(named: actual.name),
                       let theirs = Self.referenceTable(expected, scratch: &scratch) {
                        details = Self.tableDifferences(table, theirs)
                    }
                    if details.isEmpty { details = [Self.firstDifference(actual.normalized, expected.normalized)] }
                    findings.append(Finding(.error, .schema, object: actual.name,
                                            "\(actual.type) \(actual.name) differs from the reference schema: " + details.joined(separator: "; "),
                                            identity: ["changed", actual.type, Self.digest(actual.normalized), Self.digest(expected.normalized)]))
                }
            case (nil, nil):
                break
            }
        }
        try? scratch?.close()
        return findings
    }

    /// Where two normalized statements part: a few tokens before, then each side's.
    static func firstDifference(_ mine: [String], _ theirs: [String]) -> String {
        var i = 0
        while i < mine.count && i < theirs.count && mine[i] == theirs[i] { i += 1 }
        let from = max(0, i - 3)
        func window(_ tokens: [String]) -> String {
            let end = min(tokens.count, i + 6)
            let text = from < end ? render(tokens[from..<end]) : ""
            return (from > 0 ? "… " : "") + (text.isEmpty ? "(end)" : text) + (end < tokens.count ? " …" : "")
        }
        return "here `\(window(mine))`, in the reference `\(window(theirs))`"
    }

    /// The reference's table as SQLite reads it: its CREATE TABLE run alone
    /// in a private in-memory database (no file is opened, ATTACH is off),
    /// or nil when it is not a plain CREATE TABLE (...) or SQLite refuses it.
    static func referenceTable(_ object: Object, scratch: inout Connection?) -> Table? {
        let tokens = tokenizeSQL(object.sql)
        guard !object.virtual, tokens.count > 4, !tokens.contains(where: { $0.isPunctuation(";") }),
              let open = tokens.firstIndex(where: { $0.isPunctuation("(") }),
              !tokens[..<open].contains(where: { $0.isKeyword("AS") }) else { return nil }
        if scratch == nil {
            scratch = try? Connection(inMemory: Connection.defaultBusyTimeout)
            if let scratch { sqlite3_limit(scratch.rawHandle, SQLITE_LIMIT_ATTACHED, 0) }
        }
        guard let connection = scratch else { return nil }
        guard (try? connection.execute("SAVEPOINT reference")) != nil else { return nil }
        defer { try? connection.execute("ROLLBACK TO reference; RELEASE reference") }
        guard (try? connection.execute(object.sql)) != nil else { return nil }
        let schemaName = tokens[..<open].contains { $0.isKeyword("TEMP") || $0.isKeyword("TEMPORARY") } ? "temp" : "main"
        return (try? connection.readSchema(schemaName))?.table(named: object.name)
    }

    /// What differs between two tables' columns and table options, in words.
    static func tableDifferences(_ mine: Table, _ theirs: Table) -> [String] {
        var out: [String] = []
        func describe(_ c: Column) -> String {
            var parts = [c.name]
            if !c.declaredType.isEmpty { parts.append(c.declaredType) }
            if c.notNull { parts.append("NOT NULL") }
            if let d = c.defaultSQL { parts.append("DEFAULT \(d)") }
            return parts.joined(separator: " ")
        }
        func same(_ a: String?, _ b: String?) -> Bool {
            switch (a, b) {
            case (nil, nil): true
            case let (a?, b?): normalize(tokenizeSQL(a)) == normalize(tokenizeSQL(b))
            default: false
            }
        }
        for column in mine.columns where !theirs.columns.contains(where: { sameSQLName($0.name, column.name) }) {
            out.append("column \(describe(column)) is not in the reference")
        }
        for column in theirs.columns where !mine.columns.contains(where: { sameSQLName($0.name, column.name) }) {
            out.append("column \(describe(column)) of the reference is missing")
        }
        for column in mine.columns {
            guard let other = theirs.columns.first(where: { sameSQLName($0.name, column.name) }) else { continue }
            var what: [String] = []
            if !same(column.declaredType, other.declaredType) {
                what.append("type \(column.declaredType.isEmpty ? "(none)" : column.declaredType) here, \(other.declaredType.isEmpty ? "(none)" : other.declaredType) in the reference")
            }
            if column.notNull != other.notNull { what.append(column.notNull ? "NOT NULL here only" : "NOT NULL in the reference only") }
            if !same(column.defaultSQL, other.defaultSQL) {
                what.append("DEFAULT \(column.defaultSQL ?? "(none)") here, \(other.defaultSQL ?? "(none)") in the reference")
            }
            if column.primaryKeyPosition != other.primaryKeyPosition { what.append("primary key part \(column.primaryKeyPosition) here, \(other.primaryKeyPosition) in the reference") }
            if !sameSQLName(column.collation, other.collation) { what.append("COLLATE \(column.collation) here, \(other.collation) in the reference") }
            if column.hidden != other.hidden { what.append("generated or hidden differently") }
            if !what.isEmpty { out.append("column \(column.name): " + what.joined(separator: ", ")) }
        }
        let common = mine.columns.map { sqlNameKey($0.name) }.filter { n in theirs.columns.contains { sqlNameKey($0.name) == n } }
        let theirOrder = theirs.columns.map { sqlNameKey($0.name) }.filter { common.contains($0) }
        if out.isEmpty && common != theirOrder { out.append("the columns are in another order") }
        if mine.withoutRowid != theirs.withoutRowid { out.append(mine.withoutRowid ? "WITHOUT ROWID here only" : "WITHOUT ROWID in the reference only") }
        if mine.strict != theirs.strict { out.append(mine.strict ? "STRICT here only" : "STRICT in the reference only") }
        if mine.autoincrement != theirs.autoincrement { out.append(mine.autoincrement ? "AUTOINCREMENT here only" : "AUTOINCREMENT in the reference only") }
        func keys(_ t: Table) -> [String] {
            t.foreignKeys.map { key in
                String(decoding: sqlNameKey(key.columns.joined(separator: ",") + "→" + key.parentTable + "("
                    + key.parentColumns.map { $0 ?? "" }.joined(separator: ",") + ") " + key.onUpdate + " " + key.onDelete), as: UTF8.self)
            }.sorted()
        }
        if keys(mine) != keys(theirs) { out.append("the foreign keys differ") }
        return out
    }
}
