// Loads one CSV or JSON Lines file of rows into a table of a load session:
// every value bound (never spliced into SQL), typed as the dump wrote it
// (TypedCSV, JSONRowParser). Column names come from the CSV header or the JSON
// keys, so `rowid` (or `_rowid_`, `oid`) sets the rowid as it does in SQL.

/// The formats of a table's rows in a file.
public enum RowFileFormat: String, CaseIterable, Sendable {
    case csv
    case jsonl

    /// The format a file name's extension says (.csv, .jsonl, .ndjson).
    public static func of(path: String) -> RowFileFormat? {
        let lower = path.lowercased()
        if lower.hasSuffix(".csv") { return .csv }
        if lower.hasSuffix(".jsonl") || lower.hasSuffix(".ndjson") { return .jsonl }
        return nil
    }
}

enum RowFileLoader {
    /// Inserts every row of the file at `path` into `table`; returns the rows read.
    /// With `create`, the table is made first (`createTable`), in the same transaction.
    static func run(path: String, format: RowFileFormat, table: String, create: Bool = false,
                    session: LoadSession) throws -> Int64 {
        try session.begin()
        var textColumns = Set<[UInt8]>()
        if create { textColumns = try createTable(path: path, format: format, table: table, session: session) }
        let input = try InputLines(path: path)
        var inserter = RowInserter(table: table, session: session, source: input.name)
        var rows: Int64 = 0
        try forEachRow(input, format) { names, values, line in
            var values = values
            if !textColumns.isEmpty {
                // A number in a column made TEXT is stored as the file writes it.
                for (i, name) in names.enumerated() where textColumns.contains(Array(name.name.utf8)) {
                    values[i] = Self.asText(values[i], field: name.field)
                }
            }
            try inserter.insert(columns: names.map(\.name), values: values, line: line)
            rows += 1
        }
        return rows
    }

    /// A value's field, for a number bound to a TEXT column: the CSV field's
    /// bytes as they are, or (JSON) the decimal that reads back exactly.
    typealias Named = (name: String, field: [UInt8]?)

    static func asText(_ value: Value, field: [UInt8]?) -> Value {
        switch value {
        case .integer(let i): return .text(field ?? Array(String(i).utf8))
        case .real(let d): return .text(field ?? Array(exactRealText(d).utf8))
        default: return value
        }
    }

    /// Calls `body` with each row of `input`: its column names (with each
    /// CSV field's bytes), its values as load types them, and its line.
    static func forEachRow(_ input: InputLines, _ format: RowFileFormat,
                           _ body: ([Named], [Value], Int) throws -> Void) throws {
        switch format {
        case .csv:
            var reader = CSVRecordReader(input: input)
            guard let header = try reader.next() else { return }
            let names = header.map { String(decoding: $0.bytes, as: UTF8.self) }
            while let record = try reader.next() {
                guard record.count == names.count else {
                    throw LoadError(source: input.name, line: reader.recordLine,
                                    message: "\(record.count) fields where the header has \(names.count)")
                }
                try body(zip(names, record).map { (name: $0, field: $1.quoted ? nil : $1.bytes) },
                         record.map { TypedCSV.value($0.bytes, quoted: $0.quoted) }, reader.recordLine)
            }
        case .jsonl:
            while let line = try input.next() {
                if ScriptLoader.isBlank(Array(line)) { continue }
                let members: [(key: String, value: Value)]
                do {
                    members = try JSONRowParser.parseObject(line)
                } catch let failure as JSONRowParser.Failure {
                    throw LoadError(source: input.name, line: input.lineNumber, message: failure.message)
                }
                try body(members.map { (name: $0.key, field: [UInt8]?.none) }, members.map(\.value), input.lineNumber)
            }
        }
    }

