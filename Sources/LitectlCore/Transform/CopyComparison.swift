// The proof `transform` gives before commit: every kept column of every row of
// the new table against the old row, exactly (the storage class, then the
// integer, the REAL's bits, or the TEXT or BLOB bytes), counting per column
// the values that changed and each storage-class change. Rows paired by rowid
// are compared in one merge pass over both tables in rowid order (two table
// scans, no seeks); rows paired by a primary key, by a join whose pairs are
// compared the same way.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct CopyComparison {
    /// Rows of the new table matched with a row of the old one.
    var pairedRows: Int64 = 0
    /// Per compared column: values that differ.
    var changed: [Int64]
    /// Per compared column, 5 × 5 counts by (old class, new class): a flat
    /// array, not a dictionary, because a conversion may change every row
    /// (hashing a million transitions cost as much as comparing the values).
    private var transitionCounts: [Int64]

    struct Transition: Hashable {
        var from: StorageClass
        var to: StorageClass
    }

    init(columns: Int) {
        changed = Array(repeating: 0, count: columns)
        transitionCounts = Array(repeating: 0, count: 25 * columns)
    }

    /// Counts a value of compared column `column` that changed from `from` to `to`.
    @inline(__always)
    mutating func countChange(_ column: Int, from: StorageClass, to: StorageClass) {
        changed[column] += 1
        transitionCounts[25 * column + 5 * Int(from.rawValue - 1) + Int(to.rawValue - 1)] += 1
    }

    /// Per compared column: (old class, new class) → rows, for the changes counted.
    var transitions: [[Transition: Int64]] {
        let classes: [StorageClass] = [.integer, .real, .text, .blob, .null]
        return (0..<changed.count).map { column in
            var out: [Transition: Int64] = [:]
            for from in classes {
                for to in classes {
                    let n = transitionCounts[25 * column + 5 * Int(from.rawValue - 1) + Int(to.rawValue - 1)]
                    if n > 0 { out[Transition(from: from, to: to)] = n }
                }
            }
            return out
        }
    }

    /// Both tables read in rowid order, side by side. `rowid` is a name of
    /// the rowid that neither table uses for a column.
    static func byRowid(_ connection: Connection, old: String, new: String, rowid: String,
                        columns: [String]) throws -> CopyComparison {
        let list = ([rowid] + columns.map(quoteIdentifier)).joined(separator: ", ")
        let a = try connection.prepare("SELECT \(list) FROM \(quoteIdentifier(old)) ORDER BY \(rowid)")
        let b = try connection.prepare("SELECT \(list) FROM \(quoteIdentifier(new)) ORDER BY \(rowid)")
        var result = CopyComparison(columns: columns.count)
        var hasA = try a.step(), hasB = try b.step()
        while hasA && hasB {
            let ra = a.currentRow, rb = b.currentRow
            let ka = ra.int64(at: 0), kb = rb.int64(at: 0)
            if ka < kb { hasA = try a.step(); continue }
            if kb < ka { hasB = try b.step(); continue }
            result.pairedRows += 1
            for i in 0..<columns.count {
                let c = i + 1
                let ta = ra.storageClass(at: c), tb = rb.storageClass(at: c)
                if ta != tb || !sameValue(ra, rb, c, ta) {
                    result.countChange(i, from: ta, to: tb)
                }
            }
            hasA = try a.step()
            hasB = try b.step()
        }
        return result
    }

    /// Two values of one storage class, exactly.
    @inline(__always)
    static func sameValue(_ a: Row, _ b: Row, _ column: Int, _ storage: StorageClass) -> Bool {
        sameValue(a, column, b, column, storage)
    }

    /// Column `i` of `a` and column `j` of `b`, of one storage class, exactly.
    @inline(__always)
    static func sameValue(_ a: Row, _ i: Int, _ b: Row, _ j: Int, _ storage: StorageClass) -> Bool {
        switch storage {
        case .null: return true
        case .integer: return a.int64(at: i) == b.int64(at: j)
        case .real: return a.double(at: i).bitPattern == b.double(at: j).bitPattern
        case .text, .blob:
            let x = a.bytes(at: i), y = b.bytes(at: j)
            guard x.count == y.count else { return false }
            return x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0
        }
    }

    /// The tables joined on the primary key columns (by the new table's
    /// collations and affinities: that is how the copy matched them), each
    /// pair's values read out as stored and compared here exactly, as
    /// `byRowid` does (the storage class, then the integer, the REAL's bits,
    /// the bytes): SQL's `IS` would call -0.0 and 0.0 the same value. Rows
    /// whose key is NULL pair with none (`=`): they are counted as unmatched,
    /// which the caller reports and refuses.
    static func byKey(_ connection: Connection, old: String, new: String, key: [String],
                      columns: [String]) throws -> CopyComparison {
        let join = key.map { "n.\(quoteIdentifier($0)) = o.\(quoteIdentifier($0))" }.joined(separator: " AND ")
        let list = columns.flatMap { ["o.\(quoteIdentifier($0))", "n.\(quoteIdentifier($0))"] }
        let statement = try connection.prepare("""
            SELECT \(list.isEmpty ? "NULL" : list.joined(separator: ", "))
            FROM \(quoteIdentifier(old)) AS o JOIN \(quoteIdentifier(new)) AS n ON \(join)
            """)
        var result = CopyComparison(columns: columns.count)
        try statement.forEachRow { row in
            result.pairedRows += 1
            for i in 0..<columns.count {
                let a = 2 * i, b = 2 * i + 1
                let ta = row.storageClass(at: a), tb = row.storageClass(at: b)
                if ta != tb || !sameValue(row, a, row, b, ta) {
                    result.countChange(i, from: ta, to: tb)
                }
            }
        }
        return result
    }

    static func storageClass(named name: String) -> StorageClass {
        switch name {
        case "integer": return .integer
        case "real": return .real
        case "text": return .text
        case "blob": return .blob
        default: return .null
        }
    }
}

extension StorageClass {
    /// INTEGER, REAL, TEXT, BLOB or NULL.
    var sqlName: String {
        switch self {
        case .integer: return "INTEGER"
        case .real: return "REAL"
        case .text: return "TEXT"
        case .blob: return "BLOB"
        case .null: return "NULL"
        }
    }
}
