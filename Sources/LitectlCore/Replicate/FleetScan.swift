// The databases of a folder tree for `replicate --dir`: regular files whose
// name matches the glob and whose first bytes say SQLite in WAL mode. The
// tree is read defensively: symbolic links are never followed (so none
// leads out of the folder, and no loop can form), FIFOs, devices and
// sockets are never opened, a file is opened only to read its first 100
// bytes (non-blocking, no symlink), and a file found not to be a database is
// not read again until its size, time or inode change. Part of the
// replicate capability.
import CSQLite
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What `stat` says of a file, for telling a change.
struct FileStamp: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var mtimeNanos: Int64

    /// The file's stamp (not following a symbolic link), or nil when there is none.
    init?(lstatOf path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        self.init(info)
    }

    init(_ info: stat) {
        device = UInt64(info.st_dev); inode = UInt64(info.st_ino); size = Int64(info.st_size)
        mtimeNanos = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }
}

final class FleetScan {
    let root: String
    let glob: String
    /// Directories deeper than this under the root are not read.
    static let maxDepth = 32
    /// Files seen not to be WAL databases, with their stamp then: not read again until it changes.
    private var rejected: [String: FileStamp] = [:]
    /// Why each rejected file was, said once (a -v note).
    let note: (String) -> Void

    init(root: String, glob: String, note: @escaping (String) -> Void) {
        self.root = root; self.glob = glob; self.note = note
    }

    /// The WAL databases in the tree now, by path (`root/sub/name`), `known`
    /// ones taken as they are (no header read); nil when the folder itself cannot be read.
    func scan(known: (String) -> Bool) -> [String]? {
        var found: [String] = []
        var seenRejected = Set<String>()
        guard walk(root, depth: 0, found: &found, known: known, seenRejected: &seenRejected) else { return nil }
        // Files gone are forgotten.
        if rejected.count != seenRejected.count { rejected = rejected.filter { seenRejected.contains($0.key) } }
        return found
    }

    @discardableResult
    private func walk(_ folder: String, depth: Int, found: inout [String], known: (String) -> Bool, seenRejected: inout Set<String>) -> Bool {
        guard let dir = opendir(folder) else {
            note("\(folder): cannot be read: \(String(cString: strerror(errno)))")
            return false
        }
        defer { closedir(dir) }
        var subfolders: [String] = []
        while let entry = readdir(dir) {
            let type = entry.pointee.d_type
            let name: String? = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                let bytes = raw.bindMemory(to: CChar.self)
                return String(validatingCString: bytes.baseAddress!)
            }
            guard let name else {
                note("\(folder): a name that is not UTF-8 is skipped")
                continue
            }
            if name == "." || name == ".." { continue }
            let path = folder == "/" ? "/" + name : folder + "/" + name
            switch Int32(type) {
            case Int32(DT_DIR):
                subfolders.append(path)
                continue
            case Int32(DT_REG), Int32(DT_UNKNOWN):
                break
            default:
                continue  // symbolic links, FIFOs, sockets, devices: never followed nor opened
            }
            if Self.isCompanion(name) || fnmatch(glob, name, 0) != 0 { continue }
            if known(path) { found.append(path); continue }
            guard let stamp = FileStamp(lstatOf: path) else { continue }
            if Int32(type) == Int32(DT_UNKNOWN) {
                // (A file system that does not say the type in readdir.)
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFDIR { subfolders.append(path); continue }
                guard info.st_mode & S_IFMT == S_IFREG else { continue }
            }
            if let was = rejected[path], was == stamp { seenRejected.insert(path); continue }
            if let why = Self.notWALDatabase(path) {
                if rejected[path] == nil && why != "" { note("\(path): skipped: \(why)") }
                rejected[path] = stamp
                seenRejected.insert(path)
                continue
            }
            rejected[path] = nil
            found.append(path)
        }
        guard depth < Self.maxDepth else {
            if !subfolders.isEmpty { note("\(folder): folders deeper than \(Self.maxDepth) levels are not read") }
            return true
        }
        for sub in subfolders.sorted() { walk(sub, depth: depth + 1, found: &found, known: known, seenRejected: &seenRejected) }
        return true
    }

    /// The files SQLite keeps beside a database.
    static func isCompanion(_ name: String) -> Bool {
        name.hasSuffix("-wal") || name.hasSuffix("-shm") || name.hasSuffix("-journal")
    }

    /// nil when `path` is a regular file that begins as an SQLite database in
    /// WAL mode (file format bytes 18 and 19 both 2: https://www.sqlite.org/fileformat2.html#file_format_version_numbers);
    /// else why not ("" for an empty file, which may become one: not noted).
    static func notWALDatabase(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return "cannot be opened: \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return "not a regular file" }
        if info.st_size == 0 { return "" }
        var header = [UInt8](repeating: 0, count: 20)
        let n = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 20, 0) }
        guard n == 20, Array(header[0..<16]) == Array("SQLite format 3\0".utf8) else { return "not an SQLite database" }
        guard header[18] == 2 && header[19] == 2 else { return "an SQLite database not in WAL mode (switch it with PRAGMA journal_mode=wal)" }
        return nil
    }
}

