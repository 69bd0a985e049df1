// How long work reports how far it got, to whoever draws a progress bar: the
// core never prints, it calls back with counts.

/// Pages (or other units: packs, for `verify --read-data`) done so far, of a total.
public struct CopyProgress: Sendable {
    public var pagesCopied: Int
    public var pageCount: Int
    public init(pagesCopied: Int, pageCount: Int) { self.pagesCopied = pagesCopied; self.pageCount = pageCount }
}
