// `litectl query` through the built binary, judged by the sqlite3 CLI: the same
// SQL over the real databases gives the same rows (REALs bit for bit), writes
// are refused without touching the file, the attach limit and --each fan-out
// behave, parameters bind with their types, and every format parses back.
import Foundation
import Testing
import LitectlCore
import TestSupport

// MARK: A small RFC 4180 reader

/// Parses CSV bytes into records of fields (bytes). Accepts CRLF or LF line
/// ends and quoted fields with doubled quotes and embedded line breaks.
func parseCSV(_ bytes: [UInt8]) -> [[[UInt8]]] {
    var records: [[[UInt8]]] = []
    var record: [[UInt8]] = []
    var field: [UInt8] = []
    var i = 0
    var inQuotes = false
    var fieldStarted = false
    let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ","), cr: UInt8 = 0x0D, lf: UInt8 = 0x0A
    func endRecord() {
        record.append(field); field = []
        records.append(record); record = []
        fieldStarted = false
    }
    while i < bytes.count {
        let b = bytes[i]
        if inQuotes {
            if b == quote {
                if i + 1 < bytes.count && bytes[i + 1] == quote { field.append(quote); i += 2; continue }
                inQuotes = false
            } else {
                field.append(b)
            }
            i += 1
            continue
        }
        switch b {
        case quote where field.isEmpty:
            inQuotes = true; fieldStarted = true
        case comma:
            record.append(field); field = []; fieldStarted = true
        case cr where i + 1 < bytes.count && bytes[i + 1] == lf:
            endRecord(); i += 1
        case lf:
            endRecord()
        default:
            field.append(b); fieldStarted = true
        }
        i += 1
    }
    if fieldStarted || !field.isEmpty || !record.isEmpty { endRecord() }
    return records
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// Doubles equal bit for bit.
func sameBits(_ a: Double?, _ b: Double?) -> Bool {
    guard let a, let b else { return false }
    return a.bitPattern == b.bitPattern
}

/// SQL for one oracle column: the value as the shell prints it (BLOB as hex),
/// its type, and REALs with 17 significant digits (exact for a double).
func oracleColumns(_ name: String) -> String {
    let q = quoteIdentifier(name)
    return "CASE typeof(\(q)) WHEN 'blob' THEN hex(\(q)) ELSE \(q) END, typeof(\(q)), printf('%!.17g', \(q))"
}

/// Compares litectl's CSV records with the oracle's (3 fields per column).
func expectSameRows(litectl: [[[UInt8]]], oracle: [[[UInt8]]], context: String,
                    sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(litectl.count == oracle.count, "row count, \(context)", sourceLocation: sourceLocation)
    for (ours, theirs) in zip(litectl, oracle) {
        #expect(ours.count * 3 == theirs.count, "column count, \(context)", sourceLocation: sourceLocation)
        for (c, field) in ours.enumerated() where c * 3 + 2 < theirs.count {
            let shown = theirs[c * 3], type = text(theirs[c * 3 + 1]), exact = text(theirs[c * 3 + 2])
            if type == "real" {
                let mine = Double(text(field))
                #expect(sameBits(mine, Double(exact)), "REAL \(text(field)) vs \(exact), \(context)", sourceLocation: sourceLocation)
                // The shell rounds to 15 significant digits: equal as doubles within that.
                if let mine, let rounded = Double(text(shown)) {
                    #expect(abs(mine - rounded) <= abs(mine) * 1e-14, "\(context)", sourceLocation: sourceLocation)
                }
            } else {
                #expect(field == shown, "\(type) '\(text(field))' vs '\(text(shown))', \(context)", sourceLocation: sourceLocation)
            }
        }
    }
}

@Suite struct QueryCommandTests {
    // MARK: Real databases against the sqlite3 CLI

