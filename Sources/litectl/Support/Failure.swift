// How the executable reports failure: one line on stderr naming the file and
// the cause, and the documented exit codes.
import ArgumentParser
import LitectlCore

import Foundation

enum ExitStatus {
    /// Differences or problems found (compare and check commands).
    static let findings = ExitCode(1)
    /// An error: the command could not do its work.
    static let error = ExitCode(2)
}

/// Writes `litectl: <message>` on stderr, as one line: control characters
/// and bytes that are not UTF-8 (from a file name, a table name, a patch)
/// are escaped visibly (`TerminalText`).
func printError(_ message: String) {
    fflush(nil)  // what went to stdout so far comes first
    FileHandle.standardError.write(Data("litectl: \(TerminalText.visible(message))\n".utf8))
}

/// One line for any error the core throws.
func describe(_ error: any Error) -> String {
    if let error = error as? DatabaseError { return error.description }
    return "\(error)"
}

/// Writes `text` and a newline on stdout, at once: commands that stream rows
/// write through their own buffered sink, and the two must not interleave.
/// For one line of human-readable text (JSON and SQL go through
/// `printExact`): control characters, newlines included, and bytes that are
/// not UTF-8 are escaped visibly (`TerminalText`), so a name taken from a
/// file can neither reach the terminal as an escape sequence nor forge lines.
func printOut(_ text: String) {
    print(TerminalText.visible(text))
    fflush(nil)
}

/// `printOut` for a block of lines that litectl laid out itself: newlines and
/// tabs stay; what the block took from files should be escaped where it was
/// put in (`visible`).
func printBlock(_ text: String) {
    print(TerminalText.visible(text, .block))
    fflush(nil)
}

/// Writes a machine format (JSON, SQL) and a newline on stdout exactly.
func printExact(_ text: String) {
    print(text)
    fflush(nil)
}

/// `text` (a name, a path, a value) as one visible line: see `TerminalText`.
func visible(_ text: String) -> String { TerminalText.visible(text) }
