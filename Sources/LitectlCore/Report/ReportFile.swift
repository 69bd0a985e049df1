// Writing a report page to its file as every litectl writer does: a hidden
// temporary file beside it (removed on error or signal, or by the next run
// after a SIGKILL), fsynced, renamed into place, its folder fsynced; never
// over an existing file without `replace`, never over a database it reads.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum ReportFile {
    /// Writes `html` to `output`. `inputs` are the databases the report
    /// read: `output` may not be one of them or their -wal, -shm or -journal
    /// (by device and inode, so not through a link either), even with `replace`.
    public static func write(_ html: [UInt8], to output: String, replace: Bool, inputs: [String], otherInputs: [String] = []) throws {
        try requireWritable(output, replace: replace, inputs: inputs, otherInputs: otherInputs)
        let folder = DurableFolder.parent(of: output)
        let stem = DurableFolder.baseName(of: output)
        TemporaryFiles.removeStale(in: folder, stem: stem)
        let file = try TemporaryFile(in: folder, stem: stem, permissions: DurableFolder.newFilePermissions)
        do {
            try html.withUnsafeBytes { try file.write($0) }
            try file.commit(as: output, replace: replace)
        } catch {
            file.discard()
            throw error
        }
    }

    /// The checks `write` makes before anything is read or written, so that
    /// a command can fail at once instead of after a long scan: the folder
    /// exists, `output` does not (unless `replace`) and is none of `inputs`
    /// (the databases) nor of `otherInputs` (the earlier stats of --compare).
    public static func requireWritable(_ output: String, replace: Bool, inputs: [String], otherInputs: [String] = []) throws {
        // The database itself, or its -wal, -shm or -journal (the same-file
        // rule): replacing one of those would lose the database's last
        // transactions or corrupt it.
        try SameFileRule.require(output: output, apartFrom: inputs, what: "a database the report reads")
        try SameFileRule.require(output: output, apartFrom: otherInputs, what: "the earlier stats the report compares with")
        let folder = DurableFolder.parent(of: output)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder: \(folder)", path: output)
        }
        if DurableFolder.isFolder(output) {
            throw DatabaseError(code: .cantopen, message: "is a folder; give a file name", path: output)
        }
        if DurableFolder.exists(output) && !replace {
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (--force replaces it)", path: output)
        }
    }
}