    @Test(.enabled(if: !realDatabases.isEmpty))
    func everyTableOfTheRealDatabasesAttachedMatchesSqlite3() throws {
        let folder = try TemporaryFolder("query-real")
        let copies = try realDatabases.prefix(9).map { try folder.copy($0) }
        let attach = copies.enumerated().flatMap { ["--attach", "r\($0.offset)=\($0.element)"] }
        var compared = 0
        for (index, copy) in copies.enumerated() {
            let names = try sqlite3(["-batch", "-readonly", copy,
                                     "SELECT name FROM sqlite_schema WHERE type IN ('table','view') AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"])
                .split(separator: "\n").map(String.init)
            for name in names {
                let columns = try sqlite3(["-batch", "-readonly", copy, "SELECT name FROM pragma_table_info(\(Value.text(name).sqlLiteral))"])
                    .split(separator: "\n").map(String.init)
                guard !columns.isEmpty, Set(columns).count == columns.count else { continue }
                let mine = try runProcess(litectlBinary, ["query"] + attach + ["--format", "csv", "--no-headers",
                    "SELECT * FROM \(quoteIdentifier("r\(index)", name)) LIMIT 300"])
                #expect(mine.status == 0, "\(name): \(mine.stderr)")
                let oracle = try runProcess(sqlite3Binary, ["-batch", "-csv", "-readonly", copy,
                    "SELECT \(columns.map(oracleColumns).joined(separator: ", ")) FROM (SELECT * FROM \(quoteIdentifier(name)) LIMIT 300)"])
                #expect(oracle.status == 0, "\(oracle.stderr)")
                expectSameRows(litectl: parseCSV(mine.stdoutBytes), oracle: parseCSV(oracle.stdoutBytes),
                               context: "\(copy) \(name)")
                compared += 1
            }
        }
        #expect(compared > 0)
    }

    @Test(.enabled(if: realDatabases.count >= 2))
    func crossDatabaseJoinMatchesSqlite3() throws {
        let folder = try TemporaryFolder("query-join")
        let a = try folder.copy(realDatabases[0]), b = try folder.copy(realDatabases[1])
        // Join the first table of each (by rowid modulo), with every column.
        func firstTable(_ path: String) throws -> (String, [String]) {
            let name = try sqlite3Scalar(path, "SELECT name FROM sqlite_schema WHERE type='table' AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite%' ORDER BY rootpage LIMIT 1")
            let columns = try sqlite3(["-batch", path, "SELECT name FROM pragma_table_info(\(Value.text(name).sqlLiteral))"])
                .split(separator: "\n").map(String.init)
            return (name, columns)
        }
        let aBefore = try FileFingerprint(a), bBefore = try FileFingerprint(b)
        let (ta, ca) = try firstTable(a), (tb, cb) = try firstTable(b)
        let select = (ca.map { "x.\(quoteIdentifier($0)) AS \(quoteIdentifier("a_" + $0))" }
                      + cb.map { "y.\(quoteIdentifier($0)) AS \(quoteIdentifier("b_" + $0))" }).joined(separator: ", ")
        let join = "SELECT \(select) FROM a.\(quoteIdentifier(ta)) AS x JOIN b.\(quoteIdentifier(tb)) AS y "
            + "ON (x.rowid % 7) = (y.rowid % 7) ORDER BY x.rowid, y.rowid LIMIT 500"
        let mine = try litectl("query", "--attach", "a=\(a)", "--attach", "b=\(b)", "--format", "csv", "--no-headers", join)
        #expect(mine.status == 0, "\(mine.stderr)")
        let outer = (ca.map { "a_" + $0 } + cb.map { "b_" + $0 }).map(oracleColumns).joined(separator: ", ")
        let script = "ATTACH \(Value.text("file:\(a)?mode=ro").sqlLiteral) AS a; ATTACH \(Value.text("file:\(b)?mode=ro").sqlLiteral) AS b;\n"
            + "SELECT \(outer) FROM (\(join));"
        let oracle = try sqlite3(["-batch", "-csv", ":memory:"], input: script)
        let rows = parseCSV(mine.stdoutBytes)
        #expect(!rows.isEmpty)
        expectSameRows(litectl: rows, oracle: parseCSV(Array(oracle.utf8)), context: "join")
        #expect(try FileFingerprint(a) == aBefore && FileFingerprint(b) == bBefore)
    }

