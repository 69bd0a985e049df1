// The shared-pages shortcut from the inside: when it applies, what it finds
// shared, and that what it calls shared holds exactly the rows that are
// identical (checked against the sqlite3 CLI's view of both files).
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct SharedPagesTests {
    /// The shortcut for `table` between two files, read as the diff reads them.
    func shortcut(_ a: String, _ b: String, _ table: String) throws -> TableShortcut? {
        let ca = try Connection(path: a), cb = try Connection(path: b)
        return try ca.readTransaction {
            try cb.readTransaction {
                guard let shared = try SharedPages(ca, cb) else { return nil }
                let ta = try #require(try ca.readSchema().table(named: table))
                let tb = try #require(try cb.readSchema().table(named: table))
                return try shared.shortcut(ta, tb)
            }
        }
    }

    func rowids(_ database: String, _ sql: String) throws -> [Int64] {
        try sqlite3Scalar(database, "SELECT group_concat(x) FROM (\(sql))").split(separator: ",").map { Int64($0)! }
    }

    func compareRows(_ x: [Value], _ y: [Value]) -> Int {
        for (u, v) in zip(x, y) where Value.compare(u, v) != 0 { return Value.compare(u, v) }
        return 0
    }

    /// Rowids covered by the ranges.
    func covered(_ shortcut: TableShortcut, _ ids: [Int64]) -> [Int64] {
        ids.filter { id in shortcut.shared.ranges.contains { range in
            guard case .rowid(let low) = range.low, case .rowid(let high) = range.high else { return false }
            return low <= id && id <= high
        } }
    }

    @Test func aCopySharesEachTableAsOneRange() throws {
        let folder = try TemporaryFolder("shared-copy")
        let a = folder.file("a.db")
        try makeDatabase(a, """
            PRAGMA page_size = 512;
            CREATE TABLE p(id INTEGER PRIMARY KEY, v);
            CREATE TABLE w(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 4000)
            INSERT INTO p SELECT n, randomblob(n % 700) FROM i;
            INSERT INTO w SELECT 'key' || id, id FROM p;
            """)
        let b = try folder.copy(a, as: "b.db")
        let p = try #require(try shortcut(a, b, "p"))
        #expect(p.shared.kind == .rowid && p.shared.ranges.count == 1)
        #expect(p.shared.ranges.first?.low == .rowid(1) && p.shared.ranges.first?.high == .rowid(4000))
        let pages = Int(try sqlite3Scalar(a, "SELECT count(*) FROM dbstat WHERE name = 'p'"))!
        #expect(p.shared.sharedPages == pages, "every page of p, overflow included")
        let w = try #require(try shortcut(a, b, "w"))
        #expect(w.shared.kind == .primaryKey && w.shared.ranges.count == 1)
        #expect(w.shared.ranges.first?.low == .values([.text("key1")]) && w.shared.ranges.first?.high == .values([.text("key999")]))
    }

    /// A copy with other pages (one row gone, then VACUUM INTO: every later
    /// row moves) shares no page: past the first 64 leaves the comparison
    /// gives up and the table is read in full (no shortcut); a table of
    /// fewer leaves is still compared to its end.
    @Test func aCopyWithOtherPagesIsGivenUpEarly() throws {
        let folder = try TemporaryFolder("shared-none")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, """
            PRAGMA page_size = 512;
            CREATE TABLE p(id INTEGER PRIMARY KEY, v);
            CREATE TABLE q(id INTEGER PRIMARY KEY, v);
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 20000)
            INSERT INTO p SELECT n, 'value ' || n FROM i;
            INSERT INTO q SELECT id, v FROM p WHERE id <= 300;
            """)
        let c = try folder.copy(a, as: "c.db")
        _ = try sqlite3([c], input: "DELETE FROM p WHERE id = 1; DELETE FROM q WHERE id = 1; VACUUM INTO '\(b)';")
        let leaves = Int(try sqlite3Scalar(a, "SELECT count(*) FROM dbstat WHERE name = 'p' AND pagetype = 'leaf'"))!
        #expect(leaves > 2 * TreeComparison.leavesBeforeGivingUp)
        #expect(try shortcut(a, b, "p") == nil)
        let small = Int(try sqlite3Scalar(a, "SELECT count(*) FROM dbstat WHERE name = 'q' AND pagetype = 'leaf'"))!
        #expect(small < TreeComparison.leavesBeforeGivingUp)
        let q = try #require(try shortcut(a, b, "q"))
        #expect(q.shared.sharedPages == 0 && q.shared.leavesA == small)
        // A copy changed at its start still shares the rest.
        _ = try sqlite3([c], input: "UPDATE p SET v = 'changed' WHERE id < 100;")
        let changed = try #require(try shortcut(a, c, "p"))
        #expect(changed.shared.sharedPages > leaves / 2)
    }

    /// After changes, exactly the rows that are the same on both sides may be
    /// covered, and most of them are.
    @Test func onlyIdenticalRowsAreShared() throws {
        let folder = try TemporaryFolder("shared-rows")
        let a = folder.file("a.db")
        try makeDatabase(a, """
            PRAGMA page_size = 1024;
            CREATE TABLE p(id INTEGER PRIMARY KEY, v);
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 5000)
            INSERT INTO p SELECT n, CASE WHEN n % 50 = 0 THEN zeroblob(3000) ELSE 'v' || n END FROM i;
            """)
        let b = try folder.copy(a, as: "b.db")
        _ = try sqlite3([b], input: """
            UPDATE p SET v = 'changed' WHERE id IN (17, 2222, 4999);
            DELETE FROM p WHERE id BETWEEN 3000 AND 3010;
            INSERT INTO p VALUES (6000, 'new');
            UPDATE p SET v = CAST(zeroblob(2999) || x'01' AS BLOB) WHERE id = 1000;
            """)
        let shortcut = try #require(try shortcut(a, b, "p"))
        let same = try rowids(a, "SELECT id AS x FROM p") // candidates
        let differing = Set<Int64>([17, 2222, 4999, 1000, 6000] + Array(3000...3010))
        let coveredIDs = covered(shortcut, same + [6000])
        let wronglyShared = Set(coveredIDs).intersection(differing).sorted()
        #expect(wronglyShared.isEmpty, "a differing row is never shared: \(wronglyShared)")
        #expect(coveredIDs.count > same.count * 9 / 10, "most identical rows are shared: \(coveredIDs.count) of \(same.count)")
    }

    /// The same for a WITHOUT ROWID table, whose interior pages hold entries
    /// too: every 7th row changes, so some of the changed ones are dividers.
    @Test func onlyIdenticalEntriesOfAnIndexTreeAreShared() throws {
        let folder = try TemporaryFolder("shared-index")
        let a = folder.file("a.db")
        try makeDatabase(a, """
            PRAGMA page_size = 512;
            CREATE TABLE w(k INTEGER, s TEXT, v, PRIMARY KEY(k, s)) WITHOUT ROWID;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 6000)
            INSERT INTO w SELECT n / 3, 's' || n, CASE WHEN n % 40 = 0 THEN zeroblob(900) ELSE n END FROM i;
            """)
        let b = try folder.copy(a, as: "b.db")
        _ = try sqlite3([b], input: """
            UPDATE w SET v = 'changed' WHERE (k * 3 + 1) % 7 = 0 OR k % 101 = 0;
            UPDATE w SET v = CAST(zeroblob(899) || x'01' AS BLOB) WHERE k = 400;
            """)
        let shortcut = try #require(try shortcut(a, b, "w"))
        #expect(shortcut.shared.kind == .primaryKey)
        let rows = try sqlite3([a, "SELECT k, s, CASE WHEN (k * 3 + 1) % 7 = 0 OR k % 101 = 0 OR k = 400 THEN 1 ELSE 0 END FROM w"])
            .split(separator: "\n").map { $0.split(separator: "|").map(String.init) }
        var wronglyShared: [String] = [], shared = 0
        for row in rows {
            let key: [Value] = [.integer(Int64(row[0])!), .text(row[1])]
            let inRange = shortcut.shared.ranges.contains { range in
                compareRows(range.low.values, key) <= 0 && compareRows(key, range.high.values) <= 0
            }
            if inRange && row[2] == "1" { wronglyShared.append(row[0] + "/" + row[1]) }
            if inRange { shared += 1 }
        }
        #expect(wronglyShared.isEmpty, "differing entries taken as shared: \(wronglyShared.prefix(20))")
        #expect(shared > rows.count / 2, "most identical entries are shared: \(shared) of \(rows.count)")
        #expect(shortcut.shared.ranges.count < 400, "ranges join across identical dividers: \(shortcut.shared.ranges.count)")
    }

    /// Entries of an index b-tree's interior pages (dividers) changed in
    /// place: the leaves on either side stay identical, and the ranges must
    /// not join across the changed divider.
    @Test func changedDividersAreNeverShared() throws {
        let folder = try TemporaryFolder("shared-dividers")
        let a = folder.file("a.db")
        try makeDatabase(a, """
            PRAGMA page_size = 512;
            CREATE TABLE w(k INTEGER PRIMARY KEY, v INTEGER) WITHOUT ROWID;
            WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 6000)
            INSERT INTO w SELECT n, 1000 + n FROM i;
            """)
        // The keys of the entries in interior pages, read from A's file.
        let connection = try Connection(path: a)
        let dividers: [Int64] = try connection.readTransaction {
            let file = try #require(try PageFile(connection))
            guard case .integer(let root) = try connection.scalar("SELECT rootpage FROM sqlite_schema WHERE name = 'w'") else {
                return []
            }
            var keys: [Int64] = [], pending = [UInt32(root)]
            while let page = pending.popLast() {
                let bytes = try #require(file.page(page))
                let node = BTreePage(bytes: UnsafeRawBufferPointer(start: bytes, count: file.pageSize), usable: file.usableSize)
                guard !node.isLeaf else { continue }
                for i in 0..<node.cellCount {
                    if case .integer(let k)? = node.keyFields(i, count: 1)?.first { keys.append(k) }
                }
                pending += try #require(node.children())
            }
            return keys
        }
        try connection.close()
        #expect(dividers.count > 10)
        let changed = dividers.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
        let b = try folder.copy(a, as: "b.db")
        // v + 1 keeps each entry's size: the pages keep their layout.
        _ = try sqlite3([b], input: "UPDATE w SET v = v + 1 WHERE k IN (\(changed.map(String.init).joined(separator: ",")));")
        let shortcut = try #require(try shortcut(a, b, "w"))
        let wronglyShared = changed.filter { k in
            shortcut.shared.ranges.contains { compareRows($0.low.values, [.integer(k)]) <= 0 && compareRows([.integer(k)], $0.high.values) <= 0 }
        }
        #expect(wronglyShared.isEmpty, "changed dividers taken as shared: \(wronglyShared)")
        let unchanged = dividers.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        #expect(shortcut.shared.ranges.count <= changed.count + 1,
                "ranges join across the unchanged dividers: \(shortcut.shared.ranges.count) ranges, \(unchanged.count) unchanged dividers")
    }

    @Test func itDoesNotApplyAcrossEncodingsOrPageSizesOrInTheWAL() throws {
        let folder = try TemporaryFolder("shared-no")
        let schema = "CREATE TABLE p(id INTEGER PRIMARY KEY, v); INSERT INTO p VALUES (1, 'x');"
        let a = folder.file("a.db"), utf16 = folder.file("u.db"), small = folder.file("s.db")
        try makeDatabase(a, schema)
        try makeDatabase(utf16, "PRAGMA encoding = 'UTF-16le';" + schema)
        try makeDatabase(small, "PRAGMA page_size = 512;" + schema)
        #expect(try shortcut(a, utf16, "p") == nil)
        #expect(try shortcut(a, small, "p") == nil)

        let wal = folder.file("w.db")
        try makeDatabase(wal, "PRAGMA journal_mode = WAL; CREATE TABLE q(id INTEGER PRIMARY KEY, v);" + schema)
        let copy = try folder.copy(wal, as: "w2.db")
        let writer = try ShellSession(copy)
        defer { writer.close() }
        writer.run("PRAGMA wal_autocheckpoint = 0; INSERT INTO p VALUES (2, 'y');")
        #expect(try shortcut(wal, copy, "p") == nil, "p has a page in the -wal")
        #expect(try shortcut(wal, copy, "q") != nil, "q has none")
    }

    @Test func rowidFilter() {
        let ranges: [(low: KeyBound, high: KeyBound)] = [(.rowid(-5), .rowid(-1)), (.rowid(3), .rowid(3)), (.rowid(10), .rowid(20))]
        let filter = RowidFilter(ranges)
        let shared = (-10...25).filter { filter.isShared(Int64($0)) }
        #expect(shared == Array(-5...(-1)) + [3] + Array(10...20))
    }
}
