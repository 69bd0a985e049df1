// The one gate every path litectl writes, replaces or deletes goes through
// (docs/safety.md): it knows the run's protected set -- every database the run
// reads with its -wal, -journal and -shm, every other file it reads (key,
// passphrase, config, patch, script), every file under a repository or backup
// folder it touches -- and refuses, before anything is written, a path in that
// set, compared by device and inode and by the path with its links resolved.
// It also decides when an existing file may be replaced at all (`ReplaceRule`).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When an existing file at an output path may be replaced.
public enum ReplaceRule: Sendable {
    /// Never: the file must not exist (a key file, `repo init`'s folder).
    case never
    /// Only when the user said so (`--force`): `forced` is that flag.
    case forced(Bool)
    /// Only when it already is what the option makes: `kind` names it in the
    /// refusal ("a Prometheus textfile"), `matches` judges the existing
    /// file's first bytes (at most `WriteGate.sniffBytes`).
    case onlyIf(kind: String, matches: @Sendable ([UInt8]) -> Bool)
    /// Always: files whose names litectl itself made (repository objects,
    /// caches) and that the format says may be rewritten.
    case always
}

public final class WriteGate: @unchecked Sendable {
    /// The gate of this process. It guards nothing until `activate()`: the
    /// executable activates it once per run (one process is one run), so a
    /// library user -- or a test process running many unrelated operations --
    /// is not refused a file an earlier, unrelated operation read. The rules
    /// that do not depend on a run (`ReplaceRule`, key files) hold always.
    public static let shared = WriteGate()

    /// How many bytes of an existing file `ReplaceRule.onlyIf` sees.
    public static let sniffBytes = 64 << 10

    /// A folder tree the run touches as a whole (a repository, a backup
    /// folder); the holder of its token is the one writer allowed in it.
    public struct Tree: Sendable, Hashable {
        let number: Int
    }

    public enum TreeKind: Sendable {
        /// Every path inside belongs to the format: nothing but the token's
        /// holder writes or deletes there, not even a new name.
        case repository
        /// Its existing files (backups, manifests) are protected; a new name
        /// in it may be written by anyone (a metrics file beside backups).
        case backupFolder
    }

    struct Entry {
        var identity: FileIdentity?
        /// The path with every link resolved (for a missing file: its folder resolved).
        var resolved: String
        var what: String
        /// A database the run reads and may also change in place (its own
        /// target, a replicated database it checkpoints): no output replaces
        /// it, but a read-write connection may open it.
        var changeable = false
    }

    struct TreeEntry {
        var identity: FileIdentity?
        var resolved: String
        var what: String
        var kind: TreeKind
    }

    struct State {
        var active = false
        var files: [Entry] = []
        var trees: [Int: TreeEntry] = [:]
        var nextTree = 1
        /// Resolved paths this run created (temporary files, its outputs):
        /// reading them back does not protect them from the run itself.
        var owned: Set<String> = []
        /// Resolved paths of the run's targets (a restore's TARGET), with
        /// their -wal, -journal and -shm: a run reads its target (to check
        /// it, to keep a copy) and then replaces it, so reading it does not
        /// protect it.
        var targets: Set<String> = []
        /// Resolved paths of private folders this run made (a scratch
        /// folder, a dump folder before its rename): everything in them is
        /// the run's.
        var ownedFolders: [String] = []
    }

    private let state = Locked(State())

    public init() {}

    /// Starts guarding: from now on what the run reads is protected.
    public func activate() { state.withLock { $0.active = true } }

    public var isActive: Bool { state.withLock { $0.active } }

    /// Forgets the protected set, for a process that runs several commands
    /// one after the other (`litectl demo`): each starts a run of its own.
    /// What the process made stays its own.
    public func reset() {
        state.withLock { s in
            var fresh = State()
            fresh.active = s.active
            fresh.owned = s.owned
            fresh.ownedFolders = s.ownedFolders
            s = fresh
        }
    }

