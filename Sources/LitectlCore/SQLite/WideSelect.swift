// A SELECT of a rowid table's rows with more result columns than SQLite
// returns at once (SQLITE_LIMIT_COLUMN, 2,000 by default: a table of 2,000
// columns read with its rowid is one too many), read as several SELECTs of the
// same rows in the same order, stepped together, each repeating the rowid so
// that the rows are checked to be the same. See https://www.sqlite.org/limits.html
import CSQLite

/// `SELECT c0, c1, ..., cN <tail>` where column 0 is the rowid (under any of
/// its names) and `tail` orders the rows by something unique, so that every
/// part reads the rows in one order: the first part selects the first
/// `limit` columns, each further part the rowid and the next `limit - 1`.
/// When the columns fit in one statement there is just the one.
///
/// Not sendable: its statements belong to one connection.
public final class WideSelect {
    /// The parts, each a prepared statement.
    public let statements: [Statement]
    /// The columns of the whole row.
    public let columnCount: Int
    /// For each part, where its columns start in the whole row (its first
    /// column, the repeated rowid, is not counted after part 0).
    let starts: [Int]
    let path: String

    /// Prepares the parts. `columns` are SQL expressions (names already
    /// quoted), the rowid first when they are too many for one statement.
    public init(_ connection: Connection, columns: [String], tail: String) throws {
        let limit = max(2, connection.columnLimit)
        path = connection.path
        columnCount = columns.count
        guard columns.count > limit else {
            statements = [try connection.prepare("SELECT \(columns.isEmpty ? "NULL" : columns.joined(separator: ", "))\(tail)")]
            starts = [0]
            return
        }
        var statements: [Statement] = []
        var starts: [Int] = []
        var next = 0
        while next < columns.count {
            let part = next == 0 ? Array(columns.prefix(limit)) : [columns[0]] + columns[next..<min(columns.count, next + limit - 1)]
            starts.append(next)
            statements.append(try connection.prepare("SELECT \(part.joined(separator: ", "))\(tail)"))
            next += next == 0 ? limit : limit - 1
        }
        self.statements = statements
        self.starts = starts
    }

    public var isSplit: Bool { statements.count > 1 }

    /// Steps every part; false at the end. Parts that end apart, or give
    /// rows of different rowids, are an error (a table read twice in one
    /// snapshot gives the same rows: only damage does otherwise).
    public func step() throws -> Bool {
        let more = try statements[0].step()
        guard statements.count > 1 else { return more }
        let rowid = more ? sqlite3_column_int64(statements[0].handle, 0) : 0
        for statement in statements.dropFirst() {
            let also = try statement.step()
            guard also == more, !more || sqlite3_column_int64(statement.handle, 0) == rowid else {
                throw DatabaseError(code: .corrupt, message: "the table read in \(statements.count) parts (it has more columns than SQLite returns at once) gave different rows in its parts (database disk image is malformed)",
                                    path: path)
            }
        }
        return more
    }

    public func reset() { for statement in statements { statement.reset() } }

    /// Binds the same values in every part.
    public func bind(_ body: (Statement) throws -> Void) rethrows {
        for statement in statements { try body(statement) }
    }

    /// The current row (valid until the next step).
    public var currentRow: WideRow { WideRow(select: self) }
}

/// The current row of a `WideSelect`, read in place.
public struct WideRow {
    let first: Row
    let select: WideSelect?

    init(select: WideSelect) {
        first = select.statements[0].currentRow
        self.select = select.isSplit ? select : nil
    }

    public var count: Int { select?.columnCount ?? first.count }

    /// The statement and column holding column `index` of the whole row.
    @inline(__always)
    func locate(_ index: Int) -> (Row, Int) {
        guard let select else { return (first, index) }
        var part = select.starts.count - 1
        while select.starts[part] > index { part -= 1 }
        return part == 0 ? (first, index) : (select.statements[part].currentRow, index - select.starts[part] + 1)
    }

    public func cell(at index: Int) -> Cell {
        let (row, i) = locate(index)
        return row.cell(at: i)
    }

    public func int64(at index: Int) -> Int64 {
        let (row, i) = locate(index)
        return row.int64(at: i)
    }

    public func bytes(at index: Int) -> UnsafeRawBufferPointer {
        let (row, i) = locate(index)
        return row.bytes(at: i)
    }

    public func storageClass(at index: Int) -> StorageClass {
        let (row, i) = locate(index)
        return row.storageClass(at: i)
    }
}
