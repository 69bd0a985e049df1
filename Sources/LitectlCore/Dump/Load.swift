// `litectl load DB INPUT`: the inverse of `dump`, all or nothing. INPUT is a
// SQL script, one CSV or JSON Lines file of a table's rows, or a folder that
// `dump --format csv|jsonl` wrote (its schema.sql, then every table's file,
// then the triggers).

/// What a load is given.
public enum LoadInput: Sendable {
    /// A SQL script; "-" is standard input.
    case script(String)
    /// One file of rows for `table`.
    case rows(path: String, format: RowFileFormat, table: String)
    /// A folder written by `dump --format csv|jsonl`.
    case folder(String)
}

/// What a load did.
public struct LoadSummary: Sendable {
    /// True when the database did not exist and was made by the load.
    public var createdDatabase = false
    /// SQL statements run (the script's transaction control left out).
    public var statements = 0
    /// Rows inserted, updated or deleted, triggers' changes included.
    public var rowsChanged: Int64 = 0
    /// Each file of rows loaded: its path, table and row count.
    public var files: [(path: String, table: String, rows: Int64)] = []
}

public enum Loader {
    /// Loads `input` into the database at `target` (made when missing) in one
    /// transaction: on any error nothing of it stays, and a database the load
    /// was making never appears. With `createTable`, one file of rows makes
    /// its table first (`RowFileLoader.createTable`), in the same transaction.
    public static func load(into target: String, from input: LoadInput, createTable: Bool = false,
                            busyTimeout: Int = Connection.defaultBusyTimeout) throws -> LoadSummary {
        if case .folder(let folder) = input, !DurableFolder.isFolder(folder) {
            throw DatabaseError(code: .cantopen, message: "no such folder", path: folder)
        }
        try SameFileRule.require(output: target, apartFrom: try inputFiles(input), what: "the input being loaded")
        let session = try LoadSession(target: target, busyTimeout: busyTimeout)
        var summary = LoadSummary()
        summary.createdDatabase = session.createsDatabase
        do {
          // All or nothing under a signal or a full disk too (Files/InPlaceWrite.swift):
          // a signal stops the load, which rolls back.
          try Interruption.guarding([session.connection]) {
            switch input {
            case .script(let path):
                try ScriptLoader.run(path: path, session: session)
            case .rows(let path, let format, let table):
                let rows = try RowFileLoader.run(path: path, format: format, table: table, create: createTable, session: session)
                summary.files.append((path, table, rows))
            case .folder(let folder):
                let schema = folder + "/schema.sql"
                if DurableFolder.exists(schema) {
                    try ScriptLoader.run(path: schema, session: session, deferTriggers: true)
                }
                for (path, format) in try rowFiles(in: folder) {
                    let table = RowFileDump.tableName(forFile: path)
                    let rows = try RowFileLoader.run(path: path, format: format, table: table, session: session)
                    summary.files.append((path, table, rows))
                }
            }
            summary.statements = session.statements
            summary.rowsChanged = session.rowsChanged
            try session.commit()
          }
        } catch {
            // The rollback is not cut short by another signal.
            throw Interruption.deferring { () -> any Error in
                session.abandon()
                return reworded(error, target: target, existing: !session.createsDatabase, busyTimeout: busyTimeout)
            }
        }
        do {
            try session.complete()
        } catch {
            session.abandon()
            throw error
        }
        return summary
    }

    /// A failed load's error, once it is rolled back: a signal or a full
    /// disk named as such, and an existing target's journal rolled back
    /// should an I/O error have left it hot.
    static func reworded(_ error: any Error, target: String, existing: Bool, busyTimeout: Int) -> any Error {
        var left: [String] = []
        if existing {
            try? InPlaceWrite.settle(target, busyTimeout: busyTimeout)
            if InPlaceWrite.journalIsHot(target) { left = [target] }
        }
        let consequence = existing ? "nothing was loaded, \(DurableFolder.baseName(of: target)) is as it was" : "nothing was loaded"
        if var error = error as? LoadError, Interruption.received == nil, left.isEmpty {
            if error.message.hasPrefix("database or disk is full") { error.message = "disk full (\(error.message))" }
            return error
        }
        return InPlaceWrite.failure(error, target: target, consequence: consequence, journalLeft: left)
    }

    /// The files a load of `input` reads (standard input reads none).
    static func inputFiles(_ input: LoadInput) throws -> [String] {
        switch input {
        case .script(let path): return path == "-" ? [] : [path]
        case .rows(let path, _, _): return [path]
        case .folder(let folder): return [folder + "/schema.sql"] + (try rowFiles(in: folder).map(\.0))
        }
    }

    /// The CSV and JSON Lines files of a dump folder, in name order with
    /// SQLite's bookkeeping tables (sqlite_sequence, sqlite_stat1/4) last:
    /// loading a table with AUTOINCREMENT moves its sqlite_sequence row.
    static func rowFiles(in folder: String) throws -> [(String, RowFileFormat)] {
        var names: [String] = []
        guard let listing = try? folderListing(folder) else {
            throw DatabaseError(code: .cantopen, message: "cannot list the folder", path: folder)
        }
        names = listing.filter { RowFileFormat.of(path: $0) != nil }
        func isBookkeeping(_ name: String) -> Bool { sqlNameHasPrefix(RowFileDump.tableName(forFile: name), "sqlite_") }
        names.sort { a, b in
            let ka = isBookkeeping(a), kb = isBookkeeping(b)
            return ka != kb ? !ka : compareBytes(Array(a.utf8), Array(b.utf8)) < 0
        }
        return names.map { (folder + "/" + $0, RowFileFormat.of(path: $0)!) }
    }

    static func folderListing(_ folder: String) throws -> [String] {
        guard let dir = opendir(folder) else { throw DatabaseError(code: .cantopen, message: "cannot open", path: folder) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
