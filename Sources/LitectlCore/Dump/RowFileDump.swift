// `litectl dump --format csv|jsonl --output DIR`: one file of rows per table
// and `schema.sql` (the schema-only dump) in a folder that appears whole
// (StagedFolder, in Files/), all read from one snapshot of the database. Values keep their
// storage class: TypedCSV for CSV, the shared JSON value encoding for JSON Lines.

public enum RowFileDump {
    /// The name of the file holding `table`'s rows: the name's bytes, with
    /// `/`, `%`, control characters and a leading `.` written as `%XX`.
    public static func fileName(for table: String, format: RowFileFormat) -> String {
        var out: [UInt8] = []
        for (i, byte) in table.utf8.enumerated() {
            let escape = byte == UInt8(ascii: "/") || byte == UInt8(ascii: "%") || byte < 0x20 || byte == 0x7F
                || (i == 0 && byte == UInt8(ascii: "."))
            if escape {
                out.append(contentsOf: "%".utf8)
                out.append(contentsOf: String(byte, radix: 16, uppercase: true).leftPadded(to: 2).utf8)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self) + "." + format.rawValue
    }

    /// The table a file name stands for (the inverse of `fileName`), without its extension.
    public static func tableName(forFile name: String) -> String {
        var stem = Array(DurableFolder.baseName(of: name).utf8)
        if let dot = stem.lastIndex(of: UInt8(ascii: ".")) { stem.removeSubrange(dot...) }
        var out: [UInt8] = []
        var i = 0
        while i < stem.count {
            if stem[i] == UInt8(ascii: "%"), i + 2 < stem.count, let byte = TypedCSV.hexBytes(stem[(i + 1)...(i + 2)])?.first {
                out.append(byte)
                i += 3
            } else {
                out.append(stem[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes the folder `output` (see the file's opening comment); `replace`
    /// swaps out an existing non-empty folder.
    public static func write(path: String, options: DumpOptions, format: RowFileFormat, output: String, replace: Bool,
                             busyTimeout: Int = Connection.defaultBusyTimeout) throws -> DumpSummary {
        try SameFileRule.require(output: output, apartFrom: [path], what: "the database being dumped")
        try SameFileRule.require(folder: output, notHolding: [path], what: "the database being dumped")
        let connection = try Connection(path: path, mode: .readOnly, busyTimeout: busyTimeout)
        defer { try? connection.close() }
        try connection.execute("PRAGMA cell_size_check=ON")
        let folder = try StagedFolder(finalPath: output, replace: replace,
                                      isOwnFile: { $0 == "schema.sql" || RowFileFormat.of(path: $0) != nil })
        let summary = try connection.readTransaction { () -> DumpSummary in
            let plan = try DumpPlan.read(connection, options: options)
            var summary = DumpSummary()
            if options.includeSchema {
                var schemaOnly = options
                schemaOnly.includeData = false
                try folder.writeFile("schema.sql") { sink in
                    var writer = ScriptWriter(connection: connection, plan: plan, options: schemaOnly, sink: sink)
                    try writer.writeAll()
                }
            }
            guard options.includeData else { return summary }
            var used = Set<[UInt8]>()
            for table in plan.rowFileTables {
                let name = fileName(for: table.name, format: format)
                guard name.utf8.count <= 255, used.insert(Array(name.utf8)).inserted else {
                    throw DatabaseError(code: .error, message: "table \(quoteIdentifier(table.name)) has no file name of its own", path: output)
                }
                var rows: Int64 = 0
                try folder.writeFile(name) { sink in
                    rows = try writeRows(table, plan: plan, format: format, connection: connection, sink: sink)
                }
                summary.tables.append(DumpSummary.TableRows(name: table.name, rows: rows, file: folder.finalPath + "/" + name))
                if table.rowidUnnamed { summary.rowidsNotKept.append(table.name) }
            }
            return summary
        }
        try folder.commit()
        return summary
    }

    static func writeRows(_ table: DumpTable, plan: DumpPlan, format: RowFileFormat, connection: Connection,
                          sink: ByteSink) throws -> Int64 {
        let columns = table.writtenColumns
        let bookkeeping = table.role == .sequence || table.role == .statistics
        let keep: (WideRow) -> Bool = { row in
            !plan.isSubset || !bookkeeping || plan.selectedKeys.contains(Array(row.bytes(at: 0)).map(asciiLower))
        }
        var written: Int64 = 0
        switch format {
        case .csv:
            var line: [UInt8] = []
            for (i, name) in columns.enumerated() {
                if i > 0 { line.append(UInt8(ascii: ",")) }
                Array(name.utf8).withUnsafeBytes { TypedCSV.appendQuotedField($0, to: &line) }
            }
            line.append(contentsOf: [0x0D, 0x0A])
            sink.write(line)
            _ = try TableRows.forEach(table, connection: connection) { row in
                guard keep(row) else { return }
                line.removeAll(keepingCapacity: true)
                for i in 0..<columns.count {
                    if i > 0 { line.append(UInt8(ascii: ",")) }
                    TypedCSV.appendField(row.cell(at: i), to: &line)
                }
                line.append(contentsOf: [0x0D, 0x0A])
                sink.write(line)
                written += 1
            }
        case .jsonl:
            let writer = RowWriter(format: .jsonl, sink: sink)
            writer.begin(columns: columns)
            _ = try TableRows.forEach(table, connection: connection) { row in
                guard keep(row) else { return }
                writer.write(count: columns.count) { row.cell(at: $0) }
                written += 1
            }
            writer.finish()
        }
        return written
    }
}
