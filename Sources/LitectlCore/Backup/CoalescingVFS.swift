// A VFS over the default one that gathers sequential writes to a database
// file into 4 MiB writes: the backup API writes its destination one page per
// write(), which on a large copy costs more system time than the copy itself.
// (The unix VFS caps one write at 128 KiB, so the buffer is written through a
// descriptor of our own on the same file.)
// Used only for backup destinations (temporary files nothing else opens).
// See https://www.sqlite.org/vfs.html
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum CoalescingVFS {
    static let name = "litectl-coalesce"
    static let capacity = 4 << 20
    /// pMethods, then our state pointer, then the wrapped file.
    static let header = 16

    final class State {
        let buffer: UnsafeMutableRawPointer?
        let capacity: Int
        let descriptor: Int32
        var start: Int64 = 0
        var length = 0
        init(descriptor: Int32) {
            self.descriptor = descriptor
            capacity = descriptor >= 0 ? CoalescingVFS.capacity : 0
            buffer = descriptor >= 0 ? UnsafeMutableRawPointer.allocate(byteCount: CoalescingVFS.capacity, alignment: 4096) : nil
        }
        deinit {
            buffer?.deallocate()
            if descriptor >= 0 { close(descriptor) }
        }
    }

    nonisolated(unsafe) static var base: UnsafeMutablePointer<sqlite3_vfs>?
    /// The file methods, at a fixed address for the life of the process.
    nonisolated(unsafe) static let methods: UnsafeMutablePointer<sqlite3_io_methods> = {
        let p = UnsafeMutablePointer<sqlite3_io_methods>.allocate(capacity: 1)
        p.initialize(to: sqlite3_io_methods())
        return p
    }()

    /// Registers the VFS once (not as the default); returns its name.
    static let registered: String = {
        guard let real = sqlite3_vfs_find(nil) else { return "" }
        base = real
        let vfs = UnsafeMutablePointer<sqlite3_vfs>.allocate(capacity: 1)
        vfs.initialize(to: real.pointee)
        vfs.pointee.iVersion = min(real.pointee.iVersion, 3)
        vfs.pointee.szOsFile = Int32(header) + real.pointee.szOsFile
        vfs.pointee.zName = UnsafePointer(strdup(name))
        vfs.pointee.pNext = nil
        vfs.pointee.xOpen = { _, zName, file, flags, outFlags in
            guard let file, let real = CoalescingVFS.base else { return SQLITE_CANTOPEN }
            let inner = UnsafeMutableRawPointer(file) + CoalescingVFS.header
            let rc = real.pointee.xOpen(real, zName, inner.assumingMemoryBound(to: sqlite3_file.self), flags, outFlags)
            let innerFile = inner.assumingMemoryBound(to: sqlite3_file.self)
            if rc != SQLITE_OK || innerFile.pointee.pMethods == nil {
                file.pointee.pMethods = nil
                if innerFile.pointee.pMethods != nil { _ = innerFile.pointee.pMethods.pointee.xClose(innerFile) }
                return rc == SQLITE_OK ? SQLITE_CANTOPEN : rc
            }
            // Our own descriptor for the big writes (main database files only).
            let fd: Int32 = flags & SQLITE_OPEN_MAIN_DB != 0 && zName != nil ? open(zName!, O_WRONLY | O_CLOEXEC) : -1
            let state = State(descriptor: fd)
            (UnsafeMutableRawPointer(file) + 8).storeBytes(of: Unmanaged.passRetained(state).toOpaque(), as: UnsafeMutableRawPointer.self)
            file.pointee.pMethods = UnsafePointer(CoalescingVFS.methods)
            return SQLITE_OK
        }
        var m = sqlite3_io_methods()
        m.iVersion = 1
        m.xClose = { file in
            let rc = flush(file!)
            let inner = innerFile(file!)
            let rc2 = inner.pointee.pMethods.pointee.xClose(inner)
            let raw = (UnsafeMutableRawPointer(file!) + 8).load(as: UnsafeMutableRawPointer.self)
            Unmanaged<State>.fromOpaque(raw).release()
            return rc != SQLITE_OK ? rc : rc2
        }
        m.xRead = { file, buffer, amount, offset in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xRead(inner, buffer, amount, offset)
        }
        m.xWrite = { file, buffer, amount, offset in
            let s = state(file!)
            let inner = innerFile(file!)
            guard let target = s.buffer, Int(amount) <= s.capacity else {
                let rc = flush(file!); if rc != SQLITE_OK { return rc }
                return inner.pointee.pMethods.pointee.xWrite(inner, buffer, amount, offset)
            }
            if s.length > 0 && (offset != s.start + Int64(s.length) || s.length + Int(amount) > s.capacity) {
                let rc = flush(file!); if rc != SQLITE_OK { return rc }
            }
            if s.length == 0 { s.start = offset }
            (target + s.length).copyMemory(from: buffer!, byteCount: Int(amount))
            s.length += Int(amount)
            return SQLITE_OK
        }
        m.xTruncate = { file, size in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xTruncate(inner, size)
        }
        m.xSync = { file, flags in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xSync(inner, flags)
        }
        m.xFileSize = { file, size in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xFileSize(inner, size)
        }
        m.xLock = { file, level in
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xLock(inner, level)
        }
        m.xUnlock = { file, level in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xUnlock(inner, level)
        }
        m.xCheckReservedLock = { file, out in
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xCheckReservedLock(inner, out)
        }
        m.xFileControl = { file, op, arg in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xFileControl(inner, op, arg)
        }
        m.xSectorSize = { file in
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xSectorSize(inner)
        }
        m.xDeviceCharacteristics = { file in
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xDeviceCharacteristics(inner)
        }
        methods.pointee = m
        guard sqlite3_vfs_register(vfs, 0) == SQLITE_OK else { return "" }
        return name
    }()

    static func innerFile(_ file: UnsafeMutablePointer<sqlite3_file>) -> UnsafeMutablePointer<sqlite3_file> {
        (UnsafeMutableRawPointer(file) + header).assumingMemoryBound(to: sqlite3_file.self)
    }

    static func state(_ file: UnsafeMutablePointer<sqlite3_file>) -> State {
        Unmanaged<State>.fromOpaque((UnsafeMutableRawPointer(file) + 8).load(as: UnsafeMutableRawPointer.self)).takeUnretainedValue()
    }

    /// Writes what the buffer holds.
    static func flush(_ file: UnsafeMutablePointer<sqlite3_file>) -> Int32 {
        let s = state(file)
        guard s.length > 0, let buffer = s.buffer else { return SQLITE_OK }
        var done = 0
        defer { s.length = 0 }
        while done < s.length {
            let n = pwrite(s.descriptor, buffer + done, s.length - done, off_t(s.start) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                return errno == ENOSPC || errno == EFBIG || errno == EDQUOT ? SQLITE_FULL : SQLITE_IOERR | (3 << 8)  // SQLITE_IOERR_WRITE
            }
            if n == 0 { return SQLITE_FULL }
            done += n
        }
        return SQLITE_OK
    }
}
