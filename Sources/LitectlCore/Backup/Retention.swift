// Retention of backups, grandfather-father-son like restic's `forget`: keep
// the newest N, and the newest backup of each of the last H hours, D days, W
// weeks and M months that have one. Only backups named by a litectl manifest
// for the same source are ever considered, and manifests of that source whose
// backup never landed are removed.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct RetentionPolicy: Sendable, Equatable {
    public var last = 0, hourly = 0, daily = 0, weekly = 0, monthly = 0

    public init(last: Int = 0, hourly: Int = 0, daily: Int = 0, weekly: Int = 0, monthly: Int = 0) {
        self.last = last; self.hourly = hourly; self.daily = daily; self.weekly = weekly; self.monthly = monthly
    }

    /// No rule given: nothing is ever pruned.
    public var isEmpty: Bool { last == 0 && hourly == 0 && daily == 0 && weekly == 0 && monthly == 0 }
}

/// A backup in a folder, known through its manifest.
public struct CatalogEntry: Sendable {
    public var backupPath: String
    public var manifestPath: String
    public var manifest: BackupManifest
}

public enum Retention {
    /// The indices of `times` (seconds since 1970, UTC) that `policy` keeps.
    /// Buckets are UTC hours, days, ISO weeks (Monday first) and months; an
    /// empty policy keeps everything.
    public static func kept(times: [Double], policy: RetentionPolicy) -> Set<Int> {
        if policy.isEmpty { return Set(times.indices) }
        let order = times.indices.sorted { times[$0] > times[$1] || (times[$0] == times[$1] && $0 > $1) }
        var counters = [policy.last, policy.hourly, policy.daily, policy.weekly, policy.monthly]
        var lastBucket = [Int64?](repeating: nil, count: 5)
        var keep = Set<Int>()
        for index in order {
            let t = times[index]
            let seconds = Int64(t.rounded(.down))
            let days = floorDiv(seconds, 86_400)
            let p = Timestamp.parts(t)
            let buckets: [Int64] = [
                Int64(index) &+ (Int64(1) << 40),  // every backup its own bucket
                floorDiv(seconds, 3_600),
                days,
                floorDiv(days + 3, 7),  // 1970-01-01 was a Thursday: weeks start on Monday
                Int64(p.year) * 12 + Int64(p.month),
            ]
            for rule in 0..<5 where counters[rule] > 0 && lastBucket[rule] != buckets[rule] {
                keep.insert(index)
                lastBucket[rule] = buckets[rule]
                counters[rule] -= 1
            }
        }
        return keep
    }

