// Prometheus's text exposition format, as node_exporter's textfile collector
// reads it: what a metrics file litectl writes looks like, so that an existing
// file is replaced only when it is one (a repository's config, a backup or a
// database named by mistake is refused, never overwritten).
// See https://prometheus.io/docs/instrumenting/exposition_formats/

public enum PrometheusText {
    /// The write gate's rule for a metrics file: an existing file is replaced
    /// only when it is a Prometheus textfile (an empty file counts: it holds
    /// nothing to lose).
    public static let replaceRule = ReplaceRule.onlyIf(kind: "a Prometheus textfile", matches: { looksLikeTextfile($0) })

    /// A label value escaped as the format wants (backslash, quote, newline).
    public static func escapeLabel(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    /// A sample value: to the millisecond, an integer without a fraction.
    public static func number(_ d: Double) -> String {
        let ms = (d * 1000).rounded() / 1000
        return ms == ms.rounded() ? String(Int64(ms)) : String(ms)
    }

    /// The checks on a metrics file before a run begins (so that a wrong
    /// --metrics-file is refused before anything is done) and again as it is
    /// written: never one of the databases the run reads (`sources`) nor a
    /// key, passphrase or config file it reads (`otherInputs`), and an
    /// existing file only when it is a Prometheus textfile (`replaceRule`).
    public static func requireWritable(_ path: String, apartFrom sources: [String], what sourcesAre: String, otherInputs: [String]) throws {
        try SameFileRule.require(output: path, apartFrom: sources, what: sourcesAre)
        try SameFileRule.require(output: path, apartFrom: otherInputs, what: "a key, passphrase or config file the run reads")
        try WriteGate.shared.requireWritable(path, what: "the metrics file", replacing: replaceRule)
    }

    /// Whether `head` (a file's first bytes, perhaps cut short) reads as the
    /// text format: UTF-8 lines, each empty, a `#` comment, or a sample
    /// `name{labels} value [timestamp]`. The last line is not judged when it
    /// may have been cut by the read.
    public static func looksLikeTextfile(_ head: [UInt8]) -> Bool {
        if head.isEmpty { return true }
        if head.contains(0) { return false }
        var lines = head.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if head.count >= WriteGate.sniffBytes && lines.count > 1 { lines.removeLast() }
        for line in lines {
            guard let text = String(validating: line, as: UTF8.self) else { return false }
            let trimmed = text.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard isSample(Substring(trimmed)) else { return false }
        }
        return true
    }

    /// `name`, optional `{...}` labels, then a value (and an optional timestamp).
    static func isSample(_ line: Substring) -> Bool {
        var rest = line
        let name = rest.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") }
        guard let first = name.first, !first.isNumber else { return false }
        rest = rest.dropFirst(name.count)
        if rest.first == "{" {
            // Up to the closing brace, past quoted label values (which may hold braces).
            var inQuote = false, escaped = false, closed = false
            var index = rest.index(after: rest.startIndex)
            while index < rest.endIndex {
                let c = rest[index]
                if escaped { escaped = false } else if c == "\\" { escaped = inQuote } else if c == "\"" { inQuote.toggle() } else if c == "}" && !inQuote { closed = true; break }
                index = rest.index(after: index)
            }
            guard closed else { return false }
            rest = rest[rest.index(after: index)...]
        }
        let fields = rest.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard (1...2).contains(fields.count), rest.first == " " || rest.first == "\t" else { return false }
        let value = fields[0]
        guard Double(value) != nil || ["+Inf", "-Inf", "NaN"].contains(value) else { return false }
        return fields.count == 1 || Int64(fields[1]) != nil
    }
}
