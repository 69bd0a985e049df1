// Schema introspection over a database that holds one of everything.
import Testing
import LitectlCore
import TestSupport

@Suite struct SchemaReaderTests {
    func everything() throws -> (TemporaryFolder, Connection) {
        let folder = try TemporaryFolder("schema")
        let db = folder.file("all.db")
        try makeDatabase(db, """
            CREATE TABLE parent (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL COLLATE NOCASE DEFAULT 'x');
            CREATE TABLE child (
                a INTEGER, b TEXT, c REAL GENERATED ALWAYS AS (a * 2) STORED, d GENERATED ALWAYS AS (b || '!') VIRTUAL,
                parent_id INTEGER REFERENCES parent(id) ON DELETE CASCADE,
                PRIMARY KEY (b, a)) WITHOUT ROWID;
            CREATE TABLE strict_t (k INTEGER PRIMARY KEY, v ANY) STRICT;
            CREATE TABLE nokey (x, y UNIQUE);
            CREATE VIRTUAL TABLE docs USING fts5(title, body);
            CREATE INDEX child_expr ON child(lower(b), a DESC);
            CREATE INDEX nokey_partial ON nokey(x) WHERE x IS NOT NULL;
            CREATE UNIQUE INDEX parent_name ON parent(name COLLATE BINARY);
            CREATE VIEW v AS SELECT id, name FROM parent;
            CREATE TRIGGER t_ins AFTER INSERT ON parent BEGIN INSERT INTO nokey VALUES (NEW.id, NULL); END;
            INSERT INTO parent (name) VALUES ('a');
            """)
        return (folder, try Connection(path: db))
    }

    @Test func tablesAndTheirKinds() throws {
        let (folder, connection) = try everything()
        _ = folder
        let schema = try connection.readSchema()
        let kinds = Dictionary(uniqueKeysWithValues: schema.tables.map { ($0.name, $0.kind) })
        #expect(kinds["parent"] == .ordinary)
        #expect(kinds["docs"] == .virtual)
        #expect(kinds["docs_data"] == .shadow)
        #expect(kinds["docs_config"] == .shadow)
        #expect(kinds["sqlite_sequence"] == .internal)

        let parent = try #require(schema.table(named: "parent"))
        #expect(parent.autoincrement)
        #expect(parent.hasRowidAlias)
        #expect(parent.columns[1].collation == "NOCASE")
        #expect(parent.columns[1].notNull)
        #expect(parent.columns[1].defaultSQL == "'x'")

        let child = try #require(schema.table(named: "child"))
        #expect(child.withoutRowid)
        #expect(!child.hasRowidAlias)
        #expect(child.primaryKey.map(\.name) == ["b", "a"])
        #expect(child.columns.first { $0.name == "c" }?.hidden == .generatedStored)
        #expect(child.columns.first { $0.name == "d" }?.hidden == .generatedVirtual)
        #expect(child.foreignKeys.count == 1)
        #expect(child.foreignKeys.first?.parentTable == "parent")
        #expect(child.foreignKeys.first?.onDelete == "CASCADE")

        #expect(try #require(schema.table(named: "strict_t")).strict)
        #expect(try #require(schema.table(named: "nokey")).primaryKey.isEmpty)
        #expect(try #require(schema.table(named: "docs")).columns.map(\.name).starts(with: ["title", "body"]))
    }

    /// Which single-column keys are the rowid, as SQLite itself decides
    /// (https://www.sqlite.org/lang_createtable.html#rowid).
    @Test func rowidAliasesAreSQLitesOwn() throws {
        let folder = try TemporaryFolder("rowid")
        let db = folder.file("r.db")
        let cases = ["a": "id INTEGER PRIMARY KEY", "b": "id integer primary key", "c": "id INTEGER PRIMARY KEY DESC",
                     "d": "id INT PRIMARY KEY", "e": "id \u{131}nteger PRIMARY KEY", "f": "id INTEGER, PRIMARY KEY (id)",
                     "g": "id INTEGER, x, PRIMARY KEY (id, x)"]
        try makeDatabase(db, cases.map { "CREATE TABLE \($0.key) (\($0.value)); INSERT INTO \($0.key) (id) VALUES (7);" }.joined())
        let schema = try Connection(path: db).readSchema()
        for name in cases.keys.sorted() {
            // The oracle: is the column's value the rowid?
            let isAlias = try sqlite3Scalar(db, "SELECT rowid = 7 FROM \(name)") == "1"
            #expect(try #require(schema.table(named: name)).hasRowidAlias == isAlias, "\(name): \(cases[name]!)")
        }
    }

    @Test func indexesViewsTriggers() throws {
        let (folder, connection) = try everything()
        _ = folder
        let schema = try connection.readSchema()
        let indexes = Dictionary(uniqueKeysWithValues: schema.indexes.map { ($0.name, $0) })
        let expr = try #require(indexes["child_expr"])
        #expect(expr.hasExpressions)
        #expect(expr.parts.count == 2)
        #expect(expr.parts[1].descending)
        #expect(try #require(indexes["nokey_partial"]).partial)
        #expect(try #require(indexes["parent_name"]).unique)
        let automatic = schema.indexes.filter(\.isAutomatic)
        #expect(automatic.contains { $0.table == "nokey" && $0.origin == .unique })
        // A WITHOUT ROWID table is its own primary-key b-tree: no index object in sqlite_schema.
        #expect(!schema.indexes.contains { $0.table == "child" && $0.origin == .primaryKey })
        #expect(schema.views.map(\.name) == ["v"])
        #expect(schema.views.first?.columns == ["id", "name"])
        #expect(schema.triggers.map(\.name) == ["t_ins"])
        #expect(schema.triggers.first?.table == "parent")
    }
}
