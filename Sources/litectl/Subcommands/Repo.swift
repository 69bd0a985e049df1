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
            URL (given as the argument or as --repo URL, the same; $LITECTL_REPO when \
            neither is given; URL and a different --repo are a usage error) is a folder \
            (created when missing) or s3://BUCKET/PREFIX on AWS S3 or any \
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

            Exit status: 0 created, 2 error, 64 usage error.
            """)

    @Argument(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX (or give it as --repo URL).", valueName: "url"))
    var positionalURL: String?

    @OptionGroup var options: RepoOptions

    @OptionGroup var voice: VoiceOptions

    var url: String { repositoryURL(positionalURL, options) }

    func validate() throws {
        try requireOneRepository(positionalURL, options)
        if url.isEmpty { throw ValidationError("The repository location is empty: give a folder or s3://BUCKET/PREFIX.") }
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

            URL may be given as --repo URL instead (as for repo init). Exit status: 0 \
            upgraded (or already version 4), 2 error, 64 usage error.
            """)

    @Argument(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX (or give it as --repo URL).", valueName: "url"))
    var positionalURL: String?

    @OptionGroup var options: RepoOptions

    @OptionGroup var voice: VoiceOptions

    @OptionGroup var lockWait: DatabaseOptions

    var url: String { repositoryURL(positionalURL, options) }

    func validate() throws { try requireOneRepository(positionalURL, options) }

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

/// The repository a `repo` subcommand works on: URL, else --repo, else $LITECTL_REPO.
func repositoryURL(_ positional: String?, _ options: RepoOptions) -> String {
    positional ?? options.url ?? ""
}

/// Usage errors for the repository of a `repo` subcommand, which may be named
/// as URL or as --repo URL (the usage line lists both): neither given (nor
/// $LITECTL_REPO), or both given and different -- one of them would
/// otherwise be ignored silently. Credentials in either are refused first,
/// so that no message repeats them.
func requireOneRepository(_ positional: String?, _ options: RepoOptions) throws {
    if let positional { try refuseCredentials(inRepositoryURL: positional) }
    if let given = options.repo { try refuseCredentials(inRepositoryURL: given) }
    if let positional, let given = options.repo, positional != given {
        throw ValidationError("The repository is named twice, as URL '\(visible(positional))' and as --repo '\(visible(given))': give one.")
    }
    if positional == nil && options.url == nil {
        throw ValidationError("Missing the repository: give URL (a folder or s3://BUCKET/PREFIX), --repo URL, or set LITECTL_REPO.")
    }
}