    /// `kept(times:policy:)`, and one more rule: while the backups it keeps
    /// all lack data (`holdsData` false: a source wiped and backed up with
    /// --allow-empty, or before litectl refused such backups), the newest
    /// backup that holds data is kept too, so that retention never leaves
    /// only empty copies of a database that had data.
    public static func kept(times: [Double], holdsData: [Bool], policy: RetentionPolicy) -> Set<Int> {
        var keep = kept(times: times, policy: policy)
        if !keep.contains(where: { holdsData[$0] }),
           let newest = times.indices.filter({ holdsData[$0] }).max(by: { times[$0] < times[$1] || (times[$0] == times[$1] && $0 < $1) }) {
            keep.insert(newest)
        }
        return keep
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// The backups in `folder` whose manifest names `source` (an absolute,
    /// resolved path) and whose backup file exists, oldest first.
    /// Only backups named as a folder backup of `source` is named count
    /// (`isBackupName`): retention removes nothing else.
    public static func catalog(folder: String, source: String) throws -> [CatalogEntry] {
        try manifests(in: folder, source: source)
            .filter { isBackupName($0.manifest.backup, of: source) && DurableFolder.exists($0.backupPath) }
            .sorted { $0.manifest.startedAt < $1.manifest.startedAt }
    }

    /// The manifests in `folder` for `source` whose backup file does not
    /// exist: left by a run killed (SIGKILL, power loss) after its manifest
    /// landed and before its backup was renamed into place. Oldest first.
    public static func danglingManifests(folder: String, source: String) throws -> [CatalogEntry] {
        try manifests(in: folder, source: source)
            .filter { isBackupName($0.manifest.backup, of: source) && !DurableFolder.exists($0.backupPath) }
            .sorted { $0.manifest.startedAt < $1.manifest.startedAt }
    }

    /// Every litectl manifest in `folder` (for `source` only, when given), in
    /// name order, whether or not its backup exists. A file counts only when
    /// it carries litectl's format marker and is named after the backup it
    /// names, which lies beside it: `<backup>.json`.
    public static func manifests(in folder: String, source: String? = nil) throws -> [CatalogEntry] {
        guard let dir = opendir(folder) else {
            throw DatabaseError(code: .cantopen, message: "cannot list the folder: \(String(cString: strerror(errno)))", path: folder)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name.hasSuffix(".json") && !name.hasPrefix(".") { names.append(name) }
        }
        let prefix = folder.hasSuffix("/") ? folder : folder + "/"
        var entries: [CatalogEntry] = []
        for name in names.sorted() {
            let manifestPath = prefix + name
            guard let manifest = try? BackupManifest.read(manifestPath),
                  source.map({ Array(manifest.source.utf8) == Array($0.utf8) }) ?? true,
                  !manifest.backup.contains("/"), BackupManifest.path(forBackup: manifest.backup) == name
            else { continue }
            entries.append(CatalogEntry(backupPath: prefix + manifest.backup, manifestPath: manifestPath, manifest: manifest))
        }
        return entries
    }

    /// The entries of `catalog` that `policy` does not keep (never the
    /// newest backup holding data while the kept ones hold none).
    public static func toPrune(_ catalog: [CatalogEntry], policy: RetentionPolicy) -> [CatalogEntry] {
        let keep = kept(times: catalog.map(\.manifest.startedAt),
                        holdsData: catalog.map { EmptySource.holdsData(pageCount: $0.manifest.pageCount) }, policy: policy)
        return catalog.indices.filter { !keep.contains($0) }.map { catalog[$0] }
    }

    /// Whether `name` is named as `backup` names a backup of `source` in a
    /// folder: `<source stem>-<YYYYMMDDTHHMMSSZ>[-N].db[.gz]`. Retention
    /// removes nothing else, whatever a manifest says (a manifest naming the
    /// source itself, or any other file of the folder, is not a backup's).
    static func isBackupName(_ name: String, of source: String) -> Bool {
        let stem = Array((BackupJob.backupStem(of: source) + "-").utf8)
        var rest = Array(name.utf8)
        guard rest.starts(with: stem) else { return false }
        rest.removeFirst(stem.count)
        for ext in [".db.gz", ".db"] where rest.count > ext.utf8.count && rest.suffix(ext.utf8.count).elementsEqual(ext.utf8) {
            rest.removeLast(ext.utf8.count)
            // 20261207T091500Z, then an optional -N.
            let digit = { (b: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) }
            guard rest.count >= 16, rest[0..<8].allSatisfy(digit), rest[8] == UInt8(ascii: "T"),
                  rest[9..<15].allSatisfy(digit), rest[15] == UInt8(ascii: "Z") else { return false }
            let tail = rest.dropFirst(16)
            return tail.isEmpty || (tail.first == UInt8(ascii: "-") && tail.count > 1 && tail.dropFirst().allSatisfy(digit))
        }
        return false
    }

    /// Removes each backup and then its manifest, and fsyncs the folder.
    /// Each removal is asked of the write gate as `owner` (the backup
    /// folder's writer): a backup that is one of the run's inputs (a
    /// manifest naming the source itself) is refused, never removed.
    public static func prune(_ entries: [CatalogEntry], owner: WriteGate.Tree? = nil) throws {
        for entry in entries {
            try DurableFolder.remove(entry.backupPath, owner: owner)
            try? DurableFolder.remove(entry.manifestPath, owner: owner)
        }
        if let first = entries.first { try DurableFolder.sync(parentOf: first.backupPath) }
    }

    /// Removes dangling manifests (see `danglingManifests`), each only if its
    /// backup file still does not exist, and fsyncs the folder. Returns the
    /// manifests removed.
    public static func removeDangling(_ entries: [CatalogEntry], owner: WriteGate.Tree? = nil) throws -> [CatalogEntry] {
        var removed: [CatalogEntry] = []
        for entry in entries where !DurableFolder.exists(entry.backupPath) && DurableFolder.exists(entry.manifestPath) {
            try DurableFolder.remove(entry.manifestPath, owner: owner)
            removed.append(entry)
        }
        if let first = removed.first { try DurableFolder.sync(parentOf: first.manifestPath) }
        return removed
    }
}
