// Free space and where VACUUM needs it. SQLite's VACUUM builds the new
// database in a temporary file (in the folder SQLite picks for temporary files)
// and then copies it over the original through the rollback journal or the WAL
// beside it: about twice the size of the pages in use, on one file system or
// split over two. VACUUM INTO needs the size of the new file where it goes.
// See https://www.sqlite.org/lang_vacuum.html and https://www.sqlite.org/tempfiles.html
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Space a VACUUM needs on one file system.
public struct SpaceNeed: Sendable {
    /// A folder on that file system (the first one named).
    public var folder: String
    /// Bytes needed there.
    public var needed: Int64
    /// Bytes free there for this process (statvfs f_bavail), nil when unknown.
    public var available: Int64?
    /// What needs the space, in words.
    public var purposes: [String]

    public var isMet: Bool { available.map { $0 >= needed } ?? true }
}

/// A VACUUM refused before it started for lack of disk space.
public struct NotEnoughSpace: Error, CustomStringConvertible, Sendable {
    public var path: String
    public var need: SpaceNeed

    public var description: String {
        "\(path): not enough free disk space: VACUUM needs about \(humanBytes(need.needed)) in \(need.folder) "
            + "(\(need.purposes.joined(separator: " and "))), and \(humanBytes(need.available ?? 0)) is free there"
    }
}

public enum DiskSpace {
    /// Bytes free to this process on the file system holding `folder`.
    public static func available(at folder: String) -> Int64? {
        var info = statvfs()
        guard statvfs(folder, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The folder SQLite's unix VFS puts temporary files in (VACUUM's copy):
    /// as `unixTempFileDir` picks it, the first of sqlite3_temp_directory,
    /// $SQLITE_TMPDIR, $TMPDIR, /var/tmp, /usr/tmp, /tmp and . that is a
    /// folder this process may write and search. `configured` is
    /// sqlite3_temp_directory, as `PRAGMA temp_store_directory` reports it.
    public static func sqliteTemporaryFolder(configured: String?) -> String {
        var candidates: [String?] = []
        candidates.append(configured.flatMap { $0.isEmpty ? nil : $0 })
        candidates.append(getenv("SQLITE_TMPDIR").map { String(cString: $0) })
        candidates.append(getenv("TMPDIR").map { String(cString: $0) })
        candidates += ["/var/tmp", "/usr/tmp", "/tmp", "."]
        for case let folder? in candidates where DurableFolder.isFolder(folder) && access(folder, W_OK | X_OK) == 0 {
            return folder
        }
        return "."
    }

    /// Groups needs (folder, bytes, purpose) by file system, with the free space of each.
    public static func needs(_ items: [(folder: String, bytes: Int64, purpose: String)],
                             freeSpace: (String) -> Int64? = DiskSpace.available(at:)) -> [SpaceNeed] {
        var result: [SpaceNeed] = []
        var devices: [UInt64] = []
        for item in items {
            var info = stat()
            let device = stat(item.folder, &info) == 0 ? UInt64(info.st_dev) : UInt64.max - UInt64(result.count)
            if let i = devices.firstIndex(of: device) {
                result[i].needed += item.bytes
                result[i].purposes.append(item.purpose)
            } else {
                devices.append(device)
                result.append(SpaceNeed(folder: item.folder, needed: item.bytes, available: freeSpace(item.folder),
                                        purposes: [item.purpose]))
            }
        }
        return result
    }
}
