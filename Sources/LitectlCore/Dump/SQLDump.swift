// `litectl dump`'s SQL script: a database as the statements that rebuild it
// exactly in a new, empty file, streamed row by row (memory stays flat). Like
// the sqlite3 shell's .dump, but every value is written with the exact literal
// writer, rowids are kept, virtual tables come back with their very index
// (shadow tables refilled), and the file's settings (page size, auto_vacuum,
// encoding, user_version, application_id, WAL) travel too.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a dump wrote.
public struct DumpSummary: Sendable {
    public struct TableRows: Sendable {
        public var name: String
        public var rows: Int64
        /// The file written for it (CSV and JSON Lines dumps).
        public var file: String?
    }

    public var tables: [TableRows] = []
    /// Rowid tables whose rowids could not be kept: columns named rowid,
    /// _rowid_ and oid leave no name to write them under.
    public var rowidsNotKept: [String] = []
    public var rows: Int64 { tables.reduce(0) { $0 + $1.rows } }
}

public enum SQLDump {
    /// Writes the dump of the database at `path` to `sink`, reading it
    /// read-only in one read transaction (one snapshot, even under writers).
    ///
    /// When a table cannot be read to its end the script written so far is
    /// closed with `ROLLBACK` and a comment saying why (a loader then keeps
    /// nothing of it), and `DumpStopped` is thrown.
    public static func write(path: String, options: DumpOptions, to sink: ByteSink,
                             busyTimeout: Int = Connection.defaultBusyTimeout) throws -> DumpSummary {
        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        // Cells that overflow their page are reported as damage instead of being read past.
        try connection.execute("PRAGMA cell_size_check=ON")
        return try connection.readTransaction {
            let plan = try DumpPlan.read(connection, options: options)
            var writer = ScriptWriter(connection: connection, plan: plan, options: options, sink: sink)
            do {
                try writer.writeAll()
            } catch let stopped as DumpStopped {
                sink.write(Array("-- litectl: \(stopped.description.replacingNewlines())\n-- This dump is incomplete: it rolls back.\nROLLBACK;\n".utf8))
                try? sink.flush()
                throw stopped
            }
            return writer.summary
        }
    }
}

extension SQLDump {
    /// Writes the dump into the file `output`: a hidden temporary file beside
    /// it, fsynced and renamed, so that `output` appears only complete; an
    /// existing `output` is replaced only when `replace`. A killed run's
    /// temporary file is removed by the next dump to the same name.
    public static func write(path: String, options: DumpOptions, toFile output: String, replace: Bool,
                             busyTimeout: Int = Connection.defaultBusyTimeout) throws -> DumpSummary {
        let folder = DurableFolder.parent(of: output)
        guard DurableFolder.isFolder(folder) else {
            throw DatabaseError(code: .cantopen, message: "no such folder: \(folder)", path: output)
        }
        try SameFileRule.require(output: output, apartFrom: [path], what: "the database being dumped")
        if DurableFolder.exists(output) && !replace {
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (--force replaces it)", path: output)
        }
        let stem = DurableFolder.baseName(of: output)
        TemporaryFiles.removeStale(in: folder, stem: stem)
        let file = try TemporaryFile(in: folder, stem: stem, permissions: DurableFolder.newFilePermissions)
        do {
            let sink = FileDescriptorSink(descriptor: file.descriptor)
            let summary = try write(path: path, options: options, to: sink, busyTimeout: busyTimeout)
            if let failure = sink.failure {
                throw DatabaseError(code: failure == ENOSPC || failure == EFBIG || failure == EDQUOT ? .full : .ioerr,
                                    message: "cannot write: \(String(cString: strerror(failure)))", path: output)
            }
            try file.commit(as: output, replace: replace)
            return summary
        } catch {
            file.discard()
            throw error
        }
    }
}

/// Writes one plan as SQL.
struct ScriptWriter {
    let connection: Connection
    let plan: DumpPlan
    let options: DumpOptions
    let sink: ByteSink
    var summary = DumpSummary()
    var line: [UInt8] = []
    /// The table of value pieces (ValuePieces), and whether the script has made it.
    let pieces: ValuePieces
    var createdPieceTable = false

