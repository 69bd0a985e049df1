// A Prometheus textfile for node_exporter's textfile collector: per source,
// the last success time, duration, bytes, verification result and shrink
// flag of the latest run. Written atomically; the last success time of a source that
// failed this run is carried over from the previous file.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public struct BackupMetric: Sendable {
    public var source: String
    public var success: Bool
    /// Wall-clock seconds since 1970 when the backup finished (success only).
    public var finishedAt: Double?
    public var durationSeconds: Double
    public var bytes: Int64
    /// 1 verified ok, 0 failed, -1 not verified.
    public var verified: Int
    /// The source lost most of its pages since its last backup (`SourceShrink`).
    public var shrunk: Bool

    public init(source: String, success: Bool, finishedAt: Double?, durationSeconds: Double, bytes: Int64, verified: Int,
                shrunk: Bool = false) {
        self.source = source; self.success = success; self.finishedAt = finishedAt
        self.durationSeconds = durationSeconds; self.bytes = bytes; self.verified = verified; self.shrunk = shrunk
    }
}

public enum BackupMetrics {
    static let lastSuccess = "litectl_backup_last_success_timestamp_seconds"

    /// The textfile for `metrics` (previous last-success times from `previous`).
    public static func text(_ metrics: [BackupMetric], previous: String?) -> String {
        var carried: [String: String] = [:]
        for line in (previous ?? "").split(separator: "\n") where line.hasPrefix(lastSuccess + "{") {
            if let space = line.lastIndex(of: " ") {
                carried[String(line[..<space])] = String(line[line.index(after: space)...])
            }
        }
        var out = ""
        func family(_ name: String, _ help: String, _ value: (BackupMetric) -> String?) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) gauge\n"
            for metric in metrics {
                let series = "\(name){source=\"\(escape(metric.source))\"}"
                if let v = value(metric) { out += "\(series) \(v)\n" } else if let old = carried[series] { out += "\(series) \(old)\n" }
            }
        }
        family(lastSuccess, "Time the last successful backup of the source finished (seconds since 1970).") {
            $0.success ? format($0.finishedAt ?? 0) : nil
        }
        family("litectl_backup_success", "1 when the latest backup of the source succeeded, else 0.") { $0.success ? "1" : "0" }
        family("litectl_backup_duration_seconds", "Duration of the latest backup run of the source.") { format($0.durationSeconds) }
        family("litectl_backup_bytes", "Size of the latest backup file of the source (as stored).") { String($0.bytes) }
        family("litectl_backup_verified", "1 when the latest backup passed verification, 0 when it failed, -1 when not verified.") {
            String($0.verified)
        }
        family("litectl_backup_shrunk", "1 when the latest backup's source lost most of its pages since the backup before (see --warn-shrink), else 0.") {
            $0.shrunk ? "1" : "0"
        }
        return out
    }

    /// Writes the textfile at `path` atomically (mode 0644: node_exporter
    /// reads it). A path that is one of the databases backed up, or one of
    /// `otherInputs` (a key, passphrase or config file the run reads), is
    /// refused (the same-file rule).
    public static func write(_ metrics: [BackupMetric], to path: String, otherInputs: [String] = []) throws {
        try require(path, apartFrom: metrics.map(\.source), otherInputs: otherInputs)
        var previous: String?
        if let bytes = try? FileStreams.readAll(path) { previous = String(decoding: bytes, as: UTF8.self) }
        try AtomicFile.write(Array(text(metrics, previous: previous).utf8), to: path, permissions: 0o644,
                             what: "the metrics file", replacing: PrometheusText.replaceRule)
    }

    /// The same-file rule for a metrics file, and the write gate's rules
    /// (`PrometheusText.replaceRule`: an existing file is replaced only when
    /// it is a Prometheus textfile), before a run begins (so that a wrong
    /// --metrics-file is refused before anything is backed up) and again as
    /// it is written.
    public static func require(_ path: String, apartFrom sources: [String], otherInputs: [String]) throws {
        try PrometheusText.requireWritable(path, apartFrom: sources, what: "a database being backed up", otherInputs: otherInputs)
    }

    static func escape(_ s: String) -> String { PrometheusText.escapeLabel(s) }

    static func format(_ d: Double) -> String { PrometheusText.number(d) }
}
