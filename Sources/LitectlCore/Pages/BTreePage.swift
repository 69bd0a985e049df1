// The b-tree page layout of the SQLite file format, read in place: page
// header, cell pointers, cells, payloads and their overflow, record fields.
// https://www.sqlite.org/fileformat2.html#b_tree_pages

/// A b-tree page's header and cells, read in place.
struct BTreePage {
    let bytes: UnsafeRawBufferPointer
    let usable: Int

    static let tableInterior: UInt8 = 0x05, tableLeaf: UInt8 = 0x0D
    static let indexInterior: UInt8 = 0x02, indexLeaf: UInt8 = 0x0A

    var type: UInt8 { bytes[0] }
    var isValid: Bool { [Self.tableInterior, Self.tableLeaf, Self.indexInterior, Self.indexLeaf].contains(type) }
    var isLeaf: Bool { type == Self.tableLeaf || type == Self.indexLeaf }
    var isTable: Bool { type == Self.tableInterior || type == Self.tableLeaf }
    var cellCount: Int { Int(u16(3)) }
    var rightChild: UInt32 { u32(8) }

    func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]) }
    func u32(_ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    /// Where cell `i` starts, nil when outside the page.
    func cellStart(_ i: Int) -> Int? {
        let pointer = (isLeaf ? 8 : 12) + 2 * i
        guard pointer + 2 <= usable else { return nil }
        let start = Int(u16(pointer))
        return start >= (isLeaf ? 8 : 12) && start < usable ? start : nil
    }

    /// The left child of interior cell `i`.
    func child(_ i: Int) -> UInt32? {
        guard let start = cellStart(i), start + 4 <= usable else { return nil }
        return u32(start)
    }

    /// A varint at `at`: its value and length, nil past the usable area.
    func varint(_ at: Int) -> (value: UInt64, length: Int)? {
        var value: UInt64 = 0
        for i in 0..<9 {
            guard at + i < usable else { return nil }
            let byte = bytes[at + i]
            if i == 8 { return (value << 8 | UInt64(byte), 9) }
            value = value << 7 | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 { return (value, i + 1) }
        }
        return nil
    }

    /// The payload of cell `i`: where it starts, its total size, the bytes
    /// stored on this page, and the first overflow page (0 when none).
    /// nil for a table interior page (no payload) or a malformed cell.
    func payload(_ i: Int) -> (start: Int, size: Int, local: Int, overflow: UInt32)? {
        guard type != Self.tableInterior, var at = cellStart(i) else { return nil }
        if type == Self.indexInterior { at += 4 }
        guard let size = varint(at), size.value < UInt64(Int32.max) else { return nil }
        at += size.length
        if type == Self.tableLeaf {
            guard let rowid = varint(at) else { return nil }
            at += rowid.length
        }
        let p = Int(size.value), u = usable
        let maxLocal = type == Self.tableLeaf ? u - 35 : (u - 12) * 64 / 255 - 23
        let minLocal = (u - 12) * 32 / 255 - 23
        if p <= maxLocal {
            return at + p <= usable ? (at, p, p, 0) : nil
        }
        let k = minLocal + (p - minLocal) % (u - 4)
        let local = k <= maxLocal ? k : minLocal
        guard at + local + 4 <= usable else { return nil }
        return (at, p, local, u32(at + local))
    }

    /// The rowid of table-leaf cell `i`.
    func rowid(_ i: Int) -> Int64? {
        guard type == Self.tableLeaf, let start = cellStart(i), let size = varint(start),
              let rowid = varint(start + size.length) else { return nil }
        return Int64(bitPattern: rowid.value)
    }

    /// The first `count` fields of the record in index cell `i` (a WITHOUT
    /// ROWID table's key columns), nil when they do not lie on this page.
    func keyFields(_ i: Int, count: Int) -> [Value]? {
        guard let cell = payload(i) else { return nil }
        let end = cell.start + cell.local
        guard let headerSize = varint(cell.start), headerSize.value <= UInt64(end - cell.start) else { return nil }
        var typeAt = cell.start + headerSize.length
        var valueAt = cell.start + Int(headerSize.value)
        var values: [Value] = []
        while values.count < count {
            guard typeAt < cell.start + Int(headerSize.value), let serial = varint(typeAt) else { return nil }
            typeAt += serial.length
            let t = serial.value
            let length: Int
            switch t {
            case 0, 8, 9: length = 0
            case 1, 2, 3, 4: length = Int(t)
            case 5: length = 6
            case 6, 7: length = 8
            case 10, 11: return nil
            default: length = Int((t - 12) / 2)
            }
            guard length <= end - valueAt else { return nil }
            switch t {
            case 0: values.append(.null)
            case 8: values.append(.integer(0))
            case 9: values.append(.integer(1))
            case 1...6:
                var v: Int64 = Int64(Int8(bitPattern: bytes[valueAt]))
                for j in 1..<length { v = v << 8 | Int64(bytes[valueAt + j]) }
                values.append(.integer(v))
            case 7:
                var bits: UInt64 = 0
                for j in 0..<8 { bits = bits << 8 | UInt64(bytes[valueAt + j]) }
                values.append(.real(Double(bitPattern: bits)))
            default:
                let content = Array(bytes[valueAt..<(valueAt + length)])
                values.append(t % 2 == 0 ? .blob(content) : .text(content))
            }
            valueAt += length
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
