// Opening a repository by its URL: a folder path or s3://BUCKET/PREFIX (with
// the S3 connection settings of a RepositoryLocation), and its key when it is
// encrypted. The executable's options and a host config file give the
// location; this library, the only network code, makes the store.
import Foundation
import LitectlCore

public enum RepositoryOpener {
    /// The object store `url` names, with `location`'s S3 settings;
    /// `onRetry` hears of each S3 request about to be tried again.
    public static func store(url: String, location: RepositoryLocation,
                             onRetry: (@Sendable (S3RetryNote) -> Void)? = nil) throws -> ObjectStore {
        if url.hasPrefix("s3://") {
            return try S3ObjectStore(url: url, options: S3Options(endpoint: location.endpoint, region: location.region, profile: location.profile),
                                     onRetry: onRetry)
        }
        if url.contains("://") {
            throw StoreError(.other, location: URLRedaction.redacted(url), message: "unsupported repository URL: give a folder path or s3://BUCKET/PREFIX")
        }
        return FolderStore(path: url)
    }

    /// The key `location` names (a key file, a passphrase file), else the
    /// passphrase in `environment` ($LITECTL_PASSPHRASE), else none.
    public static func secret(_ location: RepositoryLocation,
                              environment: [String: String] = ProcessInfo.processInfo.environment) throws -> RepoSecret? {
        if let keyFile = location.keyFile { return .keyFile(keyFile) }
        if let passphraseFile = location.passphraseFile { return try .passphrase(file: passphraseFile) }
        return RepoSecret.passphraseFromEnvironment(environment)
    }

    /// Opens the repository at `url` with `location`'s settings and key;
    /// `warning` is told when a key is given for one that is not encrypted
    /// (is it the repository meant?).
    public static func open(url: String, location: RepositoryLocation, onRetry: (@Sendable (S3RetryNote) -> Void)? = nil,
                            warning: (String) -> Void = { _ in }) throws -> Repository {
        let repository = try Repository.open(try store(url: url, location: location, onRetry: onRetry), secret: try secret(location))
        if !repository.encrypted,
           let given = location.keyFile.map({ "--key-file \($0)" }) ?? location.passphraseFile.map({ "--passphrase-file \($0)" }) {
            warning("warning: \(url): the repository is not encrypted, so \(given) is not used (is this the repository you meant?)")
        }
        return repository
    }
}