    // MARK: Read-only enforcement

    @Test func writesAreRefusedAndTheFileIsUntouched() throws {
        let folder = try TemporaryFolder("query-ro")
        let db = folder.file("a.db"), other = folder.file("b.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        try makeDatabase(other, "CREATE TABLE u(y); INSERT INTO u VALUES (2);")
        let before = try FileFingerprint(db), beforeOther = try FileFingerprint(other)
        for sql in ["INSERT INTO t VALUES (2)", "DELETE FROM b.u", "PRAGMA user_version = 3", "CREATE TABLE z(a)",
                    "SELECT 1; UPDATE t SET x = 5", "DROP TABLE t"] {
            let result = try litectl("query", db, "--attach", "b=\(other)", "--format", "csv", sql, in: folder.path)
            #expect(result.status == 2, "\(sql)")
            #expect(result.stderr.contains("--write"), "\(sql): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1)
        }
        #expect(try FileFingerprint(db) == before)
        #expect(try FileFingerprint(other) == beforeOther)
        #expect(try folder.listing() == ["a.db", "b.db"], "no -journal or -wal left")
        #expect(try sqlite3Scalar(db, "SELECT group_concat(x) FROM t") == "1")
    }

    @Test func writeFlagAllowsChangesAndWarnsForSeveralWALFiles() throws {
        let folder = try TemporaryFolder("query-write")
        let db = folder.file("a.db"), other = folder.file("b.db")
        try makeDatabase(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(x);")
        try makeDatabase(other, "CREATE TABLE u(y);")
        let one = try litectl("query", "--write", db, "INSERT INTO t VALUES (1), (2)")
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stderr.isEmpty, "one writable file: no warning")
        let two = try litectl("query", "--write", db, "--attach", "b=\(other)", "INSERT INTO b.u SELECT x FROM t")
        #expect(two.status == 0)
        #expect(two.stderr.split(separator: "\n").count == 1 && two.stderr.contains("WAL"), "\(two.stderr)")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM t") == "2")
        #expect(try sqlite3Scalar(other, "SELECT sum(y) FROM u") == "3")
    }

    // MARK: Attaching

    @Test func attachLimitIsAClearError() throws {
        let folder = try TemporaryFolder("query-limit")
        let limit = Int(try sqlite3([":memory:"], input: ".limit attached\n").split(separator: " ").last!
            .trimmingCharacters(in: .whitespacesAndNewlines))!
        var arguments = ["query"]
        for i in 0...limit {
            let db = folder.file("s\(i).db")
            try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (\(i));")
            arguments += ["--attach", "s\(i)=\(db)"]
        }
        let within = try runProcess(litectlBinary, Array(arguments.dropLast(2)) + ["--format", "csv", "--no-headers", "SELECT x FROM s\(limit - 1).t"])
        #expect(within.status == 0, "\(within.stderr)")
        #expect(within.stdout == "\(limit - 1)\r\n")
        let past = try runProcess(litectlBinary, arguments + ["SELECT 1"])
        #expect(past.status == 2)
        #expect(past.stderr.contains("at most \(limit) attached databases"), "\(past.stderr)")
        #expect(past.stderr.contains("--each"))
        #expect(past.stderr.split(separator: "\n").count == 1)
    }

    @Test func aliasesPathsAndErrors() throws {
        let folder = try TemporaryFolder("query-alias")
        let weird = folder.file("we?ird#name%41.db")
        try makeDatabase(weird, "CREATE TABLE t(x); INSERT INTO t VALUES ('w');")
        let ok = try litectl("query", "--attach", "w=\(weird)", "--format", "csv", "--no-headers", "SELECT x FROM w.t")
        #expect(ok.status == 0 && ok.stdout == "w\r\n", "\(ok.stderr)")
        let before = try folder.listing()
        for (arguments, cause) in [
            (["--attach", "main=\(weird)", "SELECT 1"], "reserved"),
            (["--attach", "TEMP=\(weird)", "SELECT 1"], "reserved"),
            (["--attach", "1x=\(weird)", "SELECT 1"], "invalid alias"),
            (["--attach", "a b=\(weird)", "SELECT 1"], "invalid alias"),
            (["--attach", "w=\(weird)", "--attach", "W=\(weird)", "SELECT 1"], "already in use"),
            (["--attach", "m=missing.db", "SELECT 1"], "missing.db: no such file"),
            (["missing.db", "SELECT 1"], "missing.db: no such file"),
            (["--attach", "w=\(weird)", "SELECT * FROM nope.t"], "no such table: nope.t"),
            (["--attach", "w=\(weird)", "SELEC 1"], "syntax error"),
        ] {
            let result = try runProcess(litectlBinary, ["query"] + arguments, currentDirectory: folder.path)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains(cause), "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        }
        // ATTACH in the SQL itself is refused (it could create a file), with or without --write.
        for write in [[], ["--write"]] {
            let result = try runProcess(litectlBinary, ["query"] + write + ["ATTACH 'new.db' AS n; SELECT 1"], currentDirectory: folder.path)
            #expect(result.status == 2 && result.stderr == "litectl: ATTACH in SQL is not allowed: use --attach ALIAS=PATH (not authorized) (in SQL: ATTACH 'new.db' AS n; SELECT 1)\n",
                    "\(result.stderr)")
        }
        #expect(try folder.listing() == before, "nothing created")
        // A text file attached is not a database.
        try "hello".write(toFile: folder.file("notes.txt"), atomically: false, encoding: .utf8)
        let notDB = try litectl("query", "--attach", "n=notes.txt", "SELECT 1", in: folder.path)
        #expect(notDB.status == 2 && notDB.stderr.contains("notes.txt: not a SQLite database"), "\(notDB.stderr)")
    }

    @Test func sqlFromFileAndStdinWithSeveralStatements() throws {
        let folder = try TemporaryFolder("query-sql")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2), (3);")
        let script = "SELECT count(*) AS n FROM t;\n-- a comment\nSELECT x FROM t WHERE x > 1 ORDER BY x;"
        try script.write(toFile: folder.file("q.sql"), atomically: false, encoding: .utf8)
        let fromFile = try litectl("query", db, "-f", folder.file("q.sql"), "--format", "jsonl")
        let fromStdin = try litectl("query", db, "-", "--format", "jsonl", input: Array(script.utf8))
        let fromArgument = try litectl("query", db, script, "--format", "jsonl")
        #expect(fromFile.status == 0 && fromStdin.status == 0 && fromArgument.status == 0)
        #expect(fromFile.stdout == "{\"n\":3}\n{\"x\":2}\n{\"x\":3}\n")
        #expect(fromStdin.stdout == fromFile.stdout && fromArgument.stdout == fromFile.stdout)
        // An error in the second statement: the first result is printed, exit 2.
        let partial = try litectl("query", db, "SELECT 1 AS one; SELECT nope FROM t", "--format", "jsonl")
        #expect(partial.status == 2 && partial.stdout == "{\"one\":1}\n" && partial.stderr.contains("no such column: nope"))
    }

