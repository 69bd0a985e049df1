// The manifest litectl writes beside each backup (`<backup file>.json`): what
// was copied, when, how, and the SHA-256 that `verify` checks later. Retention
// only ever considers files that such a manifest names.
import Foundation

public struct BackupManifest: Sendable, Equatable {
    /// The marker that tells a litectl manifest from any other JSON file.
    public static let format = "litectl-backup-manifest/1"

    public struct Verification: Sendable, Equatable {
        /// quick, full or none.
        public var mode: String
        /// ok, skipped, or the first problem found.
        public var result: String
    }

    /// The backup's file name (in the manifest's folder).
    public var backup: String
    /// The source database, as an absolute path with links resolved.
    public var source: String
    public var startedAt: Double
    public var finishedAt: Double
    public var method: String
    public var strategy: String
    public var restarts: Int
    public var writersBlockedSeconds: Double
    public var journalMode: String
    public var pageSize: Int64
    public var pageCount: Int64
    /// Size of the database copy (uncompressed).
    public var bytes: Int64
    /// Size of the backup file when compressed (nil when not).
    public var compressedBytes: Int64?
    public var gzipLevel: Int?
    /// SHA-256 of the backup file as stored (the .gz when compressed).
    public var sha256: String
    /// SHA-256 of the database bytes (equal to `sha256` when not compressed).
    public var databaseSHA256: String
    public var userVersion: Int64
    /// SHA-256 of `type, name, tbl_name, sql` of every schema row, in
    /// (type, name) byte order, each field followed by a 0 byte (NULL as "\u{1}").
    public var schemaHash: String
    public var sqliteVersion: String
    public var verification: Verification

    public var durationSeconds: Double { finishedAt - startedAt }

    public var json: JSON {
        .object([
            ("format", .string(Self.format)),
            ("backup", .string(backup)),
            ("source", .string(source)),
            ("started_at", .string(Timestamp.iso8601(startedAt))),
            ("finished_at", .string(Timestamp.iso8601(finishedAt))),
            ("started_at_unix", .number(startedAt)),
            ("duration_seconds", .number((durationSeconds * 1000).rounded() / 1000)),
            ("method", .string(method)),
            ("strategy", .string(strategy)),
            ("restarts", .integer(Int64(restarts))),
            ("writers_blocked_seconds", .number((writersBlockedSeconds * 1000).rounded() / 1000)),
            ("journal_mode", .string(journalMode)),
            ("page_size", .integer(pageSize)),
            ("page_count", .integer(pageCount)),
            ("bytes", .integer(bytes)),
            ("compressed_bytes", .optional(compressedBytes) { .integer($0) }),
            ("gzip_level", .optional(gzipLevel) { .integer(Int64($0)) }),
            ("sha256", .string(sha256)),
            ("database_sha256", .string(databaseSHA256)),
            ("user_version", .integer(userVersion)),
            ("schema_hash", .string(schemaHash)),
            ("sqlite_version", .string(sqliteVersion)),
            ("verification", .object([("mode", .string(verification.mode)), ("result", .string(verification.result))])),
        ])
    }

    /// The manifest path for a backup file.
    public static func path(forBackup backupPath: String) -> String { backupPath + ".json" }

    /// Reads a manifest; nil when the file is not a litectl manifest.
    public static func read(_ path: String) throws -> BackupManifest? {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DatabaseError(code: .cantopen, message: "cannot read the manifest", path: path)
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              object["format"] as? String == format else { return nil }
        func string(_ key: String) throws -> String {
            guard let s = object[key] as? String else { throw invalid(key) }
            return s
        }
        func number(_ key: String) throws -> Double {
            guard let n = object[key] as? NSNumber else { throw invalid(key) }
            return n.doubleValue
        }
        func integer(_ key: String) throws -> Int64 {
            guard let n = object[key] as? NSNumber else { throw invalid(key) }
            return n.int64Value
        }
        func invalid(_ key: String) -> DatabaseError {
            DatabaseError(code: .corrupt, message: "invalid manifest (field \(key))", path: path)
        }
        let verification = object["verification"] as? [String: Any]
        let duration = try number("duration_seconds")
        let started = try number("started_at_unix")
        return BackupManifest(
            backup: try string("backup"), source: try string("source"),
            startedAt: started, finishedAt: started + duration,
            method: try string("method"), strategy: try string("strategy"),
            restarts: Int(try integer("restarts")), writersBlockedSeconds: try number("writers_blocked_seconds"),
            journalMode: try string("journal_mode"), pageSize: try integer("page_size"), pageCount: try integer("page_count"),
            bytes: try integer("bytes"), compressedBytes: (object["compressed_bytes"] as? NSNumber)?.int64Value,
            gzipLevel: (object["gzip_level"] as? NSNumber)?.intValue,
            sha256: try string("sha256"), databaseSHA256: try string("database_sha256"),
            userVersion: try integer("user_version"), schemaHash: try string("schema_hash"),
            sqliteVersion: try string("sqlite_version"),
            verification: Verification(mode: verification?["mode"] as? String ?? "none",
                                       result: verification?["result"] as? String ?? "skipped"))
    }
}
