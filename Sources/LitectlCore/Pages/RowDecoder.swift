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

    deinit {
        cells.deallocate()
        fields.deallocate()
        fieldOf.deallocate()
        realAffinity.deallocate()
        for bytes in defaultBytes { bytes.deallocate() }
    }

    /// Calls `body` with every row of the table (or of one part of its
    /// b-tree, see `BTreeWalker.split`), in key order.
    func forEachRow(in part: TreePart? = nil, _ body: (DecodedRow) throws -> Void) throws {
        let index = layout.withoutRowid
        let visit: (BTreePage, BTreeCell) throws -> Void = { page, cell in
            try body(try self.decode(page, cell))
        }
        if let part {
            try walker.walk(part, index: index, visit)
        } else {
            try walker.walk(layout.root, index: index, visit)
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
            let n = fieldOf[i]
            if n < 0 {
                cells[i] = .integer(cell.rowid)
            } else if n < parsed {
                let field = fields[n]
                var value = SerialType.cell(field.type, record + field.offset)
                switch value {
                case .integer(let v) where realAffinity[i]:
                    value = .real(Double(v))
                case .text(let bytes) where textIsUTF16:
                    let out = converted[i]
                    out.reserve(UTF16Text.maxUTF8Count(bytes.count))
                    let n = UTF16Text.writeUTF8(bytes, bigEndian: bigEndian, to: out.bytes.assumingMemoryBound(to: UInt8.self))
                    value = .text(UnsafeRawBufferPointer(start: out.bytes, count: n))
                default:
                    break
                }
                cells[i] = value
            } else {
                cells[i] = try shortRecordValue(i)
            }
        }
        return DecodedRow(rowid: cell.rowid, cells: UnsafeBufferPointer(cells))
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
