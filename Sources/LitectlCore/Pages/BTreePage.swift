// The b-tree page layout of the SQLite file format, read in place: page
// header, cell pointers, cells, payloads and their overflow, record fields.
// Every read is checked against the usable area (the page less its reserved
// bytes): `header()` and `cell(_:)` throw a PageError on any bytes; the
// optional-returning helpers below them (used by the shared-pages shortcut)
// give nil instead.
// https://www.sqlite.org/fileformat2.html#b_tree_pages

/// A b-tree page's header and cells, read in place.
struct BTreePage {
    let bytes: UnsafeRawBufferPointer
    let usable: Int
    /// Where the b-tree header starts: 100 on page 1 (after the database header), else 0.
    let headerOffset: Int

    static let tableInterior: UInt8 = 0x05, tableLeaf: UInt8 = 0x0D
    static let indexInterior: UInt8 = 0x02, indexLeaf: UInt8 = 0x0A

    init(bytes: UnsafeRawBufferPointer, usable: Int, headerOffset: Int = 0) {
        self.bytes = bytes
        self.usable = min(usable, bytes.count)
        self.headerOffset = headerOffset
    }

    /// Page `number` of a file: its header follows the 100-byte database header on page 1.
    init(bytes: UnsafeRawBufferPointer, usable: Int, page number: UInt32) {
        self.init(bytes: bytes, usable: usable, headerOffset: number == 1 ? 100 : 0)
    }

    var type: UInt8 { headerOffset < usable ? bytes[headerOffset] : 0 }
    var isValid: Bool { [Self.tableInterior, Self.tableLeaf, Self.indexInterior, Self.indexLeaf].contains(type) }
    var isLeaf: Bool { type == Self.tableLeaf || type == Self.indexLeaf }
    var isTable: Bool { type == Self.tableInterior || type == Self.tableLeaf }
    var cellCount: Int { headerOffset + 5 <= usable ? Int(u16(headerOffset + 3)) : 0 }
    var rightChild: UInt32 { headerOffset + 12 <= usable ? u32(headerOffset + 8) : 0 }
    /// Where the cell pointer array starts.
    var cellPointers: Int { headerOffset + (isLeaf ? 8 : 12) }

