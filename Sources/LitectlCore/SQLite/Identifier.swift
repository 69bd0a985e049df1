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

/// `schema.name`, both quoted.
public func quoteIdentifier(_ schema: String, _ name: String) -> String {
    quoteIdentifier(schema) + "." + quoteIdentifier(name)
}
