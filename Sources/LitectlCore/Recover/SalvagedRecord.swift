// A record read from a possibly damaged page: its header parsed with the
// file format's checks (sizes that add up exactly to the payload), its fields
// in place in the payload bytes that could be read. A field whose bytes lie
// past a broken overflow chain is lost; the others read exactly.
// https://www.sqlite.org/fileformat2.html#record_format

/// One record's fields, borrowed from a payload. A copy shares the fields'
/// memory with its original: only one of them may be parsed again while the
/// other is in use (copies are only passed down a call, never kept).
struct SalvagedRecord {
    /// The most fields a record may have and still be taken for a row
    /// (SQLite's hard column limit).
    static let maxFields = 32767
    /// The most columns a table made for salvaged rows gets (SQLite's
    /// default column limit is 2000); wider records keep their first ones.
    static let maxColumns = 1990

    /// Room for the most fields a record may have; the first `count` are its own.
    private var storage = FieldStorage()
    private(set) var base: UnsafeRawPointer?
    private(set) var available = 0
    private(set) var problem: String?
    private(set) var count = 0

    /// Every field's bytes could be read.
    var isComplete: Bool { count == 0 || storage.fields[count - 1].end <= available }

    /// Parses the record in `payload`; false when its header is not well
    /// formed or could not be read whole (then the record is no row at all).
    mutating func parse(_ payload: SalvagedPayload) -> Bool {
        count = 0
        base = payload.bytes
        available = payload.available
        problem = payload.problem
        guard payload.available > 0 else { return false }
        guard let header = try? RecordHeader.size(payload.bytes, local: payload.available, payloadSize: payload.size),
              header.size <= payload.available else { return false }
        guard let parsed = try? RecordHeader.parseFields(payload.bytes, headerSize: header.size, sizeLength: header.length,
                                                          payloadSize: payload.size, limit: SalvagedRecord.maxFields + 1,
                                                          filling: storage.fields),
              parsed <= SalvagedRecord.maxFields else { return false }
        count = parsed
        // A header cut short by the field limit must still describe the payload.
        if count > 0 && storage.fields[count - 1].end > payload.size {
            count = 0
            return false
        }
        return true
    }

    /// Field `i` (below `count`).
    func field(_ i: Int) -> RecordField { storage.fields[i] }

    /// The serial type of field `i`.
    func type(_ i: Int) -> UInt32 { storage.fields[i].type }

    /// Field `i` as a borrowed cell in the database's encoding, nil when its
    /// bytes could not be read.
    func cell(_ i: Int) -> Cell? {
        guard let base, i < count else { return nil }
        let field = storage.fields[i]
        guard field.end <= available else { return nil }
        return SerialType.cell(field.type, base + field.offset)
    }
}

/// The fields of one record, in memory allocated once (records are parsed
/// millions of times; an array would be cleared and grown each time).
private final class FieldStorage {
    let fields: UnsafeMutablePointer<RecordField>

    init() {
        fields = .allocate(capacity: SalvagedRecord.maxFields + 1)
    }

    deinit { fields.deallocate() }
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
