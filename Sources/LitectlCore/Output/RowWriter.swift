// The one set of output formats every row-printing command shares: table for
// people, csv, tsv, json, jsonl and markdown for machines and documents. Rows
// stream through; only `table` holds back its first rows to size its columns.

/// An output format for rows.
public enum OutputFormat: String, CaseIterable, Sendable {
    /// Aligned columns for a terminal (sized from the first 1,000 rows).
    case table
    /// RFC 4180: fields with `,` `"` CR or LF quoted; NULL empty; BLOB as hex.
    case csv
    /// Tab-separated; tab, LF, CR and backslash escaped as \t \n \r \\; NULL empty; BLOB as hex.
    case tsv
    /// One JSON array of objects (column name → value, exact encoding).
    case json
    /// One JSON object per line.
    case jsonl
    /// A GitHub-flavoured Markdown table.
    case markdown
}

/// Writes one result set (columns, then rows) in a format.
public final class RowWriter {
    public let format: OutputFormat
    public let headers: Bool
    let sink: ByteSink
    var columns: [String] = []
    /// JSON object keys: the column names, a repeated one suffixed ":2", ":3"...
    /// so that `SELECT a.id, b.id` loses neither value.
    var jsonKeys: [[UInt8]] = []
    var rowCount = 0
    var line: [UInt8] = []
    /// For `table`: rows held back until the widths are known.
    var pending: [[String]] = []
    var widths: [Int]?
    static let tableSample = 1_000

    public init(format: OutputFormat, headers: Bool = true, sink: ByteSink) {
        self.format = format
        self.headers = headers
        self.sink = sink
    }

    /// Starts a result with these column names (in statement order).
    public func begin(columns: [String]) {
        self.columns = columns
        jsonKeys = RowWriter.uniqueKeys(columns)
        rowCount = 0
        pending = []
        widths = nil
        switch format {
        case .csv where headers:
            line.removeAll(keepingCapacity: true)
            for (i, name) in columns.enumerated() {
                if i > 0 { line.append(UInt8(ascii: ",")) }
                appendCSVField(Array(name.utf8), to: &line)
            }
            line.append(contentsOf: [0x0D, 0x0A])
            sink.write(line)
        case .tsv where headers:
            line.removeAll(keepingCapacity: true)
            for (i, name) in columns.enumerated() {
                if i > 0 { line.append(0x09) }
                Array(name.utf8).withUnsafeBytes { appendTSVText($0, to: &line) }
            }
            line.append(0x0A)
            sink.write(line)
        case .json:
            sink.write(Array("[".utf8))
        case .markdown:
            line.removeAll(keepingCapacity: true)
            line.append(contentsOf: "|".utf8)
            for name in columns {
                line.append(contentsOf: " ".utf8)
                Array(name.utf8).withUnsafeBytes { appendMarkdownText($0, to: &line) }
                line.append(contentsOf: " |".utf8)
            }
            line.append(contentsOf: "\n|".utf8)
            for _ in columns { line.append(contentsOf: " --- |".utf8) }
            line.append(0x0A)
            sink.write(line)
        default:
            break
        }
    }

    /// Writes the current row of a statement (no per-cell copies).
    public func write(_ row: Row) {
        write(count: columns.count) { row.cell(at: $0) }
    }

    /// Writes one row of values.
    public func write(_ values: [Value]) {
        line.removeAll(keepingCapacity: true)
        if format == .table {
            holdTableRow(values.map { value in value.withCell { displayText($0) } })
            return
        }
        var line = takeLine()
        for (i, value) in values.enumerated() { value.withCell { appendCell($0, index: i, to: &line) } }
        endRow(&line)
        self.line = line
    }

    func write(count: Int, cell: (Int) -> Cell) {
        line.removeAll(keepingCapacity: true)
        if format == .table {
            holdTableRow((0..<count).map { displayText(cell($0)) })
            return
        }
        var line = takeLine()
        for i in 0..<count { appendCell(cell(i), index: i, to: &line) }
        endRow(&line)
        self.line = line
    }

