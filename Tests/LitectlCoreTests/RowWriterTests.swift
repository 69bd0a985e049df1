// The shared output formats, parsed back: JSON with a real parser, CSV by
// RFC 4180 rules, and every storage class kept distinct.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RowWriterTests {
    static let columns = ["i", "r", "t", "b", "n"]
    static let rows: [[Value]] = [
        [.integer(.max), .real(0.1), .text("plain"), .blob([0x00, 0xFF]), .null],
        [.integer(-1), .real(-0.0), .text("a,\"b\"\r\nc|d\te\\"), .blob([]), .null],
        [.integer(0), .real(1e300), .text("日本 e\u{301}"), .blob([0x31]), .real(.infinity)],
    ]

    func render(_ format: OutputFormat, headers: Bool = true) -> String {
        let sink = MemorySink()
        let writer = RowWriter(format: format, headers: headers, sink: sink)
        writer.begin(columns: Self.columns)
        for row in Self.rows { writer.write(row) }
        writer.finish()
        return sink.text
    }

    @Test func jsonParsesBackExactly() throws {
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(render(.json).utf8)) as? [[String: Any]])
        #expect(parsed.count == 3)
        #expect((parsed[0]["i"] as? NSNumber)?.int64Value == .max)
        #expect((parsed[0]["r"] as? Double)?.bitPattern == 0.1.bitPattern)
        #expect(parsed[0]["n"] is NSNull)
        #expect((parsed[0]["b"] as? [String: String]) == ["blob": "00FF"])
        #expect((parsed[1]["r"] as? Double)?.bitPattern == (-0.0).bitPattern)
        #expect(Array((parsed[1]["t"] as? String ?? "").utf8) == Array("a,\"b\"\r\nc|d\te\\".utf8))
        #expect(Array((parsed[2]["t"] as? String ?? "").utf8) == Array("日本 e\u{301}".utf8))
        #expect((parsed[2]["n"] as? [String: String]) == ["real": "Infinity"])
        let lines = render(.jsonl).split(separator: "\n")
        #expect(lines.count == 3)
        for line in lines { _ = try JSONSerialization.jsonObject(with: Data(line.utf8)) }
    }

    @Test func repeatedColumnNamesKeepEveryValueInJSON() throws {
        let sink = MemorySink()
        let writer = RowWriter(format: .jsonl, sink: sink)
        writer.begin(columns: ["id", "id", "id:2", "x"])
        writer.write([.integer(1), .integer(2), .integer(3), .null])
        writer.finish()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(sink.bytes)) as? [String: Any])
        #expect(object.count == 4)
        #expect(object["id"] as? Int == 1)
        #expect(object["id:3"] as? Int == 2, "id:2 is taken by a real column")
        #expect(object["id:2"] as? Int == 3)
    }

    @Test func csvFollowsRFC4180() {
        let csv = render(.csv)
        #expect(csv.hasPrefix("i,r,t,b,n\r\n9223372036854775807,0.1,plain,00FF,\r\n"))
        #expect(csv.contains("-1,-0.0,\"a,\"\"b\"\"\r\nc|d\te\\\",,\r\n"))
        #expect(!render(.csv, headers: false).hasPrefix("i,"))
    }

    @Test func tsvEscapesControlCharacters() {
        let tsv = render(.tsv)
        #expect(tsv.contains("-1\t-0.0\ta,\"b\"\\r\\nc|d\\te\\\\\t\t\n"))
    }

    @Test func tableAndMarkdownAreForPeople() {
        let table = render(.table)
        #expect(table.hasPrefix("i                    r       t"))
        #expect(table.contains("NULL"))
        #expect(table.contains("x'00FF'"))
        #expect(table.contains("a,\"b\"\\r\\nc|d\\te\\"), "CR LF made visible: \(table)")
        #expect(table.split(separator: "\n").count == 5)
        let markdown = render(.markdown)
        #expect(markdown.hasPrefix("| i | r | t | b | n |\n| --- | --- | --- | --- | --- |\n"))
        #expect(markdown.contains("c\\|d"))
    }
}
