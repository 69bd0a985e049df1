// The statements of a SQL script as SQLite reads them, counted without
// preparing any (a later statement may need a table an earlier one makes):
// a statement ends at a semicolon after which sqlite3_complete says the text
// so far is whole, so semicolons inside strings, comments and trigger
// bodies do not count. See https://www.sqlite.org/c3ref/complete.html
import CSQLite

public enum SQLScript {
    /// How many statements `script` holds (empty ones and comments left out).
    public static func statementCount(_ script: String) -> Int {
        let bytes = Array(script.utf8)
        var count = 0, start = 0
        for (i, byte) in bytes.enumerated() where byte == UInt8(ascii: ";") {
            let piece = Array(bytes[start...i]) + [0]
            let complete = piece.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { sqlite3_complete($0) }
            }
            guard complete != 0 else { continue }
            if !isBlank(bytes[start..<i]) { count += 1 }
            start = i + 1
        }
        if !isBlank(bytes[start...]) { count += 1 }
        return count
    }

    /// True for whitespace and comments only.
    static func isBlank(_ bytes: ArraySlice<UInt8>) -> Bool {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == 0x20 || (0x09...0x0D).contains(b) { i += 1; continue }
            if b == UInt8(ascii: "-"), i + 1 < bytes.endIndex, bytes[i + 1] == UInt8(ascii: "-") {
                while i < bytes.endIndex && bytes[i] != 0x0A { i += 1 }
                continue
            }
            if b == UInt8(ascii: "/"), i + 1 < bytes.endIndex, bytes[i + 1] == UInt8(ascii: "*") {
                i += 2
                while i + 1 < bytes.endIndex && !(bytes[i] == UInt8(ascii: "*") && bytes[i + 1] == UInt8(ascii: "/")) { i += 1 }
                i += 2
                continue
            }
            return false
        }
        return true
    }
}
