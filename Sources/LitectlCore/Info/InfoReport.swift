// `litectl info` output: a JSON object with stable keys for scripts, and an
// aligned text report for people. The keys are documented in man/litectl-info.1
// and README.md; add keys at the end, never rename.

extension DatabaseInfo {
    /// The report as JSON, keys in a fixed order.
    public var json: JSON {
        .object([
            ("path", .string(path)),
            ("file_size", .integer(fileSize)),
            ("wal_size", .optional(walSize) { .integer($0) }),
            ("page_size", .integer(pageSize)),
            ("page_count", .integer(pageCount)),
            ("freelist_count", .integer(freelistCount)),
            ("schema_version", .integer(schemaVersion)),
            ("user_version", .integer(userVersion)),
            ("application_id", .integer(applicationID)),
            ("journal_mode", .string(journalMode)),
            ("auto_vacuum", .string(autoVacuumName)),
            ("encoding", .string(encoding)),
            ("objects", .object([
                ("tables", .integer(Int64(objects.tables))),
                ("virtual_tables", .integer(Int64(objects.virtualTables))),
                ("shadow_tables", .integer(Int64(objects.shadowTables))),
                ("internal_tables", .integer(Int64(objects.internalTables))),
                ("indexes", .integer(Int64(objects.indexes))),
                ("automatic_indexes", .integer(Int64(objects.automaticIndexes))),
                ("views", .integer(Int64(objects.views))),
                ("triggers", .integer(Int64(objects.triggers))),
            ])),
            ("schema_sql_bytes", .integer(schemaSQLBytes)),
            ("header", .optional(header) { $0.json }),
            ("header_behind_wal", .bool(headerLagsBehind)),
            ("sqlite_library_version", .string(sqliteLibraryVersion)),
        ])
    }

    /// The report for people: one `label  value` line per fact.
    public var text: String {
        var lines: [(String, String)] = []
        func add(_ label: String, _ value: String) { lines.append((label, value)) }
        add("file", TerminalText.visible(path))
        add("file size", "\(fileSize) bytes" + (fileSize >= 1024 ? " (\(humanBytes(fileSize)))" : ""))
        add("wal file", walSize.map { "\($0) bytes" + ($0 >= 1024 ? " (\(humanBytes($0)))" : "") } ?? "none")
        add("journal mode", journalMode)
        add("page size", "\(pageSize)")
        add("page count", "\(pageCount)")
        add("freelist pages", "\(freelistCount)")
        add("auto vacuum", autoVacuumName)
        add("encoding", encoding)
        add("user version", "\(userVersion)")
        add("application id", applicationIDText)
        add("schema version", "\(schemaVersion)")
        add("tables", "\(objects.tables)"
            + (objects.virtualTables + objects.shadowTables + objects.internalTables > 0
               ? " (+\(objects.virtualTables) virtual, \(objects.shadowTables) shadow, \(objects.internalTables) internal)" : ""))
        add("indexes", "\(objects.indexes)" + (objects.automaticIndexes > 0 ? " (\(objects.automaticIndexes) automatic)" : ""))
        add("views", "\(objects.views)")
        add("triggers", "\(objects.triggers)")
        add("schema size", "\(schemaSQLBytes) bytes of SQL")
        if let header {
            add("header", headerLagsBehind ? "as stored in the file (the -wal holds newer pages)" : "as stored in the file")
            add("  write/read version", "\(header.writeVersion)/\(header.readVersion)"
                + (header.writeVersion == 2 ? " (WAL)" : " (rollback journal)"))
            add("  reserved bytes", "\(header.reservedBytes)")
            add("  change counter", "\(header.changeCounter)")
            add("  page count", "\(header.pageCount)" + (header.isPageCountValid ? "" : " (not valid: computed from file size)"))
            add("  freelist trunk", "\(header.firstFreelistTrunkPage)")
            add("  freelist pages", "\(header.freelistPageCount)")
            add("  schema cookie", "\(header.schemaCookie)")
            add("  schema format", "\(header.schemaFormat)")
            add("  default cache", "\(header.defaultCacheSize)" + (header.defaultCacheSize == 0 ? " (not set: the build's default applies)" : ""))
            add("  largest root page", "\(header.largestRootPage)")
            add("  incremental vacuum", "\(header.incrementalVacuum)")
            add("  text encoding", "\(header.textEncoding)" + (header.textEncodingName.map { " (\($0))" } ?? ""))
            add("  user version", "\(header.userVersion)")
            add("  application id", "\(header.applicationID)")
            add("  version valid for", "\(header.versionValidFor)")
            add("  written by SQLite", "\(header.sqliteVersion) (\(header.sqliteVersionNumber))")
        } else {
            add("header", "none (empty file: SQLite writes the header on the first change)")
        }
        let width = lines.map { $0.0.count }.max() ?? 0
        return lines.map { $0.0.padding(to: width) + "  " + $0.1 }.joined(separator: "\n")
    }

    /// The application id in decimal, in hex, and as four characters when they
    /// are printable (GeoPackage's 0x47503130 is "GP10").
    var applicationIDText: String {
        guard applicationID != 0 else { return "0" }
        let bits = UInt32(truncatingIfNeeded: applicationID)
        var text = "\(applicationID) (0x" + String(bits, radix: 16).leftPadded(to: 8)
        let chars = (0..<4).map { UInt8(truncatingIfNeeded: bits >> (24 - 8 * $0)) }
        if chars.allSatisfy({ (0x20...0x7E).contains($0) }) {
            text += ", \"" + String(decoding: chars, as: UTF8.self) + "\""
        }
        return text + ")"
    }
}

extension DatabaseHeader {
    public var json: JSON {
        .object([
            ("page_size", .integer(Int64(pageSize))),
            ("write_version", .integer(Int64(writeVersion))),
            ("read_version", .integer(Int64(readVersion))),
            ("reserved_bytes", .integer(Int64(reservedBytes))),
            ("max_payload_fraction", .integer(Int64(maxPayloadFraction))),
            ("min_payload_fraction", .integer(Int64(minPayloadFraction))),
            ("leaf_payload_fraction", .integer(Int64(leafPayloadFraction))),
            ("change_counter", .integer(Int64(changeCounter))),
            ("page_count", .integer(Int64(pageCount))),
            ("page_count_valid", .bool(isPageCountValid)),
            ("freelist_trunk_page", .integer(Int64(firstFreelistTrunkPage))),
            ("freelist_count", .integer(Int64(freelistPageCount))),
            ("schema_cookie", .integer(Int64(schemaCookie))),
            ("schema_format", .integer(Int64(schemaFormat))),
            ("default_cache_size", .integer(Int64(defaultCacheSize))),
            ("largest_root_page", .integer(Int64(largestRootPage))),
            ("text_encoding", .integer(Int64(textEncoding))),
            ("user_version", .integer(Int64(userVersion))),
            ("incremental_vacuum", .integer(Int64(incrementalVacuum))),
            ("application_id", .integer(Int64(applicationID))),
            ("version_valid_for", .integer(Int64(versionValidFor))),
            ("sqlite_version_number", .integer(Int64(sqliteVersionNumber))),
        ])
    }
}
