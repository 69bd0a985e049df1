// The migration files of a folder: `NNNN_name.sql` takes a database to version
// NNNN (its PRAGMA user_version), `NNNN_name.down.sql` takes it back. Each file
// is read once, whole, and hashed, so that what runs is exactly what was hashed.
import Foundation

/// One file of SQL: its name in the folder, its text and the SHA-256 of its bytes.
public struct MigrationScriptFile: Sendable {
    public var name: String
    public var path: String
    public var sql: String
    public var sha256: String
}

/// One numbered migration: the file that applies it and, optionally, the one
/// that reverts it.
public struct Migration: Sendable {
    /// The user_version a database has once this migration is applied.
    public var version: Int64
    public var up: MigrationScriptFile
    public var down: MigrationScriptFile?
}

public enum MigrationFolder {
    /// The largest version: PRAGMA user_version is a signed 32-bit integer.
    public static let maximumVersion = Int64(Int32.max)

    /// The migrations in `folder`, in version order. Files that do not end in
    /// `.sql` are ignored (a README, say); a `.sql` file whose name does not
    /// follow `NNNN_name.sql`, two files of one version, a `.down.sql` without
    /// its up file, or a file that is not UTF-8 text is an error, so that a
    /// typo cannot make a migration silently skipped.
    public static func read(_ folder: String) throws -> [Migration] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder", path: folder)
        }
        guard isFolder.boolValue else { throw DatabaseError(code: .cantopen, message: "not a folder", path: folder) }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: folder) } catch {
            throw DatabaseError(code: .cantopen, message: "cannot list the folder: \(error.localizedDescription)", path: folder)
        }
        var ups: [Int64: MigrationScriptFile] = [:]
        var downs: [Int64: MigrationScriptFile] = [:]
        // Byte order, not String order (which would compare canonically equivalent names as equal).
        for name in names.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }) where name.hasSuffix(".sql") {
            guard !name.hasPrefix(".") else { continue }
            let path = (folder.hasSuffix("/") ? folder : folder + "/") + name
            guard let parsed = parse(name) else {
                throw DatabaseError(code: .misuse, message: "not a migration file name (NNNN_name.sql or NNNN_name.down.sql)", path: path)
            }
            let file = try load(path, name: name)
            if parsed.down {
                if let other = downs[parsed.version] {
                    throw DatabaseError(code: .misuse, message: "two down migrations for version \(parsed.version): \(other.name) and \(name)", path: folder)
                }
                downs[parsed.version] = file
            } else {
                if let other = ups[parsed.version] {
                    throw DatabaseError(code: .misuse, message: "two migrations for version \(parsed.version): \(other.name) and \(name)", path: folder)
                }
                ups[parsed.version] = file
            }
        }
        for (version, down) in downs.sorted(by: { $0.key < $1.key }) where ups[version] == nil {
            throw DatabaseError(code: .misuse, message: "\(down.name) has no up migration of its version", path: folder)
        }
        return ups.sorted { $0.key < $1.key }.map { Migration(version: $0.key, up: $0.value, down: downs[$0.key]) }
    }

    /// `(version, down)` for `0012_add_email.sql` or `0012_add_email.down.sql`.
    static func parse(_ name: String) -> (version: Int64, down: Bool)? {
        let bytes = Array(name.utf8)
        var i = 0
        while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
        guard i > 0, i <= 10, i < bytes.count, bytes[i] == UInt8(ascii: "_") else { return nil }
        guard let version = Int64(String(decoding: bytes[0..<i], as: UTF8.self)),
              version >= 1, version <= maximumVersion else { return nil }
        let down = name.hasSuffix(".down.sql")
        let stemEnd = bytes.count - (down ? 9 : 4)
        guard stemEnd > i + 1 else { return nil }   // a name after the underscore
        return (version, down)
    }

    static func load(_ path: String, name: String) throws -> MigrationScriptFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DatabaseError(code: .cantopen, message: "cannot read the file", path: path)
        }
        let bytes = [UInt8](data)
        guard !bytes.contains(0), let sql = String(validatingUTF8: bytes.map { CChar(bitPattern: $0) } + [0]) else {
            throw DatabaseError(code: .misuse, message: "not UTF-8 text", path: path)
        }
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return MigrationScriptFile(name: name, path: path, sql: sql, sha256: hasher.finalizeHex())
    }
}
