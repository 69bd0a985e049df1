// `litectl patch A PATCH`: applies a SQL patch to a database, all or nothing.
import ArgumentParser
import Foundation
import LitectlCore

struct Patch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply a SQL patch (from litectl diff --format sql) to a database, all or nothing.",
        discussion: """
            Runs the statements of PATCH (a file, or - for stdin) on A inside one \
            BEGIN IMMEDIATE transaction with foreign-key enforcement off; the patch's \
            own BEGIN/COMMIT and PRAGMA foreign_keys lines are skipped. On any error \
            the transaction is rolled back and A is left as it was. --dry-run runs \
            the patch, reports what it would change, and rolls back.

            Prints nothing on success unless --dry-run or --verbose: then one line, \
            `N statements, M rows changed`.

            Exit status: 0 applied (or the dry run succeeded), 2 error (A untouched).
            """)

    @Argument(help: ArgumentHelp("The database to patch.", valueName: "a"))
    var a: String

    @Argument(help: ArgumentHelp("The SQL patch file, or - for standard input.", valueName: "patch"))
    var patch: String

    @Flag(help: "Apply inside a transaction, report, and roll back.")
    var dryRun = false

    @Flag(help: "Report what was applied.")
    var verbose = false

    @OptionGroup var database: DatabaseOptions

    func run() throws {
        do {
            let data = patch == "-" ? FileHandle.standardInput.readDataToEndOfFile()
                                    : try readPatch(patch)
            let script = String(decoding: data, as: UTF8.self)
            let result = try PatchApplier.apply(path: a, script: script, dryRun: dryRun, busyTimeout: database.busyTimeout)
            if dryRun || verbose {
                printOut("\(result.statements) statements, \(result.rowsChanged) rows changed\(dryRun ? " (dry run: rolled back)" : "")")
            }
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
    }

    func readPatch(_ path: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DatabaseError(code: .cantopen, message: "cannot read the patch file", path: path)
        }
        return data
    }
}