    // MARK: Parameters

    @Test func parametersBindWithTheirTypes() throws {
        let sql = "SELECT typeof(:i) AS ti, :i AS i, typeof(@r) AS tr, @r AS r, typeof($t) AS tt, $t AS t, "
            + "typeof(:forced) AS tf, :forced AS f, typeof(:big) AS tb, :big AS big, typeof(:neg) AS tn, :neg AS neg"
        let result = try litectl("query", sql, "--param", "i=42", "--param", "@r=0.1", "--param", "t=hello world",
                                 "--param-text", "forced=17", "--param", "big=99999999999999999999", "--param", "neg=-7",
                                 "--format", "json")
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try #require(JSONSerialization.jsonObject(with: Data(result.stdoutBytes)) as? [[String: Any]])
        let row = try #require(rows.first)
        #expect(row["ti"] as? String == "integer" && (row["i"] as? NSNumber)?.int64Value == 42)
        #expect(row["tr"] as? String == "real" && sameBits((row["r"] as? NSNumber)?.doubleValue, 0.1))
        #expect(row["tt"] as? String == "text" && row["t"] as? String == "hello world")
        #expect(row["tf"] as? String == "text" && row["f"] as? String == "17")
        #expect(row["tb"] as? String == "real", "too big for INTEGER")
        #expect(row["tn"] as? String == "integer" && (row["neg"] as? NSNumber)?.int64Value == -7)
        // The same parameter name matches WHERE clauses against the sqlite3 CLI.
        let folder = try TemporaryFolder("query-param")
        let db = folder.file("a.db")
        try makeDatabase(db, "CREATE TABLE t(k, v); INSERT INTO t VALUES (1, 'one'), ('1', 'text one'), (2, 'two');")
        let mine = try litectl("query", db, "SELECT v FROM t WHERE k = :k", "--param", "k=1", "--format", "csv", "--no-headers")
        #expect(parseCSV(mine.stdoutBytes) == parseCSV(Array(try sqlite3(["-batch", "-csv", db, "SELECT v FROM t WHERE k = 1"]).utf8)))
        let mineText = try litectl("query", db, "SELECT v FROM t WHERE k = :k", "--param-text", "k=1", "--format", "csv", "--no-headers")
        #expect(parseCSV(mineText.stdoutBytes) == parseCSV(Array(try sqlite3(["-batch", "-csv", db, "SELECT v FROM t WHERE k = '1'"]).utf8)))
        // A parameter without a value is an error, not a silent NULL.
        let missing = try litectl("query", db, "SELECT v FROM t WHERE k = :nope")
        #expect(missing.status == 2 && missing.stderr.contains("--param nope="), "\(missing.stderr)")
    }

