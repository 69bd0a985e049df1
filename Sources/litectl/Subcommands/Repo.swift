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
            a copy elsewhere, without it nothing can be restored. docs/repository.md (installed as /usr/local/share/doc/litectl/repository.md) \
            specifies the format.

            Exit status: 0 created, 2 error.
            """)

    @Argument(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX.", valueName: "url"))
    var url: String

    @OptionGroup var options: RepoOptions

    @OptionGroup var voice: VoiceOptions

    func validate() throws {
        if url.isEmpty { throw ValidationError("The repository location is empty: give a folder or s3://BUCKET/PREFIX.") }
        try refuseCredentials(inRepositoryURL: url)
    }

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let store = try options.store(url: url, quiet: voice.quiet)
            let secret = try options.secret()
            try Repository.requireKeyOutside(store, secret)
            if let folder = store as? FolderStore { try folder.createRoot() }
            let repository = try Repository.initialize(store, secret: secret)
            if voice.json {
                printExact(JSON.object([("repository", .string(url)), ("id", .string(repository.id)),
                                      ("encrypted", .bool(repository.encrypted))]).compact)
            } else if voice.verbose {
                printOut("created repository \(url) (id \(repository.id)\(repository.encrypted ? ", encrypted" : ""))")
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
            running backups). Silent on success; -v says what was done, --json prints \
            {repository, upgraded, from}. A version-4 repository is left as it is; versions \
            1 and 2 cannot be upgraded.

            Exit status: 0 upgraded (or already version 4), 2 error.
            """)

    @Argument(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX.", valueName: "url"))
    var url: String

    @OptionGroup var options: RepoOptions

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var lockWait: DatabaseOptions

    func validate() throws { try refuseCredentials(inRepositoryURL: url) }

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let outcome = try RepoUpgrade.run(try options.store(url: url, quiet: voice.quiet), secret: try options.secret(),
                                              lockTimeout: lockWait.seconds(default: 60))
            if voice.json {
                var from: Int64?
                if case .upgraded(let version) = outcome { from = Int64(version) }
                printExact(JSON.object([("repository", .string(url)), ("upgraded", .bool(from != nil)),
                                        ("from", .optional(from) { .integer($0) })]).compact)
            } else if voice.verbose {
                switch outcome {
                case .upgraded(let from): printOut("\(visible(url)): upgraded from version \(from) to version 4")
                case .alreadyCurrent: printOut("\(visible(url)): already version 4 or later")
                }
            }
        } catch {
            throw fail(error)
        }
    }
}
