// `litectl unlock --repo URL`: remove stale locks (or, with --all, every lock).
import ArgumentParser
import LitectlCore

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove stale locks from a repository.",
        discussion: """
            A lock is stale when its process is gone (same host) or it was not refreshed \
            for 30 minutes (running commands refresh theirs every 5). Other runs ignore \
            stale locks and warn about them; unlock removes them. --all removes every lock, \
            for a run known to be dead on another host. -v names each lock removed and \
            each kept; --json prints one object per lock (key, summary, removed, reason).

            Exit status: 0 done, 2 error.
            """)

    @OptionGroup var options: RepoOptions

    @Flag(help: "Remove every lock, not only the stale ones.")
    var all = false

    @OptionGroup var voice: VoiceOptions

    func run() throws {
        do {
            let repository = try options.open(quiet: voice.quiet)
            for lock in try RepoLock.list(repository) {
                let removed = lock.staleReason != nil || all
                if removed { try repository.store.delete(lock.key) }
                let reason = lock.staleReason.map { "stale: \($0)" } ?? (all ? "--all" : "held by a live run; --all removes it")
                if voice.json {
                    printExact(JSON.object([("key", .string(lock.key)), ("summary", .string(lock.summary)),
                                            ("removed", .bool(removed)), ("reason", .string(reason))]).compact)
                } else if voice.verbose {
                    printOut("\(removed ? "removed" : "kept") \(lock.key): \(lock.summary) (\(reason))")
                }
            }
        } catch {
            throw fail(error)
        }
    }
}
