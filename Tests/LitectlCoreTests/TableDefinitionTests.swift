// The SQL tokenizer and the CREATE TABLE editor behind `transform`: every piece
// of a definition read back as written, and every CREATE TABLE of the real
// corpus rewritten by the editor and judged by SQLite itself (the same columns,
// types, keys, defaults, collations and foreign keys as the original).
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct TableDefinitionTests {
    @Test func tokensKeepQuotingAndRanges() {
        let sql = #"CREATE TABLE "a""b" ([x y] TEXT DEFAULT 'it''s', `z`, xyz BLOB DEFAULT x'00ff', n REAL DEFAULT -1.5e+3) -- c"#
        let tokens = tokenizeSQL(sql)
        #expect(tokens[2].kind == .quotedIdentifier && tokens[2].identifierValue == #"a"b"#)
        #expect(tokens[4].identifierValue == "x y")
        #expect(tokens.contains { $0.kind == .string && $0.text == "'it''s'" && $0.identifierValue == "it's" })
        #expect(tokens.contains { $0.identifierValue == "z" && $0.kind == .quotedIdentifier })
        // A word that starts with "x" is a word; only x'..' is a blob.
        #expect(tokens.contains { $0.kind == .word && $0.text == "xyz" })
        #expect(tokens.contains { $0.kind == .string && $0.text == "x'00ff'" })
        #expect(tokens.contains { $0.kind == .number && $0.text == "1.5e+3" })
        #expect(!tokens.contains { $0.text.contains("--") })
        for token in tokens {
            #expect(String(decoding: Array(sql.utf8)[token.start..<token.end], as: UTF8.self) == token.text)
        }
    }

    @Test func columnsConstraintsAndOptionsAsWritten() throws {
        let sql = """
            CREATE TABLE t (
              id INTEGER CONSTRAINT pk PRIMARY KEY AUTOINCREMENT,
              name VARCHAR(20) NOT NULL COLLATE NOCASE DEFAULT 'x', -- who
              parent INTEGER REFERENCES t(id) ON DELETE SET NULL NOT DEFERRABLE,
              total REAL GENERATED ALWAYS AS (id * 2) STORED,
              xtra,
              CONSTRAINT u UNIQUE (name, parent),
              CHECK (length(name) > 0)
            ) STRICT, WITHOUT ROWID
            """
        let definition = try TableDefinition(parsing: sql)
        #expect(definition.columns.map(\.name) == ["id", "name", "parent", "total", "xtra"])
        #expect(definition.columns.map(\.type) == ["INTEGER", "VARCHAR(20)", "INTEGER", "REAL", ""])
        #expect(definition.columns[0].constraints.map(\.kind) == [.primaryKey])
        #expect(definition.columns[0].constraints[0].text == "CONSTRAINT pk PRIMARY KEY AUTOINCREMENT")
        #expect(definition.columns[1].constraints.map(\.kind) == [.notNull, .collate, .defaultValue])
        #expect(definition.columns[2].constraints.map(\.kind) == [.references])
        #expect(definition.columns[2].constraints[0].text == "REFERENCES t(id) ON DELETE SET NULL NOT DEFERRABLE")
        #expect(definition.columns[3].constraints.map(\.kind) == [.generated])
        #expect(definition.constraints.map(\.kind) == [.unique, .check])
        #expect(definition.constraints[0].columns == ["name", "parent"])
        #expect(definition.options == ["STRICT", "WITHOUT ROWID"])
        // Unchanged columns are written back exactly as they were.
        #expect(definition.createStatement(name: "t2").contains("name VARCHAR(20) NOT NULL COLLATE NOCASE DEFAULT 'x'"))
    }

    @Test func virtualTablesAndTableAsSelectForms() throws {
        #expect(throws: TableDefinition.ParseError.self) { try TableDefinition(parsing: "CREATE VIRTUAL TABLE d USING fts5(a, b)") }
        let plain = try TableDefinition(parsing: "CREATE TABLE \"t\"(a INT,b TEXT,c NUM)")
        #expect(plain.columns.map(\.type) == ["INT", "TEXT", "NUM"])
    }

    @Test func typeNamesAndDefaultsThatTransformAccepts() {
        for good in ["INTEGER", "VARCHAR(20)", "DECIMAL(10, 2)", "UNSIGNED BIG INT", "NUMERIC(-1)"] {
            #expect(TransformPlanner.isTypeName(good), "\(good)")
        }
        for bad in ["", "INT, evil TEXT", "TEXT) --", "INT(1,2,3)", "'x'", "INT NOT NULL", "DECIMAL(10,)"] {
            #expect(!TransformPlanner.isTypeName(bad), "\(bad)")
        }
        for good in ["0", "-1.5", "+7", "'text'", "x'00'", "NULL", "true", "CURRENT_TIMESTAMP", "(1 + 2)", "(lower('A'))"] {
            #expect(TransformPlanner.isDefaultValue(good), "\(good)")
        }
        for bad in ["", "1 + 2", "'a' NOT NULL", "(1) , x TEXT", "abc", "(1", "- 'x'"] {
            #expect(!TransformPlanner.isDefaultValue(bad), "\(bad)")
        }
    }

    /// Every CREATE TABLE of the real databases: rewritten with every column
    /// marked changed (so each is written from its parts), it must create a
    /// table SQLite describes exactly as it describes the original.
    @Test func everyRealTableRewritesToTheSameTable() throws {
        guard !realDatabases.isEmpty else { return }
        var checked = 0
        for path in realDatabases {
            guard let source = try? Connection(path: path) else { continue }
            let schema = try source.readSchema()
            for table in schema.tables where table.kind == .ordinary {
                guard let sql = table.sql else { continue }
                var definition = try TableDefinition(parsing: sql)
                for i in definition.columns.indices { definition.columns[i].original = nil }
                let scratch = try Connection(inMemory: 1000)
                try scratch.execute(sql)
                try scratch.execute(definition.createStatement(name: "litectl_copy"))
                let copy = try scratch.readSchema()
                let original = try #require(copy.table(named: table.name))
                let rewritten = try #require(copy.table(named: "litectl_copy"))
                #expect(describe(original) == describe(rewritten), "\(path): \(table.name)")
                checked += 1
            }
        }
        #expect(checked > 10)
    }

    func describe(_ table: Table) -> [String] {
        table.columns.map { "\($0.name)|\($0.declaredType)|\($0.notNull)|\($0.defaultSQL ?? "-")|\($0.primaryKeyPosition)|\($0.collation)|\($0.hidden)" }
            + table.foreignKeys.map { "fk \($0.parentTable) \($0.columns) \($0.parentColumns) \($0.onUpdate) \($0.onDelete)" }
            + ["strict \(table.strict) wr \(table.withoutRowid) ai \(table.autoincrement) alias \(table.hasRowidAlias)"]
    }
}
