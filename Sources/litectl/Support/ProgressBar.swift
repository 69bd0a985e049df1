// A one-line progress bar on stderr, drawn only when stderr is a terminal
// (and NO_COLOR does not matter: it has no colour).
import Foundation
import LitectlCore

final class ProgressBar: @unchecked Sendable {  // drawn from one thread at a time
    var label: String
    /// What the counts count: pages, or packs for `verify --read-data`.
    let unit: String
    let enabled: Bool
    private var lastPercent = -1

    init(label: String, unit: String = "pages") {
        self.label = label
        self.unit = unit
        enabled = isatty(STDERR_FILENO) == 1
    }

    func update(_ progress: CopyProgress) {
        guard enabled, progress.pageCount > 0 else { return }
        let percent = min(100, progress.pagesCopied * 100 / progress.pageCount)
        guard percent != lastPercent else { return }
        lastPercent = percent
        let width = 30, filled = percent * width / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        FileHandle.standardError.write(Data("\r\(TerminalText.visible(label)) [\(bar)] \(percent)% \(progress.pagesCopied)/\(progress.pageCount) \(unit)".utf8))
    }

    func clear() {
        guard enabled, lastPercent >= 0 else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        lastPercent = -1
    }
}
