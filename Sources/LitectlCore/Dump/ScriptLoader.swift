// Runs a SQL script (a `litectl dump`, a sqlite3 .dump, any SQL) into a load
// session, statement by statement as the sqlite3 shell reads it: a line that
// ends a complete statement (sqlite3_complete) runs it, so memory stays at one
// statement. The script's own transaction control gives way to the session's
// one transaction; see `ScriptLoader.run`.
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum ScriptLoader {
    /// Runs the script at `path` ("-": standard input) in `session`.
    ///
    /// - BEGIN, COMMIT and END are skipped (the session's transaction holds
    ///   everything); a plain ROLLBACK fails the load (a dump that stopped ends
    ///   with one); ROLLBACK TO and savepoints run as written.
    /// - `PRAGMA foreign_keys` is skipped (loads run with enforcement off);
    ///   `PRAGMA journal_mode=` runs after the commit; `PRAGMA page_size=`,
    ///   `auto_vacuum=` and `encoding=` before the transaction when the target is empty.
    /// - A write to a virtual table's shadow table (a dump refills an FTS
    ///   index that way) runs with defensive mode off for that statement only;
    ///   everything else runs with it on (no writable_schema, no sqlite_dbpage).
    /// - With `deferTriggers`, CREATE TRIGGER waits until the session finishes.
    /// - ATTACH and DETACH are refused (LoadSession denies them): a script
    ///   changes its target and no other file.
    /// - sqlite3 shell commands: `.bail` is skipped (a load always stops at the
    ///   first error); any other is an error (a load runs SQL only).
    static func run(path: String, session: LoadSession, deferTriggers: Bool = false) throws {
        let input = try InputLines(path: path)
        var pending: [UInt8] = []
        var firstLine = 0
        while let line = try input.next() {
            if isBlank(pending) {
                pending.removeAll(keepingCapacity: true)
                let first = line.first { $0 != 0x20 && $0 != 0x09 }
                if line.first == UInt8(ascii: ".") {
                    let command = String(decoding: line, as: UTF8.self).trimmingWhitespace()
                    if command.hasPrefix(".bail") { continue }
                    throw LoadError(source: input.name, line: input.lineNumber,
                                    message: "\(command) is a sqlite3 shell command; load runs SQL only")
                }
                if line.first == UInt8(ascii: "#") || first == nil || first == 0x0A || first == 0x0D { continue }
                firstLine = input.lineNumber
            }
            // Through the bytes: a dump's lines run to megabytes (a large value's pieces).
            let ends = line.withUnsafeBufferPointer { bytes in
                pending.append(contentsOf: bytes)
                return bytes.count > 0 && memchr(bytes.baseAddress!, Int32(UInt8(ascii: ";")), bytes.count) != nil
            }
            guard ends else { continue }
            pending.append(0)
            let complete = pending.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { sqlite3_complete($0.baseAddress!) != 0 }
            }
            if complete {
                try execute(&pending, firstLine: firstLine, source: input.name, session: session, deferTriggers: deferTriggers)
                pending.removeAll(keepingCapacity: true)
            } else {
                pending.removeLast()
            }
        }
        if !isBlank(pending) {
            // Comments only, or SQL that never ends: preparing it tells them apart.
            pending.append(0)
            try execute(&pending, firstLine: firstLine, source: input.name, session: session, deferTriggers: deferTriggers)
        }
    }

    static func isBlank(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
    }

    /// Prepares and runs every statement in `text`: complete statements, then
    /// the NUL that ends them (the only one: a NUL inside would end the SQL early).
    static func execute(_ text: inout [UInt8], firstLine: Int, source: String, session: LoadSession, deferTriggers: Bool) throws {
        let db = session.connection.rawHandle
        try text.withUnsafeBufferPointer { buffer in
            if memchr(buffer.baseAddress!, 0, buffer.count - 1) != nil {
                throw LoadError(source: source, line: firstLine, message: "a NUL byte in the SQL text (write it as CAST(x'..' AS TEXT))")
            }
            try buffer.withMemoryRebound(to: CChar.self) { chars in
                let base = chars.baseAddress!
                var cursor = base
                /// The line a statement starts on (counted only when a message or a held-back trigger needs it).
                func line(at start: UnsafePointer<CChar>) -> Int {
                    var count = firstLine, p = base
                    while p < start { if p.pointee == 0x0A { count += 1 }; p += 1 }
                    return count + leadingNewlines(start)
                }
                while cursor.pointee != 0 {
                    var statement: OpaquePointer?
                    var tail: UnsafePointer<CChar>?
                    var rc = sqlite3_prepare_v2(db, cursor, -1, &statement, &tail)
                    var message = rc == SQLITE_OK ? "" : String(cString: sqlite3_errmsg(db))
                    var relaxed = false
                    if rc != SQLITE_OK, let table = readOnlyTable(message), isShadowTable(table, session.connection) {
                        setDefensive(db, false)
                        relaxed = true
                        rc = sqlite3_prepare_v2(db, cursor, -1, &statement, &tail)
                        if rc != SQLITE_OK { message = String(cString: sqlite3_errmsg(db)) }
                    }
                    defer {
                        sqlite3_finalize(statement)
                        if relaxed { setDefensive(db, true) }
                    }
                    guard rc == SQLITE_OK else {
                        if message == "incomplete input" { message = "incomplete SQL at the end of the script" }
                        if rc == SQLITE_AUTH {
                            message = "ATTACH and DETACH are not allowed: a load writes into its target database only (\(message))"
                        }
                        if let table = readOnlyTable(message), ["sqlite_master", "sqlite_schema"].contains(table.lowercased()) {
                            message += " (a sqlite3 .dump of virtual tables writes sqlite_schema with PRAGMA writable_schema, which load never allows: load that script with the sqlite3 shell, or make the dump with litectl dump)"
                        }
                        throw LoadError(source: source, line: line(at: cursor), message: message)
                    }
                    guard let next = tail, next > cursor else { break }
                    let start = cursor
                    cursor = next
                    guard let statement else { continue }  // only comments or spaces
                    try run(statement, line: { line(at: start) }, source: source, session: session, deferTriggers: deferTriggers)
                }
            }
        }
    }

    /// Newlines before the first character that is neither a space nor in a comment.
    private static func leadingNewlines(_ p: UnsafePointer<CChar>) -> Int {
        var count = 0, q = p
        while q.pointee != 0 {
            switch UInt8(bitPattern: q.pointee) {
            case 0x0A:
                count += 1
                q += 1
            case 0x20, 0x09, 0x0D, 0x0C:
                q += 1
            case UInt8(ascii: "-") where q[1] == 0x2D:
                while q.pointee != 0 && q.pointee != 0x0A { q += 1 }
            case UInt8(ascii: "/") where q[1] == 0x2A:
                q += 2
                while q.pointee != 0 && !(q.pointee == 0x2A && q[1] == 0x2F) {
                    if q.pointee == 0x0A { count += 1 }
                    q += 1
                }
                if q.pointee != 0 { q += 2 }
            default:
                return count
            }
        }
        return count
    }

    /// Runs one prepared statement according to what it is.
    private static func run(_ statement: OpaquePointer, line: () -> Int, source: String,
                            session: LoadSession, deferTriggers: Bool) throws {
        // Most statements of a dump are INSERTs: only those that start like
        // BEGIN, COMMIT, CREATE, END, PRAGMA or ROLLBACK need a closer look.
        guard SQLKeywords.mayNeedCare(sqlite3_sql(statement)) else {
            try session.begin()
            return try step(statement, line: line, source: source, session: session)
        }
        let words = SQLKeywords.leading(sqlite3_sql(statement), count: 5)
        var sql: String { String(cString: sqlite3_sql(statement)) }
        func fail(_ message: String) -> LoadError { LoadError(source: source, line: line(), message: message) }
        switch words.first {
        case "BEGIN":
            if session.inTransaction { return }
            try session.begin()
            return
        case "COMMIT", "END":
            return
        case "ROLLBACK":
            if words.dropFirst().contains("TO") { break }
            throw fail("the script rolls back (a dump that stopped ends so)")
        case "PRAGMA":
            let pragma = SQLKeywords.pragma(words)
            switch pragma.name {
            case "FOREIGN_KEYS":
                return
            case "JOURNAL_MODE" where pragma.assigns:
                session.journalModeStatements.append(sql)
                return
            case "PAGE_SIZE", "AUTO_VACUUM", "ENCODING":
                // Settings of a new file: they take effect before its first write only.
                if pragma.assigns && !session.inTransaction && session.startedEmpty {
                    try step(statement, line: line, source: source, session: session)
                    return
                }
            default:
                break
            }
        case "CREATE" where deferTriggers && (words.dropFirst().prefix(2).contains("TRIGGER")):
            session.deferredTriggers.append((sql, source, line()))
            return
        default:
            break
        }
        try session.begin()
        try step(statement, line: line, source: source, session: session)
    }

    private static func step(_ statement: OpaquePointer, line: () -> Int, source: String, session: LoadSession) throws {
        try Interruption.check()  // a signal stops the load between statements too
        session.statements += 1
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_ROW { continue }
            if rc == SQLITE_DONE {
                if isPieceStatement(statement) {
                    // A dump's pieces of a large value (ValuePieces): neither a
                    // statement nor rows of the database, as a summary counts them.
                    session.statements -= 1
                    session.uncountedChanges += sqlite3_changes64(session.connection.rawHandle)
                }
                return
            }
            throw LoadError(source: source, line: line(), message: String(cString: sqlite3_errmsg(session.connection.rawHandle)))
        }
    }

    /// True for the statements a dump writes a large value's pieces with
    /// (`INSERT INTO temp.litectl_dump_piece...`, `DELETE FROM ...`; the
    /// table may have a suffix).
    private static func isPieceStatement(_ statement: OpaquePointer) -> Bool {
        guard let sql = sqlite3_sql(statement) else { return false }
        return pieceStatementStarts.contains { strncmp(sql, $0, $0.utf8.count) == 0 }
    }

    private static let pieceStatementStarts = ["INSERT INTO temp.\(ValuePieces.stem)", "DELETE FROM temp.\(ValuePieces.stem)"]

    /// The table named by SQLite's "table X may not be modified" (defensive
    /// mode refusing a write to a shadow table), if that is the error.
    private static func readOnlyTable(_ message: String) -> String? {
        guard message.hasPrefix("table "), message.hasSuffix(" may not be modified") else { return nil }
        return String(message.dropFirst(6).dropLast(20))
    }

    private static func isShadowTable(_ name: String, _ connection: Connection) -> Bool {
        let type = try? connection.scalar("SELECT type FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [.text(name)])
        return type == .text("shadow")
    }

    private static func setDefensive(_ db: OpaquePointer, _ on: Bool) {
        var ignored: Int32 = 0
        _ = litectl_db_config_bool(db, SQLITE_DBCONFIG_DEFENSIVE, on ? 1 : 0, &ignored)
    }
}

