// Names compared as the bytes they are. Swift's String == compares
// canonically (the NFC and NFD spellings of "é" are equal), but on Linux
// two such paths are two files, and two such host names two hosts: a
// repository's series of snapshots (per host and path) must never merge them.

/// True when `a` and `b` are the same bytes (UTF-8).
public func sameBytes(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

/// A key, as bytes, for a host and a path: one series of snapshots.
public func seriesKey(hostname: String, path: String) -> [UInt8] {
    Array(hostname.utf8) + [0] + Array(path.utf8)
}
