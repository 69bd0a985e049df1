// Small sample databases for `litectl demo` and for first tests: a shop in WAL
// mode (rowid, WITHOUT ROWID and key-less tables, an index, a view, a trigger,
// a foreign key) and an archive with 1 KiB pages and auto_vacuum.

public enum SampleDatabases {
    /// Creates `shop.db` and `archive.db` in `folder` (which must exist and hold
    /// neither) and returns their paths.
    public static func create(in folder: String) throws -> [String] {
        let shop = folder + "/shop.db"
        let archive = folder + "/archive.db"
        try createShop(at: shop)
        try createArchive(at: archive)
        return [shop, archive]
    }

    static func createShop(at path: String) throws {
        let db = try Connection(path: path, mode: .create)
        try db.execute("""
            PRAGMA journal_mode = WAL;
            PRAGMA user_version = 3;
            BEGIN;
            CREATE TABLE customers (
                id INTEGER PRIMARY KEY,
                name TEXT NOT NULL COLLATE NOCASE,
                email TEXT UNIQUE,
                balance REAL NOT NULL DEFAULT 0,
                updated_at TEXT
            );
            CREATE TABLE order_items (
                order_id INTEGER NOT NULL,
                line INTEGER NOT NULL,
                customer_id INTEGER NOT NULL REFERENCES customers(id) ON DELETE CASCADE,
                sku TEXT NOT NULL,
                qty INTEGER NOT NULL CHECK (qty > 0),
                price REAL NOT NULL,
                PRIMARY KEY (order_id, line)
            ) WITHOUT ROWID;
            CREATE TABLE events (ts INTEGER, kind TEXT, payload TEXT);
            CREATE INDEX order_items_sku ON order_items(sku);
            CREATE VIEW customer_totals AS
                SELECT c.id, c.name, sum(i.qty * i.price) AS total
                FROM customers AS c JOIN order_items AS i ON i.customer_id = c.id
                GROUP BY c.id;
            CREATE TRIGGER customers_touch AFTER UPDATE OF balance ON customers
            BEGIN
                INSERT INTO events (ts, kind, payload) VALUES (unixepoch(), 'balance', NEW.id);
            END;
            INSERT INTO customers (id, name, email, balance) VALUES
                (1, 'Ada Lovelace', 'ada@example.org', 1815.5),
                (2, 'Grace Hopper', 'grace@example.org', 0.1),
                (3, 'Zoë Ångström', NULL, -0.0),
                (4, 'O''Brien; DROP TABLE customers', 'ob@example.org', 1e308);
            INSERT INTO order_items VALUES
                (100, 1, 1, 'BOOK-1', 2, 12.25), (100, 2, 1, 'PEN-7', 10, 0.99),
                (101, 1, 2, 'BOOK-1', 1, 12.25), (102, 1, 4, 'LAMP-3', 1, 49.0);
            INSERT INTO events VALUES (1700000000, 'signup', 'ada'), (1700000000, 'signup', 'ada');
            COMMIT;
            """)
        try db.close()
    }

    static func createArchive(at path: String) throws {
        let db = try Connection(path: path, mode: .create)
        try db.execute("""
            PRAGMA page_size = 1024;
            PRAGMA auto_vacuum = FULL;
            PRAGMA application_id = 1280590669;
            BEGIN;
            CREATE TABLE snapshots (taken_at TEXT PRIMARY KEY, note TEXT, data BLOB) WITHOUT ROWID;
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
            INSERT INTO snapshots SELECT printf('2026-01-%03d', i), 'snapshot ' || i, randomblob(300 + i * 7) FROM n;
            COMMIT;
            DELETE FROM snapshots WHERE taken_at > '2026-01-150';
            """)
        try db.close()
    }
}
