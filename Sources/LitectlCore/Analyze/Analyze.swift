// `litectl analyze`: runs ANALYZE (or PRAGMA optimize) on the user's file —
// the one command of check/stats/analyze that writes — and returns
// sqlite_stat1 per index before and after, in readable form. With `dryRun`
// everything happens inside a transaction that is rolled back.
// See https://www.sqlite.org/lang_analyze.html and https://www.sqlite.org/fileformat.html#the_sqlite_stat1_table

/// One sqlite_stat1 row, read: the table's row count and, for an index, the
/// average number of rows per distinct value of each key prefix.
public struct IndexStatistics: Sendable, Equatable {
    public var table: String
    /// Nil for the row that only records a table's size.
    public var index: String?
    public var rows: Int64
    public var averageRowsPerPrefix: [Int64]
    /// The stat column as stored (with "unordered", "sz=" and the like).
    public var raw: String

    public init(table: String, index: String?, stat: String) {
        self.table = table
        self.index = index
        raw = stat
        let numbers = stat.split(separator: " ").map { Int64($0) }
        rows = numbers.first.flatMap { $0 } ?? 0
        averageRowsPerPrefix = numbers.dropFirst().prefix { $0 != nil }.map { $0! }
    }

    /// "1000 rows; 10, 1 per key prefix".
    public var readable: String {
        var text = "\(rows) row\(rows == 1 ? "" : "s")"
        if !averageRowsPerPrefix.isEmpty {
            text += "; " + averageRowsPerPrefix.map(String.init).joined(separator: ", ") + " per key prefix"
        }
        return text
    }
}

public struct AnalyzeOptions: Sendable {
    /// Tables or indexes to analyze; empty for the whole database.
    public var targets: [String] = []
    /// `PRAGMA optimize` instead of ANALYZE.
    public var optimize = false
    /// Analyze inside a transaction, read the result, roll back.
    public var dryRun = false
    public var busyTimeout = Connection.defaultBusyTimeout

    public init() {}
}

public struct AnalyzeResult: Sendable {
    public struct Entry: Sendable {
        public var table: String
        public var index: String?
        public var before: IndexStatistics?
        public var after: IndexStatistics?
    }

    public var path: String
    public var dryRun: Bool
    /// One entry per (table, index) in sqlite_stat1 before or after, in name order.
    public var entries: [Entry]

    public static let columns = ["table", "index", "before_rows", "before", "after_rows", "after", "changed"]

    public func row(_ e: Entry) -> [Value] {
        [.text(e.table), e.index.map { .text($0) } ?? .null,
         e.before.map { .integer($0.rows) } ?? .null, e.before.map { .text($0.readable) } ?? .null,
         e.after.map { .integer($0.rows) } ?? .null, e.after.map { .text($0.readable) } ?? .null,
         .integer(e.before?.raw == e.after?.raw ? 0 : 1)]
    }
}

public enum Analyzer {
    /// Runs ANALYZE on `path` (opened read-write) and reports sqlite_stat1 before and after.
    public static func run(path: String, options: AnalyzeOptions) throws -> AnalyzeResult {
        let connection: Connection
        if options.dryRun && PageVFS.namesSource(path) {
            // A moment of a repository cannot be written, even to roll back:
            // the dry run analyzes a private in-memory copy of it.
            let moment = try Connection(path: path, mode: .readOnly, busyTimeout: options.busyTimeout)
            connection = try Connection(inMemory: options.busyTimeout)
            try moment.copyMain(into: connection)
            try moment.close()
        } else {
            connection = try Connection(path: path, mode: .readWrite, busyTimeout: options.busyTimeout)
        }
        defer { try? connection.close() }
        // Resolve targets first, so that a typo fails before anything is written.
        let schema = try connection.readSchema()
        var statements: [String] = []
        for target in options.targets {
            let known = schema.tables.contains { sameSQLName($0.name, target) }
                || schema.indexes.contains { sameSQLName($0.name, target) }
            guard known else {
                throw DatabaseError(code: .error, message: "no table or index named \(target)", path: path)
            }
            statements.append("ANALYZE main.\(quoteIdentifier(target))")
        }
        if options.optimize {
            statements = ["PRAGMA main.optimize"]
        } else if statements.isEmpty {
            statements = ["ANALYZE main"]
        }

        return try connection.writeTransaction(commit: !options.dryRun) {
            let before = try statistics(connection)
            for sql in statements { try connection.execute(sql) }
            let after = try statistics(connection)
            return AnalyzeResult(path: path, dryRun: options.dryRun, entries: merge(before, after))
        }
    }

    static func statistics(_ connection: Connection) throws -> [IndexStatistics] {
        guard try connection.scalar("SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = 'sqlite_stat1'") != nil else {
            return []
        }
        var result: [IndexStatistics] = []
        let statement = try connection.prepare("SELECT tbl, idx, stat FROM main.sqlite_stat1")
        try statement.forEachRow { row in
            result.append(IndexStatistics(table: row.string(at: 0), index: row.isNull(at: 1) ? nil : row.string(at: 1),
                                          stat: row.string(at: 2)))
        }
        return result
    }

    static func merge(_ before: [IndexStatistics], _ after: [IndexStatistics]) -> [AnalyzeResult.Entry] {
        func key(_ s: IndexStatistics) -> String { s.table + "\u{0}" + (s.index ?? "") }
        var entries: [String: AnalyzeResult.Entry] = [:]
        for s in before { entries[key(s)] = AnalyzeResult.Entry(table: s.table, index: s.index, before: s, after: nil) }
        for s in after { entries[key(s), default: AnalyzeResult.Entry(table: s.table, index: s.index)].after = s }
        return entries.values.sorted { a, b in
            let ka = Array((a.table + "\u{0}" + (a.index ?? "")).utf8), kb = Array((b.table + "\u{0}" + (b.index ?? "")).utf8)
            return ka.lexicographicallyPrecedes(kb)
        }
    }
}
