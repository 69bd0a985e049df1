// Records as the file format lays them out: a header (its own size, then one
// serial type per field, all varints) followed by the fields' bytes. Parsed in
// place and bounds-checked on every read; malformed bytes give a PageError.
// https://www.sqlite.org/fileformat2.html#record_format

/// The varints of the file format: big-endian, 7 bits a byte with the high
/// bit as "more", at most 9 bytes, the 9th contributing all 8 bits.
enum Varint {
    /// The varint at `at`, read no further than `end`: its value and length,
    /// nil when it runs past `end`.
    @inline(__always)
    static func read(_ base: UnsafeRawPointer, _ at: Int, _ end: Int) -> (value: UInt64, length: Int)? {
        guard at < end else { return nil }
        let first = base.load(fromByteOffset: at, as: UInt8.self)
        if first < 0x80 { return (UInt64(first), 1) }
        var value = UInt64(first & 0x7F)
        var i = 1
        while i < 9 {
            guard at + i < end else { return nil }
            let byte = base.load(fromByteOffset: at + i, as: UInt8.self)
            if i == 8 { return (value << 8 | UInt64(byte), 9) }
            value = value << 7 | UInt64(byte & 0x7F)
            i += 1
            if byte < 0x80 { return (value, i) }
        }
        return nil
    }

    /// `read`, with the value as SQLite's 32-bit readers see it (record
    /// headers, payload sizes): anything above 0xFFFFFFFF reads as 0xFFFFFFFF.
    @inline(__always)
    static func read32(_ base: UnsafeRawPointer, _ at: Int, _ end: Int) -> (value: UInt32, length: Int)? {
        guard let v = read(base, at, end) else { return nil }
        return (v.value > 0xFFFF_FFFF ? 0xFFFF_FFFF : UInt32(v.value), v.length)
    }
}

/// Serial types: what a record field holds and how many bytes it takes.
enum SerialType {
    /// The field's length in bytes (types 10 and 11, reserved, take none).
    @inline(__always)
    static func length(_ type: UInt32) -> Int {
        if type >= 12 { return Int((type - 12) / 2) }
        return fixedLength(type)
    }

    /// The lengths of types 0-11: 0, 1, 2, 3, 4, 6, 8, 8, then 0 (a switch,
    /// not a table: this runs for every field of every row).
    @inline(__always)
    private static func fixedLength(_ type: UInt32) -> Int {
        switch type {
        case 1...4: return Int(type)
        case 5: return 6
        case 6, 7: return 8
        default: return 0
        }
    }

    /// The value of a field of serial type `type` whose bytes start at
    /// `bytes` (at least `length(type)` of them), as SQLite's
    /// sqlite3VdbeSerialGet reads it: a NaN reads as NULL, and the reserved
    /// types 10 and 11 as NULL. TEXT is returned in the database's encoding.
    @inline(__always)
    static func cell(_ type: UInt32, _ bytes: UnsafeRawPointer) -> Cell {
        switch type {
        case 0, 10, 11: return .null
        case 8: return .integer(0)
        case 9: return .integer(1)
        case 1...6:
            let n = fixedLength(type)
            var v = Int64(Int8(bitPattern: bytes.load(as: UInt8.self)))
            for j in 1..<n { v = v << 8 | Int64(bytes.load(fromByteOffset: j, as: UInt8.self)) }
            return .integer(v)
        case 7:
            let d = Double(bitPattern: UInt64(bigEndian: bytes.loadUnaligned(as: UInt64.self)))
            return d.isNaN ? .null : .real(d)
        default:
            let buffer = UnsafeRawBufferPointer(start: bytes, count: Int((type - 12) / 2))
            return type & 1 == 0 ? .blob(buffer) : .text(buffer)
        }
    }
}

/// One field of a parsed record header.
struct RecordField {
    var type: UInt32
    /// Where the field's bytes start, from the start of the payload.
    var offset: Int
    var length: Int { SerialType.length(type) }
    var end: Int { offset + length }
}

