// `check --format sarif`: the reports as one SARIF 2.1.0 log (what GitHub
// code scanning, GitLab and Azure DevOps read): one run, litectl as its
// tool with one rule per check, one result per finding located in its
// database (an artifact) and object (a logical location), with the stable
// fingerprint and, against a baseline, its baseline state.
// The log's skeleton is Output/SARIFLog.swift's.

public enum CheckSARIF {
    /// The key of the fingerprint in `partialFingerprints`.
    public static let fingerprintKey = "litectlCheck/v1"

    /// The log for `reports`; `exitCode` is the run's exit status, `baseline`
    /// the baseline file when one was given.
    public static func log(_ reports: [CheckReport], version: String, exitCode: Int32, baseline: String?) -> JSON {
        let rules: [JSON] = CheckKind.allCases.map { check in
            .object([
                ("id", .string(check.rawValue)),
                ("shortDescription", .object([("text", .string(check.summary))])),
                ("defaultConfiguration", .object([("level", .string(defaultLevel(check).rawValue))])),
            ])
        }
        var results: [JSON] = []
        var notifications: [JSON] = []
        for report in reports {
            if let failure = report.failure {
                notifications.append(.object([
                    ("level", .string("error")),
                    ("message", .object([("text", .string(failure.message))])),
                    ("locations", .array([.object([("physicalLocation", physical(report.path))])])),
                ]))
                continue
            }
            for finding in report.findings { results.append(result(finding, path: report.path, baseline: baseline)) }
        }
        return SARIFLog.log(fullName: "litectl check", version: version, rules: rules, results: results,
                            notifications: notifications, exitCode: exitCode)
    }

    static func defaultLevel(_ check: CheckKind) -> Severity {
        switch check {
        case .open, .integrity, .empty, .foreignKey, .expectation, .schema: .error
        case .baseline: .note
        default: .warning
        }
    }

    /// What kind of object a check's findings name, where it is one kind.
    static func objectKind(_ check: CheckKind) -> String? {
        switch check {
        case .foreignKey, .unindexedForeignKey, .noPrimaryKey, .statistics: "table"
        case .redundantIndex: "index"
        default: nil
        }
    }

    static func physical(_ path: String) -> JSON { SARIFLog.physical(path) }

    /// `path` as a URI reference (SARIFLog.uri).
    public static func uri(_ path: String) -> String { SARIFLog.uri(path) }

    static func result(_ finding: Finding, path: String, baseline: String?) -> JSON {
        var members: [(String, JSON)] = [
            ("ruleId", .string(finding.check.rawValue)),
            ("ruleIndex", .integer(Int64(CheckKind.allCases.firstIndex(of: finding.check)!))),
            ("level", .string(finding.severity.rawValue)),
            ("message", .object([("text", .string(finding.message))])),
        ]
        var location: [(String, JSON)] = [("physicalLocation", physical(path))]
        if let object = finding.object {
            var logical: [(String, JSON)] = [("name", .string(object))]
            if let kind = objectKind(finding.check) { logical.append(("kind", .string(kind))) }
            location.append(("logicalLocations", .array([.object(logical)])))
        }
        members.append(("locations", .array([.object(location)])))
        members.append(("partialFingerprints", .object([(fingerprintKey, .string(finding.fingerprint))])))
        if let state = finding.baseline {
            let sarifState = switch state {
            case .new: "new"
            case .accepted: "unchanged"
            case .changed: "updated"
            case .absent: "absent"
            }
            members.append(("baselineState", .string(sarifState)))
        }
        if finding.baseline == .accepted {
            members.append(("suppressions", .array([.object([
                ("kind", .string("external")),
                ("status", .string("accepted")),
                ("justification", .string("accepted by the baseline \(baseline ?? "")")),
            ])])))
        }
        var properties: [(String, JSON)] = []
        if let fix = finding.fix { properties.append(("fix", .string(fix))) }
        if let recorded = finding.recorded { properties.append(("recorded", .string(recorded))) }
        if !properties.isEmpty { members.append(("properties", .object(properties))) }
        return .object(members)
    }
}