    /// Makes `table` for the rows of the file (`load --create`), reading it
    /// once before the load: its columns are the CSV header's names or the
    /// JSON keys in the order they first appear (rowid, _rowid_ and oid left
    /// out: they set the rowid), each declared with the type its values ask
    /// for (`ColumnKinds`), as sqlite-utils infers them. Returns the columns
    /// declared TEXT that also hold numbers (bound as text when loaded).
    static func createTable(path: String, format: RowFileFormat, table: String, session: LoadSession) throws -> Set<[UInt8]> {
        // A pipe or FIFO (`<(...)`) would be empty the second time: the table
        // made, no rows loaded, and no error.
        var info = stat()
        if path == "-" || (stat(path, &info) == 0 && (info.st_mode & S_IFMT) != S_IFREG && (info.st_mode & S_IFMT) != S_IFDIR) {
            throw LoadError(source: path == "-" ? "standard input" : path, line: 0,
                            message: "--create reads the rows twice (types, then values): give a regular file, not a pipe")
        }
        if try session.connection.scalar("SELECT 1 FROM main.sqlite_schema WHERE type IN ('table', 'view') AND name = ?1 COLLATE NOCASE",
                                         [.text(Array(table.utf8))]) != nil {
            throw LoadError(source: path, line: 0, message: "--create: table \(table) already exists (leave out --create to load into it)")
        }
        let input = try InputLines(path: path)
        var columns: [String] = []
        var kinds: [[UInt8]: ColumnKinds] = [:]
        var seen = Set<[UInt8]>()
        func note(_ name: String) {
            let key = Array(name.utf8)
            guard !seen.contains(key) else { return }
            seen.insert(key)
            if !["rowid", "_rowid_", "oid"].contains(name.lowercased()) { columns.append(name) }
        }
        if format == .csv {
            // The header alone names the columns, rows or not.
            var reader = CSVRecordReader(input: try InputLines(path: path))
            for field in try reader.next() ?? [] { note(String(decoding: field.bytes, as: UTF8.self)) }
        }
        try forEachRow(input, format) { names, values, _ in
            for (name, value) in zip(names, values) {
                note(name.name)
                kinds[Array(name.name.utf8), default: ColumnKinds()].add(value)
            }
        }
        guard !columns.isEmpty else {
            throw LoadError(source: input.name, line: 0, message: "--create: no columns (an empty CSV header, or no JSON keys other than rowid)")
        }
        var textColumns = Set<[UInt8]>()
        let definitions = columns.map { name -> String in
            let found = kinds[Array(name.utf8)] ?? ColumnKinds()
            let type = found.declaredType(whenOnlyNull: format == .csv ? "INTEGER" : "TEXT")
            if type == "TEXT" && (found.integer || found.real) { textColumns.insert(Array(name.utf8)) }
            return "\(quoteIdentifier(name)) \(type)"
        }
        do {
            try session.connection.execute("CREATE TABLE main.\(quoteIdentifier(table))(\(definitions.joined(separator: ", ")))")
        } catch let error as DatabaseError {
            throw LoadError(source: input.name, line: 0, message: "--create: \(error.message)")
        }
        return textColumns
    }
}

/// The storage classes a column's values hold, and the type `load --create`
/// declares for it, as sqlite-utils' type detection does (INTEGER, REAL,
/// TEXT) where that keeps every value exact:
///
/// - only INTEGERs: INTEGER; INTEGERs and REALs: REAL (an INTEGER stored there
///   becomes the same number as a REAL), unless an INTEGER is beyond 2^53,
///   which a REAL would round: then BLOB, whose affinity keeps each value as it is;
/// - TEXT with numbers: TEXT, each number stored as the file writes it;
/// - any BLOB: BLOB (no affinity: each value kept as it is);
/// - only NULLs (or none): INTEGER for CSV and TEXT for JSON Lines, as sqlite-utils.
struct ColumnKinds {
    var integer = false, real = false, text = false, blob = false
    /// An INTEGER of magnitude above 2^53, which a REAL column would round.
    var wideInteger = false

    mutating func add(_ value: Value) {
        switch value {
        case .null: break
        case .integer(let i):
            integer = true
            if i.magnitude > UInt64(1) << 53 { wideInteger = true }
        case .real: real = true
        case .text: text = true
        case .blob: blob = true
        }
    }

    func declaredType(whenOnlyNull: String) -> String {
        if blob { return "BLOB" }
        if text { return "TEXT" }
        if real { return integer && wideInteger ? "BLOB" : "REAL" }
        if integer { return "INTEGER" }
        return whenOnlyNull
    }
}

/// One INSERT statement per distinct column list, values bound.
struct RowInserter {
    let table: String
    let session: LoadSession
    let source: String
    private var columns: [String] = []
    private var statement: Statement?
    private var replaceByName: (statement: Statement, column: Int)?
    /// sqlite_sequence holds one row per table: a loaded row replaces the
    /// target's (which loading the AUTOINCREMENT table itself has made).
    private let isSequence: Bool

    init(table: String, session: LoadSession, source: String) {
        self.table = table
        self.session = session
        self.source = source
        isSequence = sameSQLName(table, "sqlite_sequence")
    }

    mutating func insert(columns names: [String], values: [Value], line: Int) throws {
        do {
            if statement == nil || names.count != columns.count || !zip(names, columns).allSatisfy({ Array($0.utf8) == Array($1.utf8) }) {
                let list = names.map { ["rowid", "_rowid_", "oid"].contains($0.lowercased()) ? $0 : quoteIdentifier($0) }
                statement = try session.connection.prepare(
                    "INSERT INTO main.\(quoteIdentifier(table))(\(list.joined(separator: ","))) VALUES(\(names.indices.map { "?\($0 + 1)" }.joined(separator: ",")))")
                columns = names
                if isSequence, let at = names.firstIndex(where: { sameSQLName($0, "name") }) {
                    replaceByName = (try session.connection.prepare("DELETE FROM main.sqlite_sequence WHERE name = ?1"), at)
                }
            }
            if let (delete, column) = replaceByName {
                delete.reset()
                try delete.bind(values[column], at: 1)
                while try delete.step() {}
            }
            let statement = statement!
            statement.reset()
            try statement.bind(values)
            while try statement.step() {}
        } catch let error as DatabaseError {
            throw LoadError(source: source, line: line, message: error.message)
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
