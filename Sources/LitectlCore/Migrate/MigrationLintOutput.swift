// `migrate lint`'s report as JSON, JUnit XML (one test suite per migration
// file, one test case per rule) and SARIF 2.1.0 (one result per finding,
// located in the migration file at its statement's line), on the shapes of
// Output/JUnitXML.swift and Output/SARIFLog.swift.

public enum MigrationLintOutput {
    /// The key of the fingerprint in SARIF's `partialFingerprints`.
    public static let fingerprintKey = "litectlMigrateLint/v1"

    public static func json(_ finding: MigrationLintFinding) -> JSON {
        .object([
            ("rule", .string(finding.rule.rawValue)),
            ("name", .string(finding.rule.name)),
            ("severity", .string(finding.severity.rawValue)),
            ("file", .string(finding.file)),
            ("version", .integer(finding.version)),
            ("statement", .optional(finding.statement) { .integer(Int64($0)) }),
            ("line", .optional(finding.line) { .integer(Int64($0)) }),
            ("object", .string(finding.object)),
            ("count", .optional(finding.count, JSON.integer)),
            ("message", .string(finding.message)),
            ("fingerprint", .string(finding.fingerprint)),
        ])
    }

    /// The whole report; `error` when the lint could not run.
    public static func json(_ report: MigrationLintReport?, path: String, folder: String, error: String?) -> JSON {
        .object([
            ("path", .string(path)),
            ("folder", .string(folder)),
            ("from_version", .optional(report?.fromVersion, JSON.integer)),
            ("to_version", .optional(report?.toVersion, JSON.integer)),
            ("files", .array((report?.files ?? []).map { .object([("version", .integer($0.version)), ("file", .string($0.name))]) })),
            ("not_linted", .array((report?.notLinted ?? []).map { .string($0) })),
            ("errors", .optional(report?.count(.error)) { .integer(Int64($0)) }),
            ("warnings", .optional(report?.count(.warning)) { .integer(Int64($0)) }),
            ("notes", .optional(report?.count(.note)) { .integer(Int64($0)) }),
            ("findings", .array((report?.findings ?? []).map(json))),
            ("error", .optional(error, JSON.string)),
        ])
    }

    static func filePath(_ folder: String, _ file: String) -> String {
        (folder.hasSuffix("/") ? folder : folder + "/") + file
    }

    /// JUnit XML: a suite per file linted (a case per rule, failing with the
    /// rule's findings that fail the lint), a suite of skipped cases per file
    /// not linted, every finding in the suite's system-out.
    public static func junit(_ report: MigrationLintReport, strict: Bool, started: Double,
                             hostname: String = JUnitXML.hostname()) -> String {
        var suites: [JUnitXML.TestSuite] = []
        for (id, file) in report.files.enumerated() {
            let findings = report.findings.filter { $0.file == file.name }
            let cases = MigrationLintRule.allCases.map { rule -> JUnitXML.TestCase in
                let failing = findings.filter { $0.rule == rule && ($0.severity == .error || (strict && $0.severity == .warning)) }
                guard let first = failing.first else {
                    return JUnitXML.TestCase(name: "\(rule.rawValue) \(rule.name)", classname: file.name, seconds: 0, outcome: .passed)
                }
                let message = failing.count == 1 ? first.message : "\(failing.count) findings; the first: \(first.message)"
                return JUnitXML.TestCase(name: "\(rule.rawValue) \(rule.name)", classname: file.name, seconds: 0,
                                         outcome: .failure(message: message, type: first.severity.rawValue,
                                                           text: failing.map(\.line1).joined(separator: "\n")))
            }
            let all = findings.map(\.line1).joined(separator: "\n")
            suites.append(JUnitXML.TestSuite(name: file.name, started: started, hostname: hostname,
                                             seconds: id == 0 ? report.seconds : 0, package: "litectl.migrate-lint", id: id,
                                             properties: [("database", report.path), ("version", String(file.version)),
                                                          ("strict", strict ? "true" : "false")],
                                             cases: cases, systemOut: all.isEmpty ? "" : all + "\n", systemErr: ""))
        }
        for (offset, file) in report.notLinted.enumerated() {
            suites.append(JUnitXML.TestSuite(name: file, started: started, hostname: hostname, seconds: 0,
                                             package: "litectl.migrate-lint", id: report.files.count + offset,
                                             properties: [("database", report.path)],
                                             cases: [JUnitXML.TestCase(name: "lint", classname: file, seconds: 0,
                                                                       outcome: .skipped(message: "not linted: an earlier migration fails on the data"))],
                                             systemOut: "", systemErr: ""))
        }
        return JUnitXML.document(suites)
    }

    /// SARIF 2.1.0: a rule per lint rule, a result per finding located at
    /// its file and line, with the finding's object as a logical location.
    public static func sarif(_ report: MigrationLintReport, version: String, exitCode: Int32) -> JSON {
        let rules: [JSON] = MigrationLintRule.allCases.map { rule in
            .object([
                ("id", .string(rule.rawValue)),
                ("name", .string(rule.name)),
                ("shortDescription", .object([("text", .string(rule.summary))])),
            ])
        }
        let results: [JSON] = report.findings.map { finding in
            var members: [(String, JSON)] = [
                ("ruleId", .string(finding.rule.rawValue)),
                ("ruleIndex", .integer(Int64(MigrationLintRule.allCases.firstIndex(of: finding.rule)!))),
                ("level", .string(finding.severity.rawValue)),
                ("message", .object([("text", .string(finding.message))])),
                ("locations", .array([.object([
                    ("physicalLocation", SARIFLog.physical(filePath(report.folder, finding.file), line: finding.line)),
                    ("logicalLocations", .array([.object([("name", .string(finding.object))])])),
                ])])),
                ("partialFingerprints", .object([(fingerprintKey, .string(finding.fingerprint))])),
            ]
            var properties: [(String, JSON)] = [("database", .string(report.path))]
            if let count = finding.count { properties.append(("count", .integer(count))) }
            if let statement = finding.statement { properties.append(("statement", .integer(Int64(statement)))) }
            members.append(("properties", .object(properties)))
            return .object(members)
        }
        return SARIFLog.log(fullName: "litectl migrate lint", version: version, rules: rules, results: results,
                            notifications: [], exitCode: exitCode)
    }
}
