// A CREATE TABLE statement taken apart into column definitions (name, type,
// one segment per column constraint), table constraints and table options, so
// that `transform` can change one piece and write the statement back with
// every other piece exactly as the user wrote it.
// Grammar: https://www.sqlite.org/lang_createtable.html

/// A column constraint, or a table constraint, as written.
struct ConstraintSegment {
    enum Kind: Equatable {
        case primaryKey, notNull, null, unique, check, defaultValue, collate, references, generated
        case foreignKey
    }
    var kind: Kind
    /// The text as written, including a leading `CONSTRAINT name`.
    var text: String
    /// Its tokens (of `text`'s source), for finding the names it mentions.
    var tokens: [SQLToken]
    /// For PRIMARY KEY, UNIQUE and FOREIGN KEY table constraints: their columns.
    var columns: [String] = []
}

struct ColumnDefinition {
    var name: String
    var type: String
    var constraints: [ConstraintSegment]
    /// The definition as written; nil once something in it changed.
    var original: String?

    var sql: String {
        if let original { return original }
        var out = quoteIdentifier(name)
        if !type.isEmpty { out += " " + type }
        for constraint in constraints { out += " " + constraint.text }
        return out
    }

    mutating func remove(_ kind: ConstraintSegment.Kind) -> Bool {
        let before = constraints.count
        constraints.removeAll { $0.kind == kind }
        if constraints.count != before { original = nil }
        return constraints.count != before
    }

    mutating func append(_ kind: ConstraintSegment.Kind, _ text: String) {
        constraints.append(ConstraintSegment(kind: kind, text: text, tokens: tokenizeSQL(text)))
        original = nil
    }
}

/// The parts of a CREATE TABLE statement.
struct TableDefinition {
    var columns: [ColumnDefinition]
    var constraints: [ConstraintSegment]
    /// Upper-cased table options: "WITHOUT ROWID", "STRICT".
    var options: [String]

    enum ParseError: Error, CustomStringConvertible {
        case unsupported(String)
        var description: String {
            switch self { case .unsupported(let why): return why }
        }
    }

    /// Words that end a column's type and start a column constraint.
    static let constraintStarts: Set<String> = ["CONSTRAINT", "PRIMARY", "NOT", "NULL", "UNIQUE", "CHECK", "DEFAULT",
                                                "COLLATE", "REFERENCES", "GENERATED", "AS"]

    init(parsing sql: String) throws {
        let tokens = tokenizeSQL(sql)
        guard let open = tokens.firstIndex(where: { $0.isPunctuation("(") }),
              tokens.prefix(open).contains(where: { $0.isKeyword("TABLE") }) else {
            throw ParseError.unsupported("not a CREATE TABLE statement with a column list")
        }
        if tokens.prefix(open).contains(where: { $0.isKeyword("VIRTUAL") }) {
            throw ParseError.unsupported("a virtual table cannot be transformed")
        }
        guard let close = closingParenthesis(tokens, from: open) else {
            throw ParseError.unsupported("unbalanced parentheses in CREATE TABLE")
        }
        // Table options: words after the column list, separated by commas.
        var options: [String] = []
        var words: [String] = []
        for token in tokens[(close + 1)...] {
            if token.isPunctuation(",") || token.isPunctuation(";") {
                if !words.isEmpty { options.append(words.joined(separator: " ")) }
                words = []
            } else if let keyword = token.keyword {
                words.append(keyword)
            } else {
                throw ParseError.unsupported("unexpected text after the column list: \(token.text)")
            }
        }
        if !words.isEmpty { options.append(words.joined(separator: " ")) }
        self.options = options

        // Split the column list at top-level commas.
        var parts: [(Int, Int)] = []
        var depth = 0
        var start = open + 1
        for i in (open + 1)..<close {
            if tokens[i].isPunctuation("(") { depth += 1 }
            if tokens[i].isPunctuation(")") { depth -= 1 }
            if depth == 0 && tokens[i].isPunctuation(",") {
                parts.append((start, i - 1)); start = i + 1
            }
        }
        parts.append((start, close - 1))

        columns = []
        constraints = []
        for (first, last) in parts where first <= last {
            var head = first
            if tokens[head].isKeyword("CONSTRAINT") { head += 2 }
            let kind: ConstraintSegment.Kind?
            switch head <= last ? tokens[head].keyword : nil {
            case "PRIMARY": kind = .primaryKey
            case "UNIQUE": kind = .unique
            case "CHECK": kind = .check
            case "FOREIGN": kind = .foreignKey
            default: kind = nil
            }
            if let kind {
                var segment = ConstraintSegment(kind: kind, text: sqlText(sql, tokens, first, last),
                                                tokens: Array(tokens[first...last]))
                if kind != .check, let paren = tokens[head...last].firstIndex(where: { $0.isPunctuation("(") }),
                   let end = closingParenthesis(tokens, from: paren) {
                    segment.columns = Self.columnNames(tokens, paren + 1, end - 1)
                }
                constraints.append(segment)
            } else {
                columns.append(try Self.column(sql, tokens, first, last))
            }
        }
        guard !columns.isEmpty else { throw ParseError.unsupported("no columns found in CREATE TABLE") }
    }

