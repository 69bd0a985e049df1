// What a database file is: its header as stored, the same facts as SQLite
// reports them through pragmas (which include pages still in the -wal), the
// journal and WAL state, and how many objects the schema holds. `litectl info`.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A report on one database file.
public struct DatabaseInfo: Sendable {
    public var path: String
    public var fileSize: Int64
    /// Size of the `-wal` file, nil when there is none.
    public var walSize: Int64?
    /// The header as stored in the file; nil for an empty (0-byte) database.
    public var header: DatabaseHeader?

    // As SQLite reports them (PRAGMA ...), for the current committed state.
    public var pageSize: Int64
    public var pageCount: Int64
    public var freelistCount: Int64
    public var schemaVersion: Int64
    public var userVersion: Int64
    public var applicationID: Int64
    public var journalMode: String
    /// 0 none, 1 full, 2 incremental.
    public var autoVacuum: Int64
    public var encoding: String

    public var objects: ObjectCounts
    /// Bytes of CREATE statements stored in sqlite_schema.
    public var schemaSQLBytes: Int64
    /// The SQLite library litectl runs on.
    public var sqliteLibraryVersion: String

    public struct ObjectCounts: Sendable, Equatable {
        /// Ordinary tables made by the user (not virtual, shadow or sqlite_ tables).
        public var tables = 0
        public var virtualTables = 0
        public var shadowTables = 0
        /// sqlite_sequence, sqlite_stat1 and other tables SQLite keeps.
        public var internalTables = 0
        /// Every index, automatic ones (for UNIQUE / PRIMARY KEY) included.
        public var indexes = 0
        public var automaticIndexes = 0
        public var views = 0
        public var triggers = 0

        public init() {}
    }

    public var autoVacuumName: String {
        switch autoVacuum {
        case 1: "full"
        case 2: "incremental"
        default: "none"
        }
    }

    /// Reads the report for `path`, read-only. The header is read from the file
    /// before SQLite opens it (a second descriptor on an open SQLite file would
    /// drop SQLite's POSIX locks when closed).
    public static func read(path: String, busyTimeout: Int = Connection.defaultBusyTimeout) throws -> DatabaseInfo {
        try FileCheck.requireDatabaseFile(path, writable: false)
        let prefix = try FileCheck.readPrefix(of: path, count: DatabaseHeader.size)
        let header = prefix.isEmpty ? nil : try DatabaseHeader(bytes: prefix, path: path)
        // Taken before SQLite opens the file: a read-only connection to a WAL
        // database creates an empty -wal (and -shm) when they are missing.
        let walSize = FileCheck.size(of: path + "-wal")

        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        var info = try connection.readTransaction {
            func integer(_ pragma: String) throws -> Int64 {
                if case .integer(let v)? = try connection.scalar("PRAGMA main.\(pragma)") { return v }
                return 0
            }
            func text(_ pragma: String) throws -> String {
                try connection.scalar("PRAGMA main.\(pragma)").map { String(decoding: $0.bytesForDisplay, as: UTF8.self) } ?? ""
            }
            return DatabaseInfo(
                path: path, fileSize: 0, walSize: nil, header: header,
                pageSize: try integer("page_size"), pageCount: try integer("page_count"),
                freelistCount: try integer("freelist_count"), schemaVersion: try integer("schema_version"),
                userVersion: try integer("user_version"), applicationID: try integer("application_id"),
                journalMode: try connection.journalMode(), autoVacuum: try integer("auto_vacuum"),
                encoding: try text("encoding"), objects: try countObjects(connection),
                schemaSQLBytes: try connection.scalar(
                    "SELECT coalesce(sum(length(CAST(sql AS BLOB))), 0) FROM main.sqlite_schema")?.integerValue ?? 0,
                sqliteLibraryVersion: Connection.sqliteVersion)
        }
        // A hot journal: the header and size of the committed state read (the
        // private copy; the file holds a stopped writer's pages).
        if connection.hotJournal != nil {
            let committed = try FileCheck.readPrefix(of: connection.readPath, count: DatabaseHeader.size)
            info.header = committed.isEmpty ? nil : try DatabaseHeader(bytes: committed, path: path)
            info.fileSize = FileCheck.size(of: connection.readPath) ?? 0
            try connection.close()
            info.walSize = walSize
            return info
        }
        try connection.close()
        info.fileSize = FileCheck.size(of: path) ?? 0
        info.walSize = walSize
        return info
    }

    private static func countObjects(_ connection: Connection) throws -> ObjectCounts {
        var counts = ObjectCounts()
        let statement = try connection.prepare("""
            SELECT s.type, s.name, s.sql IS NULL, coalesce(l.type, '')
            FROM main.sqlite_schema AS s
            LEFT JOIN pragma_table_list AS l ON l.schema = 'main' AND l.name = s.name AND s.type = 'table'
            """)
        try statement.forEachRow { row in
            let name = row.string(at: 1)
            switch row.string(at: 0) {
            case "table":
                if sqlNameHasPrefix(name, "sqlite_") { counts.internalTables += 1 }
                else if row.string(at: 3) == "virtual" { counts.virtualTables += 1 }
                else if row.string(at: 3) == "shadow" { counts.shadowTables += 1 }
                else { counts.tables += 1 }
            case "index":
                counts.indexes += 1
                if row.int64(at: 2) != 0 { counts.automaticIndexes += 1 }
            case "view": counts.views += 1
            case "trigger": counts.triggers += 1
            default: break
            }
        }
        return counts
    }

    /// The fields whose file-header value differs from what SQLite reports
    /// (pages committed to the -wal but not yet checkpointed into the file).
    public var headerLagsBehind: Bool {
        guard let header else { return false }
        return Int64(header.schemaCookie) != schemaVersion || Int64(header.userVersion) != userVersion
            || (header.isPageCountValid && Int64(header.pageCount) != pageCount)
            || Int64(header.freelistPageCount) != freelistCount
    }
}