    init(connection: Connection, plan: DumpPlan, options: DumpOptions, sink: ByteSink) {
        self.connection = connection
        self.plan = plan
        self.options = options
        self.sink = sink
        pieces = ValuePieces(avoiding: plan.tables.map(\.name))
    }

    var schema: Bool { options.includeSchema }
    var data: Bool { options.includeData }

    mutating func emit(_ text: String) {
        sink.write(Array((text + "\n").utf8))
    }

    /// A stored CREATE statement, closed with `;` on a line of its own when its
    /// last line holds a `--` comment (which would swallow the `;`).
    mutating func emitStatement(_ sql: String) {
        let lastLine = sql.split(separator: "\n", omittingEmptySubsequences: false).last ?? ""
        emit(lastLine.contains("--") ? sql + "\n;" : sql + ";")
    }

    mutating func writeAll() throws {
        let settings = plan.settings
        emit("-- litectl dump (SQLite \(Connection.sqliteVersion)): load it into a new, empty database")
        emit("-- with `litectl load NEW.db FILE` or `sqlite3 NEW.db < FILE`.")
        emit("PRAGMA foreign_keys=OFF;")
        if schema {
            // Settings SQLite fixes when the file is first written: before any table.
            emit("PRAGMA page_size=\(settings.pageSize);")
            emit("PRAGMA auto_vacuum=\(DatabaseSettings.autoVacuumName(settings.autoVacuum));")
            emit("PRAGMA encoding='\(settings.encoding.rawValue)';")
        }
        emit("BEGIN TRANSACTION;")
        if schema && !plan.isSubset {
            emit("PRAGMA user_version=\(settings.userVersion);")
            emit("PRAGMA application_id=\(settings.applicationID);")
        }

        var bookkeeping: [DumpTable] = []
        for table in plan.tables {
            switch table.role {
            case .ordinary:
                if schema, let sql = table.sql { emitStatement(sql) }
                if data { try writeRows(table) }
            case .virtual:
                if schema, let sql = table.sql { emitStatement(sql) }
            case .shadow:
                // The CREATE VIRTUAL TABLE above made it (with a few rows of its own).
                if data {
                    emit("DELETE FROM \(quoteIdentifier(table.name));")
                    try writeRows(table)
                }
            case .sequence, .statistics:
                bookkeeping.append(table)
            }
        }
        try writeBookkeeping(bookkeeping)
        if createdPieceTable { emit(pieces.drop) }
        if schema {
            for sql in plan.indexes { emitStatement(sql) }
            // Views before triggers: a trigger may be on a view; neither checks
            // what its body names until it runs.
            for sql in plan.views { emitStatement(sql) }
            for sql in plan.triggers { emitStatement(sql) }
        }
        emit("COMMIT;")
        if schema && settings.journalMode == "wal" {
            emit("PRAGMA journal_mode=WAL;")
        }
        try sink.flush()
    }

    /// sqlite_sequence and the statistics tables, after every row (loading an
    /// AUTOINCREMENT table moves its sqlite_sequence row).
    mutating func writeBookkeeping(_ tables: [DumpTable]) throws {
        let statistics = tables.filter { $0.role == .statistics }
        if schema && !statistics.isEmpty {
            // The only way to make the statistics tables: ANALYZE of a table with
            // no index creates them (sqlite_stat4 too where SQLite has it) and adds no row.
            emit("ANALYZE sqlite_schema;")
            for name in ["sqlite_stat1", "sqlite_stat4"] where !statistics.contains(where: { sameSQLName($0.name, name) }) {
                emit("DROP TABLE IF EXISTS \(name);")
            }
        }
        guard data else { return }
        for table in tables {
            let keyColumn = table.role == .sequence ? "name" : "tbl"
            if plan.isSubset {
                // Only the rows of the tables asked for, each replacing the target's.
                let encoding = plan.settings.encoding, keys = plan.selectedKeys
                try writeRows(table) { row in
                    keys.contains(Array(row.bytes(at: 0)).map(asciiLower))
                } preamble: { row in
                    var delete = Array("DELETE FROM \(quoteIdentifier(table.name)) WHERE \(keyColumn)=".utf8)
                    try row.cell(at: 0).appendSQLLiteral(to: &delete, encoding: encoding)
                    delete.append(contentsOf: ";\n".utf8)
                    return delete
                }
            } else {
                emit("DELETE FROM \(quoteIdentifier(table.name));")
                try writeRows(table)
            }
        }
    }

