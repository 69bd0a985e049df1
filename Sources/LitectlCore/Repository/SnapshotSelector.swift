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

    /// UTC `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM`, `YYYY-MM-DDTHH:MM:SS` (a space for the T and a final Z are accepted);
    /// a date alone means the end of that day.
    public static func parseTime(_ text: String) throws -> Double {
        var t = text.trimmingCharacters(in: .whitespaces)
        if t.hasSuffix("Z") { t.removeLast() }
        t = t.replacingOccurrences(of: " ", with: "T")
        let parts = t.split(separator: "T", omittingEmptySubsequences: false)
        let date = parts[0].split(separator: "-").compactMap { Int($0) }
        let clockParts = parts.count > 1 ? parts[1].split(separator: ":", omittingEmptySubsequences: false) : []
        // Seconds may carry a fraction (2026-11-24T10:00:00.123Z, as `snapshots` prints).
        let fraction = clockParts.count == 3 ? Double("0" + (clockParts[2].drop { $0 != "." })) : 0
        let fractionDigits = clockParts.count == 3 ? clockParts[2].drop { $0 != "." }.dropFirst().count : 0
        let clock = clockParts.enumerated().compactMap { i, part in Int(i == 2 ? part.prefix { $0 != "." } : part) }
        guard parts.count <= 2, date.count == 3, (1...12).contains(date[1]), (1...31).contains(date[2]),
              parts.count == 1 || (2...3).contains(clock.count), clock.count == clockParts.count, let fraction, clock.allSatisfy({ $0 >= 0 && $0 < 60 }), clock.first.map({ $0 < 24 }) ?? true else {
            throw ValidationErrorText("--at \(text): not a UTC time like 2026-11-24T10:00:00Z")
        }
        var tm = tm()
        tm.tm_year = Int32(date[0] - 1900); tm.tm_mon = Int32(date[1] - 1); tm.tm_mday = Int32(date[2])
        if clock.isEmpty { tm.tm_hour = 23; tm.tm_min = 59; tm.tm_sec = 59 }
        else { tm.tm_hour = Int32(clock[0]); tm.tm_min = Int32(clock[1]); tm.tm_sec = Int32(clock.count > 2 ? clock[2] : 0) }
        // The end of the unit given, to the microsecond (states are observed
        // to the microsecond): a date means up to 23:59:59.999999, a minute up
        // to :59.999999, a second up to .999999, .123 up to .123999, .000 up
        // to .000999 (the end of its last digit).
        let end = clock.isEmpty ? 0.999999 : (clock.count > 2 ? (fractionDigits > 0 ? fraction + max(0, pow(10, -Double(fractionDigits)) - 1e-6) : 0.999999) : 59.999999)
        return Double(timegm(&tm)) + end
    }
}

/// A usage error raised by the core (the CLI maps it to exit 64).
public struct ValidationErrorText: Error, CustomStringConvertible {
    public var description: String
    public init(_ text: String) { description = text }
}
