// `litectl migrate lint DB DIR`: the pending migrations run on a private
// copy of DB, and each destructive or risky change reported with the rows
// it touches (LitectlCore's MigrationLinter; rules in docs/migrate-lint.md).
import ArgumentParser
import Foundation
import LitectlCore

struct MigrateLint: ParsableCommand {
    enum LintFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json, junit, sarif
    }

    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Run the pending migrations of DIR on a copy of DB and report destructive or risky changes with the data they touch.",
        discussion: """
            DB is copied (backup API, read-only, once) to a private temporary file in \
            $TMPDIR, with its journal in memory; the pending migrations (from DB's \
            user_version to the newest, or up or down to --to N) run on the copy as \
            `litectl migrate` runs them (each file in its own transaction, foreign keys \
            off, ATTACH, VACUUM INTO, load_extension() and most pragmas refused), \
            statement by statement. DB is never written, and the copy is removed on \
            exit, error or signal (after SIGKILL, by the next lint).

            After each statement and each file, lint compares the schema before and \
            after, and counts the rows a change touches in the data as it was before \
            the file: a dropped table's rows (DS101), a dropped column's non-NULL values \
            (DS102), the stored values a type change alters (MF105), the rows that \
            violate an added NOT NULL, UNIQUE or CHECK (MF101-MF103; the migration \
            would fail on them) or an added foreign key (MF104); views, triggers and \
            foreign keys left naming a renamed or dropped table or column (BC103-BC105); \
            a table rebuilt (dropped and re-created, SQLite's 12-step ALTER) with no \
            change (RB101). The rules: DS101 table-dropped, DS102 column-dropped, DS103 \
            view-dropped, DS104 trigger-dropped, DS105 unique-index-dropped, DS106 \
            delete-without-where, DS107 update-without-where, MF101 not-null-violated, \
            MF102 unique-violated, MF103 check-violated, MF104 foreign-key-violated, \
            MF105 type-change-alters-values, MF106 affinity-changed, MF107 \
            statement-fails, BC101 table-renamed, BC102 column-renamed, BC103 \
            view-broken, BC104 trigger-broken, BC105 foreign-key-dangling, BC106 \
            required-column-added, RB101 rebuild-unchanged, RB102 \
            autoincrement-removed, CN101 not-null-removed, CN102 foreign-key-removed, \
            PR101 pragma-without-effect. docs/migrate-lint.md (installed as \
            /usr/local/share/doc/litectl/migrate-lint.md) has each rule's severity \
            and an example. A file that fails on the data is a finding; the files \
            after it are not linted (listed as such).

            Output: one line per finding, `SEVERITY RULE FILE:LINE (statement N): \
            MESSAGE`; findings that fail the lint (errors, and warnings with --strict) \
            always, the others on a terminal or with -v; nothing else on success. \
            --json (or --format json) prints one JSON object: path, folder, \
            from_version, to_version, files [{version, file}], not_linted, errors, \
            warnings, notes, findings [{rule, name, severity, file, version, statement, \
            line, object, count, message, fingerprint}], error. --format junit prints \
            JUnit XML (a test suite per file, a test case per rule); --format sarif a \
            SARIF 2.1.0 log (a result per finding at its file and line, with a stable \
            fingerprint of rule, file and object). Exit status: 0 no finding fails the \
            lint, 1 an error-level finding (or a warning with --strict), 2 the lint \
            could not run (DB or DIR unreadable, a migration file misnamed).
            """)

    @Argument(help: ArgumentHelp("The database file (only read).", valueName: "db"))
    var database: String

    @Argument(help: ArgumentHelp("The folder of NNNN_name.sql files.", valueName: "dir"))
    var folder: String

    @Option(help: ArgumentHelp("The version to lint up or down to (default: the newest migration).", valueName: "n"))
    var to: Int64?

    @Flag(help: "Fail on warnings too (exit status 1).")
    var strict = false

    @Option(help: ArgumentHelp("Output format: text, json, junit or sarif.", valueName: "format"))
    var format: LintFormat?

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var options: DatabaseOptions

    func validate() throws {
        if let to, to < 0 || to > MigrationFolder.maximumVersion {
            throw ValidationError("--to takes a version from 0 to \(MigrationFolder.maximumVersion).")
        }
        if voice.json && format != nil && format != .json { throw ValidationError("Give --json or --format, not both.") }
    }

    func run() throws {
        try refuseMoments([database], as: "linted (migrate lint copies a file)")
        noteHotJournals(voice)
        // SIGINT, SIGTERM, SIGHUP: the copy is removed, one line names DB, exit 2.
        Interruption.install(naming: database)
        let started = Date().timeIntervalSince1970
        let format = voice.json ? LintFormat.json : (self.format ?? .text)
        var request = MigrationLintRequest(database: database, folder: folder)
        request.target = to
        request.busyTimeout = options.milliseconds(default: 60)
        request.copyTimeout = options.seconds(default: 60)
        let report: MigrationLintReport
        do {
            report = try MigrationLinter.lint(request)
        } catch {
            if format == .json { printExact(MigrationLintOutput.json(nil, path: database, folder: folder, error: describe(error)).compact) }
            printError(describe(error))
            throw ExitStatus.error
        }
        let fails = report.fails(strict: strict)
        if !voice.quiet {
            switch format {
            case .json:
                printExact(MigrationLintOutput.json(report, path: database, folder: folder, error: nil).compact)
            case .junit:
                printExact(String(MigrationLintOutput.junit(report, strict: strict, started: started).dropLast()))
            case .sarif:
                printExact(MigrationLintOutput.sarif(report, version: LitectlVersion.string, exitCode: fails ? 1 : 0).pretty)
            case .text:
                let all = voice.verbose || isatty(STDOUT_FILENO) == 1
                for finding in report.findings
                where all || finding.severity == .error || (strict && finding.severity == .warning) {
                    printOut(finding.line1)
                }
                for file in report.notLinted where all || fails {
                    printOut("not linted: \(file) (an earlier migration fails on the data)")
                }
                if all {
                    let n = report.files.count
                    printOut("\(database): \(n) migration\(n == 1 ? "" : "s") linted; \(report.count(.error)) error\(report.count(.error) == 1 ? "" : "s"), \(report.count(.warning)) warning\(report.count(.warning) == 1 ? "" : "s"), \(report.count(.note)) note\(report.count(.note) == 1 ? "" : "s")")
                }
            }
        }
        if fails { throw ExitStatus.findings }
    }
}
