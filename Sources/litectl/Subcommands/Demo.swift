// `litectl demo`: makes sample databases in a temporary folder and runs
// litectl's commands on them, showing each command line before its output.
import ArgumentParser
import Foundation
import LitectlCore

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show litectl at work on sample databases made in a temporary folder.",
        discussion: """
            The folder is removed afterwards unless --keep is given. Each command line is \
            shown before its output; -v adds each one's exit status, -q runs them all \
            and prints nothing (the exit status is 2 when one did not end as the demo \
            expects), --json prints one object per command (command, exit_status) \
            instead of their output.
            """)

    @Flag(help: "Keep the temporary folder and print its path.")
    var keep = false

    @OptionGroup var voice: VoiceOptions

    func run() throws {
        do { try show() } catch let code as ExitCode { throw code } catch { throw fail(error) }
    }

    func show() throws {
        let scratch = try ScratchFolder(purpose: "demo", kept: keep)
        let folder = scratch.path
        let talks = !voice.quiet && !voice.json
        var failed = false
        defer {
            if keep && !voice.quiet { printOut(""); printOut("(sample databases kept in \(folder))") }
            scratch.remove()
        }
        let paths = try SampleDatabases.create(in: folder)
        if talks { printOut("Sample databases in \(folder): \(paths.map { ($0 as NSString).lastPathComponent }.joined(separator: ", "))") }
        let previous = FileManager.default.currentDirectoryPath
        _ = FileManager.default.changeCurrentDirectoryPath(folder)
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }

        for arguments in [["info", "shop.db"], ["info", "--json", "archive.db"], ["info", "missing.db"],
                          ["query", "shop.db", "--attach", "arch=archive.db", "--format", "table",
                           "SELECT name, total, (SELECT count(*) FROM arch.snapshots) AS snapshots FROM customer_totals ORDER BY id"],
                          ["tables", "shop.db", "archive.db", "--counts", "--format", "table"],
                          ["backup", "-v", "shop.db", "."], ["backup", "--gzip-level", "1", "--verify", "full", "-v", "shop.db", "shop-copy.db.gz"],
                          ["repo", "init", "repo"], ["backup", "-v", "shop.db", "archive.db", "--repo", "repo", "--tag", "demo"],
                          ["query", "--write", "shop.db", "UPDATE customers SET balance = balance + 1"],
                          ["backup", "-v", "shop.db", "--repo", "repo"], ["snapshots", "--repo", "repo"],
                          ["restore", "-v", "--repo", "repo", "latest", "--db", "shop.db", "shop-restored.db"],
                          ["verify", "--repo", "repo", "--read-data", "--json"],
                          ["hash", "shop.db", "archive.db"], ["diff", "--summary", "shop.db", "archive.db"],
                          ["check", "shop.db"], ["stats", "--tables", "--top", "3", "--format", "table", "shop.db"]] {
            let line = "litectl " + arguments.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ")
            if talks { printOut(""); printOut("$ " + line) }
            // With -q or --json the commands' own output (and their expected error lines) go nowhere.
            let saved = talks ? -1 : dup(STDOUT_FILENO), savedErr = talks ? -1 : dup(STDERR_FILENO)
            if saved >= 0 {
                fflush(nil)
                let null = open("/dev/null", O_WRONLY)
                dup2(null, STDOUT_FILENO); dup2(null, STDERR_FILENO); close(null)
            }
            var status: Int32 = 0
            do {
                // Each step is a run of its own, with its own protected set.
                WriteGate.shared.reset()
                var command = try Litectl.parseAsRoot(arguments)
                try command.run()
            } catch let code as ExitCode {
                status = code.rawValue
            } catch {
                // Any other error (a usage error, say) is that command's status,
                // and the output is given back before anything else is said.
                status = Litectl.exitCode(for: error).rawValue
            }
            if saved >= 0 {
                fflush(nil)
                dup2(saved, STDOUT_FILENO); close(saved); dup2(savedErr, STDERR_FILENO); close(savedErr)
            }
            // Only `info missing.db` is meant to fail (exit 2); `diff` finds differences (1).
            let expected: Int32 = arguments == ["info", "missing.db"] ? 2 : arguments.first == "diff" ? 1 : 0
            if status != expected { failed = true }
            if voice.json {
                printExact(JSON.object([("command", .string(line)), ("exit_status", .integer(Int64(status)))]).compact)
            } else if talks && (status != 0 || voice.verbose) {
                printOut("(exit status \(status))")
            }
        }
        if failed { throw ExitStatus.error }
    }
}
