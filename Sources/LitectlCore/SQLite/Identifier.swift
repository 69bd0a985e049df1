// The one function that quotes SQL identifiers. Every name litectl splices
// into SQL goes through it; every value is bound instead.

/// `name` as a quoted SQL identifier: wrapped in double quotes, with each
/// double quote doubled. Correct for any name SQLite can hold (spaces, quotes,
/// keywords, Unicode); a name cannot contain NUL.
public func quoteIdentifier(_ name: String) -> String {
    var out = "\""
    out.reserveCapacity(name.utf8.count + 2)
    for ch in name.unicodeScalars {
        if ch == "\"" { out.unicodeScalars.append("\"") }
        out.unicodeScalars.append(ch)
    }
    out.unicodeScalars.append("\"")
    return out
}

/// True when two SQL names are the same name to SQLite: equal bytes after
/// folding ASCII letters only (SQLite does not fold other letters, and keeps
/// NFC and NFD spellings apart).
public func sameSQLName(_ a: String, _ b: String) -> Bool {
    let x = a.utf8, y = b.utf8
    guard x.count == y.count else { return false }
    return zip(x, y).allSatisfy { asciiLower($0) == asciiLower($1) }
}

/// A name's identity for SQLite, as bytes: ASCII letters folded, nothing else.
/// Use it as a dictionary or set key (a Swift String key would merge NFC and
/// NFD spellings, and `lowercased()` folds letters SQLite keeps apart).
public func sqlNameKey(_ name: String) -> [UInt8] {
    name.utf8.map(asciiLower)
}

/// True when `name` starts with `prefix`, folding ASCII letters only.
public func sqlNameHasPrefix(_ name: String, _ prefix: String) -> Bool {
    let x = Array(name.utf8), y = Array(prefix.utf8)
    return x.count >= y.count && zip(x, y).allSatisfy { asciiLower($0) == asciiLower($1) }
}

@inline(__always) func asciiLower(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
}

/// `schema.name`, both quoted.
public func quoteIdentifier(_ schema: String, _ name: String) -> String {
    quoteIdentifier(schema) + "." + quoteIdentifier(name)
}
