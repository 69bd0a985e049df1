// Rows of a table read straight from its b-tree pages: each leaf cell (or
// each entry of a WITHOUT ROWID table's index b-tree) decoded into the values
// a SELECT of the layout's columns returns, exact and without a statement per
// row. Payloads are read from overflow pages only as far as the columns need
// (as SQLite reads them); TEXT of a UTF-16 database is converted to UTF-8 as
// SQLite converts it.

/// One decoded row, borrowed: valid during the callback that receives it.
struct DecodedRow {
    /// The rowid (0 in a WITHOUT ROWID table).
    let rowid: Int64
    /// The layout's columns, in order.
    let cells: UnsafeBufferPointer<Cell>
}

/// Decodes the rows of one table on one thread (see `PageFile.clone`).
final class RowDecoder {
    let layout: TableLayout
    let walker: BTreeWalker
    /// The parsed header's fields (room for `layout.fieldLimit`).
    private let fields: UnsafeMutableBufferPointer<RecordField>
    /// Per column: its record field, or -1 for the rowid; and whether it
    /// reads integers as REAL. Plain values, so that the per-row loop copies
    /// no `TableLayout.Column` (whose strings cost a retain and a release).
    private let fieldOf: UnsafeMutableBufferPointer<Int>
    private let realAffinity: UnsafeMutableBufferPointer<Bool>
    private let fieldLimit: Int
    private let payload = PayloadBuffer()
    private let cells: UnsafeMutableBufferPointer<Cell>
    /// The key cells and record cell of `keysAndRecord`.
    private var keyCells = RowDecoder.cellBuffer(2)
    /// UTF-8 made of each column's UTF-16 TEXT (UTF-16 databases only).
    private let converted: [PayloadBuffer]
    /// Each column's short-record value, once needed, as a cell over `defaultBytes`.
    private var defaults: [Cell?]
    private var defaultBytes: [UnsafeMutableRawPointer] = []
    private let textIsUTF16: Bool
    private let bigEndian: Bool

    init(layout: TableLayout, pages: PageFile, claimed: ClaimedPages) {
        self.layout = layout
        walker = BTreeWalker(pages: pages, claimed: claimed)
        cells = .allocate(capacity: max(layout.columns.count, 1))
        cells.initialize(repeating: .null)
        textIsUTF16 = layout.encoding != .utf8
        bigEndian = layout.encoding == .utf16be
        converted = textIsUTF16 ? layout.columns.map { _ in PayloadBuffer(capacity: 256) } : []
        defaults = Array(repeating: nil, count: layout.columns.count)
        fieldLimit = layout.fieldLimit
        fields = .allocate(capacity: max(layout.fieldLimit, 1))
        fieldOf = .allocate(capacity: max(layout.columns.count, 1))
        realAffinity = .allocate(capacity: max(layout.columns.count, 1))
        for (i, column) in layout.columns.enumerated() {
            if case .field(let n) = column.source { fieldOf[i] = n } else { fieldOf[i] = -1 }
            realAffinity[i] = column.realAffinity
        }
    }

    private static func cellBuffer(_ count: Int) -> UnsafeMutableBufferPointer<Cell> {
        let buffer = UnsafeMutableBufferPointer<Cell>.allocate(capacity: count)
        buffer.initialize(repeating: .null)
        return buffer
    }

    deinit {
        cells.deallocate()
        keyCells.deallocate()
        fields.deallocate()
        fieldOf.deallocate()
        realAffinity.deallocate()
        for bytes in defaultBytes { bytes.deallocate() }
    }

    /// Calls `body` with every row of the table (or of one part of its
    /// b-tree, see `BTreeWalker.split`), in key order.
    func forEachRow(in part: TreePart? = nil, _ body: (DecodedRow) throws -> Void) throws {
        try forEachCell(in: part) { page, cell in
            try body(try self.decode(page, cell))
        }
    }

    /// Calls `body` with every leaf cell of the table (or entry of a WITHOUT
    /// ROWID table's index b-tree), or of one part of its b-tree, in key
    /// order, with its page (a copy, valid during the call).
    func forEachCell(in part: TreePart? = nil, _ body: (BTreePage, BTreeCell) throws -> Void) throws {
        let index = layout.withoutRowid
        if let part {
            try walker.walk(part, index: index, body)
        } else {
            try walker.walk(layout.root, index: index, body)
        }
    }

