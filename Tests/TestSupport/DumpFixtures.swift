// Databases that hold every kind of value and object a dump must carry: the
// five storage classes at their edges (-0.0, subnormals, infinities, 64-bit
// extremes, NUL and CR in TEXT, TEXT that is not UTF-8, empty TEXT and BLOB
// beside NULL), rowid tables without an INTEGER PRIMARY KEY and with holes in
// their rowids, WITHOUT ROWID, AUTOINCREMENT, STRICT, generated columns,
// FTS5 (with and without content), R*Tree, views on views, triggers on
// tables and views, statistics, user_version and application_id.
import Foundation
import LitectlCore

/// The real databases, without the -shm, -wal or -journal files another
/// process's connection may leave beside them in the shared folder.
public let realDatabaseFiles = realDatabases.filter { path in !["-shm", "-wal", "-journal"].contains { path.hasSuffix($0) } }

public struct EveryTypeDatabase {
    public var seed: UInt64 = 1
    /// "UTF-8", "UTF-16le" or "UTF-16be".
    public var encoding = "UTF-8"
    public var pageSize = 4096
    public var wal = false
    public var autoVacuum = 0
    public var rows = 300
    /// Include a contentless FTS5 table (CSV and JSON Lines cannot carry its index).
    public var contentless = true

    public init() {}

