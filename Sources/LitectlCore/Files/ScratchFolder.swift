// A private folder for a run's scratch files (the demo's sample databases),
// made under $TMPDIR with a name that says which process owns it, and removed
// with everything in it when the run ends; one that a killed run left is
// removed by the next run that makes one, once its process is gone. Removal
// never follows a symbolic link out of the folder.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public final class ScratchFolder {
    public let path: String
    private var removed = false

    /// Makes `$TMPDIR/litectl-<purpose>.tmp-<pid>-<n>` (mode 0700), after
    /// removing the folders of `purpose` whose processes are gone. A `kept`
    /// folder (`demo --keep`) is named `litectl-<purpose>-<pid>-<n>`, which
    /// no later run removes, and is not removed at the end either.
    public init(purpose: String, in folder: String? = nil, kept: Bool = false) throws {
        let parent = TemporaryFiles.folder(folder)
        Self.removeStale(in: parent, purpose: purpose)
        removed = kept
        var attempt = 0
        while true {
            let candidate = (parent.hasSuffix("/") ? parent : parent + "/")
                + "litectl-\(purpose)\(kept ? "" : ".tmp")-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            try WriteGate.shared.requireWritable(folder: candidate)
            if mkdir(candidate, 0o700) == 0 {
                path = candidate
                WriteGate.shared.own(candidate)
                WriteGate.shared.own(folder: candidate)
                return
            }
            let err = errno
            attempt += 1
            if err == EEXIST && attempt < 10 { continue }
            throw DatabaseError(code: .cantopen, message: "cannot create a folder: \(String(cString: strerror(err)))", path: parent)
        }
    }

    /// Removes the folder and everything in it (no-op when done already).
    public func remove() {
        guard !removed else { return }
        removed = true
        FolderTree.removeAll(path)
    }

    deinit { remove() }

    static func removeStale(in parent: String, purpose: String) {
        let tree = FolderTree(root: parent)
        for entry in (try? tree.entries("")) ?? [] where entry.isFolder && entry.name.hasPrefix("litectl-\(purpose).tmp-") {
            let parts = entry.name.dropFirst("litectl-\(purpose).tmp-".count).split(separator: "-")
            guard parts.count == 2, let pid = Int32(parts[0]), pid > 0, pid != getpid(), UInt32(parts[1]) != nil,
                  kill(pid, 0) != 0 && errno == ESRCH else { continue }
            FolderTree.removeAll(tree.path(entry.name))
        }
    }
}
