// JUnit XML, the report CI servers (Jenkins, GitLab, Azure, GitHub actions)
// read, for every command that writes one (`check`, `migrate lint`): test
// suites of test cases that pass, fail, error or are skipped, valid against
// Apache Ant's JUnit schema (the strictest of those in use;
// Tests/Fixtures/schemas/JUnit.xsd). What the suites and cases mean is the
// command's; the document's shape is here.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum JUnitXML {
    /// One test case and how it ended.
    public struct TestCase: Sendable {
        public enum Outcome: Sendable {
            case passed
            /// `type` is the failure's kind ("error", "warning"); `text` its details.
            case failure(message: String, type: String, text: String)
            case error(message: String, type: String, text: String)
            case skipped(message: String)
        }
        public var name: String
        public var classname: String
        public var seconds: Double
        public var outcome: Outcome

        public init(name: String, classname: String, seconds: Double, outcome: Outcome) {
            self.name = name
            self.classname = classname
            self.seconds = seconds
            self.outcome = outcome
        }
    }

    /// One test suite: its cases, properties and captured output.
    public struct TestSuite: Sendable {
        public var name: String
        /// Seconds since 1970.
        public var started: Double
        public var hostname: String
        public var seconds: Double
        public var package: String
        public var id: Int
        /// Name and value, in order.
        public var properties: [(String, String)]
        public var cases: [TestCase]
        public var systemOut: String
        public var systemErr: String

        public init(name: String, started: Double, hostname: String, seconds: Double, package: String, id: Int,
                    properties: [(String, String)], cases: [TestCase], systemOut: String, systemErr: String) {
            self.name = name
            self.started = started
            self.hostname = hostname
            self.seconds = seconds
            self.package = package
            self.id = id
            self.properties = properties
            self.cases = cases
            self.systemOut = systemOut
            self.systemErr = systemErr
        }
    }

    /// The whole document: `<testsuites>` holding `suites`.
    public static func document(_ suites: [TestSuite]) -> String {
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n"
        for suite in suites { render(suite, into: &xml) }
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

    public static func attribute(_ name: String, _ value: String) -> String {
        " \(name)=\"\(XMLText.escaped(value, attribute: true))\""
    }

    /// Seconds with three decimals, never negative.
    public static func seconds(_ value: Double) -> String {
        let ms = Int64((max(0, value) * 1000).rounded())
        let fraction = String(ms % 1000)
        return "\(ms / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// `2026-12-07T10:45:00`: UTC, no zone (the schema's pattern allows none).
    public static func timestamp(_ seconds: Double) -> String { String(Timestamp.iso8601(seconds).prefix(19)) }

    static func render(_ suite: TestSuite, into xml: inout String) {
        var failures = 0, errors = 0, skipped = 0
        for c in suite.cases {
            switch c.outcome {
            case .passed: break
            case .failure: failures += 1
            case .error: errors += 1
            case .skipped: skipped += 1
            }
        }
        xml += "  <testsuite" + attribute("name", suite.name) + attribute("timestamp", timestamp(suite.started))
            + attribute("hostname", suite.hostname) + attribute("tests", String(suite.cases.count))
            + attribute("failures", String(failures)) + attribute("errors", String(errors))
            + attribute("skipped", String(skipped)) + attribute("time", seconds(suite.seconds))
            + attribute("package", suite.package) + attribute("id", String(suite.id)) + ">\n"
        xml += "    <properties>\n"
        for (name, value) in suite.properties {
            xml += "      <property" + attribute("name", name) + attribute("value", value) + "/>\n"
        }
        xml += "    </properties>\n"
        for c in suite.cases {
            xml += "    <testcase" + attribute("name", c.name) + attribute("classname", c.classname) + attribute("time", seconds(c.seconds))
            switch c.outcome {
            case .passed:
                xml += "/>\n"
            case let .failure(message, type, text):
                xml += "><failure" + attribute("message", message) + attribute("type", type) + ">" + XMLText.escaped(text)
                    + "</failure></testcase>\n"
            case let .error(message, type, text):
                xml += "><error" + attribute("message", message) + attribute("type", type) + ">" + XMLText.escaped(text)
                    + "</error></testcase>\n"
            case let .skipped(message):
                xml += "><skipped" + attribute("message", message) + "/></testcase>\n"
            }
        }
        xml += "    <system-out>" + XMLText.escaped(suite.systemOut) + "</system-out>\n"
        xml += "    <system-err>" + XMLText.escaped(suite.systemErr) + "</system-err>\n"
        xml += "  </testsuite>\n"
    }
}
