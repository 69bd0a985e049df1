// The litectl executable: parses arguments, calls LitectlCore, formats, and
// turns outcomes into exit codes (0 ok, 1 differences or problems found,
// 2 error). Every behaviour lives in LitectlCore.
import ArgumentParser
import LitectlCore
#if canImport(Glibc)
/// glibc's mallopt (malloc.h, which the Glibc module does not export).
@_silgen_name("mallopt") private func mallopt(_ parameter: Int32, _ value: Int32) -> Int32
/// malloc.h: `#define M_MMAP_THRESHOLD -3`.
private let M_MMAP_THRESHOLD: Int32 = -3
#endif

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

            Every command takes -q (no report), -v (more) and --json (compact JSON), \
            and one lock wait, --timeout DURATION (docs/output.md). Every duration is \
            seconds (90, 2.5) or numbers with units, largest first (90s, 250ms, 15m, 1h30m, \
            7d); a bad one is a usage error (exit 64). The pages the \
            help texts name under docs/ are installed by scripts/install, under the \
            same names, in PREFIX/share/doc/litectl (/usr/local by default).
            """,
        version: LitectlVersion.string,
        subcommands: [Info.self, Query.self, Tables.self, Backup.self, Verify.self, Restore.self,
                      Repo.self, Snapshots.self, Forget.self, Prune.self, Unlock.self, Replicate.self,
                      Diff.self, Patch.self, Hash.self, Check.self, Stats.self, Analyze.self, Transform.self, Migrate.self,
                      Vacuum.self, Dump.self, Load.self, Recover.self, Report.self, Demo.self]
    )

    /// glibc raises its mmap threshold each time a large buffer is freed and
    /// then serves later ones from its heap, which it seldom gives back: with
    /// the threshold fixed at 128 KiB, buffers of that size and more (packs,
    /// blobs, read chunks) go back to the system when freed, and the peak
    /// memory of a run is what it uses (a first repository backup of 1 GB:
    /// 61 MB instead of 69 MB).
    static func main() {
        #if canImport(Glibc)
        _ = mallopt(M_MMAP_THRESHOLD, 128 << 10)
        #endif
        // One process is one run: from here on, what the run reads is its
        // protected set, which no path it writes or deletes may touch
        // (WriteGate, docs/safety.md).
        WriteGate.shared.activate()
        main(nil)
    }
}
