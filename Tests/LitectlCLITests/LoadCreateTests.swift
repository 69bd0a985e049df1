// `litectl load --create` through the built binary: the table made from a CSV
// header or JSON Lines keys, its column types inferred as sqlite-utils infers
// them (sqlite-utils itself is the oracle, on the same file), every value exact
// (integers to the last digit, REALs to the last bit), all or nothing.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct LoadCreateTests {
    static let sqliteUtils: String? = {
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") + ["/root/.pyenv/shims"] {
            let path = "\(folder)/sqlite-utils"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }()

    /// Each column's declared type, in order, as `PRAGMA table_info` gives it.
    func declaredTypes(_ db: String, _ table: String) throws -> [String] {
        try sqlite3(["-batch", db, "SELECT name || ' ' || type FROM pragma_table_info('\(table)') ORDER BY cid"])
            .split(separator: "\n").map(String.init)
    }

    /// Every value of `table` with its storage class, REALs to 17 significant
    /// digits (which tell every double apart), in rowid order.
    func values(_ db: String, _ table: String, _ columns: [String]) throws -> [String] {
        let cells = columns.map { "typeof(\"\($0)\") || ':' || CASE typeof(\"\($0)\") WHEN 'real' THEN printf('%!.17g', \"\($0)\") ELSE quote(\"\($0)\") END" }
        return try sqlite3(["-batch", db, "SELECT \(cells.joined(separator: " || ' | ' || ")) FROM \"\(table)\" ORDER BY rowid"])
            .split(separator: "\n").map(String.init)
    }

    /// A CSV of the kinds of column a user's file has: integers (negative,
    /// with a sign or leading zeros, 64-bit), short decimals and exponents,
    /// integers mixed with decimals, text, text mixed with numbers, a column
    /// with gaps and one that is always empty.
    func randomCSV(rows: Int, seed: UInt64) -> String {
        var rng = SplitMix64(seed: seed)
        func pick<T>(_ options: [T]) -> T { options[Int(rng.next() % UInt64(options.count))] }
        var lines = ["id,count,price,amount,name,code,score,nothing,big"]
        for i in 1...rows {
            let count = pick(["0", "-17", "+7", "0042", "123456789", "-9223372036854775808", "9223372036854775807"])
            let price = pick(["1.5", "0.25", "-3.125", "1e3", "2.5E-4", "100.0", "7.75"])
            let amount = pick(["3", "4.5", "-1", "0.125", "12"])
            let name = pick(["Ann", "\"Bob, Jr\"", "Cy", "\"say \"\"hi\"\"\"", "élan"])
            let code = pick(["03", "A12", "1.50", "7", "x-9", "1e5"])
            let score = pick(["", "1", "2", "", "99"])
            let big = pick(["9007199254740993", "-9007199254740995", "1", "18014398509481985"])
            lines.append("\(i),\(count),\(price),\(amount),\(name),\(code),\(score),,\(big)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test(.enabled(if: sqliteUtils != nil)) func csvTypesAndValuesAsSqliteUtilsMakesThem() throws {
        let folder = try TemporaryFolder("load-create-csv")
        for seed in [UInt64(1), UInt64.random(in: 2...UInt64.max)] {
            let csv = folder.file("t\(seed).csv")
            try randomCSV(rows: 300, seed: seed).write(toFile: csv, atomically: false, encoding: .utf8)
            let oracle = folder.file("oracle\(seed).db"), ours = folder.file("ours\(seed).db")
            let made = try runProcess(Self.sqliteUtils!, ["insert", oracle, "t", csv, "--csv"])
            #expect(made.status == 0, "\(made.stderr)")
            let r = try litectl("load", ours, csv, "--table", "t", "--create")
            #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "seed \(seed): \(r.stderr)")
            let types = try declaredTypes(ours, "t")
            #expect(types == (try declaredTypes(oracle, "t")), "seed \(seed)")
            #expect(types == ["id INTEGER", "count INTEGER", "price REAL", "amount REAL", "name TEXT", "code TEXT",
                              "score INTEGER", "nothing INTEGER", "big INTEGER"])
            let columns = types.map { String($0.split(separator: " ")[0]) }
            let mine = try values(ours, "t", columns), theirs = try values(oracle, "t", columns)
            #expect(mine.count == 300)
            for (a, b) in zip(mine, theirs) where a != b {
                Issue.record("seed \(seed): litectl \(a)\n   sqlite-utils \(b)")
                break
            }
            #expect(try sqlite3Scalar(ours, "PRAGMA integrity_check") == "ok")
        }
    }

    @Test(.enabled(if: sqliteUtils != nil)) func jsonLinesTypesAsSqliteUtilsMakesThem() throws {
        let folder = try TemporaryFolder("load-create-jsonl")
        let file = folder.file("rows.jsonl")
        try """
            {"id": 1, "n": 3, "r": 1.5, "both": 2, "mixed": 3, "flag": true, "none": null, "s": "a"}
            {"id": 2, "n": -4, "r": 0.1, "both": 2.5, "mixed": "x", "flag": false, "none": null, "s": "b\\nc"}
            {"id": 3, "n": 9223372036854775807, "r": -2.5e-7, "both": -7, "mixed": 0.25, "flag": true, "s": "é"}

            """.write(toFile: file, atomically: false, encoding: .utf8)
        let oracle = folder.file("oracle.db"), ours = folder.file("ours.db")
        let made = try runProcess(Self.sqliteUtils!, ["insert", oracle, "rows", file, "--nl"])
        #expect(made.status == 0, "\(made.stderr)")
        let r = try litectl("load", ours, file, "--create")
        #expect(r.status == 0, "\(r.stderr)")
        let types = try declaredTypes(ours, "rows")
        #expect(types == (try declaredTypes(oracle, "rows")))
        #expect(types == ["id INTEGER", "n INTEGER", "r REAL", "both REAL", "mixed TEXT", "flag INTEGER", "none TEXT", "s TEXT"])
        let columns = types.map { String($0.split(separator: " ")[0]) }
        #expect(try values(ours, "rows", columns) == (try values(oracle, "rows", columns)))
    }

    /// Where sqlite-utils would round, litectl does not: integers beyond 2^53
    /// beside reals keep every digit (the column is BLOB), and REALs read back
    /// bit for bit, through CSV and JSON Lines.
    @Test func noValueLosesExactness() throws {
        let folder = try TemporaryFolder("load-create-exact")
        var rng = SplitMix64(seed: UInt64.random(in: 0...UInt64.max))
        var doubles: [Double] = []
        while doubles.count < 500 {
            let d = Double(bitPattern: rng.next())
            if d.isFinite { doubles.append(d) }
        }
        let wide: [Int64] = [9_007_199_254_740_993, Int64.max, Int64.min, -9_007_199_254_740_993]
        var csv = "r,w,t\n", jsonl = ""
        for (i, d) in doubles.enumerated() {
            let w = i < wide.count ? "\(wide[i])" : exactRealText(d)
            csv += "\(exactRealText(d)),\(w),\(i % 2 == 0 ? exactRealText(d) : "text")\n"
            jsonl += "{\"r\": \(exactRealText(d)), \"w\": \(w), \"t\": \(i % 2 == 0 ? exactRealText(d) : "\"text\"")}\n"
        }
        try csv.write(toFile: folder.file("x.csv"), atomically: false, encoding: .utf8)
        try jsonl.write(toFile: folder.file("x.jsonl"), atomically: false, encoding: .utf8)
        for file in ["x.csv", "x.jsonl"] {
            let db = folder.file("\(file).db")
            let r = try litectl("load", db, folder.file(file), "--create")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try declaredTypes(db, "x") == ["r REAL", "w BLOB", "t TEXT"], "\(file)")
            let connection = try Connection(path: db, mode: .readOnly)
            defer { try? connection.close() }
            let rows = try connection.rows("SELECT r, w, t FROM x ORDER BY rowid")
            #expect(rows.count == doubles.count)
            for (i, row) in rows.enumerated() {
                guard case .real(let r) = row[0], r.bitPattern == doubles[i].bitPattern else {
                    Issue.record("\(file) row \(i + 1): r is \(row[0]), not \(doubles[i])"); break
                }
                if i < wide.count {
                    guard case .integer(let w) = row[1], w == wide[i] else { Issue.record("\(file) row \(i + 1): w is \(row[1])"); break }
                } else {
                    guard case .real(let w) = row[1], w.bitPattern == doubles[i].bitPattern else { Issue.record("\(file) row \(i + 1): w is \(row[1])"); break }
                }
                // A number in a TEXT column is the text that reads back as the very double.
                if i % 2 == 0 {
                    guard case .text(let t) = row[2], Double(String(decoding: t, as: UTF8.self))?.bitPattern == doubles[i].bitPattern else {
                        Issue.record("\(file) row \(i + 1): t is \(row[2])"); break
                    }
                }
            }
        }
    }

    /// The table and its rows come in one transaction: a bad record leaves no
    /// table; an existing table is refused (nothing loaded); rowid sets the
    /// rowid and is no column; --create with a script or stdin is a usage error.
    @Test func allOrNothingAndRefusals() throws {
        let folder = try TemporaryFolder("load-create-refusals")
        let db = folder.file("d.db")
        try makeDatabase(db, "CREATE TABLE keep(x); INSERT INTO keep VALUES (1);")
        let before = try FileFingerprint(db)
        try "a,b\n1,2\n3\n".write(toFile: folder.file("bad.csv"), atomically: false, encoding: .utf8)
        let bad = try litectl("load", db, folder.file("bad.csv"), "--create")
        #expect(bad.status == 2 && bad.stderr.contains("bad.csv:3: 1 fields where the header has 2"), "\(bad.stderr)")
        #expect(try FileFingerprint(db) == before)
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'bad'") == "0")

        try "rowid,name\n10,ten\n20,twenty\n".write(toFile: folder.file("keep.csv"), atomically: false, encoding: .utf8)
        let exists = try litectl("load", db, folder.file("keep.csv"), "--create")
        #expect(exists.status == 2 && exists.stderr.contains("table keep already exists"), "\(exists.stderr)")
        #expect(try FileFingerprint(db) == before)

        let made = try litectl("load", db, folder.file("keep.csv"), "--table", "named", "--create")
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try declaredTypes(db, "named") == ["name TEXT"])
        #expect(try sqlite3(["-batch", db, "SELECT rowid || '=' || name FROM named ORDER BY rowid"]) == "10=ten\n20=twenty\n")

        try "CREATE TABLE s(x);".write(toFile: folder.file("s.sql"), atomically: false, encoding: .utf8)
        #expect(try litectl("load", db, folder.file("s.sql"), "--create").status == 64)
        let stdin = try runProcess(litectlBinary, ["load", db, "-", "--format", "csv", "--table", "z", "--create"], input: Array("a\n1\n".utf8))
        #expect(stdin.status == 64 && stdin.stderr.contains("--create reads the file twice"), "\(stdin.stderr)")
        // A pipe under a file's name would be empty the second time: refused, nothing made.
        let piped = try runProcess("/bin/bash", ["-c", "exec \"$0\" load \"$1\" <(cat \"$2\") --format csv --table p --create",
                                                 litectlBinary, db, folder.file("keep.csv")])
        #expect(piped.status == 2 && piped.stderr.contains("give a regular file, not a pipe"), "\(piped.stderr)")
        #expect(try sqlite3Scalar(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'p'") == "0")
        try "a,A\n1,2\n".write(toFile: folder.file("twice.csv"), atomically: false, encoding: .utf8)
        let twice = try litectl("load", db, folder.file("twice.csv"), "--create")
        #expect(twice.status == 2 && twice.stderr.contains("duplicate column name"), "\(twice.stderr)")

        // Into a new database: made with the table, or not at all.
        let fresh = folder.file("new.db")
        #expect(try litectl("load", fresh, folder.file("bad.csv"), "--create").status == 2)
        #expect(!FileManager.default.fileExists(atPath: fresh))
        #expect(try litectl("load", fresh, folder.file("keep.csv"), "--create").status == 0)
        #expect(try sqlite3Scalar(fresh, "SELECT count(*) FROM keep") == "2")
    }
}
