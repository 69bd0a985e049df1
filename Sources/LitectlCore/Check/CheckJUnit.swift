// `check --format junit`: the reports as JUnit XML, the schema CI servers
// (Jenkins, GitLab, Azure, GitHub actions) read: one testsuite per database,
// one testcase per check that ran (or was skipped), the findings that fail
// the check as its failure. Valid against Apache Ant's JUnit schema (the
// strictest of those in use; Tests/Fixtures/schemas/JUnit.xsd).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum CheckJUnit {
    /// The document for `reports`. `started` (seconds since 1970) is each
    /// suite's timestamp; `baseline` the baseline file's path, when one was
    /// given (a property of each suite).
    public static func document(_ reports: [CheckReport], strict: Bool, baseline: String?, started: Double,
                                hostname: String = CheckJUnit.hostname()) -> String {
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
        for (id, report) in reports.enumerated() {
            suite(report, id: id, strict: strict, baseline: baseline, started: started, hostname: hostname, into: &xml)
        }
        xml += "</testsuites>\n"
        return xml
    }

    /// The machine's name, or `localhost` (what the schema says to use then).
    public static func hostname() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }

    static func attribute(_ name: String, _ value: String) -> String {
        " \(name)=\"\(XMLText.escaped(value, attribute: true))\""
    }

    static func seconds(_ value: Double) -> String {
        let ms = Int64((max(0, value) * 1000).rounded())
        let fraction = String(ms % 1000)
        return "\(ms / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// `2026-12-07T10:45:00`: UTC, no zone (the schema's pattern allows none).
    static func timestamp(_ seconds: Double) -> String { String(Timestamp.iso8601(seconds).prefix(19)) }

    /// One finding as a line of text (`SEVERITY [CHECK] OBJECT: MESSAGE`,
    /// its baseline state, its fix on the next line).
    public static func line(_ finding: Finding) -> String {
        var line = "\(finding.severity.rawValue) [\(finding.check.rawValue)] "
        if let object = finding.object { line += "\(object): " }
        line += finding.message + CheckText.baselineSuffix(finding)
        if let fix = finding.fix { line += "\n  fix: \(fix)" }
        return line
    }

    static func suite(_ report: CheckReport, id: Int, strict: Bool, baseline: String?, started: Double, hostname: String,
                      into xml: inout String) {
        struct Case { var name: String; var seconds: Double; var body: String }
        var cases: [Case] = []
        var failures = 0, errors = 0, skipped = 0
        if let failure = report.failure {
            errors = 1
            cases.append(Case(name: CheckKind.open.rawValue, seconds: 0,
                              body: "<error" + attribute("message", failure.message) + attribute("type", "could-not-check") + ">"
                                + XMLText.escaped(failure.description) + "</error>"))
        } else {
            var ran = report.ran
            ran.sort { a, b in CheckKind.allCases.firstIndex(of: a.check)! < CheckKind.allCases.firstIndex(of: b.check)! }
            for (check, seconds) in ran {
                let failing = report.findings.filter { $0.check == check && $0.fails(strict: strict) }
                guard let first = failing.first else {
                    cases.append(Case(name: check.rawValue, seconds: seconds, body: ""))
                    continue
                }
                failures += 1
                let type = failing.contains { $0.severity == .error } ? "error" : "warning"
                let message = failing.count == 1 ? first.message : "\(failing.count) findings; the first: \(first.message)"
                cases.append(Case(name: check.rawValue, seconds: seconds,
                                  body: "<failure" + attribute("message", message) + attribute("type", type) + ">"
                                    + XMLText.escaped(failing.map(line).joined(separator: "\n")) + "</failure>"))
            }
            for check in report.skipped {
                skipped += 1
                cases.append(Case(name: check.rawValue, seconds: 0,
                                  body: "<skipped" + attribute("message", "left out with --skip \(check.rawValue)") + "/>"))
            }
        }
        xml += "  <testsuite" + attribute("name", report.path) + attribute("timestamp", timestamp(started))
            + attribute("hostname", hostname) + attribute("tests", String(cases.count)) + attribute("failures", String(failures))
            + attribute("errors", String(errors)) + attribute("skipped", String(skipped)) + attribute("time", seconds(report.seconds))
            + attribute("package", "litectl.check") + attribute("id", String(id)) + ">\n"
        xml += "    <properties>\n"
        xml += "      <property" + attribute("name", "strict") + attribute("value", strict ? "true" : "false") + "/>\n"
        if let baseline { xml += "      <property" + attribute("name", "baseline") + attribute("value", baseline) + "/>\n" }
        xml += "    </properties>\n"
        for c in cases {
            xml += "    <testcase" + attribute("name", c.name) + attribute("classname", report.path) + attribute("time", seconds(c.seconds))
            xml += c.body.isEmpty ? "/>\n" : ">" + c.body + "</testcase>\n"
        }
        // Every finding, those that do not fail included (accepted by the
        // baseline, warnings without --strict, notes), as `check -v` says them.
        let all = report.findings.map(line).joined(separator: "\n")
        xml += "    <system-out>" + XMLText.escaped(all.isEmpty ? "" : all + "\n") + "</system-out>\n"
        xml += "    <system-err>" + XMLText.escaped(report.failure.map { $0.description + "\n" } ?? "") + "</system-err>\n"
        xml += "  </testsuite>\n"
    }
}

/// How check's text output says a finding's baseline state.
public enum CheckText {
    /// ` (accepted by the baseline)`, ` (changed since the baseline, which
    /// recorded: ...)`, ` (new: not in the baseline)`, or nothing.
    public static func baselineSuffix(_ finding: Finding) -> String {
        switch finding.baseline {
        case .accepted?: " (accepted by the baseline)"
        case .changed?: " (changed since the baseline" + (finding.recorded.map { ", which recorded: \($0)" } ?? "") + ")"
        case .new?: " (new: not in the baseline)"
        case .absent?, nil: ""
        }
    }
}