    func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]) }
    func u32(_ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    // MARK: Checked reading

    /// The page's header fields, checked: a known page type, and a cell
    /// pointer array that fits in the usable area with no more cells than a
    /// page of this size can hold.
    func header() throws -> (type: UInt8, cellCount: Int, rightChild: UInt32) {
        guard headerOffset + 8 <= usable, isValid else {
            throw PageError(.badPageType, "not a b-tree page (type byte \(type))")
        }
        let count = cellCount
        guard cellPointers + 2 * count <= usable, count <= (bytes.count - 8) / 6 else {
            throw PageError(.badHeader, "\(count) cells do not fit in the page")
        }
        return (type, count, isLeaf ? 0 : rightChild)
    }

    /// Cell `i` (after `header()` succeeded), every offset checked.
    func cell(_ i: Int) throws -> BTreeCell {
        guard i >= 0, i < cellCount else { throw PageError(.badCell, cell: i, "no such cell") }
        let pointer = cellPointers + 2 * i
        guard pointer + 2 <= usable else { throw PageError(.badHeader, cell: i, "cell pointer past the page") }
        var at = Int(u16(pointer))
        guard at >= cellPointers + 2 * cellCount, at < usable else {
            throw PageError(.badCell, cell: i, "cell starts at \(at), outside the cell content area")
        }
        guard let base = bytes.baseAddress else { throw PageError(.badCell, cell: i, "empty page") }
        var cell = BTreeCell()
        let type = self.type
        if type != Self.tableLeaf && type != Self.indexLeaf {
            guard at + 4 <= usable else { throw PageError(.badCell, cell: i, "child pointer past the page") }
            cell.leftChild = u32(at)
            at += 4
        }
        if type == Self.tableInterior {
            guard let key = Varint.read(base, at, usable) else { throw PageError(.badCell, cell: i, "key runs past the page") }
            cell.rowid = Int64(bitPattern: key.value)
            return cell
        }
        guard let size = Varint.read(base, at, usable), size.value <= UInt64(Int32.max) else {
            throw PageError(.badCell, cell: i, "payload size runs past the page or is too large")
        }
        at += size.length
        if type == Self.tableLeaf {
            guard let rowid = Varint.read(base, at, usable) else { throw PageError(.badCell, cell: i, "rowid runs past the page") }
            cell.rowid = Int64(bitPattern: rowid.value)
            at += rowid.length
        }
        let p = Int(size.value)
        let local = BTreePage.localSize(payload: p, usable: usable, table: type == Self.tableLeaf)
        cell.payloadSize = p
        cell.localStart = at
        cell.localSize = local
        if local < p {
            guard at + local + 4 <= usable else {
                throw PageError(.badCell, cell: i, "payload of \(p) bytes runs past the page")
            }
            cell.overflow = u32(at + local)
        } else {
            guard at + local <= usable else { throw PageError(.badCell, cell: i, "payload of \(p) bytes runs past the page") }
        }
        return cell
    }

    /// How many of a `payload`-byte payload's bytes a cell keeps on its page
    /// (the rest goes to overflow pages): the file format's X, M and K.
    static func localSize(payload p: Int, usable u: Int, table: Bool) -> Int {
        let maxLocal = table ? u - 35 : (u - 12) * 64 / 255 - 23
        if p <= maxLocal { return p }
        let minLocal = (u - 12) * 32 / 255 - 23
        let k = minLocal + (p - minLocal) % (u - 4)
        return k <= maxLocal ? k : minLocal
    }

    // MARK: Unchecked helpers (nil on malformed bytes)

    /// Where cell `i` starts, nil when outside the page.
    func cellStart(_ i: Int) -> Int? {
        let pointer = cellPointers + 2 * i
        guard pointer + 2 <= usable else { return nil }
        let start = Int(u16(pointer))
        return start >= cellPointers && start < usable ? start : nil
    }

    /// The left child of interior cell `i`.
    func child(_ i: Int) -> UInt32? {
        guard let start = cellStart(i), start + 4 <= usable else { return nil }
        return u32(start)
    }

    /// A varint at `at`: its value and length, nil past the usable area.
    func varint(_ at: Int) -> (value: UInt64, length: Int)? {
        guard let base = bytes.baseAddress, at >= 0 else { return nil }
        return Varint.read(base, at, usable)
    }

    /// The payload of cell `i`: where it starts, its total size, the bytes
    /// stored on this page, and the first overflow page (0 when none).
    /// nil for a table interior page (no payload) or a malformed cell.
    func payload(_ i: Int) -> (start: Int, size: Int, local: Int, overflow: UInt32)? {
        guard type != Self.tableInterior, let cell = try? cell(i) else { return nil }
        return (cell.localStart, cell.payloadSize, cell.localSize, cell.overflow)
    }

    /// The rowid of table-leaf cell `i`.
    func rowid(_ i: Int) -> Int64? {
        guard type == Self.tableLeaf, let cell = try? cell(i) else { return nil }
        return cell.rowid
    }

    /// The first `count` fields of the record in index cell `i` (a WITHOUT
    /// ROWID table's key columns), nil when they do not lie on this page.
    func keyFields(_ i: Int, count: Int) -> [Value]? {
        guard let cell = try? cell(i), type == Self.indexLeaf || type == Self.indexInterior,
              let base = bytes.baseAddress else { return nil }
        let start = base + cell.localStart
        guard let header = try? RecordHeader.size(start, local: cell.localSize, payloadSize: cell.payloadSize),
              header.size <= cell.localSize else { return nil }
        var fields: [RecordField] = []
        guard (try? RecordHeader.parse(start, headerSize: header.size, sizeLength: header.length,
                                       payloadSize: cell.payloadSize, limit: count, into: &fields)) != nil,
              fields.count == count else { return nil }
        var values: [Value] = []
        for field in fields {
            guard field.end <= cell.localSize else { return nil }
            values.append(SerialType.cell(field.type, start + field.offset).value)
        }
        return values
    }

    /// The children of an interior page, in key order.
    func children() -> [UInt32]? {
        var result: [UInt32] = []
        result.reserveCapacity(cellCount + 1)
        for i in 0..<cellCount {
            guard let child = child(i) else { return nil }
            result.append(child)
        }
        result.append(rightChild)
        return result
    }
}

/// One cell of a b-tree page, as offsets into its page.
struct BTreeCell {
    /// The child page left of this cell (interior pages), else 0.
    var leftChild: UInt32 = 0
    /// The rowid (table leaf) or key (table interior), else 0.
    var rowid: Int64 = 0
    /// The payload's whole size (0 on table interior pages, which have none).
    var payloadSize = 0
    /// Where the payload's local part starts on the page, and its length.
    var localStart = 0
    var localSize = 0
    /// The first overflow page, 0 when the payload is all local.
    var overflow: UInt32 = 0
}
