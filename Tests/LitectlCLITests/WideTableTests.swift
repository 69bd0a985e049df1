// Tables as wide as SQLite allows (2,000 columns, SQLITE_MAX_COLUMN) through
// the built binary: diff in every format, report, dump in every format and
// load. A SQL patch run by the sqlite3 shell, and dumps loaded by the shell and
// by litectl load, must give back B (litectl hash, and the rowids by a sqlite3
// query); where SQLite itself stops (the session extension applying a
// changeset to a table this wide) the message names the limit.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// A generated table of `columns` columns c1...cN, with an index on its last
/// two columns and two views over it, and five rows of every storage class.
struct WideTable: CustomStringConvertible {
    enum Shape {
        /// No primary key: rows are told apart by their rowid.
        case keyless
        /// c1 INTEGER PRIMARY KEY, the rowid.
        case rowidAlias
        /// WITHOUT ROWID, its primary key the first `key` columns.
        case withoutRowid(key: Int)
    }

    var columns: Int
    var shape: Shape

    var description: String { "\(columns) columns, \(shape)" }
    var name: (Int) -> String { { "c\($0)" } }
    var keyColumns: Int {
        switch shape {
        case .keyless: 0
        case .rowidAlias: 1
        case .withoutRowid(let key): key
        }
    }

    /// Column `i`'s value in row `r` as SQL: INTEGER, TEXT, REAL, BLOB and NULL in turn (never NULL in a key column).
    func value(_ i: Int, row r: Int) -> String {
        if i == 1 { return "\(r)" }
        if i <= keyColumns { return "'k\(r)-\(i)'" }
        switch (i + r) % 5 {
        case 0: return "\(r * 10_000 + i)"
        case 1: return "'r\(r) c\(i) é'"
        case 2: return "\(r).5e\(i % 7)"
        case 3: return "x'\(String(format: "%02X%02X", r, i % 256))'"
        default: return "NULL"
        }
    }

    func rowSQL(_ r: Int) -> String {
        "INSERT INTO t VALUES(" + (1...columns).map { value($0, row: r) }.joined(separator: ",") + ");"
    }

    func make(at path: String) throws {
        var definitions = (1...columns).map(name)
        var tail = ")"
        switch shape {
        case .keyless: break
        case .rowidAlias: definitions[0] = "c1 INTEGER PRIMARY KEY"
        case .withoutRowid(let key):
            tail = ", PRIMARY KEY(" + (1...key).map(name).joined(separator: ",") + ")) WITHOUT ROWID"
        }
        var script = "CREATE TABLE t(" + definitions.joined(separator: ",") + tail + ";\n"
        for r in 1...5 { script += rowSQL(r) + "\n" }
        script += "CREATE INDEX t_last ON t(\(name(columns)), \(name(columns - 1)));\n"
        script += "CREATE VIEW v AS SELECT * FROM t;\n"
        script += "CREATE VIEW v_last AS SELECT \(name(columns)) AS z, count(*) AS n FROM t GROUP BY 1;\n"
        try makeDatabase(path, script)
    }

    /// B: the last column of row 2 changed, row 3 deleted, row 9 added.
    func change(_ path: String) throws {
        try makeDatabase(path, """
            UPDATE t SET \(name(columns)) = 'changed' WHERE c1 = 2;
            DELETE FROM t WHERE c1 = 3;
            \(rowSQL(9))
            """)
    }

    /// What `diff --summary` says of B against A.
    var summary: String {
        switch shape {
        case .keyless: "t: +2 -2 ~0 (no primary key: compared as a multiset of rows)"
        default: "t: +1 -1 ~1"
        }
    }

    static let all: [WideTable] = [
        WideTable(columns: 2000, shape: .keyless),
        WideTable(columns: 1999, shape: .keyless),
        WideTable(columns: 2000, shape: .rowidAlias),
        WideTable(columns: 2000, shape: .withoutRowid(key: 1500)),
    ]
}

@Suite struct WideTableTests {
    func hash(_ path: String) throws -> String {
        let r = try litectl("hash", path)
        #expect(r.status == 0, "\(r.stderr)")
        return String(r.stdout.split(separator: " ").first ?? "")
    }

    /// The rowids of t in order (a WITHOUT ROWID table has none).
    func rowids(_ path: String, _ table: WideTable) throws -> String {
        if case .withoutRowid = table.shape { return "" }
        return try sqlite3Scalar(path, "SELECT group_concat(rowid) FROM (SELECT rowid FROM t ORDER BY rowid)")
    }