    // MARK: Fan-out

    @Test func eachReportsASyntaxErrorOnceAndAnEmptyMatchAsAnError() throws {
        let folder = try TemporaryFolder("cli-each-syntax")
        for i in 0..<5 { try makeDatabase(folder.file("s\(i).db"), "CREATE TABLE t(x);") }
        let syntax = try litectl("query", "--each", "s*.db", "SELEC 1", in: folder.path)
        #expect(syntax.status == 2)
        #expect(syntax.stderr == "litectl: near \"SELEC\": syntax error (in SQL: SELEC 1)\n")
        let none = try litectl("query", "--each", "nothing*.db", "SELECT 1", in: folder.path)
        #expect(none.status == 2)
        #expect(none.stderr.hasSuffix("litectl: --each matched no database file\n"))
        // A schema-dependent error is each file's own: reported per file, exit 1.
        let table = try litectl("query", "--each", "s*.db", "SELECT * FROM nope", in: folder.path)
        #expect(table.status == 1)
        #expect(table.stderr.split(separator: "\n").count == 5)
    }

    @Test func eachOverTwoHundredFilesWithOneBroken() throws {
        let folder = try TemporaryFolder("query-each")
        try FileManager.default.createDirectory(atPath: folder.file("shards"), withIntermediateDirectories: false)
        var script = ""
        for i in 0..<200 {
            let path = folder.file(String(format: "shards/s%03d.db", i))
            script += ".open \(path)\nCREATE TABLE t(k INTEGER, v REAL, s TEXT);\n"
                + "INSERT INTO t VALUES (\(i), \(i) * 0.1, 'shard \(i)'), (\(i * 1000), NULL, 'a,b \"q\"');\n"
        }
        try sqlite3(["-batch", ":memory:"], input: script)
        let broken = folder.file("shards/s137.db")
        try FileManager.default.removeItem(atPath: broken)
        try String(repeating: "not a database ", count: 100).write(toFile: broken, atomically: false, encoding: .utf8)
        let sql = "SELECT count(*) AS n, sum(k) AS k, sum(v) AS v, group_concat(s, '|') AS s FROM t"
        let result = try litectl("query", "--each", "shards/*.db", "--format", "csv", "-j", "3", sql, in: folder.path)
        #expect(result.status == 1)
        #expect(result.stderr == "litectl: shards/s137.db: not a SQLite database (no \"SQLite format 3\" header)\n")
        let records = parseCSV(result.stdoutBytes)
        #expect(records.first.map { $0.map(text) } == ["db", "n", "k", "v", "s"])
        let rows = Array(records.dropFirst())
        #expect(rows.count == 199)
        let expectedPaths = (0..<200).filter { $0 != 137 }.map { String(format: "shards/s%03d.db", $0) }
        #expect(rows.map { text($0[0]) } == expectedPaths, "path order")
        // Each file's row against the sqlite3 CLI on that file.
        let oracleSQL = "SELECT count(*), sum(k), printf('%!.17g', sum(v)), group_concat(s, '|') FROM t"
        for (row, path) in zip(rows, expectedPaths) where path.hasSuffix("0.db") || path.hasSuffix("7.db") {
            let oracle = parseCSV(Array(try sqlite3(["-batch", "-csv", "-readonly", folder.file(path), oracleSQL]).utf8))[0]
            #expect(row[1] == oracle[0] && row[2] == oracle[1] && row[4] == oracle[3], "\(path)")
            #expect(sameBits(Double(text(row[3])), Double(text(oracle[2]))), "\(path)")
        }
        // Deterministic whatever the parallelism; missing paths and empty globs reported.
        let serial = try litectl("query", "--each", "shards/*.db", "--format", "csv", "-j", "1", sql, in: folder.path)
        #expect(serial.stdout == result.stdout)
        let more = try litectl("query", "--each", "shards/s00*.db", "--each", "gone.db", "--each", "none/*.db",
                               "--format", "jsonl", "SELECT k FROM t WHERE k < 5", in: folder.path)
        #expect(more.status == 1)
        #expect(more.stderr.contains("litectl: gone.db: no such file") && more.stderr.contains("none/*.db: no file matches"))
        // s000 has k = 0 twice (0 and 0 * 1000), s001...s004 one row each.
        #expect(more.stdout.split(separator: "\n").count == 6, "\(more.stdout)")
        #expect(try !FileManager.default.fileExists(atPath: folder.file("gone.db")))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.file("shards")).count == 200)
    }