    /// Declares `path` the run's target, which it reads and then replaces or
    /// changes in place (`restore --force`, `vacuum`): reading it does not
    /// put it in the protected set. What the run protects otherwise (its
    /// backup, its source) stays protected even when named as the target.
    public func declareTarget(_ path: String) {
        guard isActive else { return }
        let names = ([path] + SameFileRule.companionSuffixes.map { path + $0 }).compactMap(Self.resolved)
        state.withLock { s in
            s.targets.formUnion(names)
            // What a read of the target protected before this call (its own
            // entries only) no longer holds.
            s.files.removeAll { entry in names.contains(entry.resolved) && entry.changeable }
        }
    }

    /// The role a read-only open gives a database.
    public static let readRole = "a database this run reads"

    // MARK: The protected set

    /// Protects a database the run reads, with its -wal, -journal and -shm
    /// (which SQLite reads with it, present or not yet). `what` names it in a
    /// refusal: "a database this run reads". A `changeable` one (the default:
    /// every read-only open; a database `replicate` checkpoints) may still be
    /// opened read-write (`requireChangeable`); one the run only reads (a
    /// backup's sources) may not.
    public func protect(database path: String, what: String = WriteGate.readRole, changeable: Bool = true) {
        guard isActive else { return }
        var entries = [Self.entry(path, what: what)]
        for suffix in SameFileRule.companionSuffixes {
            entries.append(Self.entry(path + suffix, what: "the \(suffix) file of \(what)"))
        }
        for i in entries.indices { entries[i].changeable = changeable }
        add(entries)
    }

    /// Protects a file the run reads (a key, passphrase, config, patch,
    /// script or rows file): `what` names it ("the repository's key file").
    public func protect(file path: String, what: String) {
        guard isActive else { return }
        add([Self.entry(path, what: what)])
    }

    /// Protects every file under `folder`; returns the token its one writer
    /// (the repository's store, the backup run) passes to write there. A
    /// token is returned when the gate is not active too (it then guards
    /// nothing).
    public func protect(tree folder: String, what: String, kind: TreeKind) -> Tree {
        let resolved = SameFileRule.resolvedExistingPath(folder) ?? Self.resolvedThroughAncestors(folder)
            ?? DurableFolder.absolute(folder)
        return state.withLock { s in
            // Every store over one repository folder (and every backup run
            // into one folder) of the process is the same writer.
            if let (number, _) = s.trees.first(where: { Array($0.value.resolved.utf8) == Array(resolved.utf8) && $0.value.kind == kind }) {
                return Tree(number: number)
            }
            let number = s.nextTree
            s.nextTree += 1
            if s.active {
                s.trees[number] = TreeEntry(identity: FileIdentity(folder), resolved: resolved, what: what, kind: kind)
            }
            return Tree(number: number)
        }
    }

    /// Marks `path` as made by this run (a temporary file, a committed output).
    public func own(_ path: String) {
        guard isActive, let resolved = Self.resolved(path) else { return }
        state.withLock { _ = $0.owned.insert(resolved) }
    }

    /// Marks the folder `path`, which this run made for itself alone, and
    /// everything that will be in it, as the run's.
    public func own(folder path: String) {
        guard isActive, let resolved = Self.resolved(path) else { return }
        state.withLock { $0.ownedFolders.append(resolved) }
    }

    public func disown(_ path: String) {
        guard isActive, let resolved = Self.resolved(path) else { return }
        state.withLock { _ = $0.owned.remove(resolved) }
    }

    private func add(_ entries: [Entry]) {
        state.withLock { s in
            for entry in entries where !s.owned.contains(entry.resolved) {
                if entry.changeable, s.targets.contains(entry.resolved) { continue }
                if let i = s.files.firstIndex(where: { Array($0.resolved.utf8) == Array(entry.resolved.utf8)
                                                         && $0.identity == entry.identity }) {
                    // The stricter protection, and its words, win.
                    if s.files[i].changeable && !entry.changeable { s.files[i] = entry }
                    continue
                }
                s.files.append(entry)
            }
        }
    }

