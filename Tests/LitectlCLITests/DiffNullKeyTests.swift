// Rows whose key holds a NULL: SQLite lets any number of rows of a rowid
// table hold NULL in a primary key that is not the INTEGER PRIMARY KEY (and
// in a UNIQUE column). They have no key, so every format reports them as
// rows of a multiset, and the patch deletes each by its rowid: applied with
// the sqlite3 shell or `litectl patch`, it must make A equal to B by
// litectl hash, litectl diff and sqldiff.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct DiffNullKeyTests {
    static let schema = "CREATE TABLE n(k TEXT PRIMARY KEY, v, s TEXT COLLATE NOCASE);"
    static let a = schema + """
        INSERT INTO n VALUES (NULL, 'x', 'a'), (NULL, 'y', 'a'), (NULL, 'y', 'a'), (NULL, 1, 'A'), ('k1', 1, 'a'), ('k2', 2, 'b');
        """
    static let b = schema + """
        INSERT INTO n VALUES (NULL, 'y', 'a'), (NULL, 'z', 'a'), (NULL, 1.0, 'A'), (NULL, 1, 'a'), ('k1', 10, 'a'), ('k2', 2, 'b');
        """

    @Test func everyFormatReportsThemWithoutAKey() throws {
        let folder = try TemporaryFolder("null-keys")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, Self.a)
        try makeDatabase(b, Self.b)
        // A has x, y, y, (1, A); B has y, z, (1.0, A), (1, a): one y, x and 1 go,
        // z, 1.0 and (1, a) come; k1 changes.
        let summary = try litectl("diff", "--summary", a, b)
        #expect(summary.status == 1)
        #expect(summary.stdout == "n: +3 -3 ~1\n")
        let text = try litectl("diff", a, b)
        #expect(text.stdout.contains("~ k='k1': v: 1 → 10"))
        #expect(text.stdout.contains("- k=NULL v='x' s='a'"))
        #expect(text.stdout.contains("+ k=NULL v=1.0 s='A'"))
        #expect(text.stdout.contains("+ k=NULL v=1 s='a'"))
        #expect(text.stdout.components(separatedBy: "'y'").count == 2, "one of A's two y rows goes: \(text.stdout)")
        let json = try litectl("diff", "--format", "jsonl", a, b)
        let lines = json.stdout.split(separator: "\n")
        #expect(lines.count == 7)
        #expect(lines.filter { $0.contains("\"match\":\"multiset\",\"key\":null") }.count == 6)
        #expect(lines.filter { $0.contains("\"operation\":\"update\",\"match\":\"key\",\"key\":{\"k\":\"k1\"}") }.count == 1)
        try roundTrip(a, b, in: folder)
    }

    /// Rows that differ only where `=` or NOCASE would see no difference are
    /// deleted exactly: by rowid.
    @Test func thePatchDeletesExactlyTheRowsThatGo() throws {
        let folder = try TemporaryFolder("null-keys-exact")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, Self.a)
        try makeDatabase(b, Self.b)
        let patch = try litectl("diff", "--format", "sql", a, b)
        #expect(patch.stdout.contains("DELETE FROM \"n\" WHERE rowid="))
        #expect(!patch.stdout.contains("k IS NULL"))
        #expect(!patch.stdout.contains("UPDATE \"n\" SET \"v\"='z'"))
        try roundTrip(a, b, in: folder)
        // And the other way round.
        try roundTrip(b, a, in: folder)
    }

    @Test func compositeKeysWithSomeNullParts() throws {
        try roundTrip("""
            CREATE TABLE c(a, b, v, PRIMARY KEY(a, b));
            INSERT INTO c VALUES (1, NULL, 'one'), (1, NULL, 'one'), (NULL, 2, 'two'), (1, 2, 'both'), (NULL, NULL, 'none');
            """, """
            CREATE TABLE c(a, b, v, PRIMARY KEY(a, b));
            INSERT INTO c VALUES (1, NULL, 'one'), (NULL, 2, 'deux'), (1, 2, 'both!'), (NULL, NULL, 'none'), (NULL, NULL, 'none');
            """)
    }

    /// Only NULL keys, a table whose NULL-key rows all go, and one where they all come.
    @Test func onlyNullKeysAndOneSided() throws {
        let schema = "CREATE TABLE n(k INT PRIMARY KEY, v);"
        try roundTrip(schema + "INSERT INTO n VALUES (NULL, 1), (NULL, 2), (NULL, 2);", schema + "INSERT INTO n VALUES (NULL, 2), (NULL, 3);")
        try roundTrip(schema + "INSERT INTO n VALUES (NULL, 1), (NULL, 2), (5, 5);", schema + "INSERT INTO n VALUES (5, 5);")
        try roundTrip(schema + "INSERT INTO n VALUES (5, 5);", schema + "INSERT INTO n VALUES (NULL, 1), (NULL, 1), (5, 6);")
        try roundTrip(schema + "INSERT INTO n VALUES (NULL, 1), (NULL, 2);", schema + "INSERT INTO n VALUES (NULL, 2), (NULL, 1);",
                      expectDifferent: false)
    }

    /// A UNIQUE column used as --key: NULLs in it do not make rows unique either.
    @Test func uniqueColumnAsKey() throws {
        let folder = try TemporaryFolder("null-keys-unique")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, "CREATE TABLE u(email TEXT UNIQUE, name); INSERT INTO u VALUES ('a@x', 'A'), (NULL, 'anon'), (NULL, 'ghost');")
        try makeDatabase(b, "CREATE TABLE u(email TEXT UNIQUE, name); INSERT INTO u VALUES ('a@x', 'B'), (NULL, 'ghost'), (NULL, 'new');")
        let text = try litectl("diff", "--key", "u=email", a, b)
        #expect(text.status == 1)
        #expect(text.stdout.contains("u: +1 -1 ~1\n"), "\(text.stdout)")
        #expect(text.stdout.contains("~ email='a@x': name: 'A' → 'B'"))
        #expect(text.stdout.contains("- email=NULL name='anon'") && text.stdout.contains("+ email=NULL name='new'"))
        try roundTrip(a, b, in: folder, extraArguments: ["--key", "u=email"])
    }

    /// A changeset addresses rows by key: NULL-key rows are left out, and a note says so.
    @Test func aChangesetLeavesThemOutAndSaysSo() throws {
        let folder = try TemporaryFolder("null-keys-changeset")
        let a = folder.file("a.db"), b = folder.file("b.db")
        try makeDatabase(a, Self.a)
        try makeDatabase(b, Self.b)
        let changeset = try runProcess(litectlBinary, ["diff", "--format", "changeset", a, b])
        #expect(changeset.status == 1)
        #expect(changeset.stderr == "litectl: note: table n: 6 changed rows with NULL in the primary key not in the changeset (a changeset addresses rows by key)\n")
        let file = folder.file("n.changeset")
        try Data(changeset.stdoutBytes).write(to: URL(fileURLWithPath: file))
        let patched = try folder.copy(a, as: "patched.db")
        let applied = try litectl("patch", patched, file)
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(try sqlite3Scalar(patched, "SELECT v FROM n WHERE k = 'k1'") == "10")
        #expect(try sqlite3Scalar(patched, "SELECT count(*) FROM n WHERE k IS NULL") == "4", "NULL-key rows untouched")
    }
}