    /// Writes `INSERT` statements for every row of `table` (those `filter`
    /// keeps, each after what `preamble` makes of it), with the rowid when the
    /// table's rowids are not a column. A row holding a value too large for one
    /// statement is written with that value in pieces (`writeRowInPieces`).
    mutating func writeRows(_ table: DumpTable, filter: ((WideRow) -> Bool)? = nil,
                            preamble: ((WideRow) throws -> [UInt8])? = nil) throws {
        if table.rowidUnnamed {
            summary.rowidsNotKept.append(table.name)
            // A name may hold a newline: on one line, or the rest of it would be SQL.
            emit("-- The rowids of \(quoteIdentifier(table.name).replacingNewlines()) are not kept: its columns rowid, _rowid_ and oid hide them.")
        }
        var prefix = Array("INSERT INTO \(quoteIdentifier(table.name))".utf8)
        if table.rowidAlias != nil || table.hasGeneratedColumns {
            let names = table.writtenColumns.enumerated().map { i, name in
                i == 0 && table.rowidAlias != nil ? name : quoteIdentifier(name)
            }
            prefix.append(contentsOf: "(\(names.joined(separator: ",")))".utf8)
        }
        prefix.append(contentsOf: " VALUES(".utf8)
        let count = table.writtenColumns.count
        let encoding = plan.settings.encoding
        let sink = self.sink, path = connection.path
        let pieceBytes = options.pieces.pieceBytes, statementBytes = options.pieces.statementBytes
        var line = self.line
        var written: Int64 = 0
        _ = try TableRows.forEach(table, connection: connection) { row in
            if let filter, !filter(row) { return }
            line.removeAll(keepingCapacity: true)
            if let preamble { line.append(contentsOf: try preamble(row)) }
            let start = line.count
            line.append(contentsOf: prefix)
            var tooLarge = false
            for i in 0..<count {
                if i > 0 { line.append(UInt8(ascii: ",")) }
                let cell = row.cell(at: i)
                switch cell {
                case .text(let b) where b.count > pieceBytes, .blob(let b) where b.count > pieceBytes:
                    tooLarge = true
                default:
                    if encoding == .utf8 {
                        cell.appendSQLLiteral(to: &line)
                    } else {
                        try Self.appendLiteral(cell, encoding: encoding, table: table.name, path: path, to: &line)
                    }
                    tooLarge = line.count - start > statementBytes
                }
                if tooLarge { break }
            }
            if tooLarge {
                // Written again, with some values in pieces (rare: no cost to the other rows).
                let head = Array(line[..<start])
                line.removeAll(keepingCapacity: true)
                try writeRowInPieces(row, table: table, prefix: head + prefix, count: count, encoding: encoding,
                                     rowNumber: written + 1, line: &line)
                written += 1
                return
            }
            line.append(contentsOf: ");\n".utf8)
            sink.write(line)
            written += 1
        }
        self.line = line
        summary.tables.append(DumpSummary.TableRows(name: table.name, rows: written, file: nil))
    }

