// A record read from a possibly damaged page: its header parsed with the
// file format's checks (sizes that add up exactly to the payload), its fields
// in place in the payload bytes that could be read. A field whose bytes lie
// past a broken overflow chain is lost; the others read exactly. A record
// whose header fails those checks can still be read as sqlite_dbdata reads
// it (the recover extension's reader): field by field while the header and
// the payload last, so that a damaged row is kept (in lost_and_found) rather
// than dropped.
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
    /// Why the header does not describe the payload, when the record was
    /// read field by field despite it (`parse(_:damaged:)`); nil for a
    /// well-formed record.
    private(set) var damage: String?
    /// For a damaged record whose header reads whole and well formed: the
    /// payload size that header describes (then it is the cell's payload
    /// size that may be wrong, see SalvagePage.cellEnds).
    private(set) var describedSize: Int?

    /// Every field's bytes could be read.
    var isComplete: Bool { count == 0 || storage.fields[count - 1].end <= available }

    /// Where a field that lies past the payload "starts": past any payload,
    /// so that `cell(_:)` reads it as lost.
    private static let lostOffset = Int(Int32.max) * 4

    /// Parses the record in `payload`. A well-formed record is parsed as
    /// the file format says; false when its header is not well formed or
    /// could not be read whole, unless `damaged` is true: then it is read as
    /// sqlite_dbdata reads it (a header size past the payload gives no
    /// fields; serial types are read while the header and the payload's
    /// bytes last; a field that runs past the payload is lost, as are those
    /// after it) and `damage` says what was wrong. Such a record is never a
    /// row to trust: its values after the damaged type are probably wrong.
    @discardableResult
    mutating func parse(_ payload: SalvagedPayload, damaged: Bool) -> Bool {
        if parse(payload) { return true }
        guard damaged else { return false }
        parseDamaged(payload)
        return true
    }

    /// Parses the record in `payload`; false when its header is not well
    /// formed or could not be read whole (then the record is no row at all).
    mutating func parse(_ payload: SalvagedPayload) -> Bool {
        count = 0
        damage = nil
        describedSize = nil
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

    /// The fields of a record whose header fails the format's checks, as far
    /// as they can be read (see `parse(_:damaged:)`).
    private mutating func parseDamaged(_ payload: SalvagedPayload) {
        count = 0
        describedSize = nil
        base = payload.bytes
        available = payload.available
        problem = payload.problem
        let readable = min(payload.available, payload.size)
        guard readable > 0, let header = Varint.read32(payload.bytes, 0, readable) else {
            damage = "no record header can be read"
            return
        }
        let headerSize = Int(header.value)
        guard headerSize <= payload.size else {
            damage = "its header size (\(headerSize)) is larger than the payload (\(payload.size) bytes)"
            return
        }
        let headerEnd = min(headerSize, readable)
        var at = header.length
        var offset = headerSize
        var overrun = false
        var described = headerSize
        while at < headerEnd && count < SalvagedRecord.maxFields {
            guard let type = Varint.read32(payload.bytes, at, headerEnd) else { break }
            at += type.length
            let length = SerialType.length(type.value)
            described += length
            if overrun || offset + length > payload.size {
                // sqlite_dbdata reads a field past the payload as NULL, and
                // every field after it from the payload's end.
                overrun = true
                storage.fields[count] = RecordField(type: type.value, offset: SalvagedRecord.lostOffset)
            } else {
                storage.fields[count] = RecordField(type: type.value, offset: offset)
                offset += length
            }
            count += 1
        }
        if at == headerSize && headerSize > header.length && count < SalvagedRecord.maxFields {
            describedSize = described
        }
        if overrun {
            damage = "its fields run past the \(payload.size)-byte payload"
        } else if offset != payload.size {
            damage = "its fields take \(offset) bytes of a \(payload.size)-byte payload"
        } else {
            damage = "its header is malformed"
        }
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
