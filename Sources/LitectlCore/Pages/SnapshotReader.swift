// The entry point for reading tables from pages: one connection's snapshot
// (its read transaction), the text encoding, and a decoder per table and
// thread. It says why when it cannot serve, so that callers fall back to
// statements and can report it (-v).
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads tables of one connection's snapshot straight from its pages.
final class SnapshotReader {
    let connection: Connection
    let pages: PageFile
    let encoding: TextEncoding

    /// Why a snapshot cannot be read from its pages.
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    /// A reader of `connection`'s snapshot. Call inside the read
    /// transaction, after its first read; `walIndex` is the snapshot's
    /// wal-index header (`WALIndexHeader.pinned`), if known; `cacheChunks`
    /// sizes each decoder's page cache (see `PageFile`).
    init(_ connection: Connection, walIndex: WALIndexHeader?, cacheChunks: Int = 8) throws {
        self.connection = connection
        guard let pages = try PageFile(connection, walIndex: walIndex, cacheChunks: cacheChunks) else {
            throw Unavailable(description: "the file cannot be read through SQLite's handle (or its -wal cannot be seen)")
        }
        guard case .text(let name)? = try connection.scalar("PRAGMA encoding"),
              let encoding = TextEncoding(rawValue: String(decoding: name, as: UTF8.self)) else {
            throw Unavailable(description: "unknown text encoding")
        }
        if encoding != .utf8 && !UTF16Text.matchesLibrary {
            throw Unavailable(description: "this SQLite converts UTF-16 text in a way the page reader does not")
        }
        self.pages = pages
        self.encoding = encoding
    }

    /// The layout of `columns` of `table`, or `TableLayout.Unsupported`
    /// (also when some page of the snapshot cannot be read: pages in a -wal
    /// whose frames are not known).
    func layout(_ table: Table, columns: [String], rowidName: String? = nil) throws -> TableLayout {
        guard pages.seesWholeSnapshot else {
            throw TableLayout.Unsupported(description: "pages in the -wal whose snapshot frames are not known (a commit came while the read began)")
        }
        return try TableLayout.make(connection, table: table, columns: columns, rowidName: rowidName, encoding: encoding)
    }

    /// A decoder of `layout`'s rows for one thread, with page caches of its
    /// own. Decoders of one table share `claimed` (each page is read once).
    func decoder(_ layout: TableLayout, claimed: ClaimedPages) -> RowDecoder {
        RowDecoder(layout: layout, pages: pages.clone(), claimed: claimed)
    }

    /// The number of threads worth using: the online cores, at most `limit`.
    static func threads(limit: Int = 8) -> Int {
        max(1, min(limit, ProcessInfo.processInfo.activeProcessorCount))
    }
}
