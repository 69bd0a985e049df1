// Diffs across schema changes (issue 40, item 1): a table whose columns were
// added, dropped, renamed, reordered, retyped or constrained, with its key
// unchanged, is compared on every column. Judged against an independent
// oracle: the values that differ computed by sqlite3 itself (A ATTACHed to B,
// joined on the key), the sql patch applied by sqlite3 and by `litectl patch`
// then `litectl hash`, sqldiff and PRAGMA integrity_check (see `roundTrip`),
// and sqldiff's own UPDATEs where it handles the case (columns added at the end).
import Foundation
import Testing
import LitectlCore
import TestSupport

/// How one table's columns go from A to B, as the oracle reads them: each
/// B column with the SQL (over A's row, aliased `A`) of the value it is
/// compared against, and A's dropped columns.
struct ColumnOracle {
    var table: String
    /// Key columns (B's names; A's names are the same or given in `sources`).
    var key: [String]
    /// B's columns and what each is compared against (`A."col"` or a literal).
    var sources: [(column: String, against: String)]
    var dropped: [String]
}

/// The changes the oracle finds: updates as "key|column", inserted and deleted keys.
struct ChangeSet: Equatable, CustomStringConvertible {
    var updates: Set<String> = []
    var inserted: Set<String> = []
    var deleted: Set<String> = []
    var updatedRows: Int { Set(updates.map { String($0.split(separator: "|", maxSplits: 1)[0]) }).count }
    var description: String { "updates \(updates.sorted()) inserted \(inserted.sorted()) deleted \(deleted.sorted())" }
}

/// The oracle: sqlite3 on B with A attached, joined on the key.
func oracleChanges(_ a: String, _ b: String, _ o: ColumnOracle) throws -> ChangeSet {
    func keyText(_ alias: String) -> String {
        o.key.map { "quote(\(alias).\(quoteIdentifier($0)))" }.joined(separator: "||','||")
    }
    let join = o.key.map { "A.\(quoteIdentifier(keyNameInA($0, o))) = B.\(quoteIdentifier($0))" }.joined(separator: " AND ")
    let t = quoteIdentifier(o.table)
    var queries: [String] = []
    for (column, against) in o.sources where !o.key.contains(column) {
        let c = "B.\(quoteIdentifier(column))"
        queries.append("SELECT \(keyText("B"))||'|'||'\(column)' FROM main.\(t) AS B JOIN a.\(t) AS A ON \(join) "
                       + "WHERE NOT (typeof(\(c)) = typeof(\(against)) AND quote(\(c)) = quote(\(against)));")
    }
    for column in o.dropped {
        queries.append("SELECT \(keyText("B"))||'|'||'\(column)' FROM main.\(t) AS B JOIN a.\(t) AS A ON \(join) "
                       + "WHERE A.\(quoteIdentifier(column)) IS NOT NULL;")
    }
    let attach = "ATTACH '\(a)' AS a;\n"
    var result = ChangeSet()
    for query in queries {
        for line in try sqlite3(["-batch", b], input: attach + query).split(separator: "\n") { result.updates.insert(String(line)) }
    }
    let keysA = "SELECT \(keyText("A")) FROM a.\(t) AS A", keysB = "SELECT \(keyText("B")) FROM main.\(t) AS B"
    // A's key columns under B's names (a renamed key column) are aliased by keyText's B form.
    let keysAasB = "SELECT \(o.key.map { "quote(A.\(quoteIdentifier(keyNameInA($0, o))))" }.joined(separator: "||','||")) FROM a.\(t) AS A"
    _ = keysA
    for line in try sqlite3(["-batch", b], input: attach + "\(keysB) EXCEPT \(keysAasB);").split(separator: "\n") {
        result.inserted.insert(String(line))
    }
    for line in try sqlite3(["-batch", b], input: attach + "\(keysAasB) EXCEPT \(keysB);").split(separator: "\n") {
        result.deleted.insert(String(line))
    }
    return result
}

/// A key column's name in A: the column it is compared against when that is `A."name"`.
func keyNameInA(_ column: String, _ o: ColumnOracle) -> String {
    guard let against = o.sources.first(where: { $0.column == column })?.against, against.hasPrefix("A.\"") else { return column }
    return String(against.dropFirst(3).dropLast()).replacingOccurrences(of: "\"\"", with: "\"")
}

