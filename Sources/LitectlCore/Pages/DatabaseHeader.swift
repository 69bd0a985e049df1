// The 100-byte header at the start of every SQLite database file, parsed from
// its bytes. See https://www.sqlite.org/fileformat2.html#the_database_header
// (The Debian sqlite3 shell's .dbinfo needs sqlite_dbpage, which its library
// lacks, so litectl reads the header itself.)

/// The fields of a database file header, as stored (big-endian on disk).
public struct DatabaseHeader: Sendable, Equatable {
    public static let size = 100
    static let magic: [UInt8] = Array("SQLite format 3".utf8) + [0]

    /// Page size in bytes (the stored value 1 means 65536).
    public var pageSize: Int
    /// File format write version: 1 legacy (rollback journal), 2 WAL.
    public var writeVersion: Int
    /// File format read version: 1 legacy, 2 WAL.
    public var readVersion: Int
    /// Bytes reserved at the end of each page (for extensions such as checksums).
    public var reservedBytes: Int
    public var maxPayloadFraction: Int
    public var minPayloadFraction: Int
    public var leafPayloadFraction: Int
    /// Incremented on each commit in rollback mode (not in WAL mode).
    public var changeCounter: UInt32
    /// Database size in pages as stored ("in-header database size").
    public var pageCount: UInt32
    public var firstFreelistTrunkPage: UInt32
    public var freelistPageCount: UInt32
    /// The schema cookie (`PRAGMA schema_version`).
    public var schemaCookie: UInt32
    /// Schema format number (1 to 4).
    public var schemaFormat: UInt32
    /// The suggested cache size (`PRAGMA default_cache_size`); 0 = default.
    public var defaultCacheSize: Int32
    /// The largest root b-tree page when auto- or incremental vacuum is on, else 0.
    public var largestRootPage: UInt32
    /// 1 = UTF-8, 2 = UTF-16le, 3 = UTF-16be (0 in a database not yet written).
    public var textEncoding: UInt32
    public var userVersion: Int32
    /// Non-zero for incremental vacuum mode.
    public var incrementalVacuum: UInt32
    public var applicationID: Int32
    /// The change counter value for which `pageCount` is valid.
    public var versionValidFor: UInt32
    /// SQLITE_VERSION_NUMBER of the library that last wrote the file.
    public var sqliteVersionNumber: UInt32

    /// Parses `bytes` (at least 100). Fails with `.notadb` when the magic string
    /// is missing and with `.corrupt` when a field is out of its legal range.
    public init(bytes: [UInt8], path: String? = nil) throws {
        guard bytes.count >= Self.size else {
            throw DatabaseError(code: .notadb,
                                message: "not a SQLite database (the file is \(bytes.count) bytes, shorter than the 100-byte header)",
                                path: path)
        }
        guard Array(bytes[0..<16]) == Self.magic else {
            throw DatabaseError(code: .notadb, message: "not a SQLite database (no \"SQLite format 3\" header)", path: path)
        }
        func u8(_ offset: Int) -> Int { Int(bytes[offset]) }
        func u16(_ offset: Int) -> Int { Int(bytes[offset]) << 8 | Int(bytes[offset + 1]) }
        func u32(_ offset: Int) -> UInt32 {
            UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
        }
        let storedPageSize = u16(16)
        pageSize = storedPageSize == 1 ? 65536 : storedPageSize
        writeVersion = u8(18)
        readVersion = u8(19)
        reservedBytes = u8(20)
        maxPayloadFraction = u8(21)
        minPayloadFraction = u8(22)
        leafPayloadFraction = u8(23)
        changeCounter = u32(24)
        pageCount = u32(28)
        firstFreelistTrunkPage = u32(32)
        freelistPageCount = u32(36)
        schemaCookie = u32(40)
        schemaFormat = u32(44)
        defaultCacheSize = Int32(bitPattern: u32(48))
        largestRootPage = u32(52)
        textEncoding = u32(56)
        userVersion = Int32(bitPattern: u32(60))
        incrementalVacuum = u32(64)
        applicationID = Int32(bitPattern: u32(68))
        versionValidFor = u32(92)
        sqliteVersionNumber = u32(96)

        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
            throw DatabaseError(code: .corrupt, message: "corrupt database header: page size \(storedPageSize) is not a power of two from 512 to 65536", path: path)
        }
        guard maxPayloadFraction == 64, minPayloadFraction == 32, leafPayloadFraction == 32 else {
            throw DatabaseError(code: .corrupt, message: "corrupt database header: payload fractions \(maxPayloadFraction)/\(minPayloadFraction)/\(leafPayloadFraction), expected 64/32/32", path: path)
        }
    }

    /// True when `pageCount` can be trusted (SQLite's rule: non-zero and
    /// `versionValidFor` equal to `changeCounter`).
    public var isPageCountValid: Bool { pageCount != 0 && versionValidFor == changeCounter }

    /// The text encoding's name as `PRAGMA encoding` gives it.
    public var textEncodingName: String? {
        switch textEncoding {
        case 1: "UTF-8"
        case 2: "UTF-16le"
        case 3: "UTF-16be"
        default: nil
        }
    }

    /// 0 none, 1 full, 2 incremental: what `PRAGMA auto_vacuum` reports.
    public var autoVacuum: Int { largestRootPage == 0 ? 0 : (incrementalVacuum != 0 ? 2 : 1) }

    /// "3.40.1" from 3040001.
    public var sqliteVersion: String {
        let n = sqliteVersionNumber
        return "\(n / 1_000_000).\(n / 1_000 % 1_000).\(n % 1_000)"
    }
}
