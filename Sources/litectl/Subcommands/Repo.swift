// `litectl repo init URL`: create a repository of page-deduplicated snapshots;
// `litectl repo upgrade URL`: make a version-3 one version 4 (for replicate).
import ArgumentParser
import LitectlCore

struct Repo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage a repository of page-deduplicated database snapshots.",
        subcommands: [RepoInit.self, RepoUpgradeCommand.self])
}

struct RepoInit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a repository in an empty folder or bucket prefix.",
        discussion: """
            URL is a folder (created when missing) or s3://BUCKET/PREFIX on AWS S3 or any \
            S3-compatible server (--endpoint; path-style addressing). Credentials come from \
            AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or from the \
            profile (AWS_PROFILE, --profile) of ~/.aws/credentials and ~/.aws/config. A \
            location that holds anything is refused, as is an existing repository.

            With --key-file or --passphrase-file (or LITECTL_PASSPHRASE) the repository is \
            encrypted: packs, index, page lists and snapshots are sealed with AES-256-GCM \
            under a random master key, which the config object keeps wrapped under a key \
            derived from the key file (HKDF-SHA256) or the passphrase (scrypt, N=32768, \
            r=8, p=1); page ids are then HMAC-SHA256 so stored names reveal nothing of the \
            content. A missing key file is created with 32 random bytes (mode 0600): keep \
            a copy elsewhere, without it nothing can be restored. docs/repository.md \
            specifies the format.
            """)

    @Argument(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX.", valueName: "url"))
    var url: String

    @OptionGroup var options: RepoOptions

    @Flag(help: "Print the repository as a JSON object.")
    var json = false

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let store = try options.store(url: url)
            if let folder = store as? FolderStore { try folder.createRoot() }
            let repository = try Repository.initialize(store, secret: try options.secret())
            if json {
                printOut(JSON.object([("repository", .string(url)), ("id", .string(repository.id)),
                                      ("encrypted", .bool(repository.encrypted))]).compact)
            }
        } catch {
            throw fail(error)
        }
    }
}

struct RepoUpgradeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upgrade",
        abstract: "Make a version-3 repository version 4, so that replicate can store segments in it.",
        discussion: """
            Only the config object changes (its version); every object already in the \
            repository stays as it is. A litectl from before version 4 then refuses the \
            repository (its prune would not know that segments use packs, and would \
            delete them): upgrade once every litectl that uses the repository is this \
            version or later. Taken under an exclusive lock (waiting up to --timeout for \
            running backups). Silent on success; -v says what was done. A version-4 \
            repository is left as it is; versions 1 and 2 cannot be upgraded.
            """)

    @Argument(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX.", valueName: "url"))
    var url: String

    @OptionGroup var options: RepoOptions

    @Option(help: ArgumentHelp("Seconds to wait for other runs' locks.", valueName: "seconds"))
    var timeout: Double = 60

    @Flag(name: .shortAndLong, help: "Say what was done on stdout.")
    var verbose = false

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let outcome = try RepoUpgrade.run(try options.store(url: url), secret: try options.secret(), lockTimeout: timeout)
            if verbose {
                switch outcome {
                case .upgraded(let from): printOut("\(url): upgraded from version \(from) to version 4")
                case .alreadyCurrent: printOut("\(url): already version 4 or later")
                }
            }
        } catch {
            throw fail(error)
        }
    }
}
