// A database for the tests of schema changes (`transform`): tables with
// indexes (partial and expression ones), triggers, views, foreign keys in both
// directions, AUTOINCREMENT, WITHOUT ROWID and STRICT tables, rowids with gaps
// and sqlite_stat1, made by the sqlite3 CLI.

/// A library: authors ← books ← reviews (foreign keys both ways around books).
public func makeLibrary(_ path: String) throws {
    try makeDatabase(path, """
        CREATE TABLE authors (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL COLLATE NOCASE,
                              born TEXT, score, note TEXT DEFAULT 'n/a');
        CREATE TABLE books (id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES authors(id) ON DELETE CASCADE,
                            title TEXT NOT NULL, year TEXT, price REAL, isbn TEXT UNIQUE);
        CREATE TABLE reviews (book_id INTEGER NOT NULL REFERENCES books(id), reviewer TEXT NOT NULL,
                              stars INTEGER CHECK (stars BETWEEN 1 AND 5), PRIMARY KEY (book_id, reviewer)) WITHOUT ROWID;
        CREATE TABLE tags (name TEXT PRIMARY KEY, weight INTEGER) STRICT;
        CREATE TABLE log (at TEXT, msg TEXT);
        CREATE TABLE settings (key TEXT, value);
        CREATE INDEX books_title ON books(title);
        CREATE INDEX books_year ON books(year) WHERE year IS NOT NULL;
        CREATE INDEX books_lower_title ON books(lower(title));
        CREATE INDEX authors_name ON authors(name);
        CREATE TRIGGER books_added AFTER INSERT ON books BEGIN INSERT INTO log VALUES ('added', NEW.title); END;
        CREATE TRIGGER authors_renamed AFTER UPDATE OF name ON authors BEGIN INSERT INTO log VALUES ('renamed', NEW.name); END;
        CREATE VIEW book_list AS SELECT b.title, a.name AS author, b.year FROM books b JOIN authors a ON a.id = b.author_id;
        CREATE VIEW author_births AS SELECT name, born FROM authors;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
          INSERT INTO authors (name, born, score) SELECT 'Author ' || i, CASE WHEN i % 7 = 0 THEN NULL ELSE 1800 + i END,
                 CASE i % 4 WHEN 0 THEN i WHEN 1 THEN i * 0.5 WHEN 2 THEN 'n' || i ELSE x'00ff' END FROM n;
        DELETE FROM authors WHERE id % 10 = 3 OR id > 290;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 900)
          INSERT INTO books (id, author_id, title, year, price, isbn)
          SELECT i * 3, (i % 280) + 1 - ((i % 280) + 1) % 10 + CASE WHEN ((i % 280) + 1) % 10 = 3 THEN 4 ELSE ((i % 280) + 1) % 10 END,
                 'Title ' || i || CASE WHEN i % 5 = 0 THEN ' é' ELSE '' END,
                 CASE WHEN i % 11 = 0 THEN NULL WHEN i % 13 = 0 THEN 'c. 18' || (i % 100) ELSE CAST(1900 + i % 120 AS TEXT) END,
                 i * 1.25, CASE WHEN i % 3 = 0 THEN NULL ELSE 'isbn-' || i END FROM n;
        DELETE FROM books WHERE author_id NOT IN (SELECT id FROM authors);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600)
          INSERT INTO reviews SELECT b.id, 'r' || (n.i % 4), 1 + n.i % 5 FROM n JOIN books b ON b.id = n.i * 3 WHERE n.i <= 600;
        INSERT INTO tags VALUES ('fiction', 3), ('poetry', 1), ('history', 7);
        INSERT INTO settings VALUES ('theme', 'dark'), ('lang', 'fr'), ('size', 12), ('ratio', 1.5);
        DELETE FROM log WHERE rowid % 3 = 0;
        ANALYZE;
        """)
}
