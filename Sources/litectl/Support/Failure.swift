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

/// Writes `litectl: <message>` on stderr.
func printError(_ message: String) {
    fflush(nil)  // what went to stdout so far comes first
    FileHandle.standardError.write(Data("litectl: \(message)\n".utf8))
}

/// One line for any error the core throws.
func describe(_ error: any Error) -> String {
    if let error = error as? DatabaseError { return error.description }
    return "\(error)"
}

/// Writes `text` and a newline on stdout, at once: commands that stream rows
/// write through their own buffered sink, and the two must not interleave.
func printOut(_ text: String) {
    print(text)
    fflush(nil)
}
