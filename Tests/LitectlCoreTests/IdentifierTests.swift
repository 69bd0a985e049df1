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
