// A small SQL tokenizer for the statements SQLite stores in sqlite_schema: it
// knows quoting ('..', "..", `..`, [..], x'..'), comments and parentheses, and
// keeps every token's byte range so that an edit can reuse the original text.
// See https://www.sqlite.org/lang_keywords.html and tokenize.c in SQLite.

/// One token of SQL text.
struct SQLToken {
    enum Kind: Equatable {
        /// A bare word: a keyword or an unquoted identifier.
        case word
        /// "name", `name` or [name].
        case quotedIdentifier
        /// 'text' or x'hex'.
        case string
        case number
        /// `(`, `)`, `,`, `;` or an operator character.
        case punctuation
    }

    var kind: Kind
    /// Byte offsets into the UTF-8 text.
    var start: Int
    var end: Int
    /// The token's text as written.
    var text: String

    /// The upper-cased word for a bare word, nil otherwise.
    var keyword: String? { kind == .word ? text.uppercased() : nil }

    func isKeyword(_ word: String) -> Bool { kind == .word && text.utf8.count == word.utf8.count && keyword == word }

    func isPunctuation(_ character: String) -> Bool { kind == .punctuation && text == character }

    /// The name a word, a quoted identifier or a string token stands for when
    /// SQLite takes it as an identifier (quotes removed, doubled quotes undone).
    var identifierValue: String? {
        switch kind {
        case .word: return text
        case .quotedIdentifier, .string:
            guard text.utf8.count >= 2 else { return nil }
            let bytes = Array(text.utf8)
            let open = bytes[0]
            if open == UInt8(ascii: "[") { return String(decoding: bytes[1..<(bytes.count - 1)], as: UTF8.self) }
            var out: [UInt8] = []
            var i = 1
            while i < bytes.count - 1 {
                out.append(bytes[i])
                if bytes[i] == open && i + 1 < bytes.count - 1 && bytes[i + 1] == open { i += 1 }
                i += 1
            }
            return String(decoding: out, as: UTF8.self)
        default: return nil
        }
    }
}

/// Splits `sql` into tokens, dropping whitespace and comments. An unterminated
/// quote or comment runs to the end of the text (SQLite rejects such text, so
/// it does not occur in a schema that opened).
func tokenizeSQL(_ sql: String) -> [SQLToken] {
    let bytes = Array(sql.utf8)
    var tokens: [SQLToken] = []
    var i = 0
    func isWordByte(_ b: UInt8) -> Bool {
        b >= 0x80 || b == UInt8(ascii: "_") || b == UInt8(ascii: "$")
            || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
    }
    func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    func add(_ kind: SQLToken.Kind, _ start: Int, _ end: Int) {
        tokens.append(SQLToken(kind: kind, start: start, end: end, text: String(decoding: bytes[start..<end], as: UTF8.self)))
    }
    func skipQuoted(from start: Int, close: UInt8, doubling: Bool) -> Int {
        var j = start + 1
        while j < bytes.count {
            if bytes[j] == close {
                if doubling && j + 1 < bytes.count && bytes[j + 1] == close { j += 2; continue }
                return j + 1
            }
            j += 1
        }
        return bytes.count
    }
    while i < bytes.count {
        let b = bytes[i]
        switch b {
        case 0x20, 0x09, 0x0A, 0x0D, 0x0C:
            i += 1
        case UInt8(ascii: "-") where i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "-"):
            while i < bytes.count && bytes[i] != 0x0A { i += 1 }
        case UInt8(ascii: "/") where i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "*"):
            var j = i + 2
            while j + 1 < bytes.count && !(bytes[j] == UInt8(ascii: "*") && bytes[j + 1] == UInt8(ascii: "/")) { j += 1 }
            i = min(j + 2, bytes.count)
        case UInt8(ascii: "'"):
            let end = skipQuoted(from: i, close: b, doubling: true)
            add(.string, i, end); i = end
        case UInt8(ascii: "\""), UInt8(ascii: "`"):
            let end = skipQuoted(from: i, close: b, doubling: true)
            add(.quotedIdentifier, i, end); i = end
        case UInt8(ascii: "["):
            let end = skipQuoted(from: i, close: UInt8(ascii: "]"), doubling: false)
            add(.quotedIdentifier, i, end); i = end
        // One `where` for both letters: in `case a, b where c` the clause
        // guards only `b`, which sent every word starting with "x" here.
        case _ where (b | 0x20) == UInt8(ascii: "x") && i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "'"):
            let end = skipQuoted(from: i + 1, close: UInt8(ascii: "'"), doubling: false)
            add(.string, i, end); i = end
        case _ where isDigit(b) || (b == UInt8(ascii: ".") && i + 1 < bytes.count && isDigit(bytes[i + 1])):
            var j = i + 1
            while j < bytes.count {
                let c = bytes[j]
                if isWordByte(c) || c == UInt8(ascii: ".") {
                    j += 1
                } else if (c == UInt8(ascii: "+") || c == UInt8(ascii: "-")) && (bytes[j - 1] | 0x20) == UInt8(ascii: "e")
                            && !(bytes[i] == UInt8(ascii: "0") && j > i + 1 && (bytes[i + 1] | 0x20) == UInt8(ascii: "x")) {
                    j += 1
                } else {
                    break
                }
            }
            add(.number, i, j); i = j
        case _ where isWordByte(b):
            var j = i + 1
            while j < bytes.count && isWordByte(bytes[j]) { j += 1 }
            add(.word, i, j); i = j
        default:
            add(.punctuation, i, i + 1); i += 1
        }
    }
    return tokens
}

/// The text of `sql` from the start of token `first` to the end of token `last`.
func sqlText(_ sql: String, _ tokens: [SQLToken], _ first: Int, _ last: Int) -> String {
    guard first <= last else { return "" }
    let bytes = Array(sql.utf8)
    return String(decoding: bytes[tokens[first].start..<tokens[last].end], as: UTF8.self)
}

/// The index of the `)` that closes the `(` at `open`, or nil.
func closingParenthesis(_ tokens: [SQLToken], from open: Int) -> Int? {
    var depth = 0
    var i = open
    while i < tokens.count {
        if tokens[i].isPunctuation("(") { depth += 1 }
        if tokens[i].isPunctuation(")") {
            depth -= 1
            if depth == 0 { return i }
        }
        i += 1
    }
    return nil
}

/// True when any identifier-like token (a word, a quoted name and, with
/// `includingStrings`, a string, which SQLite takes as a name where a name
/// must be) names `name`, folding ASCII letters as SQLite does. Broad on
/// purpose: it is used to refuse changes that might break a constraint, never
/// to allow one.
func tokensMention(_ tokens: ArraySlice<SQLToken>, _ name: String, includingStrings: Bool = true) -> Bool {
    tokens.contains { token in
        guard includingStrings || token.kind != .string else { return false }
        return token.identifierValue.map { sameSQLName($0, name) } ?? false
    }
}
