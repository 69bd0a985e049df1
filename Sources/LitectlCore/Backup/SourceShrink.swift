// A source that shrank to nothing is not a backup. SQLite opens a 0-byte
// file as a valid empty database, so a wiped source (an application bug, a
// bad deploy, a full disk) would otherwise be backed up as a 4 KB empty
// copy and, through retention, push the last good backup out. Backups refuse
// a source without tables unless asked, flag one that lost most of its pages
// since its last backup (and then removes none of its older backups in that
// run), and retention keeps the newest backup that holds data.

/// The rules a backup applies to what it copies.
public struct SourceShrinkPolicy: Sendable, Equatable {
    /// Back up a source with no tables or indexes (a 0-byte file included).
    public var allowEmpty = false
    /// Flag a source whose page count fell by more than this fraction since
    /// its last backup (0.9: to a tenth or less); nil never flags.
    public var warnFraction: Double? = 0.9

    public init(allowEmpty: Bool = false, warnFraction: Double? = 0.9) {
        self.allowEmpty = allowEmpty
        self.warnFraction = warnFraction
    }
}

/// A backup whose source lost most of its pages since its last backup.
public struct SourceShrink: Sendable, Equatable {
    public var pages: Int64
    public var previousPages: Int64
    /// When the last backup was made (seconds since 1970).
    public var previousTime: Double

    /// The share of pages lost, 0...1.
    public var fraction: Double { previousPages > 0 ? 1 - Double(pages) / Double(previousPages) : 0 }

    /// `pages` after a backup of `previousPages` at `previousTime`, when the
    /// fall exceeds the policy's fraction; nil otherwise.
    public init?(pages: Int64, previousPages: Int64?, previousTime: Double?, policy: SourceShrinkPolicy) {
        guard let threshold = policy.warnFraction, let previousPages, let previousTime, previousPages > 0,
              Double(pages) < Double(previousPages) * (1 - threshold) else { return nil }
        self.pages = pages
        self.previousPages = previousPages
        self.previousTime = previousTime
    }

    /// One line for people, naming the source; `retention` when --keep-*
    /// rules were given (a run that flags a shrink removes no older backup
    /// of that source: the last good one may be among them).
    public func message(source: String, retention: Bool) -> String {
        "\(source): \(pages == 1 ? "1 page" : "\(pages) pages"), \(Int((fraction * 100).rounded(.down)))% fewer than its last backup (\(previousPages) pages, \(Timestamp.iso8601(previousTime))); backed up, but look at it"
            + (retention ? " (retention removed no older backup of it in this run)" : "")
    }

    public var json: JSON {
        .object([("pages", .integer(pages)), ("previous_pages", .integer(previousPages)),
                 ("previous_time", .string(Timestamp.iso8601(previousTime)))])
    }
}

public enum EmptySource {
    /// Whether a database of `pageCount` pages holds data: every table and
    /// index has a root page of its own past page 1 (which holds only the
    /// schema), so a database of one page (or none: a 0-byte file) has none.
    public static func holdsData(pageCount: Int64) -> Bool { pageCount >= 2 }

    /// Refuses, unless `policy.allowEmpty`, a source that holds no table or
    /// index, as `connection` (the source, opened for the copy) sees it.
    /// Checked before the copy; the copy's page count is checked again after
    /// it (`require(pageCount:...)`), for a source wiped in between. The
    /// source is opened without a busy handler, so a writer's lock (a
    /// rollback journal's EXCLUSIVE) is retried until `timeout` seconds pass,
    /// as the open and the copy retry it.
    public static func require(_ connection: Connection, path: String, policy: SourceShrinkPolicy, timeout: Double) throws {
        guard !policy.allowEmpty else { return }
        let objects = try HotCopy.retryingBusy(Deadline(seconds: timeout), path: path) {
            try connection.scalar("SELECT count(*) FROM sqlite_schema WHERE type IN ('table','index') AND rootpage > 0")
        }
        if case .integer(let n) = objects, n > 0 { return }
        throw refusal(path)
    }

    /// Refuses, unless `policy.allowEmpty`, a copy of `pageCount` pages that holds no data.
    public static func require(pageCount: Int64, path: String, policy: SourceShrinkPolicy) throws {
        guard !policy.allowEmpty, !holdsData(pageCount: pageCount) else { return }
        throw refusal(path)
    }

    static func refusal(_ path: String) -> DatabaseError {
        let bytes = FileCheck.size(of: path)
        let what = bytes == 0 ? "is empty (0 bytes)" : "holds no tables (an empty database)"
        return DatabaseError(code: .empty, message: "\(what); not backed up, since a source that shrank to nothing is not a backup (--allow-empty backs it up anyway)", path: path)
    }
}
