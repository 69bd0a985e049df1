// Moments of a repository as database arguments (`repo:NAME@WHEN`,
// docs/moments.md): the options every read command takes to find them (the
// repository, or a host config file that names it; the page cache), the one
// step that opens each reference a command was given and binds it under its
// own text (PageVFS), after which the core opens it wherever it takes a
// path, and the one refusal writers give a moment.
import ArgumentParser
import Foundation
import LitectlCore

struct MomentSourceOptions: ParsableArguments {
    @OptionGroup var repository: RepoOptions

    @Option(help: ArgumentHelp("With a moment: the repository is the one this host config file names (TOML, as backup --config reads it; docs/repo.md).", valueName: "file"))
    var config: String?

    @Option(help: ArgumentHelp("With a moment: memory for its pages, e.g. 64M (default: 32M; each moment of the run has a cache of this size).", valueName: "size"),
            transform: SizeArgument.parse)
    var cacheSize: SizeArgument?

    @Option(help: ArgumentHelp("With a moment: keep the blobs it fetches in this folder across runs (made if missing, but not its parents; at most 1G, least recently used removed first; safe to delete at any time; each blob checked against its page ids whenever it is read).", valueName: "dir"))
    var cacheDir: String?

    func validate() throws {
        if config != nil && repository.repo != nil { throw ValidationError("Give --repo or --config, not both.") }
    }

    /// The options given that only a moment uses.
    var given: [String] {
        (repository.repo != nil ? ["--repo"] : []) + repository.repositoryOnlyGiven + (config != nil ? ["--config"] : [])
            + (cacheSize != nil ? ["--cache-size"] : []) + (cacheDir != nil ? ["--cache-dir"] : [])
    }

    /// Opens every moment reference among `paths` (each text once) from the
    /// repository these options name, and binds each under its text, so
    /// that the core opens it wherever it takes that path. Prints one line
    /// and exits 64 for a reference that does not read, or for no
    /// repository; 2 when a moment cannot be opened (an unknown database, a
    /// time before its first state or after now). With `eachOnItsOwn` (a
    /// command that reads several databases one after another: info, check,
    /// hash), a moment that cannot be opened is instead bound as a failure:
    /// the command reports it in its turn, as it does a missing file, and
    /// goes on with the others. A note the choice of a moment's state gave
    /// (its chain's segments gone: the newest snapshot read instead, as
    /// restore says it) is printed once on stderr, not under `quiet`. With
    /// no moment among `paths`, refuses the options that only a moment uses (64).
    func open(_ paths: [String?], quiet: Bool = false, eachOnItsOwn: Bool = false) throws -> OpenMoments {
        var references: [MomentReference] = []
        do {
            for path in paths.compactMap({ $0 }) {
                guard let reference = try MomentReference.parse(path) else { continue }
                if !references.contains(reference) { references.append(reference) }
            }
        } catch {
            printError(describe(error))
            throw ExitCode(64)
        }
        guard !references.isEmpty else {
            if let first = given.first {
                printError("\(first) applies to a moment of a repository (repo:NAME@WHEN, docs/moments.md): give one, or leave \(first) out")
                throw ExitCode(64)
            }
            return OpenMoments([], options: LitectlCore.MomentOptions())
        }
        var location = repository.location
        do {
            if let config { location = location.merging(config: try HostConfig.load(path: config)) }
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
        guard location.url != nil else {
            printError("\(references[0].text) is a moment of a repository: give --repo URL or --config FILE (or set LITECTL_REPO)")
            throw ExitCode(64)
        }
        var options = LitectlCore.MomentOptions()
        if let cacheSize { options.cacheBytes = Int(clamping: cacheSize.bytes) }
        options.cacheFolder = cacheDir
        do {
            let repo = try RepoOptions.open(location, quiet: quiet)
            let now = Date().timeIntervalSince1970
            // One cache and one index read for all of them (Moment.open of several).
            var failures: [(String, String)] = []
            let moments = try Moment.open(references, repository: repo, options: options, now: now,
                                          failed: eachOnItsOwn ? { failures.append(($0.text, $1.message)) } : nil)
            if !quiet {
                for moment in moments { for note in moment.notes { printError("warning: \(moment.reference.text): \(note)") } }
            }
            return OpenMoments(moments, failures: failures, options: options)
        } catch let error as ValidationErrorText {
            printError(error.description)
            throw ExitCode(64)
        } catch {
            printError(describe(error))
            throw ExitStatus.error
        }
    }
}

/// The moments a run opened, each bound under its reference's text while
/// this lives (unbound when it goes).
final class OpenMoments {
    private(set) var moments: [Moment]
    /// References that could not be opened (each bound as a failure), with why.
    let failures: [(String, String)]
    let options: LitectlCore.MomentOptions

    init(_ moments: [Moment], failures: [(String, String)] = [], options: LitectlCore.MomentOptions) {
        self.moments = moments
        self.failures = failures
        self.options = options
        for moment in moments { PageVFS.bind(moment.registration, as: moment.reference.text) }
        for (reference, message) in failures { PageVFS.bind(failure: message, as: reference) }
    }

    var isEmpty: Bool { moments.isEmpty }

    /// Moves every moment whose WHEN is `latest` to the newest state now
    /// (the pages already fetched are shared); true when any moved.
    func refresh() throws -> Bool {
        var moved = false
        for (i, moment) in moments.enumerated() where moment.reference.when == "latest" {
            guard let newer = try moment.refreshed() else { continue }
            moments[i] = newer
            PageVFS.bind(newer.registration, as: newer.reference.text)
            moved = true
        }
        return moved
    }

    /// Opens every moment again with the repository's index read anew
    /// (`Moment.reloaded`: after a prune moved the blobs a page map names);
    /// a moment at latest moves to the newest state.
    func reload() throws {
        for (i, moment) in moments.enumerated() {
            let again = try moment.reloaded()
            moments[i] = again
            PageVFS.bind(again.registration, as: again.reference.text)
        }
    }

    deinit {
        for moment in moments { PageVFS.unbind(moment.reference.text) }
        for (reference, _) in failures { PageVFS.unbind(reference) }
    }
}

/// A writer's refusal of a moment as what it writes (or reads as a file):
/// one line, exit 64. `role` says what the argument is ("the database to
/// vacuum").
func refuseMoments(_ paths: [String?], as role: String) throws {
    for path in paths.compactMap({ $0 }) where path.hasPrefix(MomentReference.prefix) {
        printError("\(path): a moment of a repository is read-only and not a file: it cannot be \(role); restore it with litectl restore --at, or give a local file so named as ./\(path)")
        throw ExitCode(64)
    }
}

/// A size option's value (`--cache-size 64M`): bytes, in the one unit family
/// litectl prints (powers of 1024).
struct SizeArgument: ExpressibleByArgument, Sendable {
    var bytes: Int64

    init?(argument: String) {
        guard let bytes = try? SizeText.bytes(argument) else { return nil }
        self.bytes = bytes
    }

    init(bytes: Int64) { self.bytes = bytes }

    static func parse(_ text: String) throws -> SizeArgument {
        do { return SizeArgument(bytes: try SizeText.bytes(text)) } catch let error as SizeText.Invalid {
            throw ValidationError(error.description)
        }
    }
}
