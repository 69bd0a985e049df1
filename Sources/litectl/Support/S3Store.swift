// Where the S3 store's retry notes reach the user: on a terminal only, on
// stderr (the store itself is made by LitectlS3's RepositoryOpener).
import Foundation
import LitectlCore
import LitectlS3

/// The retry notes' receiver: none with -q or off a terminal.
func retryNotes(quiet: Bool) -> (@Sendable (S3RetryNote) -> Void)? {
    !quiet && isatty(STDERR_FILENO) == 1 ? printRetryNote : nil
}

/// `litectl: retrying PUT s3://... after HTTP 503 SlowDown (attempt 2 of 5)`:
/// a slow run on a terminal says why; cron's mail never sees it. The line
/// first clears what a progress bar left on the terminal's current line.
@Sendable func printRetryNote(_ note: S3RetryNote) {
    FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    printError(note.description)
}