/// What `litectl diff --format jsonl` reports for `table`, in the oracle's terms.
func reportedChanges(_ jsonl: String, table: String, key: [String]) throws -> ChangeSet {
    var result = ChangeSet()
    func literal(_ value: Any?) -> String {
        switch value {
        case let s as String: return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case let n as NSNumber: return n.stringValue
        default: return "\(value ?? "NULL")"
        }
    }
    for line in jsonl.split(separator: "\n") {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        guard object["type"] as? String == "row", object["table"] as? String == table else { continue }
        let keyObject = try #require(object["key"] as? [String: Any])
        let keyText = key.map { literal(keyObject[$0]) }.joined(separator: ",")
        switch object["operation"] as? String {
        case "insert": result.inserted.insert(keyText)
        case "delete": result.deleted.insert(keyText)
        default:
            let old = object["old"] as? [String: Any] ?? [:], new = object["new"] as? [String: Any] ?? [:]
            for column in Set(old.keys).union(new.keys) { result.updates.insert(keyText + "|" + column) }
        }
    }
    return result
}

@Suite struct DiffSchemaChangeTests {
    // MARK: The Artist case

    /// Issue 40's case on a copy of Chinook: a column added to Artist and set
    /// in two rows. Every output shows both rows' new value; the sql patch adds
    /// the column (no rebuild) and sets the two values, as sqldiff does.
    @Test func artistCountryAddedAndSetShowsInEveryOutput() throws {
        guard let chinook = realDatabases.first(where: { $0.hasSuffix("Chinook_Sqlite.sqlite") }) else { return }
        let folder = try TemporaryFolder("schemadiff-artist")
        let a = try folder.copy(chinook, as: "a.db"), b = try folder.copy(chinook, as: "b.db")
        try sqlite3(["-batch", b], input: "ALTER TABLE Artist ADD COLUMN Country TEXT; UPDATE Artist SET Country='UK' WHERE ArtistId IN (1,2);")

        let text = try litectl("diff", a, b)
        #expect(text.status == 1)
        #expect(text.stdout == """
            ~ table Artist changed: column Country added (TEXT)
            Artist: +0 -0 ~2
              ~ ArtistId=1: Country: NULL → 'UK'
              ~ ArtistId=2: Country: NULL → 'UK'

            """, "\(text.stdout)\(text.stderr)")
        let summary = try litectl("diff", "--summary", a, b)
        #expect(summary.stdout == "~ table Artist changed: column Country added (TEXT)\nArtist: +0 -0 ~2\n", "\(summary.stdout)")

        // --data-only: the new column's values are data.
        let dataOnly = try litectl("diff", "--data-only", "--summary", a, b)
        #expect(dataOnly.status == 1)
        #expect(dataOnly.stdout == "Artist: +0 -0 ~2\n", "\(dataOnly.stdout)")

        let jsonl = try litectl("diff", "--format", "jsonl", a, b)
        let rows = jsonl.stdout.split(separator: "\n").filter { $0.contains("\"type\":\"row\"") }
        #expect(rows == [
            #"{"type":"row","table":"Artist","operation":"update","match":"key","key":{"ArtistId":1},"old":{"Country":null},"new":{"Country":"UK"}}"#,
            #"{"type":"row","table":"Artist","operation":"update","match":"key","key":{"ArtistId":2},"old":{"Country":null},"new":{"Country":"UK"}}"#,
        ], "\(jsonl.stdout)")
        let oracle = ColumnOracle(table: "Artist", key: ["ArtistId"],
                                  sources: [("ArtistId", "A.\"ArtistId\""), ("Name", "A.\"Name\""), ("Country", "NULL")], dropped: [])
        #expect(try reportedChanges(jsonl.stdout, table: "Artist", key: ["ArtistId"]) == (try oracleChanges(a, b, oracle)))

        // The patch: ADD COLUMN as B's CREATE TABLE writes it, and the two UPDATEs; no rebuild.
        let sql = try litectl("diff", "--format", "sql", a, b)
        #expect(sql.stdout.contains("ALTER TABLE \"Artist\" ADD COLUMN Country TEXT;\n"), "\(sql.stdout)")
        #expect(sql.stdout.contains("UPDATE \"Artist\" SET \"Country\"='UK' WHERE \"ArtistId\"=1;\n"))
        #expect(sql.stdout.contains("UPDATE \"Artist\" SET \"Country\"='UK' WHERE \"ArtistId\"=2;\n"))
        #expect(!sql.stdout.contains("DROP TABLE"), "\(sql.stdout)")
        #expect(!sql.stdout.contains("INSERT"), "\(sql.stdout)")
        // sqldiff pairs the same rows with the same values.
        let sqldiff = try runProcess(sqldiffBinary, [a, b])
        let theirs = sqldiff.stdout.split(separator: "\n").filter { $0.hasPrefix("UPDATE") }.map(String.init)
        #expect(theirs == ["UPDATE Artist SET Country='UK' WHERE ArtistId=1;", "UPDATE Artist SET Country='UK' WHERE ArtistId=2;"],
                "\(sqldiff.stdout)")
        try roundTrip(a, b, in: folder)

        // report A B: the table's rows, the two new values.
        let html = folder.file("report.html")
        let report = try litectl("report", a, b, "-o", html)
        #expect(report.status == 1, "\(report.stderr)")
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("Country <span class=\"muted\">(added)</span>"), "report names the added column")
        #expect(page.contains("<tr><td class=\"name\">Artist</td><td class=\"n\">0</td><td class=\"n\">2</td><td class=\"n\">0</td>"),
                "report counts Artist's two updates")
        #expect(page.components(separatedBy: "UK").count - 1 == 2, "report shows both new values")

        // A changeset carries no schema: the table is left out, and named.
        let changeset = try litectl("diff", "--format", "changeset", a, b)
        #expect(changeset.status == 1)
        #expect(changeset.stderr == "litectl: note: table Artist is not in the changeset: definition changed (changesets carry no schema)\n",
                "\(changeset.stderr)")
    }

    /// --data-only across an added column set only there: a difference (it
    /// was "identical" when only the common columns were compared).
    @Test func dataOnlyFindsValuesOfAnAddedColumn() throws {
        let folder = try TemporaryFolder("schemadiff-dataonly")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'x'), (2, 'y');")
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'x'), (2, 'y');"
                         + "ALTER TABLE t ADD COLUMN w INTEGER DEFAULT 0; UPDATE t SET w = 5 WHERE id = 2;")
        let diff = try litectl("diff", "--data-only", a, b)
        #expect(diff.status == 1)
        #expect(diff.stdout == "t: +0 -0 ~1\n  ~ id=2: w: 0 → 5\n", "\(diff.stdout)")
        // The default itself is no change.
        try sqlite3(["-batch", b], input: "UPDATE t SET w = 0;")
        let same = try litectl("diff", "--data-only", a, b)
        #expect(same.status == 0, "\(same.stdout)")
    }

    /// A dropped column's values are reported (they are lost), renamed ones
    /// are paired by position and definition.
    @Test func droppedAndRenamedColumnsInTextAndJSON() throws {
        let folder = try TemporaryFolder("schemadiff-dropped")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, fax TEXT); INSERT INTO t VALUES (1, 'a', NULL), (2, 'b', '555');")
        _ = try folder.copy(a, as: "b.db")
        try sqlite3(["-batch", b], input: "ALTER TABLE t DROP COLUMN fax; ALTER TABLE t RENAME COLUMN name TO title; UPDATE t SET title = 'B' WHERE id = 2;")
        let diff = try litectl("diff", a, b)
        #expect(diff.stdout == """
            ~ table t changed: column name renamed to title; column fax dropped
            t: +0 -0 ~1
              ~ id=2: title: 'b' → 'B', fax: '555' → (column dropped)

            """, "\(diff.stdout)")
        let jsonl = try litectl("diff", "--format", "jsonl", a, b)
        #expect(jsonl.stdout.hasSuffix(#"{"type":"row","table":"t","operation":"update","match":"key","key":{"id":2},"old":{"title":"b","fax":"555"},"new":{"title":"B"}}"# + "\n"),
                "\(jsonl.stdout)")
        let sql = try litectl("diff", "--format", "sql", a, b)
        #expect(sql.stdout.contains("ALTER TABLE \"t\" RENAME COLUMN \"name\" TO title;\nALTER TABLE \"t\" DROP COLUMN \"fax\";\n"), "\(sql.stdout)")
        #expect(!sql.stdout.contains("DROP TABLE"))
        try roundTrip(a, b, in: folder)
    }

    // MARK: Generated schema changes

    /// One kind of schema change: the SQL that makes B from a copy of A, the
    /// oracle's view of table t's columns, and whether ALTER TABLE can make it.
    struct Change {
        var name: String
        var sql: String
        var columns: [(column: String, against: String)]
        var dropped: [String] = []
        var altered: Bool
    }

    static let baseColumns: [(String, String)] = [("id", "A.\"id\""), ("a", "A.\"a\""), ("b", "A.\"b\""), ("c", "A.\"c\""),
                                                  ("d", "A.\"d\""), ("e", "A.\"e\"")]
    static func base(except: Set<String> = [], renaming: [String: String] = [:], adding: [(String, String)] = []) -> [(column: String, against: String)] {
        baseColumns.filter { !except.contains($0.0) }.map { (renaming[$0.0] ?? $0.0, $0.1) } + adding
    }

    /// A rebuild of t with `columns` (its definitions) filled by `select` from the old t.
    static func rebuild(_ columns: String, _ names: String, _ select: String) -> String {
        """
        PRAGMA foreign_keys=OFF;
        DROP VIEW v;
        CREATE TABLE t_new(\(columns));
        INSERT INTO t_new(\(names)) SELECT \(select) FROM t;
        DROP TABLE t;
        ALTER TABLE t_new RENAME TO t;
        CREATE INDEX t_c ON t(c);
        CREATE VIEW v AS SELECT id, c FROM t;
        """
    }

    static let changes: [Change] = [
        Change(name: "add", sql: "ALTER TABLE t ADD COLUMN f TEXT;", columns: base(adding: [("f", "NULL")]), altered: true),
        Change(name: "add-default", sql: "ALTER TABLE t ADD COLUMN f INTEGER DEFAULT '7';", columns: base(adding: [("f", "7")]), altered: true),
        Change(name: "add-not-null", sql: "ALTER TABLE t ADD COLUMN \"f g\" TEXT NOT NULL DEFAULT 'none' COLLATE NOCASE;",
               columns: base(adding: [("f g", "'none'")]), altered: true),
        Change(name: "drop", sql: "ALTER TABLE t DROP COLUMN b;", columns: base(except: ["b"]), dropped: ["b"], altered: true),
        Change(name: "rename", sql: "ALTER TABLE t RENAME COLUMN a TO a2;", columns: base(renaming: ["a": "a2"]), altered: true),
        Change(name: "rename-quoted", sql: "ALTER TABLE t RENAME COLUMN e TO \"e e\";", columns: base(renaming: ["e": "e e"]), altered: true),
        Change(name: "reorder", sql: rebuild("id INTEGER PRIMARY KEY, c REAL, a TEXT, b INTEGER, d BLOB, e TEXT COLLATE NOCASE",
                                             "id, c, a, b, d, e", "id, c, a, b, d, e"),
               columns: base(), altered: false),
        Change(name: "retype", sql: rebuild("id INTEGER PRIMARY KEY, a TEXT, b TEXT, c REAL, d BLOB, e TEXT COLLATE NOCASE",
                                            "id, a, b, c, d, e", "id, a, b, c, d, e"),
               columns: base(), altered: false),
        Change(name: "constrain", sql: rebuild("id INTEGER PRIMARY KEY, a TEXT NOT NULL DEFAULT '', b INTEGER CHECK (b IS NOT 'forbidden'), c REAL, d BLOB, e TEXT COLLATE BINARY",
                                               "id, a, b, c, d, e", "id, coalesce(a, ''), b, c, d, e"),
               columns: base(), altered: false),
        Change(name: "combined-alter", sql: "ALTER TABLE t RENAME COLUMN a TO a2; ALTER TABLE t DROP COLUMN d; ALTER TABLE t ADD COLUMN f INTEGER DEFAULT 7;",
               columns: base(except: ["d"], renaming: ["a": "a2"], adding: [("f", "7")]), dropped: ["d"], altered: true),
        // A column renamed and moved is, to the pairing, one dropped and one added.
        Change(name: "combined-rebuild", sql: rebuild("id INTEGER PRIMARY KEY, c REAL, title TEXT, b TEXT, d BLOB, e TEXT COLLATE NOCASE, g DEFAULT 1.5",
                                                      "id, c, title, b, d, e", "id, c, a, b, d, e"),
               columns: base(except: ["a"], adding: [("title", "NULL"), ("g", "1.5")]), dropped: ["a"], altered: false),
        // Renamed in place while other columns changed type: still one column (its values compared as such).
        Change(name: "rename-and-retype", sql: rebuild("id INTEGER PRIMARY KEY, title TEXT, b TEXT, c REAL, d BLOB, e TEXT COLLATE NOCASE",
                                                       "id, title, b, c, d, e", "id, a, b, c, d, e"),
               columns: base(renaming: ["a": "title"]), altered: false),
    ]

    static let baseSchema = """
        CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INTEGER, c REAL, d BLOB, e TEXT COLLATE NOCASE);
        CREATE INDEX t_c ON t(c);
        CREATE VIEW v AS SELECT id, a, c FROM t;
        CREATE TABLE untouched(id INTEGER PRIMARY KEY, z);
        INSERT INTO untouched VALUES (1, 'same');
        """

    /// A value of one of several kinds, for column `column`.
    static func randomValue(_ rng: inout SplitMix64, _ column: String) -> String {
        switch rng.next() % 9 {
        case 0: return "NULL"
        case 1: return "\(Int64(bitPattern: rng.next()) % 1000)"
        case 2: return ["0.5", "-3.0", "1e300", "2.0/3.0", "1.0"][Int(rng.next() % 5)]
        case 3: return "'\(["abc", "ABC", "1", "x y", "é", ""][Int(rng.next() % 6)])'"
        case 4: return "x'\(String(format: "%04x", Int(rng.next() % 65536)))'"
        case 5: return "'12'"
        case 6: return "12"
        default: return column == "b" ? "\(rng.next() % 50)" : "'v\(rng.next() % 7)'"
        }
    }

    /// Every kind of change alone, and with rows changed (values in every
    /// column, new ones included; rows inserted and deleted), over several seeds.
    @Test(arguments: changes.indices)
    func generatedSchemaChangeIsExact(_ index: Int) throws {
        let change = Self.changes[index]
        for (seed, withRows) in [(UInt64(index * 31 + 1), false), (UInt64(index * 31 + 2), true),
                                 (UInt64.random(in: 0...UInt64.max), true)] {
            var rng = SplitMix64(seed: seed)
            let folder = try TemporaryFolder("schemadiff-\(change.name)")
            let a = folder.file("a.db"), b = folder.file("b.db")
            var rows = ""
            for id in 1...40 {
                rows += "INSERT INTO t VALUES (\(id), " + ["a", "b", "c", "d", "e"].map { Self.randomValue(&rng, $0) }.joined(separator: ", ") + ");\n"
            }
            try makeDatabase(a, Self.baseSchema + rows)
            _ = try folder.copy(a, as: "b.db")
            var script = change.sql + "\n"
            if withRows {
                let writable = change.columns.map(\.column).filter { $0 != "id" }
                func value(_ column: String) -> String {
                    // (NOT NULL columns take no NULL.)
                    let value = column == "f g" ? "'n\(rng.next() % 3)'" : Self.randomValue(&rng, column)
                    return value == "NULL" && change.name == "constrain" && column == "a" ? "'was null'" : value
                }
                for _ in 0..<8 {
                    let column = writable[Int(rng.next() % UInt64(writable.count))]
                    let value = value(column)
                    script += "UPDATE t SET \(quoteIdentifier(column)) = \(value) WHERE id = \(1 + rng.next() % 40);\n"
                }
                script += "DELETE FROM t WHERE id IN (\(1 + rng.next() % 40), \(1 + rng.next() % 40));\n"
                let names = change.columns.map { quoteIdentifier($0.column) }.joined(separator: ", ")
                for id in 41...43 {
                    let values = change.columns.map { $0.column == "id" ? "\(id)" : value($0.column) }
                    script += "INSERT INTO t(\(names)) VALUES (\(values.joined(separator: ", ")));\n"
                }
            }
            try sqlite3(["-batch", b], input: script)
            let context = "\(change.name) seed \(seed) rows \(withRows)"

            // The values that differ, against sqlite3's own join of A and B.
            let oracle = ColumnOracle(table: "t", key: ["id"], sources: change.columns, dropped: change.dropped)
            let expected = try oracleChanges(a, b, oracle)
            let jsonl = try litectl("diff", "--format", "jsonl", a, b)
            #expect(jsonl.status == 1, "\(context): \(jsonl.stderr)")
            #expect(try reportedChanges(jsonl.stdout, table: "t", key: ["id"]) == expected, "\(context)")
            #expect(!jsonl.stdout.contains("\"table\":\"untouched\""), "\(context)")

            // The counts, in --summary and the text format alike.
            let counts = "t: +\(expected.inserted.count) -\(expected.deleted.count) ~\(expected.updatedRows)"
            let summary = try litectl("diff", "--summary", a, b)
            let hasRows = expected.updates.count + expected.inserted.count + expected.deleted.count > 0
            #expect(summary.stdout.contains(counts + "\n") == hasRows, "\(context): \(summary.stdout) expected \(counts)")
            let dataOnly = try litectl("diff", "--data-only", "--summary", a, b)
            #expect(dataOnly.status == (hasRows ? 1 : 0), "\(context)")
            #expect(dataOnly.stdout == (hasRows ? counts + "\n" : ""), "\(context): \(dataOnly.stdout)")

            // report A B: the same counts.
            let html = folder.file("report.html")
            let report = try litectl("report", a, b, "-o", html)
            #expect(report.status == 1, "\(context): \(report.stderr)")
            let page = try String(contentsOfFile: html, encoding: .utf8)
            let row = "<tr><td class=\"name\">t</td><td class=\"n\">\(expected.inserted.count)</td><td class=\"n\">\(expected.updatedRows)</td>"
                + "<td class=\"n\">\(expected.deleted.count)</td>"
            #expect(page.contains(hasRows ? row : "No table has changed rows."), "\(context): expected \(row)")

            // The patch: ALTER TABLE where it can, a rebuild only where it must; B by hash either way.
            let sql = try litectl("diff", "--format", "sql", a, b)
            #expect(sql.stdout.contains("ALTER TABLE \"t\"") == change.altered, "\(context): \(sql.stdout.prefix(1500))")
            #expect(sql.stdout.contains("DROP TABLE \"t\";") == !change.altered, "\(context)")
            if change.altered {
                // Only the rows that changed are written.
                let written = sql.stdout.split(separator: "\n").filter { $0.hasPrefix("INSERT INTO \"t\"") || $0.hasPrefix("UPDATE \"t\"") }
                #expect(written.count <= expected.inserted.count + expected.updatedRows, "\(context)")
            }
            try roundTrip(a, b, in: folder)
        }
    }

    // MARK: Long values

    /// On a terminal (a pty made by script(1)) long values are cut with a
    /// marker; -v and pipes show them whole.
    @Test func longValuesAreCutOnlyWhereAsked() throws {
        let folder = try TemporaryFolder("schemadiff-long")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'short');")
        try makeDatabase(b, "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, printf('%.*c', 5000, 'x'));")
        // A pipe: whole.
        let piped = try litectl("diff", a, b)
        #expect(piped.stdout.contains(String(repeating: "x", count: 5000)))
        // A terminal: cut, through `script` (a pty), when it is installed.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { return }
        let command = "NO_COLOR=1 \(litectlBinary) diff \(a) \(b)"
        let tty = try runProcess("/usr/bin/script", ["-qec", command, "/dev/null"])
        #expect(tty.stdout.contains("'short' → '" + String(repeating: "x", count: 199) + "…[TEXT of 5000 bytes]"), "\(tty.stdout.prefix(600))")
        #expect(!tty.stdout.contains(String(repeating: "x", count: 201)))
        let verbose = try runProcess("/usr/bin/script", ["-qec", command + " -v", "/dev/null"])
        #expect(verbose.stdout.contains(String(repeating: "x", count: 5000)))
    }

    // MARK: The docs' recipe

    /// docs/diff.md's upgrade recipe, run as written: it must apply the
    /// patch when the databases differ (diff exits 1 then).
    @Test func docsRecipeAppliesThePatch() throws {
        let docs = try String(contentsOfFile: packageRoot + "/docs/diff.md", encoding: .utf8)
        let recipe = try #require(docs.split(separator: "\n").first { $0.contains("upgrade.sql") && $0.contains("sqlite3 old.db") })
        let folder = try TemporaryFolder("schemadiff-recipe")
        try makeDatabase(folder.file("old.db"), "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'old');")
        try makeDatabase(folder.file("new.db"), "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'new');"
                         + "ALTER TABLE t ADD COLUMN w; UPDATE t SET w = 2;")
        let line = String(recipe).replacingOccurrences(of: "litectl ", with: litectlBinary + " ")
        let shell = try runProcess("/bin/sh", ["-c", line], currentDirectory: folder.path)
        #expect(shell.status == 0, "\(line): \(shell.stderr)")
        #expect(try sqlite3Scalar(folder.file("old.db"), "SELECT v || w FROM t") == "new2")
    }
}