    // MARK: Streaming

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/time")))
    func memoryStaysFlatAsTheResultGrows() throws {
        /// Peak RSS in KB of `litectl query` writing `rows` rows to /dev/null.
        func peak(_ rows: Int) throws -> Int {
            let sql = "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < \(rows)) "
                + "SELECT i, i * 0.5, 'row ' || i, x'00ff' FROM c"
            let result = try runProcess("/bin/sh", ["-c", "exec /usr/bin/time -f '%M' \"$0\" query --format csv \"$1\" >/dev/null",
                                                    litectlBinary, sql])
            #expect(result.status == 0, "\(result.stderr)")
            return Int(result.stderr.split(separator: "\n").last.map(String.init) ?? "") ?? .max
        }
        let small = try peak(100_000), large = try peak(1_000_000)
        // A million rows held in memory would take far more than this; streamed, they take nothing.
        #expect(large <= small + 8_192, "peak RSS \(small) KB for 100k rows, \(large) KB for 1M")
    }

    // MARK: Every format parsed back

    @Test func everyFormatParsesBackToTheDatabaseValues() throws {
        let folder = try TemporaryFolder("query-formats")
        let db = folder.file("v.db")
        try makeDatabase(db, """
            CREATE TABLE v(id INTEGER PRIMARY KEY, x);
            INSERT INTO v(x) VALUES (NULL), (0), (-1), (9223372036854775807), (-9223372036854775808),
              (0.1), (1e300), (4.9406564584124654e-324), (-2.5), (1.0), (123456789.123456789),
              (''), ('plain'), ('with,comma'), ('with "quotes"'), ('two
            lines'), ('tab	here'), ('back\\slash'), ('pipe | here'), ('héllo wörld ✓'), ('1'), ('1.0'),
              (x''), (x'00ff10'), (x'31');
            """)
        // The oracle: each value's type and exact form from the sqlite3 CLI.
        let oracle = parseCSV(Array(try sqlite3(["-batch", "-csv", db, "SELECT id, \(oracleColumns("x")) FROM v ORDER BY id"]).utf8))
            .map { (id: Int64(text($0[0]))!, shown: $0[1], type: text($0[2]), exact: text($0[3])) }
        #expect(oracle.count == 25)
        let sql = "SELECT id, x FROM v ORDER BY id"

        // csv
        let csv = parseCSV(try litectl("query", db, sql, "--format", "csv").stdoutBytes)
        #expect(csv.first.map { $0.map(text) } == ["id", "x"])
        expectSameRows(litectl: csv.dropFirst().map { [$0[1]] }, oracle: oracle.map { [$0.shown, Array($0.type.utf8), Array($0.exact.utf8)] },
                       context: "csv")

        // tsv: unescape \t \n \r \\.
        let tsvLines = try litectl("query", db, sql, "--format", "tsv").stdoutBytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        let tsv = tsvLines.dropFirst().filter { !$0.isEmpty }.map { line -> [[UInt8]] in
            line.split(separator: 0x09, omittingEmptySubsequences: false).map { field in
                var out: [UInt8] = [], escaped = false
                for b in field {
                    if escaped {
                        out.append(b == UInt8(ascii: "t") ? 0x09 : b == UInt8(ascii: "n") ? 0x0A : b == UInt8(ascii: "r") ? 0x0D : b)
                        escaped = false
                    } else if b == UInt8(ascii: "\\") { escaped = true } else { out.append(b) }
                }
                return out
            }
        }
        expectSameRows(litectl: tsv.map { [$0[1]] }, oracle: oracle.map { [$0.shown, Array($0.type.utf8), Array($0.exact.utf8)] },
                       context: "tsv")

        // json and jsonl, with a real parser.
        func checkJSON(_ objects: [[String: Any]], _ label: String) {
            #expect(objects.count == oracle.count, "\(label)")
            for (object, expected) in zip(objects, oracle) {
                #expect((object["id"] as? NSNumber)?.int64Value == expected.id)
                let value = object["x"]
                switch expected.type {
                case "null": #expect(value is NSNull, "\(label) \(expected.id)")
                case "integer": #expect((value as? NSNumber)?.int64Value == Int64(text(expected.shown)), "\(label) \(expected.id)")
                case "real": #expect(sameBits((value as? NSNumber)?.doubleValue, Double(expected.exact)), "\(label) \(expected.id)")
                case "text": #expect(value as? String == text(expected.shown), "\(label) \(expected.id)")
                default: #expect((value as? [String: Any])?["blob"] as? String == text(expected.shown), "\(label) \(expected.id)")
                }
            }
        }
        let json = try litectl("query", db, sql, "--format", "json")
        checkJSON(try #require(JSONSerialization.jsonObject(with: Data(json.stdoutBytes)) as? [[String: Any]]), "json")
        let jsonl = try litectl("query", db, sql, "--format", "jsonl")
        checkJSON(try jsonl.stdout.split(separator: "\n").map {
            try #require(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }, "jsonl")
        // A REAL that is integral stays a REAL in JSON: it is written with a '.'.
        #expect(jsonl.stdout.contains("{\"id\":10,\"x\":1.0}"))

        // markdown and table: the header, one line per row, integers and plain text readable.
        let markdown = try litectl("query", db, sql, "--format", "markdown").stdout.split(separator: "\n")
        #expect(markdown.first == "| id | x |" && markdown.count == 2 + oracle.count, "the line break shown as <br>")
        #expect(markdown.contains("| 4 | 9223372036854775807 |") && markdown.contains("| 19 | pipe \\| here |"))
        let table = try litectl("query", db, "SELECT id, x FROM v WHERE typeof(x) = 'integer' ORDER BY id", "--format", "table").stdout
        let tableRows = table.split(separator: "\n").dropFirst(2).map { $0.split(separator: " ").map(String.init) }
        let integers = oracle.filter { $0.type == "integer" }
        #expect(tableRows.map { $0 } == integers.map { [String($0.id), text($0.shown)] })
        // The default off a terminal is jsonl.
        #expect(try litectl("query", db, sql).stdout == jsonl.stdout)
    }

    /// csv and tsv hold one table: SQL giving several results is refused (64)
    /// before anything runs, rather than run together into one file whose
    /// second header a CSV reader takes for a row; one result among other
    /// statements is fine; json and jsonl still take several.
    @Test func csvHoldsOneResult() throws {
        let folder = try TemporaryFolder("query-csv-one")
        let db = folder.file("q.db")
        try makeDatabase(db, "CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'x'), (2, 'y');")
        let two = "SELECT a FROM t; SELECT b FROM t"
        for format in ["csv", "tsv"] {
            let r = try litectl("query", db, two, "--format", format)
            #expect(r.status == 64 && r.stdout.isEmpty, "\(format): \(r.status) \(r.stdout)")
            #expect(r.stderr.contains("--format \(format) holds one result") && r.stderr.contains("2 statements"), "\(r.stderr)")
        }
        // A statement that reads a table the script makes is known only once it is reached:
        // refused there, before it is stepped.
        let late = try litectl("query", "--write", "CREATE TABLE n(x); INSERT INTO n VALUES (7); SELECT x FROM n; SELECT x + 1 FROM n",
                               "--format", "csv")
        #expect(late.status == 64 && late.stderr.contains("returns result 2"), "\(late.stderr)")
        #expect(parseCSV(late.stdoutBytes).map { $0.map(text) } == [["x"], ["7"]], "\(late.stdout)")

        let one = try litectl("query", "--write", "CREATE TABLE n(x); INSERT INTO n VALUES (7), (8); SELECT x FROM n ORDER BY x",
                              "--format", "csv")
        #expect(one.status == 0, "\(one.stderr)")
        #expect(parseCSV(one.stdoutBytes).map { $0.map(text) } == [["x"], ["7"], ["8"]])

        let json = try litectl("query", db, two, "--format", "json")
        #expect(json.status == 0, "\(json.stderr)")
        let arrays = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[[String: Any]]]
        #expect(arrays?.map(\.count) == [2, 2] && arrays?[1][0]["b"] as? String == "x", "\(json.stdout)")
        #expect(try litectl("query", db, two, "--format", "jsonl").stdout.split(separator: "\n").count == 4)
        #expect(try litectl("query", "-q", db, two, "--format", "csv").status == 0, "-q prints nothing, so nothing runs together")

        let each = try litectl("query", "--each", db, two, "--format", "csv")
        #expect(each.status == 64 && each.stdout.isEmpty && each.stderr.contains("holds one result"), "\(each.stderr)")
        let eachOne = try litectl("query", "--each", db, "SELECT a FROM t", "--format", "csv")
        #expect(eachOne.status == 0 && parseCSV(eachOne.stdoutBytes).count == 3, "\(eachOne.stderr)")
    }
}
