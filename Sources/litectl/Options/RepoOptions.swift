// The options every repository command shares: where the repository is
// (a folder or s3://BUCKET/PREFIX, with the S3 connection settings) and its
// key when it is encrypted.
import ArgumentParser
import Foundation
import LitectlCore
import LitectlS3

struct RepoOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The repository: a folder or s3://BUCKET/PREFIX (default: $LITECTL_REPO).", valueName: "url"))
    var repo: String?

    @Option(help: ArgumentHelp("S3-compatible server, e.g. http://127.0.0.1:9000 (path-style addressing; default: $AWS_ENDPOINT_URL or the profile's endpoint_url).", valueName: "url"))
    var endpoint: String?

    @Option(help: ArgumentHelp("S3 region (default: $AWS_REGION, the profile's region, us-east-1).", valueName: "region"))
    var region: String?

    @Option(help: ArgumentHelp("Profile of ~/.aws/credentials and ~/.aws/config (default: $AWS_PROFILE, then default).", valueName: "name"))
    var profile: String?

    @Option(help: ArgumentHelp("Key file of an encrypted repository (repo init creates it, 32 random bytes, when missing).", valueName: "path"))
    var keyFile: String?

    @Option(help: ArgumentHelp("File whose first line is the passphrase of an encrypted repository (or $LITECTL_PASSPHRASE).", valueName: "path"))
    var passphraseFile: String?

    var url: String? { repo ?? ProcessInfo.processInfo.environment["LITECTL_REPO"].flatMap { $0.isEmpty ? nil : $0 } }

    var isGiven: Bool { url != nil }

    func validate() throws {
        if keyFile != nil && passphraseFile != nil { throw ValidationError("Give --key-file or --passphrase-file, not both.") }
        // Credentials in a URL would be printed with it (in every error that
        // names the endpoint): refused, named with them masked.
        if let endpoint, let problem = URLRedaction.credentialProblem(endpoint) { throw ValidationError("--endpoint \(problem)") }
        if let url, url.contains("://"), let problem = URLRedaction.credentialProblem(url) {
            throw ValidationError("\(repo != nil ? "--repo" : "LITECTL_REPO") \(problem)")
        }
    }

    /// The options given that only a repository uses ("--key-file", ...).
    var repositoryOnlyGiven: [String] {
        [("--endpoint", endpoint), ("--region", region), ("--profile", profile), ("--key-file", keyFile),
         ("--passphrase-file", passphraseFile)].compactMap { $0.1 == nil ? nil : $0.0 }
    }

    /// For a command that works on files or on a repository: refuses the
    /// repository's options when no repository is given (`with` says what
    /// gives one), so that a key file named by mistake is never silently
    /// ignored.
    func requireNoRepositoryOptions(with: String = "--repo") throws {
        if let first = repositoryOnlyGiven.first {
            throw ValidationError("\(first) applies with \(with): give \(with), or leave \(first) out.")
        }
    }

    /// The repository and its settings as these options give them.
    var location: RepositoryLocation {
        var l = RepositoryLocation()
        l.url = url
        l.endpoint = endpoint; l.region = region; l.profile = profile
        l.keyFile = keyFile; l.passphraseFile = passphraseFile
        return l
    }

    /// The object store the URL names.
    func store(url: String, quiet: Bool = false) throws -> ObjectStore {
        try Self.store(url: url, location: location, quiet: quiet)
    }

    /// The key of `location`, or $LITECTL_PASSPHRASE.
    static func secret(_ location: RepositoryLocation) throws -> RepoSecret? { try RepositoryOpener.secret(location) }

    func secret() throws -> RepoSecret? { try Self.secret(location) }

    /// The object store `url` names, with `location`'s S3 settings; -q
    /// (`quiet`) keeps the S3 client's retry notes off the terminal too.
    static func store(url: String, location: RepositoryLocation, quiet: Bool) throws -> ObjectStore {
        try RepositoryOpener.store(url: url, location: location, onRetry: retryNotes(quiet: quiet))
    }

    /// Opens the repository these options name (one error line naming it when that fails).
    func open(quiet: Bool = false) throws -> Repository { try Self.open(location, quiet: quiet) }

    /// Opens the repository `location` names; warns when a key is given for
    /// one that is not encrypted.
    static func open(_ location: RepositoryLocation, quiet: Bool = false) throws -> Repository {
        guard let url = location.url else { throw ValidationError("Give --repo URL (or set LITECTL_REPO).") }
        return try RepositoryOpener.open(url: url, location: location, onRetry: retryNotes(quiet: quiet),
                                         warning: { if !quiet { printError($0) } })
    }
}

/// A usage error for a repository URL (`repo init URL`) that holds
/// credentials, which would be printed wherever the URL is named: masked.
func refuseCredentials(inRepositoryURL url: String) throws {
    if url.contains("://"), let problem = URLRedaction.credentialProblem(url) { throw ValidationError("URL \(problem)") }
}

/// Prints one error line and exits 2.
func fail(_ error: any Error) -> ExitCode {
    if let error = error as? ValidationError { printError(error.message); return ExitCode(64) }
    printError(describe(error))
    return ExitStatus.error
}
