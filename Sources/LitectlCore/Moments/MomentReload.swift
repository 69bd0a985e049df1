// A moment opened again with the repository's index read anew: a moment
// keeps the index it was opened with (and `refreshed` reuses it), so after a
// prune or a repack moved the blobs its page map names, its reads fail until
// it is reloaded (query --follow does so, and tries once more). Built on
// Repository/ (its index).
import Foundation

extension Moment {
    /// The moment with its page map built from the index as the repository
    /// holds it now: a moment at `latest` moves to the newest state; another
    /// keeps its state (its snapshot by id, a chain state by the microsecond
    /// it was observed). The pages fetched so far are shared: each was
    /// checked against its id, and an id names the same bytes whatever pack
    /// holds them.
    public func reloaded() throws -> Moment {
        var when = reference.when
        if when != "latest" { when = state == 0 ? snapshotID : String(format: "%.6f", time) }
        let again = MomentReference(database: reference.database, when: when, text: reference.text)
        return try Moment.open(again, repository: repository, options: options, now: nil, fetcher: pages.fetcher, index: nil)
    }
}
