// The litectl executable: parses arguments, calls LitectlCore, formats, and
// turns outcomes into exit codes (0 ok, 1 differences or problems found,
// 2 error). Every behaviour lives in LitectlCore.
import ArgumentParser
import LitectlCore

@main
struct Litectl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "litectl",
        abstract: "Administration toolkit for SQLite databases.",
        discussion: """
            Exit status: 0 success; 1 differences or problems found (commands that \
            compare or check); 2 error (a missing file, a non-database, a locked or \
            corrupt database, a failed operation); 64 a usage error.

            Commands that only read open databases read-only and never create a file. \
            Every connection to a user's file runs with trusted_schema=OFF, defensive \
            mode, and extension loading off.
            """,
        version: LitectlVersion.string,
        subcommands: [Info.self, Query.self, Tables.self, Backup.self, Verify.self, Restore.self,
                      Repo.self, Snapshots.self, Forget.self, Prune.self, Unlock.self,
                      Diff.self, Patch.self, Hash.self, Check.self, Stats.self, Analyze.self, Recover.self, Demo.self]
    )
}
