// Identifier quoting with hostile names: each name makes a table and a column
// through the sqlite3 shell, and the schema reader finds it unchanged.
import Testing
import LitectlCore
import TestSupport

@Suite struct IdentifierTests {
    static let hostile = ["plain", "with space", "double\"quote", "single'quote", "select", "table", "\"\"", "a.b",
                          "[bracket]", "`tick`", "日本語", "e\u{301}", "\u{E9}", "semi;colon -- comment", "x\ny", "🎉"]

    @Test func quotesDoubleTheQuote() {
        #expect(quoteIdentifier("a\"b") == "\"a\"\"b\"")
        #expect(quoteIdentifier("main", "t x") == "\"main\".\"t x\"")
    }

    /// SQLite folds ASCII letters only, and keeps NFC and NFD spellings apart.
    @Test func namesSQLiteKeepsApartStayApart() throws {
        let folder = try TemporaryFolder("ident-apart")
        let db = folder.file("a.db")
        let names = ["\u{E9}", "e\u{301}", "\u{C9}", "Abc"]
        try makeDatabase(db, names.enumerated().map { "CREATE TABLE \(quoteIdentifier($1)) (c\($0));" }
            .joined() + "CREATE TABLE \(quoteIdentifier("e\u{301}x")) (k PRIMARY KEY) WITHOUT ROWID;")
        let schema = try Connection(path: db).readSchema()
        #expect(schema.tables.count == 5)
        for (i, name) in names.enumerated() {
            let table = try #require(schema.table(named: name))
            #expect(Array(table.name.utf8) == Array(name.utf8))
            #expect(table.columns.map(\.name) == ["c\(i)"])
        }
        #expect(schema.table(named: "ABC")?.name == "Abc", "ASCII folds")
        #expect(schema.table(named: "\u{E9}X") == nil, "non-ASCII does not fold, nor does NFC match NFD")
        #expect(try #require(schema.table(named: "e\u{301}x")).withoutRowid)
        #expect(!(try #require(schema.table(named: "\u{E9}")).withoutRowid))
    }

    @Test(arguments: hostile)
    func hostileNamesRoundTripThroughTheShell(name: String) throws {
        let folder = try TemporaryFolder("ident")
        let db = folder.file("a.db")
        let q = quoteIdentifier(name)
        try makeDatabase(db, "CREATE TABLE \(q) (\(q) TEXT); INSERT INTO \(q) (\(q)) VALUES ('ok'); CREATE INDEX \(quoteIdentifier(name + "_i")) ON \(q)(\(q));")
        let connection = try Connection(path: db)
        let schema = try connection.readSchema()
        let table = try #require(schema.tables.first)
        #expect(Array(table.name.utf8) == Array(name.utf8))
        #expect(table.columns.map { Array($0.name.utf8) } == [Array(name.utf8)])
        #expect(try connection.scalar("SELECT \(q) FROM \(q)") == .text("ok"))
    }
}
