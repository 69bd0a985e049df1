// CSV and JSON Lines dumps: a folder that loads back into the same database
// (litectl hash, sqldiff), values typed exactly field by field, file names
// that stand for any table name, and a folder that appears whole or not at all.
import Foundation
import Testing
@testable import LitectlCore
import TestSupport

@Suite struct RowFileDumpTests {
    @Test(arguments: [RowFileFormat.csv, .jsonl])
    func aFolderLoadsBackIntoTheSameDatabase(format: RowFileFormat) throws {
        let folder = try TemporaryFolder("rowfiles")
        var fixture = EveryTypeDatabase()
        fixture.contentless = false
        fixture.seed = 11
        let db = folder.file("r.db")
        try fixture.make(at: db)
        let out = folder.file("out")
        let summary = try RowFileDump.write(path: db, options: DumpOptions(), format: format, output: out, replace: false)
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names.contains("schema.sql"))
        #expect(names.contains("odd \"name\" %2F x.\(format.rawValue)"))
        #expect(names.contains("sqlite_sequence.\(format.rawValue)"))
        #expect(!names.contains { $0.hasPrefix("docs_") }, "shadow tables travel through their virtual table")
        #expect(summary.tables.first { $0.name == "plain" }?.rows == Int64(try sqlite3Scalar(db, "SELECT count(*) FROM plain")))

