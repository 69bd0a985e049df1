// Naming a snapshot on the command line: `latest` (of a database, at or
// before a time) or a unique prefix of its id.
import Foundation

public enum SnapshotSelector {
    /// The fewest hex digits that name a snapshot.
    public static let shortestPrefix = 4

    public static func select(_ name: String, from snapshots: [Snapshot], database: String?, at: Double?,
                              location: String) throws -> Snapshot {
        func fits(_ s: Snapshot) -> Bool {
            if let database, !sameBytes(s.database, database), !sameBytes(s.path, database), !sameBytes(s.path, FilePaths.resolved(database)) { return false }
            if let at, s.time > at { return false }
            return true
        }
        if name == "latest" {
            let candidates = snapshots.filter(fits)
            guard let newest = candidates.max(by: { $0.time < $1.time }) else {
                throw StoreError(.notFound, location: location, message: "no snapshot\(database.map { " of \($0)" } ?? "")\(at.map { " at or before \(Timestamp.iso8601($0))" } ?? "")")
            }
            if database == nil, Set(candidates.map { Array($0.path.utf8) }).count > 1 {
                throw StoreError(.other, location: location, message: "latest is ambiguous: the repository holds several databases; name one with --db")
            }
            return newest
        }
        let lower = name.lowercased()
        guard !lower.isEmpty, lower.allSatisfy(\.isHexDigit) else {
            throw StoreError(.other, location: location, message: "\(name): not a snapshot id (hex digits) or latest")
        }
        // A prefix of 1 to 3 digits names a snapshot only by chance (and the
        // wrong one once another backup lands): snapshots list 8.
        guard lower.count >= Self.shortestPrefix else {
            throw StoreError(.other, location: location, message: "\(name): too short to name a snapshot; give at least \(Self.shortestPrefix) hex digits of its id (snapshots lists 8) or latest")
        }
        let matches = snapshots.filter { $0.id.hasPrefix(lower) }
        if matches.count > 1 { throw StoreError(.other, location: location, message: "\(name): ambiguous, \(matches.count) snapshots start with it") }
        guard let only = matches.first else { throw StoreError(.notFound, location: location, message: "no snapshot \(name)") }
        return only
    }

    /// The time `text` names (`MomentTime.parse`: RFC 3339, -10m, epoch
    /// seconds; a date alone means the end of that day).
    public static func parseTime(_ text: String) throws -> Double {
        try MomentTime.parse(text)
    }
}
