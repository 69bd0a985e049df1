// SARIF 2.1.0, the log GitHub code scanning, GitLab and Azure DevOps read, for
// every command that writes one (`check`, `migrate lint`): one run of litectl
// as the tool, with its rules, results and invocation. What a rule and a
// result say is the command's; the log's skeleton and locations are here.
// See https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html

public enum SARIFLog {
    public static let schema = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

    /// The log of one run: `fullName` names the command ("litectl check"),
    /// `rules` and `results` are reportingDescriptor and result objects, and
    /// `notifications` the tool's own failures (which make the run unsuccessful).
    public static func log(fullName: String, version: String, rules: [JSON], results: [JSON], notifications: [JSON],
                           exitCode: Int32) -> JSON {
        let invocation: JSON = .object([
            ("executionSuccessful", .bool(notifications.isEmpty)),
            ("exitCode", .integer(Int64(exitCode))),
            ("toolExecutionNotifications", .array(notifications)),
        ])
        return .object([
            ("$schema", .string(schema)),
            ("version", .string("2.1.0")),
            ("runs", .array([.object([
                ("tool", .object([("driver", .object([
                    ("name", .string("litectl")),
                    ("fullName", .string(fullName)),
                    ("version", .string(version)),
                    ("semanticVersion", .string(version)),
                    ("rules", .array(rules)),
                ]))])),
                ("invocations", .array([invocation])),
                ("results", .array(results)),
            ])])),
        ])
    }

    /// A physicalLocation naming the file at `path`, optionally a line in it.
    public static func physical(_ path: String, line: Int? = nil) -> JSON {
        var members: [(String, JSON)] = [("artifactLocation", .object([("uri", .string(uri(path)))]))]
        if let line { members.append(("region", .object([("startLine", .integer(Int64(line)))]))) }
        return .object(members)
    }

    /// `path` as a URI reference: a relative path percent-encoded (a `:` too,
    /// which would otherwise read as a scheme), an absolute one as `file://`.
    public static func uri(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if byte < 0x80 && (c.isLetter || c.isNumber || "-._~/".contains(c)) {
                out.append(c)
            } else {
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return path.hasPrefix("/") ? "file://" + out : out
    }
}
