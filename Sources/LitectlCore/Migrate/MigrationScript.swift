// Runs one migration file statement by statement inside the transaction the
// runner opened, so that a failure names the statement (its number and line)
// and a statement that would end that transaction (BEGIN, COMMIT, END,
// ROLLBACK) is refused before it runs: a file's changes and its user_version
// must commit together or not at all.
import CSQLite

/// A statement of a migration file failed; the runner rolls the file back.
public struct MigrationError: Error, CustomStringConvertible, Sendable {
    /// The database the migration ran on.
    public var path: String
    /// The migration file.
    public var file: String
    /// 1-based number of the statement in the file, and the line it starts on;
    /// nil when the failure is not one statement's (a check after the file).
    public var statement: Int?
    public var line: Int?
    public var message: String
    /// The statement's text, on one line and shortened.
    public var sql: String?
    /// Where that leaves the database ("the database stays at version 2").
    public var consequence: String? = nil

    public var description: String {
        var text = "\(path): \(file)"
        if let statement, let line { text += ", statement \(statement) (line \(line))" }
        text += ": \(message)"
        if let sql { text += " (in SQL: \(sql))" }
        if let consequence { text += "; \(consequence)" }
        return text
    }
}

enum MigrationScript {
    /// Runs every statement of `file` on `connection`, which must be inside
    /// a transaction. Statements are prepared one at a time, so a statement
    /// may use a table an earlier one created.
    static func run(_ file: MigrationScriptFile, on connection: Connection) throws {
        try forEachStatement(file, on: connection) { statement, _, _, fail in
            do {
                while try statement.step() {}
            } catch let error as DatabaseError {
                throw fail(error.message)
            }
        }
    }

    /// Prepares each statement of `file` in turn and hands it to `body` with
    /// its number, line and a maker of its `MigrationError`; `body` runs it
    /// (`migrate lint` looks at the schema between statements). A statement
    /// that would end the transaction is refused before `body` sees it, and
    /// one that ended it some other way after.
    static func forEachStatement(_ file: MigrationScriptFile, on connection: Connection,
                                 _ body: (Statement, _ number: Int, _ line: Int, _ fail: (String) -> MigrationError) throws -> Void) throws {
        let text = Array(file.sql.utf8)
        var statementNumber = 0
        try (text + [0]).withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var offset = 0
            while offset < text.count {
                try Interruption.check()  // a signal stops the file between statements too
                var handle: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let rc = sqlite3_prepare_v2(connection.rawHandle, base + offset, Int32(text.count - offset + 1), &handle, &tail)
                let end = tail.map { $0 - base } ?? text.count
                let start = offset + leadingTrivia(text, from: offset, to: end > offset ? end : text.count)
                func fail(_ message: String, number: Int) -> MigrationError {
                    // A statement that does not prepare has no known end: show what follows.
                    MigrationError(path: connection.path, file: file.name, statement: number, line: lineNumber(text, start),
                                   message: message, sql: shortened(text, start, end > start ? end : text.count))
                }
                guard rc == SQLITE_OK else {
                    let message = String(cString: sqlite3_errmsg(connection.rawHandle))
                    throw fail(message, number: statementNumber + 1)
                }
                guard let handle else { break }   // only whitespace and comments were left
                statementNumber += 1
                let statement = Statement(handle: handle, connection: connection)
                if let word = transactionControl(statement) {
                    throw fail("\(word) is not allowed: litectl runs each migration file in its own transaction, "
                               + "with the new user_version", number: statementNumber)
                }
                let number = statementNumber
                try body(statement, number, lineNumber(text, start)) { fail($0, number: number) }
                // A statement that ended the transaction some other way
                // (an ON CONFLICT ROLLBACK that fired) leaves autocommit on.
                if sqlite3_get_autocommit(connection.rawHandle) != 0 {
                    throw fail("the statement ended the migration's transaction", number: statementNumber)
                }
                guard end > offset else { break }
                offset = end
            }
        }
    }

    /// "BEGIN", "COMMIT", "END" or "ROLLBACK" when `statement` would start or
    /// end a transaction; nil otherwise (ROLLBACK TO and RELEASE of a
    /// savepoint stay inside the transaction and are allowed). SQLite calls
    /// transaction control statements read-only, which rules out the rest cheaply.
    static func transactionControl(_ statement: Statement) -> String? {
        guard statement.isReadOnly else { return nil }
        let tokens = tokenizeSQL(statement.sql)
        guard let first = tokens.first?.keyword else { return nil }
        switch first {
        case "BEGIN", "COMMIT", "END":
            return first
        case "ROLLBACK":
            // ROLLBACK [TRANSACTION] TO [SAVEPOINT] name
            let rest = tokens.dropFirst().drop { $0.isKeyword("TRANSACTION") }
            return rest.first?.isKeyword("TO") == true ? nil : first
        default:
            return nil
        }
    }

    /// Bytes of whitespace and comments at `from`.
    static func leadingTrivia(_ text: [UInt8], from: Int, to end: Int) -> Int {
        let segment = String(decoding: text[from..<end], as: UTF8.self)
        return tokenizeSQL(segment).first?.start ?? 0
    }

    static func lineNumber(_ text: [UInt8], _ offset: Int) -> Int {
        1 + text[0..<min(offset, text.count)].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }

    /// The statement on one line, at most 120 characters.
    static func shortened(_ text: [UInt8], _ start: Int, _ end: Int) -> String {
        let segment = String(decoding: text[min(start, end)..<end], as: UTF8.self)
        let words = segment.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }).joined(separator: " ")
        return words.count > 120 ? words.prefix(119) + "…" : words
    }
}