    /// The line buffer moved out of the object, so that appending to it per
    /// cell costs no dynamic exclusivity check (they showed in profiles of
    /// million-row exports); put back after the row to keep its capacity.
    private func takeLine() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &line)
        return taken
    }

    private func appendCell(_ cell: Cell, index i: Int, to line: inout [UInt8]) {
        switch format {
        case .csv:
            if i > 0 { line.append(UInt8(ascii: ",")) }
            switch cell {
            case .null: break
            case .integer(let v): appendDecimal(v, to: &line)
            case .real(let d): line.append(contentsOf: exactRealText(d).utf8)
            case .text(let b): appendCSVField(b, to: &line)
            case .blob(let b): appendHexDigits(b, to: &line)
            }
        case .tsv:
            if i > 0 { line.append(0x09) }
            switch cell {
            case .null: break
            case .integer(let v): appendDecimal(v, to: &line)
            case .real(let d): line.append(contentsOf: exactRealText(d).utf8)
            case .text(let b): appendTSVText(b, to: &line)
            case .blob(let b): appendHexDigits(b, to: &line)
            }
        case .json, .jsonl:
            line.append(i == 0 ? UInt8(ascii: "{") : UInt8(ascii: ","))
            jsonKeys[i].withUnsafeBytes { appendJSONString($0, to: &line) }
            line.append(UInt8(ascii: ":"))
            cell.appendJSON(to: &line)
        case .markdown:
            line.append(contentsOf: i == 0 ? "| ".utf8 : " | ".utf8)
            Array(displayText(cell).utf8).withUnsafeBytes { appendMarkdownText($0, to: &line) }
        case .table:
            break
        }
    }

    private func endRow(_ line: inout [UInt8]) {
        switch format {
        case .csv: line.append(contentsOf: [0x0D, 0x0A])
        case .tsv: line.append(0x0A)
        case .json:
            if columns.isEmpty { line.append(UInt8(ascii: "{")) }
            line.insert(contentsOf: (rowCount == 0 ? "\n" : ",\n").utf8, at: 0)
            line.append(UInt8(ascii: "}"))
        case .jsonl:
            if columns.isEmpty { line.append(UInt8(ascii: "{")) }
            line.append(contentsOf: "}\n".utf8)
        case .markdown: line.append(contentsOf: " |\n".utf8)
        case .table: break
        }
        rowCount += 1
        sink.write(line)
    }

    static func uniqueKeys(_ names: [String]) -> [[UInt8]] {
        var seen: [[UInt8]: Int] = [:]
        var taken = Set(names.map { Array($0.utf8) })
        return names.map { name in
            let bytes = Array(name.utf8)
            let count = (seen[bytes] ?? 0) + 1
            seen[bytes] = count
            guard count > 1 else { return bytes }
            var n = count
            var key = bytes + Array(":\(n)".utf8)
            while taken.contains(key) { n += 1; key = bytes + Array(":\(n)".utf8) }
            taken.insert(key)
            return key
        }
    }

    /// Ends the result (closes the JSON array, prints held-back table rows).
    public func finish() {
        switch format {
        case .json:
            sink.write(Array((rowCount == 0 ? "]\n" : "\n]\n").utf8))
        case .table:
            if widths == nil { flushTable() }
        default:
            break
        }
    }

    // MARK: table

    private func holdTableRow(_ cells: [String]) {
        rowCount += 1
        if let widths {
            sink.write(Array(tableLine(cells, widths).utf8))
            return
        }
        pending.append(cells)
        if pending.count >= Self.tableSample { flushTable() }
    }

    private func flushTable() {
        var widths = columns.map { headers ? TerminalText.visible($0).count : 0 }
        for row in pending {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        self.widths = widths
        var out = ""
        if headers && !columns.isEmpty {
            out += tableLine(columns.map { TerminalText.visible($0) }, widths)
            out += tableLine(widths.map { String(repeating: "-", count: $0) }, widths)
        }
        for row in pending { out += tableLine(row, widths) }
        pending = []
        sink.write(Array(out.utf8))
    }

    private func tableLine(_ cells: [String], _ widths: [Int]) -> String {
        var out = ""
        for (i, cell) in cells.enumerated() {
            if i > 0 { out += "  " }
            out += i == cells.count - 1 ? cell : cell.padding(to: widths[i])
        }
        return out + "\n"
    }

    /// A cell as people read it: NULL as "NULL", BLOB as x'..', control
    /// characters and bytes that are not UTF-8 made visible (`TerminalText`).
    func displayText(_ cell: Cell) -> String {
        switch cell {
        case .null: return "NULL"
        case .integer(let v): return String(v)
        case .real(let d): return exactRealText(d)
        case .text(let b):
            // Byte by byte: CR LF is one Swift Character, and the bytes need
            // not be UTF-8.
            return TerminalText.visible(bytes: b)
        case .blob(let b):
            var out: [UInt8] = Array("x'".utf8)
            appendHexDigits(b, to: &out)
            out.append(UInt8(ascii: "'"))
            return String(decoding: out, as: UTF8.self)
        }
    }
}

func appendCSVField(_ bytes: [UInt8], to out: inout [UInt8]) {
    bytes.withUnsafeBytes { appendCSVField($0, to: &out) }
}

func appendCSVField(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    let needsQuotes = bytes.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0A || $0 == 0x0D }
    guard needsQuotes else { out.append(contentsOf: bytes); return }
    out.append(UInt8(ascii: "\""))
    for byte in bytes {
        out.append(byte)
        if byte == UInt8(ascii: "\"") { out.append(byte) }
    }
    out.append(UInt8(ascii: "\""))
}

func appendTSVText(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    for byte in bytes {
        switch byte {
        case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
        case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
        case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        default: out.append(byte)
        }
    }
}

/// Markdown is for people too: a newline becomes `<br>`, a `|` is escaped,
/// and other control characters are made visible (`TerminalText`).
func appendMarkdownText(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    var plain: [UInt8] = []
    for byte in bytes {
        switch byte {
        case UInt8(ascii: "|"): plain.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "|")])
        case 0x0A: plain.append(contentsOf: "<br>".utf8)
        case 0x0D: break
        default: plain.append(byte)
        }
    }
    TerminalText.append(plain, .line, to: &out)
}
