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

    func validate() throws {
        if config != nil && repository.repo != nil { throw ValidationError("Give --repo or --config, not both.") }
    }

    /// The options given that only a moment uses.
    var given: [String] {
        (repository.repo != nil ? ["--repo"] : []) + repository.repositoryOnlyGiven + (config != nil ? ["--config"] : [])
            + (cacheSize != nil ? ["--cache-size"] : [])
    }

    /// Opens every moment reference among `paths` (each text once) from the
    /// repository these options name, and binds each under its text, so
    /// that the core opens it wherever it takes that path. Prints one line
    /// and exits 64 for a reference that does not read, or for no
    /// repository; 2 when a moment cannot be opened (an unknown database, a
    /// time before its first state or after now). With no moment among
    /// `paths`, refuses the options that only a moment uses (64).
    func open(_ paths: [String?], quiet: Bool = false) throws -> OpenMoments {
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
        do {
            let repo = try RepoOptions.open(location, quiet: quiet)
            let now = Date().timeIntervalSince1970
            // One cache and one index read for all of them (Moment.open of several).
            let moments = try Moment.open(references, repository: repo, options: options, now: now)
            return OpenMoments(moments, options: options)
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
    let options: LitectlCore.MomentOptions

    init(_ moments: [Moment], options: LitectlCore.MomentOptions) {
        self.moments = moments
        self.options = options
        for moment in moments { PageVFS.bind(moment.registration, as: moment.reference.text) }
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

    deinit { for moment in moments { PageVFS.unbind(moment.reference.text) } }
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
