// `check --format junit`: the reports as JUnit XML, the schema CI servers
// (Jenkins, GitLab, Azure, GitHub actions) read: one testsuite per database,
// one testcase per check that ran (or was skipped), the findings that fail
// the check as its failure. Valid against Apache Ant's JUnit schema (the
// strictest of those in use; Tests/Fixtures/schemas/JUnit.xsd).
// The document's shape is Output/JUnitXML.swift's.

public enum CheckJUnit {
    /// The document for `reports`. `started` (seconds since 1970) is each
    /// suite's timestamp; `baseline` the baseline file's path, when one was
    /// given (a property of each suite).
    public static func document(_ reports: [CheckReport], strict: Bool, baseline: String?, started: Double,
                                hostname: String = CheckJUnit.hostname()) -> String {
        JUnitXML.document(reports.enumerated().map { id, report in
            suite(report, id: id, strict: strict, baseline: baseline, started: started, hostname: hostname)
        })
    }

    /// The machine's name, or `localhost`.
    public static func hostname() -> String { JUnitXML.hostname() }

    /// One finding as a line of text (`SEVERITY [CHECK] OBJECT: MESSAGE`,
    /// its baseline state, its fix on the next line).
    public static func line(_ finding: Finding) -> String {
        var line = "\(finding.severity.rawValue) [\(finding.check.rawValue)] "
        if let object = finding.object { line += "\(object): " }
        line += finding.message + CheckText.baselineSuffix(finding)
        if let fix = finding.fix { line += "\n  fix: \(fix)" }
        return line
    }

    static func suite(_ report: CheckReport, id: Int, strict: Bool, baseline: String?, started: Double,
                      hostname: String) -> JUnitXML.TestSuite {
        var cases: [JUnitXML.TestCase] = []
        if let failure = report.failure {
            cases.append(JUnitXML.TestCase(name: CheckKind.open.rawValue, classname: report.path, seconds: 0,
                                           outcome: .error(message: failure.message, type: "could-not-check", text: failure.description)))
        } else {
            var ran = report.ran
            ran.sort { a, b in CheckKind.allCases.firstIndex(of: a.check)! < CheckKind.allCases.firstIndex(of: b.check)! }
            for (check, seconds) in ran {
                let failing = report.findings.filter { $0.check == check && $0.fails(strict: strict) }
                guard let first = failing.first else {
                    cases.append(JUnitXML.TestCase(name: check.rawValue, classname: report.path, seconds: seconds, outcome: .passed))
                    continue
                }
                let type = failing.contains { $0.severity == .error } ? "error" : "warning"
                let message = failing.count == 1 ? first.message : "\(failing.count) findings; the first: \(first.message)"
                cases.append(JUnitXML.TestCase(name: check.rawValue, classname: report.path, seconds: seconds,
                                               outcome: .failure(message: message, type: type, text: failing.map(line).joined(separator: "\n"))))
            }
            for check in report.skipped {
                cases.append(JUnitXML.TestCase(name: check.rawValue, classname: report.path, seconds: 0,
                                               outcome: .skipped(message: "left out with --skip \(check.rawValue)")))
            }
        }
        var properties = [("strict", strict ? "true" : "false")]
        if let baseline { properties.append(("baseline", baseline)) }
        // Every finding, those that do not fail included (accepted by the
        // baseline, warnings without --strict, notes), as `check -v` says them.
        let all = report.findings.map(line).joined(separator: "\n")
        return JUnitXML.TestSuite(name: report.path, started: started, hostname: hostname, seconds: report.seconds,
                                  package: "litectl.check", id: id, properties: properties, cases: cases,
                                  systemOut: all.isEmpty ? "" : all + "\n", systemErr: report.failure.map { $0.description + "\n" } ?? "")
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