    /// A random value of any storage class, edge cases often.
    public static func randomValue(_ rng: inout SplitMix64, textOnlyUTF8: Bool) -> Value {
        switch rng.next() % 16 {
        case 0: return .null
        case 1: return .integer(Int64(bitPattern: rng.next()))
        case 2: return .integer([Int64.min, Int64.max, 0, -1, 1 << 53, (1 << 53) + 1][Int(rng.next() % 6)])
        case 3:
            let specials: [Double] = [-0.0, 0.0, .infinity, -.infinity, .leastNonzeroMagnitude, -.leastNormalMagnitude,
                                      .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 0.1, 1e-320, 9007199254740993]
            return .real(specials[Int(rng.next() % UInt64(specials.count))])
        case 4, 5:
            var d = Double(bitPattern: rng.next())
            if d.isNaN { d = 1.5 }
            return .real(d)
        case 6: return .real(Double(Int64(rng.next() % 2_000_001) - 1_000_000) / 1000)
        case 7: return .text([])
        case 8: return .blob([])
        case 9:
            // NUL, CR, CRLF, quotes, semicolons, U+FFFE/U+FFFF and astral characters.
            let pieces: [[UInt8]] = [[0], [0x0D], [0x0D, 0x0A], Array("'".utf8), Array("\"".utf8), Array(";".utf8),
                                     Array("é".utf8), Array("\u{FFFE}".utf8), Array("\u{FFFF}".utf8), Array("😀".utf8),
                                     Array("x".utf8), Array(",".utf8), Array("--".utf8), Array("\\".utf8)]
            var bytes: [UInt8] = []
            for _ in 0..<(rng.next() % 12) { bytes += pieces[Int(rng.next() % UInt64(pieces.count))] }
            return .text(bytes)
        case 10:
            if textOnlyUTF8 { return .text("plain \(rng.next() % 1000)") }
            // Not UTF-8: stray continuation bytes, an overlong form, a lone surrogate.
            let invalid: [[UInt8]] = [[0xFF, 0xFE], [0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80, 0x41], [0x61, 0xE2, 0x82]]
            return .text(invalid[Int(rng.next() % UInt64(invalid.count))])
        case 11:
            return .blob((0..<(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        case 12:
            // Large enough to spill onto overflow pages.
            return .blob((0..<(3000 + rng.next() % 9000)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        default:
            return .text("row \(rng.next() % 100_000) with some words to index")
        }
    }

    /// Makes the database at `path` (through litectl's own connection, values bound).
    public func make(at path: String) throws {
        var rng = SplitMix64(seed: seed)
        let utf8Only = encoding != "UTF-8"
        let db = try Connection(path: path, mode: .create)
        try db.execute("PRAGMA page_size=\(pageSize); PRAGMA auto_vacuum=\(autoVacuum); PRAGMA encoding='\(encoding)'")
        try db.execute("""
            CREATE TABLE plain(a, b, c);
            CREATE TABLE keyed(id INTEGER PRIMARY KEY, v);
            CREATE TABLE "odd ""name"" / x"(k TEXT PRIMARY KEY, v) WITHOUT ROWID;
            CREATE TABLE counter(id INTEGER PRIMARY KEY AUTOINCREMENT, v);
            CREATE TABLE computed(a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) STORED, c AS (a + 1) VIRTUAL, d);
            CREATE TABLE typed(id INTEGER PRIMARY KEY, r REAL, i INTEGER, t TEXT, x ANY) STRICT;
            CREATE TABLE hidden(rowid, _rowid_, oid);
            CREATE TABLE "Mixed Case"(id INT PRIMARY KEY, v) ;
            CREATE INDEX plain_b ON plain(b);
            CREATE INDEX keyed_v ON keyed(v) WHERE typeof(v) = 'integer';
            CREATE INDEX computed_b ON computed(b);
            CREATE VIRTUAL TABLE docs USING fts5(title, body);
            CREATE VIRTUAL TABLE places USING rtree(id, x0, x1, y0, y1);
            CREATE VIEW keyed_ints AS SELECT id, v FROM keyed WHERE typeof(v) = 'integer';
            CREATE VIEW keyed_ints_count AS SELECT count(*) AS n FROM keyed_ints;
            CREATE TABLE log(at INTEGER, what TEXT);
            CREATE TRIGGER keyed_logged AFTER INSERT ON keyed BEGIN INSERT INTO log VALUES (new.id, 'insert'); END;
            CREATE TRIGGER view_insert INSTEAD OF INSERT ON keyed_ints BEGIN INSERT INTO keyed VALUES (new.id, new.v); END;
            """)
        if contentless { try db.execute("CREATE VIRTUAL TABLE bare USING fts5(x, content='')") }
        try db.execute("PRAGMA user_version=\(Int32(truncatingIfNeeded: rng.next())); PRAGMA application_id=\(Int32(truncatingIfNeeded: rng.next()))")
        try db.execute("BEGIN")
        func insert(_ sql: String, _ values: [Value]) throws {
            let statement = try db.prepare(sql)
            try statement.bind(values)
            while try statement.step() {}
        }
        func any() -> Value { Self.randomValue(&rng, textOnlyUTF8: utf8Only) }
        for i in 0..<rows {
            try insert("INSERT INTO plain VALUES (?, ?, ?)", [any(), any(), any()])
            try insert("INSERT INTO keyed VALUES (?, ?)", [.integer(Int64(i) * 7 - 1000), any()])
            try insert("INSERT OR REPLACE INTO \"odd \"\"name\"\" / x\" VALUES (?, ?)", [.text("key \(rng.next() % 100_000)"), any()])
            try insert("INSERT INTO counter(v) VALUES (?)", [any()])
            try insert("INSERT INTO computed(a, d) VALUES (?, ?)", [.integer(Int64(rng.next() % 1000)), any()])
            try insert("INSERT INTO typed VALUES (?, ?, ?, ?, ?)", [.integer(Int64(i)), .real(Double(bitPattern: rng.next() & 0x7FEF_FFFF_FFFF_FFFF)),
                                                                 .integer(Int64(bitPattern: rng.next())), .text("t\(i)"), any()])
            try insert("INSERT INTO hidden VALUES (?, ?, ?)", [any(), any(), any()])
            try insert("INSERT INTO \"Mixed Case\" VALUES (?, ?)", [.integer(Int64(i)), any()])
            try insert("INSERT INTO docs(rowid, title, body) VALUES (?, ?, ?)",
                       [.integer(Int64(i) * 3 + 1), .text("title \(i)"), .text("body words \(rng.next() % 50) and \(rng.next() % 50)")])
            let x = Double(rng.next() % 1000), y = Double(rng.next() % 1000)
            try insert("INSERT INTO places VALUES (?, ?, ?, ?, ?)", [.integer(Int64(i) + 10), .real(x), .real(x + 1.5), .real(y), .real(y + 0.25)])
            if contentless { try insert("INSERT INTO bare(rowid, x) VALUES (?, ?)", [.integer(Int64(i) + 5), .text("word\(rng.next() % 30) other")]) }
        }
        // Holes: rowids that VACUUM would renumber and a dump must keep.
        try db.execute("""
            DELETE FROM plain WHERE rowid % 3 = 0;
            DELETE FROM hidden WHERE _rowid_ % 4 = 0;
            DELETE FROM counter WHERE id > \(rows - 5);
            DELETE FROM docs WHERE rowid % 5 = 0;
            """)
        try db.execute("COMMIT")
        try db.execute("ANALYZE")
        if wal { try db.execute("PRAGMA journal_mode=WAL") }
        try db.close()
    }
}
