// The checks a command makes before it renames a new database over an
// existing file (vacuum --into, recover): the file must not be the database
// it reads, and no -wal or -journal may lie beside it, which SQLite would
// replay or roll back onto the new file the first time it is opened.
// See https://www.sqlite.org/tempfiles.html
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum SeparateOutput {
    /// Refuses `output` when it is `source` itself or one of its companion
    /// files (the same-file rule, `SameFileRule`: renaming the new file over
    /// it would replace the file being read), `what` naming the source, or
    /// when it has a -wal or -journal beside it.
    static func require(_ output: String, apartFrom source: String, what: String) throws {
        try SameFileRule.require(output: output, apartFrom: [source], what: what)
        for suffix in ["-wal", "-journal"] where DurableFolder.exists(output + suffix) {
            throw DatabaseError(code: .cantopen,
                                message: "\(DurableFolder.baseName(of: output))\(suffix) exists beside it (SQLite would apply it to the new file); remove it or choose another file",
                                path: output)
        }
    }
}