    /// Writes one row whose values do not all fit in one statement: each
    /// TEXT or BLOB value longer than `pieceBytes` (and, once the INSERT is
    /// `statementBytes` long, each longer than `smallest`) goes into the
    /// pieces table first, then the INSERT takes it from there, then the
    /// pieces are deleted. One INSERT per row, as for any other row: its
    /// triggers (with --data-only), constraints and generated columns see
    /// the whole value at once. A row whose record would pass SQLite's
    /// SQLITE_MAX_LENGTH, which no SQL statement can insert, stops the dump
    /// before any of it is written.
    mutating func writeRowInPieces(_ row: WideRow, table: DumpTable, prefix: [UInt8], count: Int, encoding: TextEncoding,
                                   rowNumber: Int64, line: inout [UInt8]) throws {
        let limits = options.pieces
        let recordLimit = limits.recordBytes ?? connection.lengthLimit
        let sqlLimit = limits.sqlBytes ?? connection.sqlLengthLimit
        let record = ValuePieces.recordSize(row, table: table, encoding: encoding)
        if record > recordLimit {
            throw DumpStopped(path: connection.path, table: table.name, rowsRead: rowNumber - 1, lastRowid: nil,
                              refusedRowid: rowid(row, table),
                              cause: DatabaseError(code: .toobig, message: "its record would be \(groupedDigits(record)) bytes, more than SQLite's limit on a string, BLOB or row (SQLITE_MAX_LENGTH, \(groupedDigits(recordLimit)) bytes): no SQL statement can insert it, so no dump can rebuild it"))
        }
        var pieced = Set<Int>()
        var length = prefix.count
        for i in 0..<count {
            let cell = row.cell(at: i)
            switch cell {
            case .text(let b), .blob(let b):
                let literal = 2 * b.count + 16
                if b.count > limits.pieceBytes || (b.count > limits.smallest && length + literal > limits.statementBytes) {
                    if ValuePieces.canSplit(cell, encoding: encoding) {
                        pieced.insert(i)
                        length += 96
                        continue
                    }
                    if length + literal > sqlLimit {
                        throw DumpStopped(path: connection.path, table: table.name, rowsRead: rowNumber - 1, lastRowid: nil,
                                          refusedRowid: rowid(row, table), cause: DatabaseError(code: .toobig, message: "column \(quoteIdentifier(table.writtenColumns[i])) holds a \(cellIsText(cell) ? "TEXT" : "BLOB") of \(groupedDigits(b.count)) bytes: its literal passes SQLite's limit on a statement (SQLITE_MAX_SQL_LENGTH, \(groupedDigits(sqlLimit)) bytes) and it cannot be written in pieces into a \(encoding.rawValue) database (dump --format jsonl keeps it)"))
                    }
                }
                length += literal
            default:
                length += 32
            }
        }
        if !createdPieceTable {
            emit(pieces.create)
            createdPieceTable = true
        }
        for i in pieced.sorted() {
            try pieces.writePieces(of: row.cell(at: i), k: i, encoding: encoding, pieceBytes: limits.pieceBytes,
                                        to: sink, line: &line)
        }
        line.removeAll(keepingCapacity: true)
        line.append(contentsOf: prefix)
        for i in 0..<count {
            if i > 0 { line.append(UInt8(ascii: ",")) }
            let cell = row.cell(at: i)
            if pieced.contains(i) {
                line.append(contentsOf: pieces.joined(k: i, isText: cellIsText(cell)).utf8)
            } else {
                try Self.appendLiteral(cell, encoding: encoding, table: table.name, path: connection.path, to: &line)
            }
        }
        line.append(contentsOf: ");\n".utf8)
        sink.write(line)
        line.removeAll(keepingCapacity: true)
        emit(pieces.empty)
    }

    /// The row's rowid, when the dump reads it (for messages).
    func rowid(_ row: WideRow, _ table: DumpTable) -> Int64?? {
        .some(table.rowidPosition.map { row.int64(at: $0) })
    }

    static func appendLiteral(_ cell: Cell, encoding: TextEncoding, table: String, path: String,
                              to line: inout [UInt8]) throws {
        do {
            try cell.appendSQLLiteral(to: &line, encoding: encoding)
        } catch is UnrepresentableTextError {
            throw DatabaseError(code: .error, message: "table \(quoteIdentifier(table)): TEXT that is not UTF-8 has no literal in a \(encoding.rawValue) database",
                                path: path)
        }
    }
}

func cellIsText(_ cell: Cell) -> Bool {
    if case .text = cell { return true }
    return false
}
