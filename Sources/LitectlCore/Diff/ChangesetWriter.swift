// Writes a diff in the session extension's changeset format
// (https://www.sqlite.org/sessionintro.html), applicable with
// sqlite3changeset_apply or `litectl patch`. Changesets carry rows of tables
// with a primary key only, and no schema: other tables are listed in
// `skippedTables` for the caller to report.
import CSQLite

public final class ChangesetWriter: DiffConsumer {
    let sink: ByteSink
    var out: [UInt8] = []
    var headerWritten = false
    var current: TablePlan?
    var usable = false
    var comparison: SchemaComparison!
    /// Tables whose changes a changeset cannot carry, with the reason.
    public private(set) var skippedTables: [(name: String, reason: String)] = []
    /// Tables some of whose changed rows a changeset cannot carry: rows whose
    /// primary key holds a NULL (the session extension addresses rows by key,
    /// and a NULL key addresses none), with their number.
    public private(set) var nullKeyRowsLeftOut: [(name: String, rows: Int)] = []
    var nullKeyRows = 0
    /// Why the current table cannot be carried; it is named only if it differs.
    var skipReason: String?

    public init(sink: ByteSink) { self.sink = sink }

    public var rebuildsChangedTables: Bool { false }
    public var wantsRowidsForKeylessTables: Bool { false }

    public func begin(_ diff: SchemaComparison) throws {
        comparison = diff
        for table in diff.addedTables { skippedTables.append((table.name, "only in the second database (changesets carry no schema)")) }
        for table in diff.droppedTables { skippedTables.append((table.name, "only in the first database (changesets carry no schema)")) }
        for pair in diff.changedTables { skippedTables.append((pair.b.name, "definition changed (changesets carry no schema)")) }
    }

    public func beginTable(_ plan: TablePlan) throws {
        current = plan
        headerWritten = false
        usable = false
        skipReason = nil
        nullKeyRows = 0
        guard !plan.onlyInA && !plan.onlyInB, comparison.sameTables.contains(where: { $0.b.name == plan.name }) else { return }
        guard plan.mode == .key && !plan.userKey && !plan.isVirtual else {
            skipReason = "no primary key"; return
        }
        if let wrong = plan.misreadPrimaryKey(comparison) {
            skipReason = "rows were matched by \(wrong.used), not by its primary key \(wrong.declared)"; return
        }
        guard let table = comparison.b.table(named: plan.name), table.columns.allSatisfy({ $0.hidden == .normal }),
              table.columns.count == plan.columns.count else {
            skipReason = "generated or hidden columns"; return
        }
        guard comparison.options.ignoredColumns.allSatisfy({ !sqlNameHasPrefix($0, plan.name + ".") }) else {
            skipReason = "--ignore-column"; return
        }
        usable = true
    }

    func writeHeader(_ plan: TablePlan) {
        guard !headerWritten else { return }
        headerWritten = true
        out.append(UInt8(ascii: "T"))
        appendVarint(UInt64(plan.columns.count))
        // Each column's position in the primary key (0 when not in it), as
        // PRAGMA table_info reports it: sqlite3changeset_apply compares these
        // bytes with the target table's. The session extension keeps it in one
        // byte (a u8: the 256th key column is 0 there), and so does this.
        for i in plan.columns.indices { out.append(UInt8(truncatingIfNeeded: (plan.keyIndexes.firstIndex(of: i) ?? -1) + 1)) }
        out.append(contentsOf: Array(plan.name.utf8))
        out.append(0)
    }

    func appendVarint(_ value: UInt64) {
        // SQLite's varint: 7 bits per byte, most significant first, high bit = more.
        if value <= 0x7F { out.append(UInt8(value)); return }
        var groups: [UInt8] = []
        var v = value
        if v > 0x00FF_FFFF_FFFF_FFFF {
            groups.append(UInt8(v & 0xFF)); v >>= 8
            for _ in 0..<8 { groups.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
        } else {
            while v > 0 { groups.append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
            groups[0] &= 0x7F
        }
        out.append(contentsOf: groups.reversed())
    }

    func appendBigEndian(_ v: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((v >> UInt64(shift)) & 0xFF)) }
    }

    func appendValue(_ row: DiffRow, _ i: Int) {
        switch row.storageClass(at: i) {
        case .integer: out.append(1); appendBigEndian(UInt64(bitPattern: row.int64(at: i)))
        case .real: out.append(2); appendBigEndian(row.double(at: i).bitPattern)
        case .text, .blob:
            let bytes = row.bytes(at: i)
            out.append(row.storageClass(at: i) == .text ? 3 : 4)
            appendVarint(UInt64(bytes.count))
            out.append(contentsOf: bytes)
        case .null: out.append(5)
        }
    }

    func flushIfLarge() {
        if out.count >= 1 << 16 { sink.write(out); out.removeAll(keepingCapacity: true) }
    }

    /// Rows of a usable table reported without their key (it holds a NULL).
    func leftOut(_ plan: TablePlan) -> Bool {
        guard usable, plan.mode != .key else { return false }
        nullKeyRows += 1
        return true
    }

    public func inserted(_ plan: TablePlan, new: DiffRow) throws {
        guard usable, !leftOut(plan) else { return }
        writeHeader(plan)
        out.append(UInt8(SQLITE_INSERT)); out.append(0)
        for i in plan.columns.indices { appendValue(new, i) }
        flushIfLarge()
    }

    public func deleted(_ plan: TablePlan, old: DiffRow) throws {
        guard usable, !leftOut(plan) else { return }
        writeHeader(plan)
        out.append(UInt8(SQLITE_DELETE)); out.append(0)
        for i in plan.columns.indices { appendValue(old, i) }
        flushIfLarge()
    }

    public func updated(_ plan: TablePlan, old: DiffRow, new: DiffRow, changed: [Int]) throws {
        guard usable, !leftOut(plan) else { return }
        writeHeader(plan)
        out.append(UInt8(SQLITE_UPDATE)); out.append(0)
        let keys = Set(plan.keyIndexes), changes = Set(changed)
        for i in plan.columns.indices {
            if keys.contains(i) || changes.contains(i) { appendValue(old, i) } else { out.append(0) }
        }
        for i in plan.columns.indices {
            if changes.contains(i) { appendValue(new, i) } else { out.append(0) }
        }
        flushIfLarge()
    }

    public func endTable(_ plan: TablePlan, counts: ChangeCounts) throws {
        if let skipReason, counts.total > 0 { skippedTables.append((plan.name, skipReason)) }
        if nullKeyRows > 0 { nullKeyRowsLeftOut.append((plan.name, nullKeyRows)) }
    }

    public func finish(_ summary: DiffSummary) throws {
        sink.write(out)
        out.removeAll()
        try sink.flush()
    }
}
