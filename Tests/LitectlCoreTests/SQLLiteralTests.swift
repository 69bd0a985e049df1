// The literal writer, judged by the real sqlite3 CLI: every literal is parsed
// by the shell, stored, and read back (typeof/hex in the shell, bit patterns
// through the C API) to be compared with the value it came from.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct SQLLiteralTests {
    /// Writes `values` as literals into `t(id, v)` (v untyped, so no affinity
    /// changes them) with the sqlite3 shell, and reads them back.
    func roundTrip(_ values: [Value]) throws -> [Value] {
        let folder = try TemporaryFolder("literal")
        let db = folder.file("t.db")
        var script: [UInt8] = Array("CREATE TABLE t(id INTEGER PRIMARY KEY, v);\nBEGIN;\n".utf8)
        for (i, value) in values.enumerated() {
            script.append(contentsOf: "INSERT INTO t VALUES(\(i),".utf8)
            value.appendSQLLiteral(to: &script)
            script.append(contentsOf: ");\n".utf8)
        }
        script.append(contentsOf: "COMMIT;\n".utf8)
        let result = try runProcess(sqlite3Binary, ["-batch", "-bail", db], input: script)
        #expect(result.status == 0, "sqlite3 rejected the script: \(result.stderr)")
        let connection = try Connection(path: db)
        return try connection.rows("SELECT v FROM t ORDER BY id").map { $0[0] }
    }

    @Test func aMillionRandomDoublesReadBackBitForBit() throws {
        var rng = SplitMix64(state: 0x5EED)
        var values: [Value] = []
        values.reserveCapacity(1_000_000)
        // Half: uniformly random bit patterns (every exponent, subnormals, NaNs, infinities).
        for _ in 0..<500_000 { values.append(.real(Double(bitPattern: rng.next()))) }
        // Half: everyday magnitudes, where decimal parsing goes wrong most often.
        for _ in 0..<500_000 {
            let scale = Double(sign: .plus, exponent: Int(rng.next() % 80) - 40, significand: 1)
            values.append(.real(Double.random(in: -1...1, using: &rng) * scale))
        }
        let specials: [Double] = [0.0, -0.0, .infinity, -.infinity, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
                                  .leastNormalMagnitude, .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 0.1, 1e308,
                                  2.2250738585072009e-308, 9007199254740993, 9007199254740992, 1.0, -1.5, .pi, 1e-320]
        values.append(contentsOf: specials.map { .real($0) })

        let back = try roundTrip(values)
        #expect(back.count == values.count)
        var mismatches: [(Double, Value)] = []
        for (value, read) in zip(values, back) {
            guard case .real(let d) = value else { continue }
            // SQLite stores no NaN: it becomes NULL.
            let expected: Value = d.isNaN ? .null : value
            if read != expected, mismatches.count < 5 { mismatches.append((d, read)) }
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.map { "\($0.0) (\(String($0.0.bitPattern, radix: 16))) read back as \($0.1)" })")
    }

    @Test func specialDoublesHaveTheirReadableForms() {
        #expect(Value.real(0.0).sqlLiteral == "0.0")
        #expect(Value.real(-0.0).sqlLiteral == "-0.0")
        #expect(Value.real(.infinity).sqlLiteral == "9e999")
        #expect(Value.real(-.infinity).sqlLiteral == "-9e999")
        #expect(Value.real(.nan).sqlLiteral == "NULL")
        #expect(Value.real(42).sqlLiteral == "42.0")
        #expect(Value.real(0.5).sqlLiteral == "(1.0/2)")
        #expect(Value.real(-0.75).sqlLiteral == "(-3.0/4)")
    }

    @Test func integersTextAndBlobsSurviveTheShell() throws {
        let texts: [[UInt8]] = [
            [], Array("plain".utf8), Array("it's \"quoted\"".utf8), Array("line1\nline2".utf8),
            Array("dos\r\nline".utf8), Array("lone\rcr".utf8), [0x61, 0x00, 0x62], [0x00],
            [0xFF, 0xFE, 0x41], [0xC0, 0x80], Array("e\u{301}".utf8), Array("\u{E9}".utf8),
            Array("日本語 🎉 Zoë".utf8), Array(String(repeating: "x'", count: 50_000).utf8),
            Array("'); DROP TABLE t; --".utf8),
        ]
        var values: [Value] = texts.map { .text($0) }
        values += [.blob([]), .blob([0]), .blob(Array(0...255)), .blob([UInt8](repeating: 0xAB, count: 200_000))]
        values += [.integer(0), .integer(-1), .integer(.max), .integer(.min), .integer(1 << 53 + 1), .null]

        let back = try roundTrip(values)
        for (value, read) in zip(values, back) {
            #expect(read == value, "\(value.typeName) value read back as \(read.typeName)")
        }

        // And as the shell itself sees them: typeof() and hex() of what it stored.
        let folder = try TemporaryFolder("literal-shell")
        let db = folder.file("t.db")
        var script = "CREATE TABLE t(id INTEGER PRIMARY KEY, v);\n"
        for (i, value) in values.enumerated() { script += "INSERT INTO t VALUES(\(i), \(value.sqlLiteral));\n" }
        try makeDatabase(db, script)
        let lines = try sqlite3(["-batch", db, "SELECT typeof(v) || ' ' || hex(v) FROM t ORDER BY id"])
            .split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(lines.count == values.count)
        for (value, line) in zip(values, lines) {
            let expectedHex: String
            switch value {
            case .text(let b), .blob(let b): expectedHex = b.map { String(format: "%02X", $0) }.joined()
            case .integer(let i): expectedHex = String(i).utf8.map { String(format: "%02X", $0) }.joined()
            default: expectedHex = ""
            }
            #expect(String(line) == "\(value.typeName) \(expectedHex)")
        }
    }

    /// Literals written for a UTF-16 database, run there by the sqlite3 shell
    /// and read back (as UTF-8, as litectl reads every database) byte for byte.
    @Test(arguments: [TextEncoding.utf16le, .utf16be, .utf8]) func textReadsBackInEveryEncoding(encoding: TextEncoding) throws {
        var rng = SplitMix64(seed: 0xE1C0DE)
        var texts: [[UInt8]] = [
            [], Array("plain".utf8), Array("it's".utf8), Array("dos\r\nline\r".utf8), [0x61, 0x00, 0x62], [0x00],
            Array("\u{FFFF}\u{FFFE}\u{FFFD}".utf8), Array("\u{FEFF}bom".utf8), Array("e\u{301} \u{E9} 日本語 🎉".utf8),
            Array("\u{1FFFF}\u{10FFFF}\u{E000}".utf8), Array("x\u{FFFF}\r".utf8),
        ]
        // Random strings over every plane, with the characters that need care mixed in.
        let picks: [Unicode.Scalar] = ["\0", "\r", "\n", "'", "\u{FFFE}", "\u{FFFF}", "\u{FEFF}", "a"]
        for _ in 0..<300 {
            var string = ""
            for _ in 0..<(rng.next() % 12) {
                if rng.next() % 3 == 0 { string.unicodeScalars.append(picks[Int(rng.next() % UInt64(picks.count))]); continue }
                let limit: UInt64 = [0x80, 0x800, 0x10000, 0x110000][Int(rng.next() % 4)]
                if let scalar = Unicode.Scalar(UInt32(rng.next() % limit)) { string.unicodeScalars.append(scalar) }
            }
            texts.append(Array(string.utf8))
        }
        let folder = try TemporaryFolder("literal-utf16")
        let db = folder.file("t.db")
        var script: [UInt8] = Array("PRAGMA encoding='\(encoding.rawValue)';\nCREATE TABLE t(id INTEGER PRIMARY KEY, v);\nBEGIN;\n".utf8)
        for (i, text) in texts.enumerated() {
            script.append(contentsOf: "INSERT INTO t VALUES(\(i),".utf8)
            try Value.text(text).appendSQLLiteral(to: &script, encoding: encoding)
            script.append(contentsOf: ");\n".utf8)
        }
        script.append(contentsOf: "COMMIT;\n".utf8)
        let result = try runProcess(sqlite3Binary, ["-batch", "-bail", db], input: script)
        #expect(result.status == 0, "sqlite3 rejected the script: \(result.stderr)")
        #expect(try sqlite3Scalar(db, "PRAGMA encoding") == encoding.rawValue)
        let back = try Connection(path: db).rows("SELECT v FROM t ORDER BY id").map { $0[0] }
        #expect(back.count == texts.count)
        for (text, read) in zip(texts, back) where read != .text(text) {
            Issue.record("\(Value.blob(text).sqlLiteral) read back as \(read)")
        }
    }

    @Test func textForUTF16IsWrittenAsItsCodeUnits() throws {
        func literal(_ bytes: [UInt8], _ encoding: TextEncoding) throws -> String {
            var out: [UInt8] = []
            try Value.text(bytes).appendSQLLiteral(to: &out, encoding: encoding)
            return String(decoding: out, as: UTF8.self)
        }
        #expect(try literal(Array("a\r".utf8), .utf16le) == "CAST(x'61000D00' AS TEXT)")
        #expect(try literal(Array("a\r".utf8), .utf16be) == "CAST(x'0061000D' AS TEXT)")
        #expect(try literal(Array("a\r".utf8), .utf8) == "CAST(x'610D' AS TEXT)")
        #expect(try literal(Array("\u{FFFF}".utf8), .utf16le) == "CAST(x'FFFF' AS TEXT)")
        #expect(try literal(Array("\u{FFFF}".utf8), .utf8) == "'\u{FFFF}'")
        #expect(try literal(Array("🎉\0".utf8), .utf16be) == "CAST(x'D83CDF890000' AS TEXT)")
        #expect(try literal(Array("plain é".utf8), .utf16le) == "'plain é'")
        // A lone surrogate at the end (what SQLite reads out of UTF-16 holding one) goes back as that unit.
        #expect(try literal([0x41, 0xED, 0xA0, 0x80], .utf16le) == "CAST(x'410000D8' AS TEXT)")
        // Anything else that is not UTF-8 has no exact UTF-16 form.
        for bytes: [UInt8] in [[0xFF], [0x41, 0x80], [0xC0, 0x80], [0xED, 0xA0, 0x80, 0x41], [0xE2, 0x82], [0xF4, 0x90, 0x80, 0x80]] {
            #expect(throws: UnrepresentableTextError.self) { try literal(bytes, .utf16le) }
            #expect(try literal(bytes, .utf8).hasPrefix("CAST(x'"))
        }
    }

    @Test func textWithCRorNULIsWrittenFromItsBytes() {
        #expect(Value.text([0x61, 0x0D, 0x0A]).sqlLiteral == "CAST(x'610D0A' AS TEXT)")
        #expect(Value.text([0x61, 0x00]).sqlLiteral == "CAST(x'6100' AS TEXT)")
        #expect(Value.text("a\nb").sqlLiteral == "'a\nb'")
        #expect(Value.text("O'Brien").sqlLiteral == "'O''Brien'")
        #expect(Value.blob([0x31]).sqlLiteral == "x'31'")
        #expect(Value.integer(.min).sqlLiteral == "-9223372036854775808")
    }
}
