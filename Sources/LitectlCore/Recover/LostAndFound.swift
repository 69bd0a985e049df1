// The lost_and_found table of a recovered database, as the shell's .recover
// makes it, with two more columns: rows that could be read but not placed in
// their table (on pages no b-tree reaches that fit no known table, out of
// place on a damaged page, refused by the new schema, or with a value lost to
// a broken overflow chain; and R*Tree entries their module refuses), each
// with where it was found and why. Rows are
// held until the run ends (or a budget of memory fills) and the table is
// made then, as wide as the widest of them: a damaged record can claim
// thousands of fields, and widening the table one ALTER TABLE ADD COLUMN
// at a time re-reads the schema each time (seconds for 2,000 columns).
import CSQLite

/// Rows salvage could read but not put in a table.
final class LostAndFound {
    private let database: RecoveredDatabase
    private(set) var name: String?
    private(set) var rows = 0
    private var width = 0
    private var statement: Statement?
    /// The fixed columns before the values c0, c1, ...
    static let fixedColumns = ["rootpgno", "pgno", "cell", "nfield", "id", "reason"]

    init(database: RecoveredDatabase) { self.database = database }

    /// One field of a held row: NULL for a field whose bytes were lost;
    /// TEXT in the database's encoding, unconverted, or (`utf8Text`) as
    /// SQLite returned it, converted back when bound.
    private enum Field {
        case null, integer(Int64), real(Double), text([UInt8]), utf8Text([UInt8]), blob([UInt8])
    }

    /// A row held until `flush`.
    private struct Held {
        var root: UInt32, page: UInt32, cell: Int, fieldCount: Int, rowid: Int64?, reason: String
        var fields: [Field]
    }

    private var held: [Held] = []
    private var heldBytes = 0
    /// The memory held rows may take before they are written.
    static let holdBudget = 32 << 20

    /// Finalizes the INSERT (before the database closes).
    func close() { statement = nil }

    /// Adds `record`'s fields (NULL for any whose bytes were lost), found in
    /// cell `cell` of page `page` of the b-tree rooted at `root` (0 when not
    /// known), with its rowid when it had one. The row is written by `flush`.
    func add(root: UInt32, page: UInt32, cell: Int, rowid: Int64?, record: SalvagedRecord, reason: String) throws {
        let kept = min(record.count, SalvagedRecord.maxColumns)
        var fields: [Field] = []
        fields.reserveCapacity(kept)
        var bytes = 64 + reason.utf8.count
        for f in 0..<kept {
            switch record.cell(f) {
            case nil, .null?: fields.append(.null)
            case .integer(let v)?: fields.append(.integer(v))
            case .real(let v)?: fields.append(.real(v))
            case .text(let b)?: fields.append(.text(Array(b))); bytes += b.count
            case .blob(let b)?: fields.append(.blob(Array(b))); bytes += b.count
            }
            bytes += 24
        }
        held.append(Held(root: root, page: page, cell: cell, fieldCount: record.count, rowid: rowid, reason: reason, fields: fields))
        heldBytes += bytes
        rows += 1
        if heldBytes > LostAndFound.holdBudget { try flush() }
    }

    /// Adds `values`, read back from the new database (TEXT in UTF-8, as
    /// SQLite returns it): an R*Tree entry its module refuses, say. `nfield`
    /// is their count.
    func add(root: UInt32, page: UInt32, cell: Int, rowid: Int64?, values: [Value], reason: String) throws {
        var bytes = 64 + reason.utf8.count
        let fields: [Field] = values.prefix(SalvagedRecord.maxColumns).map { value in
            bytes += 24
            switch value {
            case .null: return .null
            case .integer(let v): return .integer(v)
            case .real(let v): return .real(v)
            case .text(let b): bytes += b.count; return .utf8Text(b)
            case .blob(let b): bytes += b.count; return .blob(b)
            }
        }
        held.append(Held(root: root, page: page, cell: cell, fieldCount: values.count, rowid: rowid, reason: reason, fields: fields))
        heldBytes += bytes
        rows += 1
        if heldBytes > LostAndFound.holdBudget { try flush() }
    }

    /// Writes the held rows: makes the table on the first rows, as wide as
    /// the widest (widened later only by rows wider than every row before).
    func flush() throws {
        guard !held.isEmpty else { return }
        let db = database.db
        let needed = held.reduce(0) { max($0, $1.fields.count) }
        if name == nil {
            var candidate = "lost_and_found"
            var n = 0
            while try database.hasObject(candidate) {
                candidate = "lost_and_found_\(n)"
                n += 1
            }
            let values = (0..<needed).map { ", c\($0)" }.joined()
            try db.execute("CREATE TABLE main.\(quoteIdentifier(candidate))(rootpgno INTEGER, pgno INTEGER, cell INTEGER, "
                           + "nfield INTEGER, id INTEGER, reason TEXT\(values))")
            name = candidate
            width = needed
            statement = nil
        }
        guard let name else { return }
        if needed > width || statement == nil {
            while width < needed {
                try db.execute("ALTER TABLE main.\(quoteIdentifier(name)) ADD COLUMN c\(width)")
                width += 1
            }
            let columns = (LostAndFound.fixedColumns + (0..<width).map { "c\($0)" }).joined(separator: ", ")
            let values = (1...(LostAndFound.fixedColumns.count + width)).map { "?\($0)" }.joined(separator: ", ")
            statement = try db.prepare("INSERT INTO main.\(quoteIdentifier(name))(\(columns)) VALUES (\(values))")
        }
        guard let statement else { return }
        let handle = statement.handle
        let encoding = database.settings.encoding
        for row in held {
            sqlite3_clear_bindings(handle)
            sqlite3_bind_int64(handle, 1, Int64(row.root))
            sqlite3_bind_int64(handle, 2, Int64(row.page))
            sqlite3_bind_int64(handle, 3, Int64(row.cell))
            sqlite3_bind_int64(handle, 4, Int64(row.fieldCount))
            if let rowid = row.rowid { sqlite3_bind_int64(handle, 5, rowid) }
            bindOwned(handle, 6, .text(row.reason))
            for (f, field) in row.fields.enumerated() {
                let index = Int32(7 + f)
                switch field {
                case .null: break
                case .integer(let v): sqlite3_bind_int64(handle, index, v)
                case .real(let v): sqlite3_bind_double(handle, index, v)
                case .text(let b): b.withUnsafeBytes { bindRaw(handle, index, .text($0), encoding: encoding) }
                case .utf8Text(let b): b.withUnsafeBytes { bindRaw(handle, index, .text($0), encoding: .utf8) }
                case .blob(let b): b.withUnsafeBytes { bindRaw(handle, index, .blob($0), encoding: encoding) }
                }
            }
            try statement.step()
            statement.reset()
        }
        held.removeAll(keepingCapacity: false)
        heldBytes = 0
    }
}