    /// The row in `cell` of `page` (a leaf cell of a table b-tree, or an
    /// entry of an index b-tree).
    func decode(_ page: BTreePage, _ cell: BTreeCell) throws -> DecodedRow {
        guard let base = page.bytes.baseAddress else { throw PageError(.badCell, "empty page") }
        var record = base + cell.localStart
        var available = cell.localSize
        let header = try RecordHeader.size(record, local: available, payloadSize: cell.payloadSize)
        if header.size > available {
            try Overflow.assemble(cell, page: base, count: header.size, pages: walker.pages, into: payload)
            record = UnsafeRawPointer(payload.bytes)
            available = header.size
        }
        let parsed = try RecordHeader.parseFields(record, headerSize: header.size, sizeLength: header.length,
                                                  payloadSize: cell.payloadSize, limit: fieldLimit,
                                                  filling: fields.baseAddress!)
        let count = layout.columns.count
        var needed = 0
        for i in 0..<count {
            let n = fieldOf[i]
            if n >= 0 && n < parsed { needed = max(needed, fields[n].end) }
        }
        if needed > available {
            try Overflow.assemble(cell, page: base, count: needed, pages: walker.pages, into: payload)
            record = UnsafeRawPointer(payload.bytes)
        }
        for i in 0..<count {
            cells[i] = try column(i, record: record, parsed: parsed, rowid: cell.rowid)
        }
        return DecodedRow(rowid: cell.rowid, cells: UnsafeBufferPointer(cells))
    }

    /// Column `i`'s value in a record whose header `parseFields` read into
    /// `fields` (`parsed` of them), the record's bytes at `record` (as far as
    /// the column's field). The one place a field becomes a value.
    @inline(__always)
    private func column(_ i: Int, record: UnsafeRawPointer, parsed: Int, rowid: Int64) throws -> Cell {
        let n = fieldOf[i]
        if n < 0 { return .integer(rowid) }
        guard n < parsed else { return try shortRecordValue(i) }
        let field = fields[n]
        let value = SerialType.cell(field.type, record + field.offset)
        switch value {
        case .integer(let v) where realAffinity[i]:
            return .real(Double(v))
        case .text(let bytes) where textIsUTF16:
            let out = converted[i]
            out.reserve(UTF16Text.maxUTF8Count(bytes.count))
            let n = UTF16Text.writeUTF8(bytes, bigEndian: bigEndian, to: out.bytes.assumingMemoryBound(to: UInt8.self))
            return .text(UnsafeRawBufferPointer(start: out.bytes, count: n))
        default:
            return value
        }
    }

    /// The row in `cell` of `page` as the layout's columns `keys` (decoded,
    /// in that order) followed by a BLOB cell holding its whole record,
    /// overflow pages included: what a comparison of raw records needs
    /// (equal records under layouts that `decodesAlike` are equal rows;
    /// `decode(record:rowid:)` gives the values of the others). The record
    /// is checked as `decode` checks it (its header, the fields the layout
    /// reads), so a damaged one fails here as it would there.
    func keysAndRecord(_ page: BTreePage, _ cell: BTreeCell, keys: [Int]) throws -> DecodedRow {
        guard let base = page.bytes.baseAddress else { throw PageError(.badCell, "empty page") }
        var record = base + cell.localStart
        if cell.localSize < cell.payloadSize {
            try Overflow.assemble(cell, page: base, count: cell.payloadSize, pages: walker.pages, into: payload)
            record = UnsafeRawPointer(payload.bytes)
        }
        let header = try RecordHeader.size(record, local: cell.payloadSize, payloadSize: cell.payloadSize)
        let parsed = try RecordHeader.parseFields(record, headerSize: header.size, sizeLength: header.length,
                                                  payloadSize: cell.payloadSize, limit: fieldLimit,
                                                  filling: fields.baseAddress!)
        if keyCells.count < keys.count + 1 {
            keyCells.deallocate()
            keyCells = RowDecoder.cellBuffer(keys.count + 1)
        }
        for (k, i) in keys.enumerated() {
            keyCells[k] = try column(i, record: record, parsed: parsed, rowid: cell.rowid)
        }
        keyCells[keys.count] = .blob(UnsafeRawBufferPointer(start: record, count: cell.payloadSize))
        return DecodedRow(rowid: cell.rowid, cells: UnsafeBufferPointer(rebasing: keyCells[0...keys.count]))
    }

    /// The row whose whole record is `record` (from `keysAndRecord`), under
    /// `rowid` (ignored by a WITHOUT ROWID table), decoded as `decode` decodes
    /// it from its page: the same values, by the same code.
    func decode(record: UnsafeRawBufferPointer, rowid: Int64) throws -> DecodedRow {
        var cell = BTreeCell()
        cell.rowid = rowid
        cell.payloadSize = record.count
        cell.localStart = 0
        cell.localSize = record.count
        return try decode(BTreePage(bytes: record, usable: record.count), cell)
    }

    /// What column `i` reads as in a record too short to hold it.
    private func shortRecordValue(_ i: Int) throws -> Cell {
        if let known = defaults[i] { return known }
        let column = layout.columns[i]
        let value = try layout.defaults.value(i, declaredType: column.declaredType, defaultSQL: column.defaultSQL)
        let cell: Cell
        switch value {
        case .null: cell = .null
        case .integer(let v): cell = .integer(v)
        case .real(let v): cell = .real(v)
        case .text(let bytes), .blob(let bytes):
            let storage = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            defaultBytes.append(storage)
            bytes.withUnsafeBytes { storage.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(storage), byteCount: bytes.count) }
            let view = UnsafeRawBufferPointer(start: storage, count: bytes.count)
            if case .text = value { cell = .text(view) } else { cell = .blob(view) }
        }
        defaults[i] = cell
        return cell
    }
}
