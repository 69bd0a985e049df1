// A replicated run for the moment tests (Moments/): a WAL database followed
// by `litectl replicate` while a writer (run by replicate's --exec, so both
// end together) commits inserts, updates, deletes, schema changes and a
// VACUUM; and the oracle a moment is held to: the file `litectl restore --at`
// of the same WHEN writes, page for page, row for row (by the sqlite3 CLI).
import Foundation
import LitectlCore

public enum MomentRun {
    /// The writer: seeded, about 90 commits 40 ms apart (about 5 s).
    static let writer = """
        import random, sqlite3, sys, time
        random.seed(int(sys.argv[2]))
        c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
        def pause(): time.sleep(0.04)
        def tx(*statements):
            c.execute("BEGIN IMMEDIATE")
            for s in statements:
                c.execute(*s) if isinstance(s, tuple) else c.execute(s)
            c.execute("COMMIT"); pause()
        def rows(n, extra=False):
            out = []
            for _ in range(n):
                size = random.choice([20, 200, 900, 5000])
                r = (None, "n%d" % random.randrange(10**6), random.random() * 1000, random.randbytes(size))
                out.append(r + ("x%d" % random.randrange(99),) if extra else r)
            return out
        for i in range(15):
            c.execute("BEGIN"); c.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows(25)); c.execute("COMMIT"); pause()
        for i in range(10):
            tx(("UPDATE t SET name = ?, data = ? WHERE id % 7 = ?", ("u%d" % i, random.randbytes(300), i % 7)))
        for i in range(8):
            tx("DELETE FROM t WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 12)")
        tx("ALTER TABLE t ADD COLUMN note TEXT DEFAULT 'none'", "CREATE INDEX t_name ON t(name)",
           "CREATE TABLE u(k TEXT PRIMARY KEY, v) WITHOUT ROWID")
        for i in range(10):
            tx(("INSERT INTO u VALUES (?, ?)", ("k%d" % i, random.randbytes(100))),
               ("UPDATE t SET note = ? WHERE id % 5 = ?", ("note%d" % i, i % 5)))
        tx("DELETE FROM t WHERE id % 3 = 0")
        c.execute("VACUUM"); pause()
        for i in range(10):
            c.execute("BEGIN"); c.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows(10, True)); c.execute("COMMIT"); pause()
        tx("DROP TABLE u")
        for i in range(8):
            tx(("UPDATE t SET score = -score WHERE id % 11 = ?", (i,)))
        """

    /// Makes `db` (WAL, 200 rows), initialises the repository at `url` and
    /// follows `db` into it while the writer runs; returns replicate's result
    /// (it must exit 0). `options`: the repository options (--endpoint, --key-file).
    public static func run(db: String, url: String, options: [String], env: [String: String], folder: TemporaryFolder,
                           seed: Int = 1) throws -> ProcessResult {
        try makeDatabase(db, """
            PRAGMA journal_mode=wal;
            CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
            INSERT INTO t(name, score, data) SELECT 'r' || i, i * 1.5, randomblob(i * 7 % 1500) FROM n;
            """)
        let script = folder.file("writer.py")
        try writer.write(toFile: script, atomically: true, encoding: .utf8)
        let initialised = try litectl(["repo", "init", url] + options, env: env)
        guard initialised.status == 0 else { return initialised }
        return try litectl(["replicate", db, "--repo", url] + options + ["--interval", "0.3", "--poll-interval", "0.05", "--gather-every", "3",
                            "--exec", "python3 '\(script)' '\(db)' \(seed)"], env: env)
    }

    /// The built litectl with `env` added to its environment.
    public static func litectl(_ arguments: [String], env: [String: String]) throws -> ProcessResult {
        try runProcess("/usr/bin/env", env.map { "\($0)=\($1)" } + [litectlBinary] + arguments)
    }

    /// What differs between the moment `registration` serves and the file
    /// `restored`, as one line; nil when nothing does: the size, each page's
    /// bytes, integrity_check through the VFS, and every table's rows (each
    /// value as quote() writes it, in order) read through the VFS and by the
    /// sqlite3 CLI from the file.
    public static func difference(_ registration: PageVFS.Registration, restored: String) throws -> String? {
        let file = [UInt8](try Data(contentsOf: URL(fileURLWithPath: restored)))
        let source = registration.source
        guard source.pageSize * source.pageCount == file.count else {
            return "\(source.pageCount) pages of \(source.pageSize) bytes, the restored file \(file.count) bytes"
        }
        for n in 1...source.pageCount {
            let page = try source.page(n)
            if !page.elementsEqual(file[(n - 1) * source.pageSize..<n * source.pageSize]) { return "page \(n) differs" }
        }
        let connection = try Connection(pages: registration)
        defer { try? connection.close() }
        guard case .text(let ok)? = try connection.scalar("PRAGMA integrity_check"), ok == Array("ok".utf8) else {
            return "integrity_check through the VFS is not ok"
        }
        let tables = try sqlite3([restored, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name"])
            .split(separator: "\n").map(String.init)
        let listed = try connection.rows("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").map { row -> String in
            guard case .text(let b) = row[0] else { return "?" }
            return String(decoding: b, as: UTF8.self)
        }
        guard listed == tables else { return "tables \(listed) through the VFS, \(tables) in the file" }
        for table in tables {
            let quoted = "\"" + table.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            let columns = try sqlite3([restored, "SELECT name FROM pragma_table_info('\(table.replacingOccurrences(of: "'", with: "''"))')"])
                .split(separator: "\n").map { "quote(\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\")" }
            let sql = "SELECT " + columns.joined(separator: " || '|' || ") + " FROM \(quoted) ORDER BY 1"
            let viaFile = try sqlite3([restored, sql])
            var viaMoment = ""
            for row in try connection.rows(sql) {
                guard case .text(let b) = row[0] else { return "a row of \(table) is not text" }
                viaMoment += String(decoding: b, as: UTF8.self) + "\n"
            }
            if viaMoment != viaFile { return "the rows of \(table) differ" }
        }
        return nil
    }
}