    /// The first name of each comma-separated item between `first` and `last`.
    static func columnNames(_ tokens: [SQLToken], _ first: Int, _ last: Int) -> [String] {
        var names: [String] = []
        var expectName = true
        var depth = 0
        for i in stride(from: first, through: last, by: 1) {
            let token = tokens[i]
            if token.isPunctuation("(") { depth += 1 }
            if token.isPunctuation(")") { depth -= 1 }
            if depth == 0 && token.isPunctuation(",") { expectName = true; continue }
            if expectName, let name = token.identifierValue { names.append(name) }
            expectName = false
        }
        return names
    }

    static func column(_ sql: String, _ tokens: [SQLToken], _ first: Int, _ last: Int) throws -> ColumnDefinition {
        guard let name = tokens[first].identifierValue else {
            throw ParseError.unsupported("cannot read the column definition: \(sqlText(sql, tokens, first, last))")
        }
        // The type: every token up to the first constraint word outside parentheses.
        var i = first + 1
        var depth = 0
        while i <= last {
            if tokens[i].isPunctuation("(") { depth += 1 }
            if tokens[i].isPunctuation(")") { depth -= 1 }
            if depth == 0, let keyword = tokens[i].keyword, constraintStarts.contains(keyword) { break }
            i += 1
        }
        let type = sqlText(sql, tokens, first + 1, i - 1)

        // Constraints: a segment starts at a constraint word, with the
        // exceptions the grammar needs (NOT DEFERRABLE, SET NULL and SET DEFAULT
        // inside REFERENCES, AS after GENERATED ALWAYS, NULL after NOT, the
        // value after DEFAULT and the name after COLLATE or CONSTRAINT).
        var segments: [ConstraintSegment] = []
        var segmentStart: Int? = nil
        var segmentKind: ConstraintSegment.Kind? = nil
        func finish(_ end: Int) {
            if let start = segmentStart, let kind = segmentKind {
                segments.append(ConstraintSegment(kind: kind, text: sqlText(sql, tokens, start, end),
                                                  tokens: Array(tokens[start...end])))
            }
            segmentStart = nil; segmentKind = nil
        }
        var pendingName = false
        while i <= last {
            let token = tokens[i]
            if token.isPunctuation("(") {
                i = (closingParenthesis(tokens, from: i) ?? last) + 1
                continue
            }
            let keyword = token.keyword
            let previous = i > first ? tokens[i - 1].keyword : nil
            let next = i < last ? tokens[i + 1].keyword : nil
            var starts = keyword.map { constraintStarts.contains($0) } ?? false
            if segmentKind == .references && (keyword == "NOT" && next == "DEFERRABLE"
                                                || (keyword == "NULL" || keyword == "DEFAULT") && previous == "SET") {
                starts = false
            }
            if segmentKind == .generated && keyword == "AS" { starts = false }
            if segmentKind == .notNull && keyword == "NULL" && previous == "NOT" { starts = false }
            if starts {
                if pendingName {
                    pendingName = false
                } else {
                    finish(i - 1)
                    segmentStart = i
                }
                switch keyword {
                case "CONSTRAINT":
                    pendingName = true
                    segmentKind = .check   // provisional: the next word decides
                    i += 2
                    continue
                case "PRIMARY": segmentKind = .primaryKey
                case "NOT": segmentKind = .notNull
                case "NULL": segmentKind = .null
                case "UNIQUE": segmentKind = .unique
                case "CHECK": segmentKind = .check
                case "REFERENCES": segmentKind = .references
                case "GENERATED", "AS": segmentKind = .generated
                case "COLLATE":
                    segmentKind = .collate
                    i += 2
                    continue
                case "DEFAULT":
                    segmentKind = .defaultValue
                    var j = i + 1
                    if j <= last, tokens[j].isPunctuation("+") || tokens[j].isPunctuation("-") { j += 1 }
                    if j <= last, tokens[j].isPunctuation("(") { j = closingParenthesis(tokens, from: j) ?? last }
                    i = j + 1
                    continue
                default: break
                }
            } else if segmentStart == nil {
                throw ParseError.unsupported("cannot read the constraints of column \(name): \(sqlText(sql, tokens, i, last))")
            }
            i += 1
        }
        finish(last)
        return ColumnDefinition(name: name, type: type, constraints: segments, original: sqlText(sql, tokens, first, last))
    }

    /// The statement for a table named `name`.
    func createStatement(name: String) -> String {
        var lines = columns.map { "  " + $0.sql }
        lines += constraints.map { "  " + $0.text }
        var sql = "CREATE TABLE \(quoteIdentifier(name)) (\n" + lines.joined(separator: ",\n") + "\n)"
        if !options.isEmpty { sql += " " + options.joined(separator: ", ") }
        return sql
    }

    func columnIndex(_ name: String) -> Int? { columns.firstIndex { sameSQLName($0.name, name) } }

    var hasPrimaryKey: Bool {
        constraints.contains { $0.kind == .primaryKey } || columns.contains { $0.constraints.contains { $0.kind == .primaryKey } }
    }
}
