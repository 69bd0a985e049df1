// A path as the kernel resolves it: absolute, with symbolic links followed,
// so that one file named two ways is one name (a backup's source in metrics
// and snapshots, a database followed once however it is named).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum FilePaths {
    /// The absolute path with links resolved (as given, made absolute, when that fails).
    public static func resolved(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return DurableFolder.absolute(path) }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