/// A record header parsed as SQLite's OP_Column parses it.
enum RecordHeader {
    /// The header's size (the varint at the start of the payload) and that
    /// varint's length. `local` bytes of the payload are at `bytes`.
    ///
    /// A size of 0 is a record of no fields (SQLite reads every column of it
    /// as its default); a size that does not cover its own varint, or that
    /// exceeds the payload, is damage.
    static func size(_ bytes: UnsafeRawPointer, local: Int, payloadSize: Int) throws -> (size: Int, length: Int) {
        guard let header = Varint.read32(bytes, 0, min(local, payloadSize)) else {
            throw PageError(.badRecord, "record header size runs past the payload")
        }
        if header.value == 0 { return (0, header.length) }
        guard Int(header.value) > header.length, Int(header.value) <= payloadSize, header.value <= 98307 else {
            throw PageError(.badRecord, "record header size \(header.value) does not fit a payload of \(payloadSize) bytes")
        }
        return (Int(header.value), header.length)
    }

    /// Parses the serial types of the first `limit` fields (fewer when the
    /// header ends first) into `fields`. `bytes` holds at least the whole
    /// header (`headerSize` bytes).
    ///
    /// The checks are SQLite's: the types read must not run past the header;
    /// a header read to its end must describe exactly `payloadSize` bytes;
    /// the fields read must end within the payload. A header that goes on
    /// past `limit` fields is not read further (as SQLite reads only the
    /// columns a statement asks for).
    static func parse(_ bytes: UnsafeRawPointer, headerSize: Int, sizeLength: Int, payloadSize: Int, limit: Int,
                      into fields: inout [RecordField]) throws {
        fields.removeAll(keepingCapacity: true)
        guard headerSize > 0 else { return }
        var at = sizeLength
        var offset = headerSize
        while fields.count < limit && at < headerSize {
            guard let type = Varint.read32(bytes, at, headerSize) else {
                throw PageError(.badRecord, "serial type of field \(fields.count) runs past the record header")
            }
            at += type.length
            fields.append(RecordField(type: type.value, offset: offset))
            offset += SerialType.length(type.value)
            if offset > payloadSize { break }
        }
        if offset > payloadSize || (at >= headerSize && offset != payloadSize) {
            throw PageError(.badRecord, "record fields take \(offset) bytes of a \(payloadSize)-byte payload")
        }
    }

    /// `parse` into room for `limit` fields at `fields` (the row decoder's
    /// hot path: no array to grow); returns how many were parsed. (Named
    /// apart from `parse`: `&array` would convert to this pointer.)
    @inline(__always)
    static func parseFields(_ bytes: UnsafeRawPointer, headerSize: Int, sizeLength: Int, payloadSize: Int, limit: Int,
                            filling fields: UnsafeMutablePointer<RecordField>) throws -> Int {
        guard headerSize > 0 else { return 0 }
        var count = 0
        var at = sizeLength
        var offset = headerSize
        while count < limit && at < headerSize {
            let type: UInt32
            let first = bytes.load(fromByteOffset: at, as: UInt8.self)
            if first < 0x80 {
                type = UInt32(first)
                at += 1
            } else {
                guard let long = Varint.read32(bytes, at, headerSize) else {
                    throw PageError(.badRecord, "serial type of field \(count) runs past the record header")
                }
                type = long.value
                at += long.length
            }
            fields[count] = RecordField(type: type, offset: offset)
            count += 1
            offset += SerialType.length(type)
            if offset > payloadSize { break }
        }
        if offset > payloadSize || (at >= headerSize && offset != payloadSize) {
            throw PageError(.badRecord, "record fields take \(offset) bytes of a \(payloadSize)-byte payload")
        }
        return count
    }

    /// Every field of a whole record (header and data at `payload`) as exact
    /// values, TEXT converted from `encoding` to UTF-8 as SQLite converts it.
    static func values(_ payload: UnsafeRawBufferPointer, encoding: TextEncoding) throws -> [Value] {
        guard let base = payload.baseAddress, payload.count > 0 else {
            throw PageError(.badRecord, "empty record")
        }
        let header = try size(base, local: payload.count, payloadSize: payload.count)
        var fields: [RecordField] = []
        try parse(base, headerSize: header.size, sizeLength: header.length, payloadSize: payload.count, limit: Int.max,
                  into: &fields)
        var converted: [UInt8] = []
        return fields.map { field in
            switch SerialType.cell(field.type, base + field.offset) {
            case .text(let bytes) where encoding != .utf8:
                UTF16Text.toUTF8(bytes, bigEndian: encoding == .utf16be, into: &converted)
                return .text(converted)
            case let cell:
                return cell.value
            }
        }
    }
}