/// The first words of a statement, enough to tell what it does.
enum SQLKeywords {
    /// Up to `count` tokens after any leading comments: words and quoted
    /// names in upper case (ASCII only), single punctuation characters as they are.
    static func leading(_ sql: String, count: Int) -> [String] {
        sql.withCString { leading($0, count: count) }
    }

    /// The same, reading NUL-terminated SQL only as far as the words go.
    static func leading(_ text: UnsafePointer<CChar>?, count: Int) -> [String] {
        guard let text else { return [] }
        let bytes = UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self)
        var tokens: [String] = []
        var i = 0
        while bytes[i] != 0 && tokens.count < count {
            let b = bytes[i]
            if b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D || b == 0x0C { i += 1; continue }
            if b == UInt8(ascii: "-"), bytes[i + 1] == UInt8(ascii: "-") {
                while bytes[i] != 0 && bytes[i] != 0x0A { i += 1 }
                continue
            }
            if b == UInt8(ascii: "/"), bytes[i + 1] == UInt8(ascii: "*") {
                i += 2
                while bytes[i] != 0 && !(bytes[i] == UInt8(ascii: "*") && bytes[i + 1] == UInt8(ascii: "/")) { i += 1 }
                if bytes[i] != 0 { i += 2 }
                continue
            }
            if isWordByte(b) {
                var word: [UInt8] = []
                while bytes[i] != 0 && isWordByte(bytes[i]) { word.append(asciiUpper(bytes[i])); i += 1 }
                tokens.append(String(decoding: word, as: UTF8.self))
                continue
            }
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "'") || b == UInt8(ascii: "`") || b == UInt8(ascii: "[") {
                let close = b == UInt8(ascii: "[") ? UInt8(ascii: "]") : b
                var word: [UInt8] = []
                i += 1
                while bytes[i] != 0 {
                    if bytes[i] == close {
                        if close != UInt8(ascii: "]"), bytes[i + 1] == close { word.append(close); i += 2; continue }
                        break
                    }
                    word.append(asciiUpper(bytes[i]))
                    i += 1
                }
                tokens.append(String(decoding: word, as: UTF8.self))
                if bytes[i] != 0 { i += 1 }
                continue
            }
            tokens.append(String(UnicodeScalar(b)))
            i += 1
        }
        return tokens
    }

    /// False when the statement's first character (past spaces and comments)
    /// cannot begin BEGIN, COMMIT, CREATE, END, PRAGMA or ROLLBACK.
    static func mayNeedCare(_ text: UnsafePointer<CChar>?) -> Bool {
        guard let text else { return false }
        let bytes = UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self)
        var i = 0
        while true {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D, 0x0C:
                i += 1
            case UInt8(ascii: "-") where bytes[i + 1] == UInt8(ascii: "-"), UInt8(ascii: "/") where bytes[i + 1] == UInt8(ascii: "*"):
                return true
            default:
                switch asciiUpper(bytes[i]) {
                case UInt8(ascii: "B"), UInt8(ascii: "C"), UInt8(ascii: "E"), UInt8(ascii: "P"), UInt8(ascii: "R"): return true
                default: return false
                }
            }
        }
    }

    /// A PRAGMA's name (without its schema) and whether it sets a value.
    static func pragma(_ words: [String]) -> (name: String, assigns: Bool) {
        guard words.count >= 2 else { return ("", false) }
        var rest = Array(words.dropFirst())
        if rest.count >= 3 && rest[1] == "." { rest = Array(rest.dropFirst(2)) }
        return (rest[0], rest.count > 1 && (rest[1] == "=" || rest[1] == "("))
    }

    private static func isWordByte(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "_") || b == UInt8(ascii: "$") || b >= 0x80
    }

    private static func asciiUpper(_ b: UInt8) -> UInt8 {
        b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z") ? b - 32 : b
    }
}
