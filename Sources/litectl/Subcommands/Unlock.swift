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
            for a run known to be dead on another host. -v names each lock removed.
            """)

    @OptionGroup var options: RepoOptions

    @Flag(help: "Remove every lock, not only the stale ones.")
    var all = false

    @Flag(name: .shortAndLong, help: "Name each lock removed, and each kept.")
    var verbose = false

    func run() throws {
        do {
            let repository = try options.open()
            for lock in try RepoLock.list(repository) {
                if let reason = lock.staleReason {
                    try repository.store.delete(lock.key)
                    if verbose { printOut("removed \(lock.key): stale \(lock.summary): \(reason)") }
                } else if all {
                    try repository.store.delete(lock.key)
                    if verbose { printOut("removed \(lock.key): \(lock.summary)") }
                } else if verbose {
                    printOut("kept \(lock.key): \(lock.summary) (held by a live run; --all removes it)")
                }
            }
        } catch {
            throw fail(error)
        }
    }
}
