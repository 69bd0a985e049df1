// What the page readers report when bytes do not make a valid b-tree page,
// cell, record or overflow chain. Every reader in Pages/ throws this rather
// than trapping, whatever the bytes: the diff and hash fall back to SQLite's
// own statements on it, and a salvage tool reports it and goes on.

/// A damaged page, cell, record or chain, with where it was found.
struct PageError: Error, CustomStringConvertible, Equatable {
    enum Kind: Equatable {
        /// The page number lies outside the file (0, or past the snapshot's last page).
        case pageOutOfRange
        /// The page could not be read (I/O error, or a page the reader cannot see).
        case unreadable
        /// The first byte is not one of the four b-tree page types.
        case badPageType
        /// The page is not of the kind its parent leads to expect (table/index, depth).
        case unexpectedPageType
        /// A header field (cell count, cell pointer) points outside the page.
        case badHeader
        /// A cell runs past the usable area, or its sizes do not add up.
        case badCell
        /// A record header that is not well formed (sizes, varints, serial types).
        case badRecord
        /// An overflow chain that ends early, loops, or leaves the file.
        case badOverflow
        /// A b-tree that visits a page twice or is deeper than SQLite allows.
        case badTree
        /// Something the reader does not handle and leaves to SQLite.
        case unsupported
    }

    var kind: Kind
    /// The page where it was found (0 when not known).
    var page: UInt32
    /// The cell on that page, when it concerns one.
    var cell: Int?
    var detail: String

    init(_ kind: Kind, page: UInt32 = 0, cell: Int? = nil, _ detail: String) {
        self.kind = kind
        self.page = page
        self.cell = cell
        self.detail = detail
    }

    var description: String {
        var place = page == 0 ? "" : "page \(page)"
        if let cell { place += (place.isEmpty ? "" : ", ") + "cell \(cell)" }
        return place.isEmpty ? detail : "\(place): \(detail)"
    }

    /// The same error, placed on `page` (and `cell`) when it was not yet.
    func at(page: UInt32, cell: Int? = nil) -> PageError {
        var copy = self
        if copy.page == 0 { copy.page = page }
        if copy.cell == nil { copy.cell = cell }
        return copy
    }
}