        let copy = folder.file("copy.db")
        let loaded = try Loader.load(into: copy, from: .folder(out))
        #expect(loaded.files.count == summary.tables.count)
        #expect(try contentHash(copy) == contentHash(db))
        // Rowids too, and the triggers came after the rows (the log holds only the original's rows).
        let diff = try runProcess("/usr/bin/sqldiff", ["--table", "plain", db, copy])
        #expect(diff.stdout.isEmpty, "\(diff.stdout.prefix(300))")
        #expect(try sqlite3Scalar(copy, "SELECT count(*) FROM log") == sqlite3Scalar(db, "SELECT count(*) FROM log"))
        #expect(try sqlite3Scalar(copy, "PRAGMA integrity_check") == "ok")
        try sqlite3(["-batch", "-bail", copy], input: "INSERT INTO docs(docs) VALUES('integrity-check');")
        #expect(try sqlite3Scalar(copy, "SELECT rtreecheck('places')") == "ok")
    }

    @Test func realDatabaseFilesThroughCSV() throws {
        guard !realDatabaseFiles.isEmpty else { return }
        let folder = try TemporaryFolder("rowfiles-real")
        for (i, path) in realDatabaseFiles.enumerated() {
            let out = folder.file("out\(i)")
            _ = try RowFileDump.write(path: path, options: DumpOptions(), format: .csv, output: out, replace: false)
            let copy = folder.file("copy\(i).db")
            _ = try Loader.load(into: copy, from: .folder(out))
            #expect(try contentHash(copy) == contentHash(path), "\(path)")
        }
    }

    @Test func csvFieldsKeepTheirStorageClass() throws {
        let values: [Value] = [.null, .integer(0), .integer(Int64.min), .integer(Int64.max), .real(-0.0), .real(1.0), .real(.infinity),
                               .real(-.infinity), .real(5e-324), .real(1.7976931348623157e308), .real(0.1), .text(""), .text("12"),
                               .text("x'00'"), .text("a,\"b\"\r\nc\0d"), .text([0xFF, 0x41]), .blob([]), .blob([0, 1, 0xAB])]
        var line: [UInt8] = []
        for (i, value) in values.enumerated() {
            if i > 0 { line.append(UInt8(ascii: ",")) }
            value.withCell { TypedCSV.appendField($0, to: &line) }
        }
        line.append(contentsOf: [0x0D, 0x0A])
        let folder = try TemporaryFolder("csv-fields")
        try Data(line).write(to: URL(fileURLWithPath: folder.file("f.csv")))
        var reader = CSVRecordReader(input: try InputLines(path: folder.file("f.csv")))
        let record = try #require(try reader.next())
        #expect(record.map { TypedCSV.value($0.bytes, quoted: $0.quoted) } == values)
        let end = try reader.next()
        #expect(end == nil)
        // Unquoted text from elsewhere stays TEXT; numbers by their form.
        #expect(TypedCSV.value(Array("hello".utf8), quoted: false) == .text("hello"))
        #expect(TypedCSV.value(Array("1e5".utf8), quoted: false) == .real(100000))
        #expect(TypedCSV.value(Array("99999999999999999999".utf8), quoted: false) == .real(1e20))
    }

    @Test func csvRecordsSpanLinesAndEndWithCRLFOrLF() throws {
        let folder = try TemporaryFolder("csv-reader")
        let path = folder.file("t.csv")
        try Data("\"a\",\"b\"\r\n\"x\r\ny\",1\n,\"\"\"q\"\"\"\r\nx'0A',t'FF'".utf8).write(to: URL(fileURLWithPath: path))
        var reader = CSVRecordReader(input: try InputLines(path: path))
        var records: [[Value]] = []
        while let record = try reader.next() { records.append(record.map { TypedCSV.value($0.bytes, quoted: $0.quoted) }) }
        #expect(records == [[.text("a"), .text("b")], [.text("x\r\ny"), .integer(1)], [.null, .text("\"q\"")], [.blob([0x0A]), .text([0xFF])]])
    }

    @Test func jsonRowsParseBackExactly() throws {
        let values: [Value] = [.null, .integer(-9_007_199_254_740_993), .real(0.1), .real(-0.0), .real(.infinity), .real(5e-324),
                               .text("é\n\"\\\u{1}😀"), .text([0xC3]), .blob([1, 2]), .blob([])]
        let sink = MemorySink()
        let writer = RowWriter(format: .jsonl, sink: sink)
        writer.begin(columns: values.indices.map { "c\($0)" })
        writer.write(values)
        let members = try JSONRowParser.parseObject(ArraySlice(sink.bytes))
        #expect(members.map(\.value) == values)
        #expect(members.map(\.key) == values.indices.map { "c\($0)" })
        #expect(try JSONRowParser.parseObject(ArraySlice(Array("{\"a\": \"\\ud83d\\ude00\", \"b\": true}".utf8))).map(\.value)
                == [.text("😀"), .integer(1)])
        #expect(throws: JSONRowParser.Failure.self) { try JSONRowParser.parseObject(ArraySlice(Array("{\"a\": [1]}".utf8))) }
    }

    @Test func fileNamesStandForAnyTableName() {
        for name in ["plain", "a/b", ".hidden", "50%", "tab\there", "Café", "odd \"name\""] {
            let file = RowFileDump.fileName(for: name, format: .csv)
            #expect(!file.contains("/") && !file.hasPrefix("."))
            #expect(RowFileDump.tableName(forFile: "/some/folder/" + file) == name)
        }
    }

    @Test func anExistingFolderIsReplacedOnlyWithForceAndWhole() throws {
        let folder = try TemporaryFolder("rowfiles-replace")
        let db = folder.file("r.db")
        try makeDatabase(db, "CREATE TABLE t(a); INSERT INTO t VALUES (1), (2);")
        let out = folder.file("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        // An earlier dump's file (--force replaces only a folder of those).
        try "keep".write(toFile: out + "/old.csv", atomically: false, encoding: .utf8)
        #expect(throws: DatabaseError.self) {
            _ = try RowFileDump.write(path: db, options: DumpOptions(), format: .csv, output: out, replace: false)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == ["old.csv"])
        _ = try RowFileDump.write(path: db, options: DumpOptions(), format: .csv, output: out, replace: true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).sorted() == ["schema.sql", "t.csv"])
        #expect(try String(contentsOfFile: out + "/t.csv", encoding: .utf8) == "\"rowid\",\"a\"\r\n1,1\r\n2,2\r\n")
        #expect(try folder.listing() == ["out", "r.db"], "no hidden folder left behind")

        // A hidden folder of a killed run (its process gone) is removed by the next dump.
        let stale = folder.file(".out.tmp-\(try deadProcessID())-1")
        try FileManager.default.createDirectory(atPath: stale, withIntermediateDirectories: false)
        try "x".write(toFile: stale + "/t.csv", atomically: false, encoding: .utf8)
        _ = try RowFileDump.write(path: db, options: DumpOptions(), format: .jsonl, output: out, replace: true)
        #expect(try folder.listing() == ["out", "r.db"])
    }
}

/// The id of a process that has ended (for names a killed run leaves).
func deadProcessID() throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    try process.run()
    process.waitUntilExit()
    return process.processIdentifier
}
