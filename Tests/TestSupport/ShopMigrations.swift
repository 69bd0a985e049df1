// Migrations written for the tests of `litectl migrate`: a shop (customers,
// orders, a column type changed by SQLite's 12-step table rebuild, a view, an
// added column, data moved), and the database the sqlite3 CLI makes by
// applying them by hand, the oracle of what migrate must produce.
import Foundation

/// The shop's migrations, in order; `down` files for all but the third.
public let shopMigrations: [(name: String, up: String, down: String?)] = [
    ("0001_customers.sql", """
        -- The first table.
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);
        INSERT INTO customers (name, email) VALUES ('Ada', 'ada@example.com'), ('Brian', NULL), ('Chloé', 'c@example.org');
        """, "DROP TABLE customers;"),
    ("0002_orders.sql", """
        CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                             total TEXT, placed_at TEXT);
        CREATE INDEX orders_customer ON orders(customer_id);
        INSERT INTO orders (customer_id, total, placed_at) VALUES (1, '12.50', '2024-01-02'), (1, '3', '2024-02-03'),
                                                                   (3, '99.99', '2024-03-04');
        """, "DROP TABLE orders;"),
    ("0003_total_as_real.sql", """
        -- SQLite cannot change a column's type: the 12-step rebuild.
        CREATE TABLE orders_new (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                                 total REAL NOT NULL DEFAULT 0, placed_at TEXT);
        INSERT INTO orders_new SELECT id, customer_id, CAST(total AS REAL), placed_at FROM orders;
        DROP TABLE orders;
        ALTER TABLE orders_new RENAME TO orders;
        CREATE INDEX orders_customer ON orders(customer_id);
        """, nil),
    ("0004_customer_totals.sql", """
        CREATE VIEW customer_totals AS
          SELECT c.id, c.name, total(o.total) AS spent FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id;
        ALTER TABLE customers ADD COLUMN tier TEXT NOT NULL DEFAULT 'basic';
        UPDATE customers SET tier = 'gold' WHERE id IN (SELECT customer_id FROM orders GROUP BY customer_id HAVING sum(total) > 50);
        """, """
        DROP VIEW customer_totals;
        ALTER TABLE customers DROP COLUMN tier;
        """),
]

/// Writes the shop's migrations (the first `count`) into `folder`/migrations.
public func writeShopMigrations(_ folder: TemporaryFolder, count: Int = shopMigrations.count, downs: Bool = true) throws -> String {
    let dir = folder.file("migrations")
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    for (name, up, down) in shopMigrations.prefix(count) {
        try up.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
        if downs, let down {
            try down.write(toFile: dir + "/" + name.replacingOccurrences(of: ".sql", with: ".down.sql"), atomically: true, encoding: .utf8)
        }
    }
    return dir
}

/// The database the sqlite3 CLI makes by applying the first `count` files by
/// hand and setting user_version: the oracle for what migrate must produce.
public func shopByHand(_ folder: TemporaryFolder, count: Int) throws -> String {
    let path = folder.file("by-hand-\(count).db")
    unlink(path)
    var script = "PRAGMA foreign_keys=OFF;\n"
    for (_, up, _) in shopMigrations.prefix(count) { script += up + "\n" }
    script += "PRAGMA user_version=\(count);\n"
    try makeDatabase(path, script)
    return path
}
