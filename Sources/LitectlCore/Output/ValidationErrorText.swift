// The usage error the core raises when a text a person typed (a duration, a
// time) does not read: the executable reports it as a usage error (exit 64).
// In the base so that every capability and the text forms can raise it.

/// A usage error raised by the core (the CLI maps it to exit 64).
public struct ValidationErrorText: Error, CustomStringConvertible {
    public var description: String
    public init(_ text: String) { description = text }
}
