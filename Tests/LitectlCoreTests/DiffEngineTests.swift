// The diff engine through a recording consumer: exact comparison (types,
// bytes, bits, no collation), key matching, multisets, filters and the schema
// comparison, on databases made by the sqlite3 CLI.
import Foundation
import Testing
import LitectlCore
import TestSupport

/// Records every event the engine reports.
final class RecordingConsumer: DiffConsumer {
    var rebuildsChangedTables: Bool { false }
    var wantsRowidsForKeylessTables: Bool { false }
    var events: [String] = []
    var schema: [SchemaChange] = []

    func begin(_ diff: SchemaComparison) throws { schema = diff.changes }
    func beginTable(_ plan: TablePlan) throws {}
    func key(_ plan: TablePlan, _ row: DiffRow) -> String {
        plan.keyIndexes.map { row.value(at: $0).sqlLiteral }.joined(separator: ",")
    }
    func inserted(_ plan: TablePlan, new: DiffRow) throws { events.append("+\(plan.name)[\(key(plan, new))]") }
    func deleted(_ plan: TablePlan, old: DiffRow) throws { events.append("-\(plan.name)[\(key(plan, old))]") }
    func updated(_ plan: TablePlan, old: DiffRow, new: DiffRow, changed: [Int]) throws {
        let columns = changed.map { plan.columns[$0] }.joined(separator: ",")
        events.append("~\(plan.name)[\(key(plan, old))]{\(columns)}")
    }
    func endTable(_ plan: TablePlan, counts: ChangeCounts) throws {}
    func finish(_ summary: DiffSummary) throws {}
}

@Suite struct DiffEngineTests {
    func diff(_ scriptA: String, _ scriptB: String, options: DiffOptions = DiffOptions()) throws -> (RecordingConsumer, DiffSummary) {
        let folder = try TemporaryFolder("engine")
        try makeDatabase(folder.file("a.db"), scriptA)
        try makeDatabase(folder.file("b.db"), scriptB)
        let consumer = RecordingConsumer()
        let summary = try DiffEngine.run(pathA: folder.file("a.db"), pathB: folder.file("b.db"), options: options, consumer: consumer)
        return (consumer, summary)
    }

    @Test func exactValuesNoCollation() throws {
        let schema = "CREATE TABLE t(id INTEGER PRIMARY KEY, v, s TEXT COLLATE NOCASE);"
        let (consumer, summary) = try diff(schema + """
            INSERT INTO t VALUES (1, 1, 'a'), (2, 1, 'a'), (3, 1, 'a'), (4, 0.1, 'abc'), (5, 'e' || char(233), 'x'), (6, 1, 'same');
            """, schema + """
            INSERT INTO t VALUES (1, 1.0, 'a'), (2, '1', 'a'), (3, x'31', 'a'), (4, 0.1, 'ABC'), (5, 'e' || char(101, 769), 'x'), (6, 1, 'same');
            """)
        #expect(consumer.events == ["~t[1]{v}", "~t[2]{v}", "~t[3]{v}", "~t[4]{s}", "~t[5]{v}"])
        #expect(!summary.identical)
    }

    @Test func keysMultisetsAndFilters() throws {
        let schema = """
            CREATE TABLE c(a, b, v, PRIMARY KEY(a, b)) WITHOUT ROWID;
            CREATE TABLE k(x, y);
            CREATE TABLE other(id INTEGER PRIMARY KEY, updated_at, v);
            """
        let scriptA = schema + """
            INSERT INTO c VALUES (1, 'x', 1), ('n', 2, 2), (2, 'y', 3);
            INSERT INTO k VALUES (1, 'a'), (1, 'a'), (2, 'b');
            INSERT INTO other VALUES (1, 100, 'v');
            """
        let scriptB = schema + """
            INSERT INTO c VALUES (1, 'x', 1), ('n', 2, 'two'), (3, 'z', 4);
            INSERT INTO k VALUES (2, 'b'), (1, 'a'), (3, 'c');
            INSERT INTO other VALUES (1, 200, 'v');
            """
        let (all, _) = try diff(scriptA, scriptB)
        #expect(all.events == ["-c[2,'y']", "+c[3,'z']", "~c['n',2]{v}", "-k[1,'a']", "+k[3,'c']", "~other[1]{updated_at}"])

        var options = DiffOptions()
        options.ignoredColumns = ["other.updated_at"]
        options.excluded = ["c"]
        let (filtered, summary) = try diff(scriptA, scriptB, options: options)
        #expect(filtered.events == ["-k[1,'a']", "+k[3,'c']"])
        #expect(summary.tables.map(\.name) == ["k", "other"])

        options = DiffOptions()
        options.tables = ["other"]
        options.ignoredColumns = ["other.updated_at"]
        let (one, oneSummary) = try diff(scriptA, scriptB, options: options)
        #expect(one.events.isEmpty && oneSummary.identical)
    }

