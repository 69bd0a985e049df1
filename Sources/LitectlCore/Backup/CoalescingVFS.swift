// A VFS over the default one that gathers sequential writes to a database
// file into 2 MiB chunks (`CoalescedWriter`, which can also hash them): the
// backup API writes its destination one page per write(), which on a large
// copy costs more system time than the copy itself. (The unix VFS caps one
// write at 128 KiB, so the chunks are written through a descriptor of our own
// on the same file.) Every other file method first writes the pending chunk,
// so SQLite never sees the file behind its own writes.
// A writer may also be told to keep only the first bytes of the file (a
// repository backup of a WAL source reads the pages from the source's
// snapshot instead): the file then reports the size written, and a read of
// a dropped range fails rather than returning zeros.
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
    /// pMethods, then our state pointer, then the wrapped file.
    static let header = 16

    /// Per open file: the writer of a main database file (nil for any other file).
    final class State {
        let writer: CoalescedWriter?
        init(writer: CoalescedWriter?) { self.writer = writer }
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
            let state = State(writer: fd >= 0 ? CoalescedWriter(descriptor: fd) : nil)
            (UnsafeMutableRawPointer(file) + 8).storeBytes(of: Unmanaged.passRetained(state).toOpaque(), as: UnsafeMutableRawPointer.self)
            file.pointee.pMethods = UnsafePointer(CoalescingVFS.methods)
            return SQLITE_OK
        }
        var m = sqlite3_io_methods()
        m.iVersion = 1
        m.xClose = { file in
            let rc = state(file!).writer?.finish() ?? SQLITE_OK
            let inner = innerFile(file!)
            let rc2 = inner.pointee.pMethods.pointee.xClose(inner)
            let raw = (UnsafeMutableRawPointer(file!) + 8).load(as: UnsafeMutableRawPointer.self)
            Unmanaged<State>.fromOpaque(raw).release()
            return rc != SQLITE_OK ? rc : rc2
        }
        m.xRead = { file, buffer, amount, offset in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            // Bytes the writer dropped (`keepOnly`) cannot be read back: never zeros in their place.
            if let writer = state(file!).writer, writer.dropped(Int(amount), at: offset) { return SQLITE_IOERR | (1 << 8) }  // SQLITE_IOERR_READ
            let inner = innerFile(file!)
            return inner.pointee.pMethods.pointee.xRead(inner, buffer, amount, offset)
        }
        m.xWrite = { file, buffer, amount, offset in
            guard let writer = state(file!).writer else {
                let inner = innerFile(file!)
                return inner.pointee.pMethods.pointee.xWrite(inner, buffer, amount, offset)
            }
            return writer.append(buffer!, count: Int(amount), at: offset)
        }
        m.xTruncate = { file, size in
            let rc = flush(file!); if rc != SQLITE_OK { return rc }
            state(file!).writer?.truncated(to: size)
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
            let rc2 = inner.pointee.pMethods.pointee.xFileSize(inner, size)
            // A copy that keeps only its first bytes is as long as what was written to it.
            if rc2 == SQLITE_OK, let writer = state(file!).writer, writer.keptBelow != Int64.max, let size {
                size.pointee = max(size.pointee, writer.logicalSize)
            }
            return rc2
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
            // A size hint (one per few hundred pages written) need not wait: the
            // unix VFS only acts on it with a chunk size or mmap, neither set
            // on a backup destination, and our pending chunks land after it anyway.
            if op != SQLITE_FCNTL_SIZE_HINT {
                let rc = flush(file!); if rc != SQLITE_OK { return rc }
            }
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

    /// Waits until the pending chunks are on the file; SQLITE_OK or the first write error.
    static func flush(_ file: UnsafeMutablePointer<sqlite3_file>) -> Int32 {
        state(file).writer?.flush() ?? SQLITE_OK
    }

    /// The writer of `connection`'s main database file, when it is open through this VFS.
    static func writer(of connection: OpaquePointer) -> CoalescedWriter? {
        var pointer: UnsafeMutableRawPointer?
        guard sqlite3_file_control(connection, "main", SQLITE_FCNTL_FILE_POINTER, &pointer) == SQLITE_OK,
              let file = pointer?.assumingMemoryBound(to: sqlite3_file.self),
              file.pointee.pMethods == UnsafePointer(methods) else { return nil }
        return state(file).writer
    }
}