    @Test func diffReportDumpAndLoadWorkUpToSQLitesColumnLimit() throws {
        for table in WideTable.all {
            let folder = try TemporaryFolder("cli-wide")
            let a = folder.file("a.db"), b = folder.file("b.db")
            try table.make(at: a)
            try table.make(at: b)
            try table.change(b)
            let last = "c\(table.columns)"

            let text = try litectl("diff", a, b)
            #expect(text.status == 1 && text.stderr.isEmpty, "\(table): \(text.stderr)")
            #expect(text.stdout.contains("\(last)="), "\(table)")
            let summary = try litectl("diff", "--summary", a, b)
            #expect(summary.status == 1 && summary.stdout == table.summary + "\n", "\(table): \(summary.stdout) \(summary.stderr)")
            for format in ["json", "jsonl"] {
                let r = try litectl("diff", "--format", format, a, b)
                #expect(r.status == 1 && r.stderr.isEmpty, "\(table) \(format): \(r.stderr)")
                #expect(r.stdout.contains("\"\(last)\":\"changed\""), "\(table) \(format)")
            }

            // The patch, run by the sqlite3 shell on a copy of A, gives B.
            let patch = try litectl("diff", "--format", "sql", a, b)
            #expect(patch.status == 1, "\(table): \(patch.stderr)")
            let patched = try folder.copy(a, as: "patched.db")
            let shell = try runProcess(sqlite3Binary, ["-batch", "-bail", patched], input: patch.stdoutBytes)
            #expect(shell.status == 0, "\(table): \(shell.stderr.prefix(300))")
            #expect(try hash(patched) == hash(b), "\(table)")
            #expect(try rowids(patched, table) == rowids(b, table), "\(table)")
            #expect(try litectl("diff", patched, b).status == 0, "\(table)")

            let report = try litectl("report", a, b, "-o", folder.file("r.html"))
            #expect(report.status == 1 && report.stderr.isEmpty, "\(table): \(report.stderr)")
            let html = try String(contentsOfFile: folder.file("r.html"), encoding: .utf8)
            #expect(html.contains("of its \(table.columns) columns not shown"), "\(table)")

            // Dumped, B comes back through the sqlite3 shell and litectl load.
            let dump = try litectl("dump", b)
            #expect(dump.status == 0 && dump.stderr.isEmpty, "\(table): \(dump.stderr)")
            let byShell = folder.file("by-shell.db"), byLoad = folder.file("by-load.db")
            let loadedByShell = try runProcess(sqlite3Binary, ["-batch", "-bail", byShell], input: dump.stdoutBytes)
            #expect(loadedByShell.status == 0, "\(table): \(loadedByShell.stderr.prefix(300))")
            let loaded = try litectl("load", byLoad, "-", input: dump.stdoutBytes)
            #expect(loaded.status == 0, "\(table): \(loaded.stderr)")
            for copy in [byShell, byLoad] {
                #expect(try hash(copy) == hash(b), "\(table): \(copy)")
                #expect(try rowids(copy, table) == rowids(b, table), "\(table): \(copy)")
            }
            for format in ["csv", "jsonl"] {
                let out = folder.file("rows-\(format)")
                let r = try litectl("dump", b, "--format", format, "-o", out)
                #expect(r.status == 0, "\(table) \(format): \(r.stderr)")
                let copy = folder.file("from-\(format).db")
                let l = try litectl("load", copy, out)
                #expect(l.status == 0, "\(table) \(format): \(l.stderr)")
                #expect(try hash(copy) == hash(b), "\(table) \(format)")
                #expect(try rowids(copy, table) == rowids(b, table), "\(table) \(format)")
            }
        }
    }

    /// A changeset of a table with 300 key columns (a key position past 255,
    /// which the session extension keeps in one byte) applies and gives B; one
    /// of a 2,000-column table is written, and applying it fails naming the
    /// SQLite limit that stops the session extension.
    @Test func changesetsOfWideTables() throws {
        let folder = try TemporaryFolder("cli-wide-changeset")
        let keyed = WideTable(columns: 320, shape: .withoutRowid(key: 300))
        let a = folder.file("a.db"), b = folder.file("b.db")
        try keyed.make(at: a)
        try keyed.make(at: b)
        try keyed.change(b)
        let changeset = folder.file("c.bin")
        let written = try runProcess("/bin/sh", ["-c", "\"$0\" diff --format changeset \"$1\" \"$2\" > \"$3\"", litectlBinary, a, b, changeset])
        #expect(written.status == 1 && written.stderr.isEmpty, "\(written.stderr.prefix(300))")
        let target = try folder.copy(a, as: "target.db")
        let applied = try litectl("patch", target, changeset)
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(try hash(target) == hash(b))

        for table in [WideTable(columns: 2000, shape: .rowidAlias), WideTable(columns: 2000, shape: .withoutRowid(key: 1500))] {
            let wa = folder.file("wa.db"), wb = folder.file("wb.db")
            try? FileManager.default.removeItem(atPath: wa)
            try? FileManager.default.removeItem(atPath: wb)
            try table.make(at: wa)
            try table.make(at: wb)
            try table.change(wb)
            let out = try runProcess("/bin/sh", ["-c", "\"$0\" diff --format changeset \"$1\" \"$2\" > \"$3\"", litectlBinary, wa, wb, changeset])
            #expect(out.status == 1 && out.stderr.isEmpty, "\(table): \(out.stderr.prefix(300))")
            let size = (try FileManager.default.attributesOfItem(atPath: changeset)[.size] as? Int) ?? 0
            #expect(size > 2000, "\(table): a changeset of three changes to 2,000 columns")
            let before = try hash(wa)
            let r = try litectl("patch", wa, changeset)
            #expect(r.status == 2, "\(table)")
            #expect(r.stderr.contains("table t has 2,000 columns") && r.stderr.contains("SQLITE_MAX_EXPR_DEPTH"), "\(table): \(r.stderr)")
            #expect(try hash(wa) == before, "\(table): nothing applied")
        }
    }
}
