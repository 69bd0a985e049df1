// Re-checks a backup later (the restore drill): SHA-256 against its manifest,
// gunzip into a temporary file when compressed, then integrity_check (or
// quick_check) of the database the backup holds.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct BackupCheck: Sendable {
    public var path: String
    /// The manifest beside the backup, when there is one.
    public var manifestPath: String?
    public var compressed: Bool
    /// SHA-256 of the file as stored.
    public var sha256: String
    /// True/false when a manifest gave a hash to compare; nil without manifest.
    public var sha256Matches: Bool?
    /// "ok", or what the check found (or why the file is not a database).
    public var checkResult: String
    public var checkMode: VerifyLevel
    public var pageCount: Int64?

    /// The backup is good: hashes match (when known) and the check passed.
    public var passed: Bool { sha256Matches != false && checkResult == "ok" }
}

/// A backup made ready to read: the database file itself, or its gunzipped
/// temporary copy (removed when this value goes).
public final class PreparedBackup {
    public let check: BackupCheck
    /// The database to read (the backup, or the temporary decompressed copy).
    public let databasePath: String
    let temporary: TemporaryFile?

    init(check: BackupCheck, databasePath: String, temporary: TemporaryFile?) {
        self.check = check; self.databasePath = databasePath; self.temporary = temporary
    }

    public func discard() { temporary?.discard() }
    deinit { temporary?.discard() }
}

/// One thing `verify` reports on.
public enum VerifyItem: Sendable, Equatable {
    /// A backup file to check (its manifest, if any, lies beside it).
    case backup(String)
    /// A manifest whose backup file does not exist: a run was killed between
    /// writing the manifest and renaming the backup into place (or the backup
    /// was removed by hand).
    case missingBackup(backup: String, manifest: String)
}

public enum BackupVerifier {
    /// What to check for one `verify` argument: a backup file; a manifest
    /// (its backup); a folder (the backup of every litectl manifest in it, in
    /// name order; a folder without one is an error); and a manifest whose
    /// backup does not exist, whether the manifest or the backup's path is
    /// given, is reported as such.
    public static func items(for argument: String) throws -> [VerifyItem] {
        if DurableFolder.isFolder(argument) {
            let entries = try Retention.manifests(in: argument)
            if entries.isEmpty {
                throw DatabaseError(code: .cantopen, message: "no litectl backup manifests (<backup>.json) in this folder", path: argument)
            }
            return entries.map { item(backup: $0.backupPath, manifest: $0.manifestPath) }
        }
        if argument.hasSuffix(".json"), DurableFolder.exists(argument),
           let manifest = try? BackupManifest.read(argument), !manifest.backup.contains("/") {
            let folder = DurableFolder.parent(of: argument)
            return [item(backup: (folder.hasSuffix("/") ? folder : folder + "/") + manifest.backup, manifest: argument)]
        }
        let manifestPath = BackupManifest.path(forBackup: argument)
        if !DurableFolder.exists(argument), DurableFolder.exists(manifestPath),
           let manifest = try? BackupManifest.read(manifestPath), manifest.backup == DurableFolder.baseName(of: argument) {
            return [.missingBackup(backup: argument, manifest: manifestPath)]
        }
        return [.backup(argument)]
    }

    private static func item(backup: String, manifest: String) -> VerifyItem {
        DurableFolder.exists(backup) ? .backup(backup) : .missingBackup(backup: backup, manifest: manifest)
    }

    /// Checks the backup at `path`. Throws only when it cannot be checked
    /// (missing, unreadable, no room for the decompressed copy); a backup that
    /// is damaged gives a `BackupCheck` that did not pass.
    public static func verify(_ path: String, level: VerifyLevel = .full) throws -> BackupCheck {
        try prepare(path, level: level).check
    }

    /// `verify`, keeping the database readable for a restore. A compressed
    /// backup is decompressed next to it (or in `$TMPDIR` when that folder is
    /// not writable).
    public static func prepare(_ path: String, level: VerifyLevel) throws -> PreparedBackup {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw DatabaseError(code: .cantopen, message: errno == ENOENT ? "no such file" : String(cString: strerror(errno)), path: path)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw DatabaseError(code: .cantopen, message: "not a regular file", path: path)
        }
        let manifestPath = BackupManifest.path(forBackup: path)
        let manifest = DurableFolder.exists(manifestPath) ? try BackupManifest.read(manifestPath) : nil
        let prefix = try FileCheck.readPrefix(of: path, count: 2)
        let compressed = prefix == [0x1f, 0x8b]

        var databasePath = path
        var temporary: TemporaryFile?
        var stored: StreamDigest
        var databaseDigest: StreamDigest
        var checkResult: String?
        if compressed {
            let file: TemporaryFile
            do {
                file = try TemporaryFile(in: DurableFolder.parent(of: path), stem: DurableFolder.baseName(of: path), permissions: info.st_mode & 0o600)
            } catch {
                let tmp = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
                file = try TemporaryFile(in: tmp, stem: DurableFolder.baseName(of: path), permissions: info.st_mode & 0o600)
            }
            temporary = file
            do {
                (stored, databaseDigest) = try FileStreams.gunzip(path, into: file)
                try file.sync()
            } catch let error as DatabaseError where error.code.primary == .corrupt {
                stored = try FileStreams.digest(of: path)
                databaseDigest = StreamDigest(bytes: 0, sha256: "")
                checkResult = error.message
            }
            databasePath = file.path
        } else {
            stored = try FileStreams.digest(of: path)
            databaseDigest = stored
        }
        var matches: Bool?
        if let manifest {
            matches = Array(manifest.sha256.utf8) == Array(stored.sha256.utf8)
                && (checkResult != nil || Array(manifest.databaseSHA256.utf8) == Array(databaseDigest.sha256.utf8))
        }
        var pageCount: Int64?
        if checkResult == nil {
            do {
                let facts = try BackupJob.inspect(databasePath, verify: level == .none ? .quick : level)
                checkResult = facts.checkResult
                pageCount = facts.pageCount
            } catch let error as DatabaseError where [.notadb, .corrupt].contains(error.code.primary) {
                checkResult = error.message
            }
        }
        let check = BackupCheck(path: path, manifestPath: manifest == nil ? nil : manifestPath, compressed: compressed,
                                sha256: stored.sha256, sha256Matches: matches, checkResult: checkResult ?? "ok",
                                checkMode: level == .none ? .quick : level, pageCount: pageCount)
        return PreparedBackup(check: check, databasePath: databasePath, temporary: temporary)
    }
}
