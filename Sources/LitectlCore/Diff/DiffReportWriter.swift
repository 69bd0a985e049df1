// Writes a diff for people (a summary line per table, then the changed rows:
// key, and for updates the changed columns as `old → new`) and for machines
// (one JSON object per change, values in the lossless JSON encoding).

/// How `DiffReportWriter` lays out its output.
public enum DiffReportStyle: Sendable {
    /// Summary lines and changed rows.
    case text
    /// Summary lines only.
    case summary
    /// One JSON object per line per change (JSON Lines).
    case jsonl
    /// One JSON array of the same objects.
    case json
}

/// A `DiffConsumer` for the people and JSON outputs.
public final class DiffReportWriter: DiffConsumer {
    let sink: ByteSink
    let style: DiffReportStyle
    let colour: Bool
    var out: [UInt8] = []
    var firstJSON = true
    var comparison: SchemaComparison!
    /// Text mode: the rows of the current table, written after its summary line.
    var tableRows: [UInt8] = []
    var rowsShown = 0
    /// The most changed rows shown per table in text mode (the counts are exact).
    public var rowLimit: Int
    /// The cut `diff` makes on a terminal.
    public static let terminalValueLimit = 200
    /// Text mode: a value whose shown form is longer than this many
    /// characters is cut there and marked with its full size (nil: shown whole).
    public var valueLimit: Int?

    public init(sink: ByteSink, style: DiffReportStyle, colour: Bool = false, rowLimit: Int = 1_000, valueLimit: Int? = nil) {
        self.sink = sink
        self.style = style
        self.colour = colour
        self.rowLimit = rowLimit
        self.valueLimit = valueLimit
    }

    public var rebuildsChangedTables: Bool { false }
    public var wantsRowidsForKeylessTables: Bool { false }

    var isJSON: Bool { style == .json || style == .jsonl }

    func paint(_ text: String, _ code: String) -> String { colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }

    func write(_ text: String) { out.append(contentsOf: text.utf8); flushIfLarge() }

    func flushIfLarge() {
        if out.count >= 1 << 16 { sink.write(out); out.removeAll(keepingCapacity: true) }
    }

    // MARK: JSON objects

    func beginObject() {
        if style == .json { out.append(contentsOf: (firstJSON ? "[\n" : ",\n").utf8) }
        firstJSON = false
    }

    func endObject() {
        if style == .jsonl { out.append(0x0A) }
        flushIfLarge()
    }

    func appendJSONString(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeBytes { LitectlCore.appendJSONString($0, to: &out) }
        bytes.removeAll()
    }