extension FleetScan {
    /// Why the files `marks` opened are not the database `path` found by the
    /// scan (`identity`: its device and inode then), or nil when they are.
    /// The scan never follows a symbolic link, but SQLite opens by path: a
    /// folder of the tree swapped for a link to another folder between the
    /// scan and a slice would have it read a database outside the tree. So
    /// each descriptor SQLite holds (the database file's, the -wal's) is
    /// asked where it is: the kernel's own name for it (/proc/self/fd) must
    /// be the path found (whose folder is the tree's resolved path, so it
    /// holds no link), and the database file's device and inode the scan's
    /// (`replaced` when only those differ: another file under the name).
    static func openedElsewhere(_ marks: ReadMarks, path: String, identity: (device: UInt64, inode: UInt64)) -> (why: String, replaced: Bool)? {
        for connection in marks.connections {
            var pointer: UnsafeMutableRawPointer?
            guard sqlite3_file_control(connection.rawHandle, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
                  let file = pointer?.assumingMemoryBound(to: sqlite3_file.self), let fd = descriptor(file) else {
                return ("SQLite's file handle cannot be checked (not its unix VFS)", false)
            }
            guard let name = kernelName(fd), name == path else { return ("the file opened is elsewhere (a folder of the path is a symbolic link)", false) }
            var info = stat()
            guard fstat(fd, &info) == 0, UInt64(info.st_dev) == identity.device, UInt64(info.st_ino) == identity.inode else {
                return ("another file under its name", true)
            }
            var wal: UnsafeMutableRawPointer?
            if sqlite3_file_control(connection.rawHandle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK,
               let walFile = wal?.assumingMemoryBound(to: sqlite3_file.self), walFile.pointee.pMethods != nil {
                guard let walFD = descriptor(walFile), let walName = kernelName(walFD), walName == path + "-wal" else {
                    return ("the -wal opened is elsewhere (a folder of the path is a symbolic link)", false)
                }
            }
        }
        return nil
    }

    /// The descriptor of a file SQLite's unix VFS opened: its `unixFile`
    /// begins with three pointers (methods, VFS, inode) and then the
    /// descriptor, as sqlite3.c has laid it out since 3.7. nil when the
    /// file's VFS is not a unix one.
    static func descriptor(_ file: UnsafeMutablePointer<sqlite3_file>) -> Int32? {
        let raw = UnsafeRawPointer(file)
        guard let vfs = raw.load(fromByteOffset: MemoryLayout<UnsafeRawPointer>.stride, as: UnsafePointer<sqlite3_vfs>?.self),
              let name = vfs.pointee.zName, String(cString: name).hasPrefix("unix"),
              Int(vfs.pointee.szOsFile) >= 3 * MemoryLayout<UnsafeRawPointer>.stride + 4 else { return nil }
        let fd = raw.load(fromByteOffset: 3 * MemoryLayout<UnsafeRawPointer>.stride, as: Int32.self)
        return fd >= 0 && fcntl(fd, F_GETFD) != -1 ? fd : nil
    }

    /// The path the kernel gives an open descriptor (its link in /proc/self/fd).
    static func kernelName(_ fd: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = readlink("/proc/self/fd/\(fd)", &buffer, 4096)
        guard n > 0 && n < 4096 else { return nil }
        return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
