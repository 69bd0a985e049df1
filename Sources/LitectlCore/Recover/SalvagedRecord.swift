// A record read from a possibly damaged page: its header parsed with the
// file format's checks (sizes that add up exactly to the payload), its fields
// in place in the payload bytes that could be read. A field whose bytes lie
// past a broken overflow chain is lost; the others read exactly.
// https://www.sqlite.org/fileformat2.html#record_format

/// One record's fields, borrowed from a payload.
struct SalvagedRecord {
    /// The most fields a record may have and still be taken for a row
    /// (SQLite's hard column limit).
    static let maxFields = 32767
    /// The most columns a table made for salvaged rows gets (SQLite's
    /// default column limit is 2000); wider records keep their first ones.
    static let maxColumns = 1990

    private(set) var fields: [RecordField] = []
    private(set) var base: UnsafeRawPointer?
    private(set) var available = 0
    private(set) var problem: String?

    var count: Int { fields.count }
    /// Every field's bytes could be read.
    var isComplete: Bool { fields.last.map { $0.end <= available } ?? true }

    /// Parses the record in `payload`; false when its header is not well
    /// formed or could not be read whole (then the record is no row at all).
    mutating func parse(_ payload: SalvagedPayload) -> Bool {
        fields.removeAll(keepingCapacity: true)
        base = payload.bytes
        available = payload.available
        problem = payload.problem
        guard payload.available > 0 else { return false }
        guard let header = try? RecordHeader.size(payload.bytes, local: payload.available, payloadSize: payload.size),
              header.size <= payload.available else { return false }
        guard (try? RecordHeader.parse(payload.bytes, headerSize: header.size, sizeLength: header.length,
                                       payloadSize: payload.size, limit: SalvagedRecord.maxFields + 1,
                                       into: &fields)) != nil,
              fields.count <= SalvagedRecord.maxFields else {
            fields.removeAll(keepingCapacity: true)
            return false
        }
        // A header cut short by the field limit must still describe the payload.
        if let last = fields.last, last.end > payload.size { return false }
        return true
    }

    /// The serial type of field `i`.
    func type(_ i: Int) -> UInt32 { fields[i].type }

    /// Field `i` as a borrowed cell in the database's encoding, nil when its
    /// bytes could not be read.
    func cell(_ i: Int) -> Cell? {
        guard let base, i < fields.count, fields[i].end <= available else { return nil }
        return SerialType.cell(fields[i].type, base + fields[i].offset)
    }
}

/// What a serial type stores, for matching rows with tables.
enum StoredClass {
    case null, integer, real, text, blob

    init(serialType t: UInt32) {
        switch t {
        case 0, 10, 11: self = .null
        case 1...6, 8, 9: self = .integer
        case 7: self = .real
        default: self = t & 1 == 0 ? .blob : .text
        }
    }
}