    func appendColumnsObject(_ plan: TablePlan, _ row: DiffRow, _ indexes: [Int]) {
        out.append(UInt8(ascii: "{"))
        for (n, i) in indexes.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            appendJSONString(plan.columns[i])
            out.append(UInt8(ascii: ":"))
            row.cell(at: i).appendJSON(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    func rowJSON(_ operation: String, _ plan: TablePlan, old: DiffRow?, new: DiffRow?, changed: [Int]) {
        beginObject()
        out.append(contentsOf: "{\"type\":\"row\",\"table\":".utf8)
        appendJSONString(plan.name)
        out.append(contentsOf: ",\"operation\":\"\(operation)\",\"match\":\"\(plan.mode.rawValue)\",\"key\":".utf8)
        if plan.mode == .multiset {
            out.append(contentsOf: "null".utf8)
        } else {
            appendColumnsObject(plan, (old ?? new)!, plan.keyIndexes)
        }
        let shown = operation == "update" ? changed : Array(plan.columns.indices)
        // Across a change of columns, `old` holds A's columns (an added one
        // as the DEFAULT A's rows take on ADD COLUMN) and `new` B's only.
        out.append(contentsOf: ",\"old\":".utf8)
        if let old {
            appendColumnsObject(plan, old, operation == "update" ? shown : shown.filter { plan.inA($0) })
        } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: ",\"new\":".utf8)
        if let new { appendColumnsObject(plan, new, shown.filter { plan.inB($0) }) } else { out.append(contentsOf: "null".utf8) }
        out.append(UInt8(ascii: "}"))
        endObject()
    }

    // MARK: Consumer

    public func begin(_ diff: SchemaComparison) throws {
        comparison = diff
        for change in diff.changes {
            if isJSON {
                beginObject()
                out.append(contentsOf: "{\"type\":\"schema\",\"object\":\"\(change.objectType)\",\"name\":".utf8)
                appendJSONString(change.name)
                out.append(contentsOf: ",\"operation\":\"\(change.operation.rawValue)\",\"details\":[".utf8)
                for (n, detail) in change.details.enumerated() {
                    if n > 0 { out.append(UInt8(ascii: ",")) }
                    appendJSONString(detail)
                }
                out.append(contentsOf: "],\"old_sql\":".utf8)
                if let sql = change.oldSQL { appendJSONString(sql) } else { out.append(contentsOf: "null".utf8) }
                out.append(contentsOf: ",\"new_sql\":".utf8)
                if let sql = change.newSQL { appendJSONString(sql) } else { out.append(contentsOf: "null".utf8) }
                out.append(UInt8(ascii: "}"))
                endObject()
            } else {
                let sign: String
                switch change.operation {
                case .added: sign = paint("+", "32")
                case .dropped: sign = paint("-", "31")
                case .changed: sign = paint("~", "33")
                }
                var text = "\(sign) \(change.objectType) \(visible(change.name)) \(change.operation.rawValue)"
                if !change.details.isEmpty { text += ": " + change.details.map(visible).joined(separator: "; ") }
                write(text + "\n")
            }
        }
    }

    public func beginTable(_ plan: TablePlan) throws {
        tableRows.removeAll(keepingCapacity: true)
        rowsShown = 0
    }

    func keyText(_ plan: TablePlan, _ row: DiffRow) -> String {
        if plan.mode == .multiset { return "(row)" }
        return plan.keyIndexes.map { "\(visible(plan.columns[$0]))=\(display(row.value(at: $0)))" }.joined(separator: " ")
    }

    func rowsText(_ text: String) {
        guard style == .text else { return }
        rowsShown += 1
        if rowsShown <= rowLimit { tableRows.append(contentsOf: text.utf8) }
    }

    /// The row's columns that its side has (`inA`: A's row, else B's).
    func wholeRow(_ plan: TablePlan, _ row: DiffRow, inA: Bool) -> String {
        plan.columns.indices.filter { (!plan.keyIndexes.contains($0) || plan.mode == .multiset) && (inA ? plan.inA($0) : plan.inB($0)) }
            .map { "\(visible(plan.columns[$0]))=\(display(row.value(at: $0)))" }.joined(separator: " ")
    }

    /// A value for people: SQL literal syntax, but REALs in their shortest
    /// exact decimal form (the patch uses the exact-arithmetic literal), and
    /// control characters made visible.
    func display(_ value: Value) -> String {
        if case .real(let d) = value { return exactRealText(d) }
        let shown = visible(value.sqlLiteral)
        guard let limit = valueLimit, shown.unicodeScalars.count > limit else { return shown }
        // Cut on a terminal (-v or --json show it whole): the start, a marker, the size.
        let size: String
        switch value {
        case .text(let bytes): size = "TEXT of \(bytes.count) bytes"
        case .blob(let bytes): size = "BLOB of \(bytes.count) bytes"
        default: size = "\(shown.unicodeScalars.count) characters"
        }
        var cut = String.UnicodeScalarView()
        cut.append(contentsOf: shown.unicodeScalars.prefix(limit))
        return String(cut) + paint("…[\(size)]", "2")
    }

    /// A name or text from the databases as one visible line (`TerminalText`).
    func visible(_ text: String) -> String { TerminalText.visible(text) }

    public func inserted(_ plan: TablePlan, new: DiffRow) throws {
        if isJSON { rowJSON("insert", plan, old: nil, new: new, changed: []); return }
        guard style == .text, rowsShown < rowLimit else { rowsShown += 1; return }
        rowsText("  \(paint("+", "32")) \(plan.mode == .multiset ? "" : keyText(plan, new) + ": ")\(wholeRow(plan, new, inA: false))\n")
    }

    public func deleted(_ plan: TablePlan, old: DiffRow) throws {
        if isJSON { rowJSON("delete", plan, old: old, new: nil, changed: []); return }
        guard style == .text, rowsShown < rowLimit else { rowsShown += 1; return }
        rowsText("  \(paint("-", "31")) \(plan.mode == .multiset ? "" : keyText(plan, old) + ": ")\(wholeRow(plan, old, inA: true))\n")
    }

    public func updated(_ plan: TablePlan, old: DiffRow, new: DiffRow, changed: [Int]) throws {
        if isJSON { rowJSON("update", plan, old: old, new: new, changed: changed); return }
        guard style == .text, rowsShown < rowLimit else { rowsShown += 1; return }
        let changes = changed.map { i in
            "\(visible(plan.columns[i])): \(display(old.value(at: i))) → \(plan.inB(i) ? display(new.value(at: i)) : "(column dropped)")"
        }
        rowsText("  \(paint("~", "33")) \(keyText(plan, old)): \(changes.joined(separator: ", "))\n")
    }

    public func endTable(_ plan: TablePlan, counts: ChangeCounts) throws {
        guard !isJSON, counts.total > 0 else { return }
        var line = "\(visible(plan.name)): \(paint("+\(counts.inserted)", "32")) \(paint("-\(counts.deleted)", "31")) \(paint("~\(counts.updated)", "33"))"
        if plan.onlyInB { line += " (new table)" }
        if plan.mode == .multiset { line += " (no primary key: compared as a multiset of rows)" }
        write(line + "\n")
        out.append(contentsOf: tableRows)
        if style == .text && rowsShown > rowLimit { write("  … \(rowsShown - rowLimit) more changed rows not shown\n") }
        flushIfLarge()
    }

    public func finish(_ summary: DiffSummary) throws {
        if isJSON {
            if style == .json { out.append(contentsOf: (firstJSON ? "[]\n" : "\n]\n").utf8) }
        } else {
            for table in comparison.droppedTables where !comparison.options.schemaOnly && !comparison.options.dataOnly {
                if let counts = summary.tables.first(where: { $0.name == table.name })?.counts, counts.deleted > 0 {
                    write("\(visible(table.name)): \(paint("-\(counts.deleted)", "31")) (table dropped)\n")
                }
            }
        }
        sink.write(out)
        out.removeAll()
        try sink.flush()
    }
}