    // MARK: Checks

    /// Throws, before anything is written, when the run may not write or
    /// replace `path`: it is in the protected set, or inside a protected tree
    /// whose token `owner` is not, or it exists and `replacing` does not
    /// allow replacing it. `what` names the output in the refusal ("the
    /// metrics file"). A folder is never replaced by a file.
    public func requireWritable(_ path: String, what: String, replacing: ReplaceRule, owner: Tree? = nil) throws {
        try requireUnprotected(path, owner: owner, doing: "write")
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            throw DatabaseError(code: .cantopen, message: "is a folder; give a file name", path: path)
        }
        switch replacing {
        case .always:
            return
        case .never:
            throw DatabaseError(code: .cantopen, message: "already exists; not overwritten", path: path)
        case .forced(let force):
            if !force {
                throw DatabaseError(code: .cantopen, message: "already exists; not overwritten (--force replaces it)", path: path)
            }
        case .onlyIf(let kind, let matches):
            // A symbolic link is judged by what it points to, and a link is
            // never what an option makes.
            let head = (info.st_mode & S_IFMT) == S_IFREG ? Self.head(of: path) : nil
            if head.map(matches) != true {
                throw DatabaseError(code: .cantopen,
                                    message: "already exists and is not \(kind) (as \(what) it would be replaced); remove it or choose another file",
                                    path: path)
            }
        }
    }

    /// Throws when the run may not make or replace the folder `path` (a dump
    /// folder): it is in the protected set or inside a protected tree.
    public func requireWritable(folder path: String, owner: Tree? = nil) throws {
        try requireUnprotected(path, owner: owner, doing: "write")
    }

    /// Throws when the run may not change the database `path` in place (a
    /// read-write connection: patch, load, transform, migrate, analyze,
    /// query --write, and SQLite's own journal beside it): it is protected as
    /// something other than a database the run reads (its target is read
    /// too), or lies inside a protected tree.
    public func requireChangeable(database path: String) throws {
        try requireUnprotected(path, owner: nil, doing: "write", ignoringReads: true)
    }

    /// Throws when the run may not delete `path`: it is in the protected set,
    /// or inside a protected tree whose token `owner` is not.
    public func requireDeletable(_ path: String, owner: Tree? = nil) throws {
        try requireUnprotected(path, owner: owner, doing: "delete")
    }

    /// Whether `path` may be written or deleted by the holder of `owner`
    /// (for best-effort clean-ups that skip what they may not touch).
    public func allows(_ path: String, owner: Tree? = nil) -> Bool {
        (try? requireUnprotected(path, owner: owner, doing: "delete")) != nil
    }

    private func requireUnprotected(_ path: String, owner: Tree?, doing: String, ignoringReads: Bool = false) throws {
        // A moment's name (repo:NAME@WHEN) is never a file to write or
        // delete, whatever the option: a local file so named is ./repo:...
        if PageVFS.namesSource(path) {
            throw DatabaseError(code: .cantopen, message: "names a moment of a repository (repo:NAME@WHEN), not a file; a local file so named is ./\(path)",
                                path: path)
        }
        let (files, trees, owned, ownedFolders) = state.withLock { s in
            (s.active ? s.files : [], s.active ? s.trees : [:], s.owned, s.ownedFolders)
        }
        if files.isEmpty && trees.isEmpty { return }
        // What a rename replaces is the name itself (a link is replaced, not
        // followed); what a write through the name reaches is its target.
        // Both are compared.
        let lexical = Self.resolvedThroughAncestors(path)
        let followed = SameFileRule.resolvedExistingPath(path)
        let identity = FileIdentity(path)
        let names = [lexical, followed].compactMap { $0 }
        // What this run made (a temporary file, an output it then read back)
        // stays the run's to replace or remove.
        if names.contains(where: { owned.contains($0) }) { return }
        if names.contains(where: { name in ownedFolders.contains { Array(name.utf8).starts(with: Array(($0 + "/").utf8)) } }) { return }
        for entry in files where !(ignoringReads && entry.changeable) {
            let sameFile = identity != nil && identity == entry.identity
            let sameName = names.contains { Array($0.utf8) == Array(entry.resolved.utf8) }
            if sameFile || sameName {
                throw DatabaseError(code: .cantopen,
                                    message: doing == "write" ? "is \(entry.what) (the same file); write to another file"
                                        : "is \(entry.what) (the same file); not deleted",
                                    path: path)
            }
        }
        func inside(_ tree: TreeEntry) -> Bool {
            let prefix = Array((tree.resolved == "/" ? "/" : tree.resolved + "/").utf8)
            return names.contains { Array($0.utf8).starts(with: prefix) } || (identity != nil && identity == tree.identity)
        }
        // The owner's tree speaks for what lies inside it, over the trees
        // that hold it (a repository inside a backup folder).
        let ownerTree = owner.flatMap { trees[$0.number] }.flatMap { inside($0) ? $0 : nil }
        for (number, tree) in trees.sorted(by: { $0.key < $1.key }) where owner?.number != number {
            guard inside(tree) else { continue }
            if let ownerTree, Array(ownerTree.resolved.utf8).starts(with: Array((tree.resolved == "/" ? "/" : tree.resolved + "/").utf8)) {
                continue
            }
            if tree.kind == .backupFolder && identity == nil && followed == nil && !DurableFolder.exists(path) { continue }
            throw DatabaseError(code: .cantopen,
                                message: doing == "write" ? "is inside \(tree.what), which this run uses; write outside it"
                                    : "is inside \(tree.what), which this run uses; not deleted",
                                path: path)
        }
    }

    /// What the protected set says `path` is ("a database being backed
    /// up"), or nil when it is not in it (trees left aside).
    public func protectedRole(of path: String) -> String? {
        let files = state.withLock { $0.active ? $0.files : [] }
        let identity = FileIdentity(path)
        let names = [Self.resolvedThroughAncestors(path), SameFileRule.resolvedExistingPath(path)].compactMap { $0 }
        return files.first { entry in
            (identity != nil && identity == entry.identity) || names.contains { Array($0.utf8) == Array(entry.resolved.utf8) }
        }?.what
    }

    // MARK: Helpers

    static func resolved(_ path: String) -> String? {
        SameFileRule.resolvedExistingPath(path) ?? resolvedThroughAncestors(path)
    }

    /// `path` with its nearest existing folder's links resolved and the rest
    /// (which does not exist yet: folders a write would make) appended by
    /// name; the last component itself is never followed (a rename replaces
    /// a link, it does not write through it).
    static func resolvedThroughAncestors(_ path: String) -> String? {
        var rest: [String] = [DurableFolder.baseName(of: path)]
        var folder = DurableFolder.parent(of: path)
        while true {
            if let resolved = SameFileRule.resolvedExistingPath(folder) {
                let joined = ([resolved == "/" ? "" : resolved] + rest.reversed()).joined(separator: "/")
                return DurableFolder.normalized(joined)
            }
            if folder == "/" || folder == "." || folder.isEmpty { return nil }
            rest.append(DurableFolder.baseName(of: folder))
            folder = DurableFolder.parent(of: folder)
        }
    }

    static func entry(_ path: String, what: String) -> Entry {
        Entry(identity: FileIdentity(path), resolved: resolved(path) ?? DurableFolder.absolute(path), what: what)
    }

    /// The first `sniffBytes` of the regular file at `path` (following links), or nil.
    static func head(of path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var buffer = [UInt8](repeating: 0, count: sniffBytes)
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            done += n
        }
        return Array(buffer[0..<done])
    }
}
