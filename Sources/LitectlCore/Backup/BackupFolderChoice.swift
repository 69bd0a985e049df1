// Choosing a backup from a folder of backups (`restore /backups/ --db app.db
// TARGET`): the backups of one database as `backup` names them and retention
// catalogs them (a litectl manifest beside each), newest first, so that the
// restore takes the newest one that passes verification.

public enum BackupFolderChoice {
    /// The backups in `folder` of the database `database` names (its file
    /// name, `app.db`, or its path), started at or before `at` when given,
    /// newest first. Without `database` the folder must hold backups of one
    /// database only. Empty when the folder holds none.
    public static func candidates(in folder: String, database: String?, at: Double? = nil) throws -> [CatalogEntry] {
        let all = try Retention.manifests(in: folder)
            .filter { Retention.isBackupName($0.manifest.backup, of: $0.manifest.source) && DurableFolder.exists($0.backupPath) }
        let matching = all.filter { entry in
            guard let database else { return true }
            let source = entry.manifest.source
            if database.contains("/") {
                return sameBytes(source, database) || sameBytes(source, BackupJob.resolvedPath(database))
            }
            return sameBytes(DurableFolder.baseName(of: source), database)
        }
        var sources: [String] = []
        for entry in matching where !sources.contains(where: { sameBytes($0, entry.manifest.source) }) {
            sources.append(entry.manifest.source)
        }
        if sources.count > 1 {
            let listed = sources.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.joined(separator: ", ")
            throw DatabaseError(code: .cantopen, message: database == nil
                ? "holds backups of several databases (\(listed)); name one with --db"
                : "holds backups of several databases named \(database!) (\(listed)); give --db the path of one", path: folder)
        }
        return matching.filter { at == nil || $0.manifest.startedAt <= at! }
            .sorted { ($0.manifest.startedAt, $0.backupPath.utf8.count) > ($1.manifest.startedAt, $1.backupPath.utf8.count) }
    }

    /// What to say when `candidates` found nothing.
    public static func noneMessage(database: String?, at: Double?) -> String {
        "no backup\(database.map { " of \($0)" } ?? "")\(at.map { " started at or before \(Timestamp.iso8601($0))" } ?? "") in this folder (a backup file named <name>-<UTC time>.db[.gz] with its litectl manifest beside it)"
    }
}