    @Test func schemaChangesAreDescribed() throws {
        let (consumer, _) = try diff("""
            CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INTEGER DEFAULT 1);
            CREATE INDEX t_a ON t(a); CREATE VIEW v AS SELECT a FROM t;
            CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;
            """, """
            CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT COLLATE NOCASE, b REAL DEFAULT 2, c);
            CREATE INDEX t_a ON t(a, b);   CREATE VIEW v AS SELECT a FROM t;
            CREATE TABLE n(x);
            """)
        let lines = consumer.schema.map { "\($0.objectType) \($0.name) \($0.operation.rawValue): \($0.details.joined(separator: "; "))" }
        #expect(lines == [
            "trigger tr dropped: ",
            "table n added: ",
            "table t changed: column a collation BINARY → NOCASE; column b type INTEGER → REAL; column b default 1 → 2; column c added (no type)",
            "index t_a changed: ",
        ])
    }
}

extension DiffEngineTests {
    /// A table on one side only. A new table's rows go through the merge
    /// with an empty side: inserted in key order, and a row whose key holds a
    /// NULL after the keyed ones (a row of the multiset: its key is every
    /// column). A dropped table's rows are counted without a merge (that
    /// assertion documents it; it does not test the merge).
    @Test func tablesOnOneSideOnly() throws {
        let common = "CREATE TABLE t(id INTEGER PRIMARY KEY, v); INSERT INTO t VALUES (1, 'same');"
        let (consumer, summary) = try diff(common + """
            CREATE TABLE gone(id INTEGER PRIMARY KEY, v); INSERT INTO gone VALUES (3, 'c'), (1, 'a'), (2, 'b');
            """, common + """
            CREATE TABLE fresh(k TEXT PRIMARY KEY, v) WITHOUT ROWID; INSERT INTO fresh VALUES ('y', 2), ('x', 1);
            CREATE TABLE loose(k TEXT PRIMARY KEY, v); INSERT INTO loose VALUES ('b', 1), (NULL, 2), ('a', 3);
            """)
        #expect(consumer.events == ["+fresh['x']", "+fresh['y']", "+loose['a']", "+loose['b']", "+loose[NULL,2]"])
        #expect(summary.tables.first { $0.name == "gone" }?.counts.deleted == 3)
        #expect(summary.tables.first { $0.name == "loose" }?.counts.inserted == 3)
    }
}

extension DiffEngineTests {
    /// Rows whose key holds a NULL have no key: compared as a multiset, never
    /// paired with each other by their NULL.
    @Test func nullKeysAreRowsWithoutAKey() throws {
        let schema = "CREATE TABLE n(k TEXT PRIMARY KEY, v); CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
        let (consumer, summary) = try diff(schema + """
            INSERT INTO n VALUES (NULL, 'x'), (NULL, 'y'), ('a', 1);
            INSERT INTO w VALUES ('a', 1);
            """, schema + """
            INSERT INTO n VALUES (NULL, 'y'), (NULL, 'z'), ('a', 2);
            INSERT INTO w VALUES ('a', 2);
            """)
        #expect(consumer.events == ["~n['a']{v}", "-n[NULL,'x']", "+n[NULL,'z']", "~w['a']{v}"])
        #expect(summary.tables.first { $0.name == "n" }?.counts == { var c = ChangeCounts(); c.inserted = 1; c.deleted = 1; c.updated = 1; return c }())
    }
}
