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
    static func run(path: String, format: RowFileFormat, table: String, session: LoadSession) throws -> Int64 {
        let input = try InputLines(path: path)
        try session.begin()
        var inserter = RowInserter(table: table, session: session, source: input.name)
        var rows: Int64 = 0
        switch format {
        case .csv:
            var reader = CSVRecordReader(input: input)
            guard let header = try reader.next() else { return 0 }
            let names = header.map { String(decoding: $0.bytes, as: UTF8.self) }
            while let record = try reader.next() {
                guard record.count == names.count else {
                    throw LoadError(source: input.name, line: reader.recordLine,
                                    message: "\(record.count) fields where the header has \(names.count)")
                }
                try inserter.insert(columns: names, values: record.map { TypedCSV.value($0.bytes, quoted: $0.quoted) },
                                    line: reader.recordLine)
                rows += 1
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
                try inserter.insert(columns: members.map(\.key), values: members.map(\.value), line: input.lineNumber)
                rows += 1
            }
        }
        return rows
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
