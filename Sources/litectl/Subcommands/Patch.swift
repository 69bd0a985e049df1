// `litectl patch A PATCH`: applies a SQL patch to a database, all or nothing.
import ArgumentParser
import Foundation
import LitectlCore

extension ConflictPolicy: ExpressibleByArgument {}

struct Patch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply a SQL patch or a changeset (from litectl diff) to a database, all or nothing.",
        discussion: """
            Runs the statements of PATCH (a file, or - for stdin) on A inside one \
            BEGIN IMMEDIATE transaction with foreign-key enforcement off; the patch's \
            own BEGIN/COMMIT and PRAGMA foreign_keys lines are skipped. On any error \
            the transaction is rolled back and A is left as it was: a full disk says \
            "disk full", SIGINT, SIGTERM or SIGHUP "interrupted by SIGTERM" (the \
            transaction is rolled back before litectl exits; after SIGKILL A's journal \
            is left, as SQLite leaves it for any killed writer, and the next write of A \
            rolls it back). --dry-run runs \
            the patch, reports what it would change, and rolls back. PATCH may be a \
            pipe or FIFO, e.g. <(litectl diff --format sql B C).

            A patch changes A and nothing else, as SQLite enforces while each statement \
            is prepared (an authorizer, and SQLITE_LIMIT_ATTACHED 0): ATTACH, DETACH, \
            VACUUM INTO, load_extension() and every PRAGMA but foreign_keys, \
            defer_foreign_keys, user_version and application_id are refused, and so \
            are sqlite3 shell dot-commands other than the .bail on a litectl patch \
            starts with; a refused patch is exit status 2 with nothing applied. Bytes \
            that are neither UTF-8 SQL text nor a changeset are refused before anything \
            runs. See docs/safety.md (installed as /usr/local/share/doc/litectl/safety.md).

            A changeset (litectl diff --format changeset, or any session-extension \
            changeset; recognized by its content) is applied with \
            sqlite3changeset_apply in the same kind of transaction. --on-conflict \
            says what to do when a change meets a row that differs from what the \
            changeset expects, a missing row or a constraint: abort (default: roll \
            everything back, exit 2), omit (skip that change) or replace (overwrite \
            the row where SQLite allows it, else skip). Changes that only collide \
            with other rows of the changeset (rows swapping a UNIQUE value, or passing \
            one round a cycle), which sqlite3changeset_apply reports as constraint \
            conflicts, are applied together afterwards, rows deleted first and inserted \
            after, with triggers off; --on-conflict decides only if that fails too. \
            --invert applies the inverse changeset (undoes it).

            Prints nothing on success unless --dry-run or -v: then one line, \
            `N statements, M rows changed` (for a changeset, `changeset: M rows changed`); \
            --json prints one object (kind sql or changeset, statements, rows_changed, \
            committed); -q prints nothing, even for --dry-run.

            Exit status: 0 applied (or the dry run succeeded), 2 error (A untouched).
            """)

    @Argument(help: ArgumentHelp("The database to patch.", valueName: "a"))
    var a: String

    @Argument(help: ArgumentHelp("The SQL patch file, or - for standard input.", valueName: "patch"))
    var patch: String

    @Flag(help: "Apply inside a transaction, report, and roll back.")
    var dryRun = false

    @Option(help: ArgumentHelp("Changesets: abort, omit or replace on a conflict.", valueName: "policy"))
    var onConflict: ConflictPolicy = .abort

    @Flag(help: "Changesets: apply the inverse (undo the changeset).")
    var invert = false

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var database: DatabaseOptions

    func run() throws {
        try refuseMoments([a], as: "patched")
        Interruption.install(naming: a)
        do {
            let bytes = patch == "-" ? [UInt8](FileHandle.standardInput.readDataToEndOfFile())
                                     : try FileStreams.readAll(patch)
            let result: PatchResult
            if PatchApplier.isChangeset(bytes) {
                result = try PatchApplier.applyChangeset(path: a, changeset: bytes, policy: onConflict, invert: invert,
                                                         dryRun: dryRun, busyTimeout: database.busyTimeout)
            } else {
                if invert { throw ValidationError("--invert applies to changesets; \(patch) is SQL.") }
                guard let script = PatchApplier.sqlText(bytes) else {
                    throw DatabaseError(code: .notadb, message: "not a SQL patch or a changeset (binary data that is not UTF-8 text)",
                                        path: patch == "-" ? "standard input" : patch)
                }
                result = try PatchApplier.apply(path: a, script: script, dryRun: dryRun, patch: patch == "-" ? nil : patch,
                                                busyTimeout: database.busyTimeout)
            }
            let changeset = PatchApplier.isChangeset(bytes)
            if voice.json {
                printExact(JSON.object([("kind", .string(changeset ? "changeset" : "sql")),
                                        ("statements", changeset ? .null : .integer(Int64(result.statements))),
                                        ("rows_changed", .integer(Int64(result.rowsChanged))),
                                        ("committed", .bool(result.committed))]).compact)
            } else if voice.quiet || !(dryRun || voice.verbose) {
                // Nothing to say.
            } else if changeset {
                printOut("changeset: \(result.rowsChanged) rows changed\(dryRun ? " (dry run: rolled back)" : "")")
            } else {
                printOut("\(result.statements) statements, \(result.rowsChanged) rows changed\(dryRun ? " (dry run: rolled back)" : "")")
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
    }
}
