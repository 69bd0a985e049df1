// The same-file rule that every command writing a file obeys: its destination
// is never one of its inputs, nor an input's -wal, -journal or -shm, compared
// by device and inode (so through symbolic and hard links), so that `dump
// a.db -o a.db` or `restore B B` is refused before anything is written.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file as the kernel knows it: the same pair means the same file, whatever
/// path (link, hard link, `..`) reached it.
public struct FileIdentity: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64

    /// The identity of the file `path` names (following symbolic links), or
    /// nil when there is none.
    public init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}

public enum SameFileRule {
    /// The files SQLite keeps beside a database while it is used.
    /// See https://www.sqlite.org/tempfiles.html
    public static let companionSuffixes = ["-wal", "-journal", "-shm"]

    /// Throws when `output` is one of `inputs`, or one of their companion
    /// files, compared by device and inode; a missing `output` is compared by
    /// its resolved path with the inputs' companions (which SQLite may create
    /// later). `what` names the inputs in the message: "the database being
    /// dumped", "the backup being restored".
    ///
    /// The error is an error (exit status 2) naming `output`, raised before
    /// the command writes anything.
    public static func require(output: String, apartFrom inputs: [String], what: String) throws {
        let outputIdentity = FileIdentity(output)
        let outputResolved = outputIdentity == nil ? resolvedMissingPath(output) : nil
        for input in inputs {
            let inputIdentity = FileIdentity(input)
            if let outputIdentity, outputIdentity == inputIdentity {
                throw refusal(output, "is \(what) itself (the same file); write to another file")
            }
            for suffix in companionSuffixes {
                let companion = input + suffix
                let isCompanion: Bool
                if let outputIdentity {
                    isCompanion = FileIdentity(companion) == outputIdentity
                } else if let outputResolved, let inputResolved = resolvedExistingPath(input) {
                    isCompanion = Array(outputResolved.utf8) == Array((inputResolved + suffix).utf8)
                } else {
                    isCompanion = false
                }
                if isCompanion {
                    throw refusal(output, "is the \(suffix) file of \(what) (SQLite reads it with the database); write to another file")
                }
            }
        }
    }

    /// Throws when the folder `output` would be replaced (a dump folder
    /// written with --force) while it holds one of `inputs`.
    public static func require(folder output: String, notHolding inputs: [String], what: String) throws {
        guard let folder = FileIdentity(output) else { return }
        for input in inputs {
            guard let resolved = resolvedExistingPath(input) else { continue }
            if FileIdentity(DurableFolder.parent(of: resolved)) == folder {
                throw refusal(output, "holds \(what) (\(DurableFolder.baseName(of: resolved))); write to another folder")
            }
        }
    }

    /// Throws when `output` lies inside the folder `inputFolder` (a folder
    /// repository, whose files a restore reads), through links or not.
    public static func require(output: String, outside inputFolder: String, what: String) throws {
        guard let folder = resolvedExistingPath(inputFolder),
              let target = resolvedExistingPath(output) ?? resolvedMissingPath(output) else { return }
        let prefix = Array((folder == "/" ? "/" : folder + "/").utf8)
        if Array(target.utf8).starts(with: prefix) {
            throw refusal(output, "is inside \(what) (\(inputFolder)), which holds the command's inputs; write outside it")
        }
    }

    static func refusal(_ output: String, _ message: String) -> DatabaseError {
        DatabaseError(code: .cantopen, message: message, path: output)
    }

    /// `path` with every symbolic link resolved, or nil when it does not exist.
    static func resolvedExistingPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// A path that does not exist yet, resolved through its parent folder
    /// (which must exist), or nil.
    static func resolvedMissingPath(_ path: String) -> String? {
        guard let parent = resolvedExistingPath(DurableFolder.parent(of: path)) else { return nil }
        return (parent == "/" ? "" : parent) + "/" + DurableFolder.baseName(of: path)
    }
}
