// The one place the executable builds an S3 store (LitectlS3), and where the
// store's retry notes reach the user: on a terminal only, on stderr.
import Foundation
import LitectlCore
import LitectlS3

func makeS3Store(url: String, endpoint: String?, region: String?, profile: String?, quiet: Bool = false) throws -> ObjectStore {
    try S3ObjectStore(url: url, options: S3Options(endpoint: endpoint, region: region, profile: profile),
                      onRetry: !quiet && isatty(STDERR_FILENO) == 1 ? printRetryNote : nil)
}

/// `litectl: retrying PUT s3://... after HTTP 503 SlowDown (attempt 2 of 5)`:
/// a slow run on a terminal says why; cron's mail never sees it. The line
/// first clears what a progress bar left on the terminal's current line.
@Sendable func printRetryNote(_ note: S3RetryNote) {
    FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    printError(note.description)
}
