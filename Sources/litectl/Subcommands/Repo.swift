// `litectl repo init URL`: create a repository of page-deduplicated snapshots.
import ArgumentParser
import LitectlCore

struct Repo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage a repository of page-deduplicated database snapshots.",
        subcommands: [RepoInit.self])
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
    }

    func run() throws {
        TemporaryFiles.installSignalCleanup()
        do {
            let store = try options.store(url: url, quiet: voice.quiet)
            if let folder = store as? FolderStore { try folder.createRoot() }
            let repository = try Repository.initialize(store, secret: try options.secret())
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
