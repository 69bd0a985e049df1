// Page sources whose pages carry content addresses (a moment of a
// repository: each page is known by its id before a byte of it is read), so
// that two images can be compared page by page without reading the pages
// they share: the diff of two moments reads only what changed.
import CSQLite

/// An `ImagePages` that can tell, without reading either page, that one of
/// its pages holds the same bytes as the page of the same number in another
/// source (both content-addressed, the same address).
public protocol IdentifiedPages: ImagePages {
    /// True only when page `number` is known to hold the same bytes here and
    /// in `other`; false when they differ, or when either cannot tell (then
    /// the caller reads both).
    func samePage(_ number: Int, in other: any ImagePages) -> Bool

    /// True only when page `number` is known to hold `bytes` (a page of a
    /// file that is no such source, hashed here as this source names its
    /// pages: a moment against a local file); false when it does not or
    /// when this source cannot tell.
    func samePage(_ number: Int, asBytes bytes: UnsafeRawBufferPointer) -> Bool
}

extension IdentifiedPages {
    /// A source that cannot name another file's page tells nothing.
    public func samePage(_ number: Int, asBytes bytes: UnsafeRawBufferPointer) -> Bool { false }
}

extension PageVFS {
    /// The source that `file` (a main database's handle) is served from,
    /// when it is a file of this VFS.
    static func source(of file: UnsafeMutablePointer<sqlite3_file>) -> (any ImagePages)? {
        guard file.pointee.pMethods == UnsafePointer(methods) else { return nil }
        return registration(file).source
    }
}
