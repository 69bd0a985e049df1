// CopyComparison's counts: every (old storage class, new storage class) pair
// counted in its own cell, for rows paired by rowid (the merge pass) and by
// primary key (the join), against what the sqlite3 CLI reports for the same
// pairs of values.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct TransformCopyComparisonTests {
    let folder: TemporaryFolder

    init() throws {
        folder = try TemporaryFolder("transform-comparison")
    }

    /// Two tables whose `v` differ row by row in known ways, keyed by rowid
    /// (`a`, `b`) and by a text key (`ka`, `kb`).
    func makePairs() throws -> String {
        let path = folder.file("pairs.db")
        // (old, new): unchanged, then each kind of change, some repeated.
        let pairs = [
            ("1", "1"), ("'x'", "'x'"), ("NULL", "NULL"), ("x'00'", "x'00'"), ("2.5", "2.5"),
            ("'12'", "12"), ("'13'", "13"), ("'1.5'", "1.5"), ("12", "12.0"), ("-0.0", "0.0"),
            ("'a'", "x'61'"), ("x'61'", "'a'"), ("NULL", "0"), ("0", "NULL"), ("'ab'", "'ac'"),
            ("7", "8"), ("1.5", "'1.5'"), ("x'01'", "x'0102'"),
        ]
        var script = "CREATE TABLE a (v); CREATE TABLE b (v); CREATE TABLE ka (k TEXT PRIMARY KEY, v) WITHOUT ROWID; CREATE TABLE kb (k TEXT PRIMARY KEY, v) WITHOUT ROWID;\n"
        for (i, pair) in pairs.enumerated() {
            let rowid = i * 10 + 3
            script += "INSERT INTO a (rowid, v) VALUES (\(rowid), \(pair.0)); INSERT INTO b (rowid, v) VALUES (\(rowid), \(pair.1));\n"
            script += "INSERT INTO ka VALUES ('k\(i)', \(pair.0)); INSERT INTO kb VALUES ('k\(i)', \(pair.1));\n"
        }
        // Rows without a partner on either side pair with nothing.
        script += "INSERT INTO a (rowid, v) VALUES (1000, 1); INSERT INTO b (rowid, v) VALUES (1001, 1);"
        try makeDatabase(path, script)
        return path
    }

    func describe(_ comparison: CopyComparison) -> [String] {
        comparison.transitions[0].map { "\($0.key.from.sqlName)→\($0.key.to.sqlName) \($0.value)" }.sorted()
    }

    @Test func everyPairOfStorageClassesIsCountedInItsOwnCell() throws {
        let path = try makePairs()
        let expected = ["BLOB→BLOB 1", "BLOB→TEXT 1", "INTEGER→INTEGER 1", "INTEGER→NULL 1", "INTEGER→REAL 1",
                        "NULL→INTEGER 1", "REAL→REAL 1", "REAL→TEXT 1", "TEXT→BLOB 1", "TEXT→INTEGER 2",
                        "TEXT→REAL 1", "TEXT→TEXT 1"]
        // The sqlite3 CLI finds the same, but for -0.0 → 0.0, which SQL calls equal.
        let shell = try sqlite3(["-batch", path, """
            SELECT t || ' ' || count(*) FROM (SELECT upper(typeof(a.v)) || '→' || upper(typeof(b.v)) AS t
              FROM a JOIN b ON a.rowid = b.rowid WHERE typeof(a.v) != typeof(b.v) OR a.v IS NOT b.v) GROUP BY t ORDER BY t
            """]).split(separator: "\n").map(String.init)
        #expect(shell + ["REAL→REAL 1"] == expected.filter { $0 != "REAL→REAL 1" } + ["REAL→REAL 1"])
        let connection = try Connection(path: path)
        let byRowid = try CopyComparison.byRowid(connection, old: "a", new: "b", rowid: "rowid", columns: ["v"])
        #expect(byRowid.pairedRows == 18)
        #expect(describe(byRowid) == expected)
        #expect(byRowid.changed == [13])
        let byKey = try CopyComparison.byKey(connection, old: "ka", new: "kb", key: ["k"], columns: ["v"])
        #expect(byKey.pairedRows == 18)
        #expect(describe(byKey) == expected)
        #expect(byKey.changed == [13])
    }
}
