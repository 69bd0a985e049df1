// What a recovery did, for people (text) and machines (JSON, keys in a fixed
// order): per table the rows copied, the rows sent to lost_and_found, the
// pages read and found damaged; for the file the damaged pages, pages no
// b-tree reached, the freelist, schema objects that could not be made again,
// foreign keys the salvage left without their parent rows, and whether the
// source was sound and copied whole (exit 0) or not (exit 1).

/// The outcome of `Recovery.run`.
public struct RecoveryReport: Sendable {
    public struct TableResult: Sendable {
        /// The table's name in the new database.
        public var name: String
        /// Its root page in the damaged file (for a table made for pages
        /// whose schema is lost, the page its rows were found under).
        public var root: UInt32
        public var rows: Int
        /// Rows of this table put in lost_and_found instead.
        public var lostAndFoundRows: Int
        public var pagesRead: Int
        public var pagesDamaged: Int
        /// Pages no b-tree reached any more, given back to this table.
        public var pagesAttached: Int
        /// Made for rows whose table's schema was lost (columns c0, c1, ...).
        public var generic: Bool
        /// Something of it was damaged or could not be copied.
        public var damaged: Bool
        /// Its b-trees were sound, and SQLite copied them with its indexes as
        /// they were (rather than row by row and index by index).
        public var treeCopied: Bool
    }

    /// An R*Tree virtual table: copied as it was, or built again through its
    /// module from the entries its salvaged nodes still hold.
    public struct RTreeResult: Sendable {
        public var name: String
        /// Entries in the new table.
        public var entries: Int
        /// Entries known lost: `_rowid` rows whose entry no node holds any
        /// more (nor lost_and_found).
        public var entriesLost: Int
        /// Entries the module refused (a box whose minimum exceeds its
        /// maximum), kept in lost_and_found instead.
        public var entriesInLostAndFound: Int
        /// Built again (its shadow rows did not form a sound tree).
        public var rebuilt: Bool
        /// Why it was built again.
        public var problem: String?
    }

    /// Rows of one foreign key of the new database whose parent row is
    /// missing (lost with a damaged page), as PRAGMA foreign_key_check
    /// reports them: `check` on the new database fails on them.
    public struct ForeignKeyOrphans: Sendable {
        /// The child table.
        public var table: String
        /// The foreign key's columns in `table`.
        public var columns: [String]
        /// The parent table.
        public var parent: String
        /// The parent's columns the key names (empty: its primary key).
        public var parentColumns: [String]
        /// Rows of `table` whose parent row is missing.
        public var rows: Int
    }

    /// A schema object that could not be made in the new database.
    public struct ObjectFailure: Sendable {
        public var type: String
        public var name: String
        public var message: String
    }

    public var source: String
    public var output: String
    public var pageSize: Int
    public var pageCount: Int
    public var encoding: String
    /// Committed pages read from the -wal.
    public var walPages: Int
    public var tables: [TableResult]
    public var lostAndFoundTable: String?
    public var lostAndFoundRows: Int
    /// A page found damaged, and what was wrong with it.
    public struct DamagedPage: Sendable {
        public var page: UInt32
        public var problem: String
    }

    /// Pages found damaged (unreadable, malformed, or in the wrong place), in order.
    public var damagedPages: [DamagedPage]
    /// Cells that could not be read as a record at all, and are lost (a
    /// sqlite_schema cell that is no schema row).
    public var unreadableCells: Int
    /// Cells whose record is damaged (its header does not describe its
    /// payload): kept in lost_and_found with the fields that could be read,
    /// as the recover extension reads them.
    public var damagedRecords: Int
    /// B-tree pages no b-tree reached (not counting the freelist's).
    public var orphanPages: Int
    /// Pages nothing accounts for that are no b-tree page (lost overflow pages, zeroed or garbled pages).
    public var unaccountedPages: Int
    /// The R*Trees (in name order).
    public var rtrees: [RTreeResult]
    public var freelistPages: Int
    /// Rows on free pages that were not taken back (deleted rows).
    public var freelistRowsIgnored: Int
    public var schemaDamaged: Bool
    public var objectsNotRecreated: [ObjectFailure]
    /// Foreign keys with rows whose parent row the salvage lost (by child
    /// table, then key). Looked for only when the source was damaged: a
    /// sound source's rows are all copied, so OUT has the source's orphans,
    /// if any, and no others.
    public var foreignKeyOrphans: [ForeignKeyOrphans] = []
    /// What was wrong with the file itself (header, freelist, -wal, size).
    public var problems: [String]
    /// The source was sound and every row was copied.
    public var sound: Bool
    /// Copies stopped, or never begun, because the proof refused their
    /// tables' b-trees (for the tests; not in the report).
    var copiesRefused = 0

    public var rowsRecovered: Int { tables.reduce(0) { $0 + $1.rows } }

    /// 0 when the source was sound and all was copied, 1 otherwise.
    public var exitCode: Int32 { sound ? 0 : 1 }

    public var json: JSON {
        .object([
            ("source", .string(source)),
            ("output", .string(output)),
            ("status", .string(sound ? "sound" : "damaged")),
            ("page_size", .integer(Int64(pageSize))),
            ("page_count", .integer(Int64(pageCount))),
            ("encoding", .string(encoding)),
            ("wal_pages", .integer(Int64(walPages))),
            ("rows_recovered", .integer(Int64(rowsRecovered))),
            ("lost_and_found", .object([
                ("table", .optional(lostAndFoundTable) { .string($0) }),
                ("rows", .integer(Int64(lostAndFoundRows))),
            ])),
            ("tables", .array(tables.map { table in
                .object([
                    ("name", .string(table.name)),
                    ("root_page", .integer(Int64(table.root))),
                    ("rows", .integer(Int64(table.rows))),
                    ("lost_and_found_rows", .integer(Int64(table.lostAndFoundRows))),
                    ("pages_read", .integer(Int64(table.pagesRead))),
                    ("pages_damaged", .integer(Int64(table.pagesDamaged))),
                    ("pages_attached", .integer(Int64(table.pagesAttached))),
                    ("schema_lost", .bool(table.generic)),
                    ("damaged", .bool(table.damaged)),
                    ("tree_copied", .bool(table.treeCopied)),
                ])
            })),
            ("rtrees", .array(rtrees.map { rtree in
                .object([
                    ("name", .string(rtree.name)),
                    ("entries", .integer(Int64(rtree.entries))),
                    ("entries_lost", .integer(Int64(rtree.entriesLost))),
                    ("entries_in_lost_and_found", .integer(Int64(rtree.entriesInLostAndFound))),
                    ("rebuilt", .bool(rtree.rebuilt)),
                    ("problem", .optional(rtree.problem) { .string($0) }),
                ])
            })),
            ("damaged_pages", .array(damagedPages.map { .object([("page", .integer(Int64($0.page))), ("problem", .string($0.problem))]) })),
            ("unreadable_cells", .integer(Int64(unreadableCells))),
            ("damaged_records", .integer(Int64(damagedRecords))),
            ("orphan_pages", .integer(Int64(orphanPages))),
            ("unaccounted_pages", .integer(Int64(unaccountedPages))),
            ("freelist_pages", .integer(Int64(freelistPages))),
            ("freelist_rows_ignored", .integer(Int64(freelistRowsIgnored))),
            ("schema_damaged", .bool(schemaDamaged)),
            ("objects_not_recreated", .array(objectsNotRecreated.map { failure in
                .object([("type", .string(failure.type)), ("name", .string(failure.name)), ("message", .string(failure.message))])
            })),
            ("foreign_key_orphans", .array(foreignKeyOrphans.map { orphans in
                .object([
                    ("table", .string(orphans.table)),
                    ("columns", .array(orphans.columns.map { .string($0) })),
                    ("parent", .string(orphans.parent)),
                    ("parent_columns", .array(orphans.parentColumns.map { .string($0) })),
                    ("rows", .integer(Int64(orphans.rows))),
                ])
            })),
            ("problems", .array(problems.map { .string($0) })),
        ])
    }

    /// The report for people, one line each.
    public var lines: [String] {
        var lines: [String] = []
        let walNote = walPages > 0 ? ", \(walPages) pages from the -wal" : ""
        lines.append("\(source): \(pageCount) pages of \(pageSize) bytes, \(encoding)\(walNote)")
        if sound {
            lines.append("sound: every page accounted for; \(rowsRecovered) rows in \(tables.count) tables copied to \(output)")
            return lines
        }
        lines.append("damaged: \(rowsRecovered) rows recovered into \(output)")
        for problem in problems { lines.append("  \(problem)") }
        if !damagedPages.isEmpty {
            lines.append("  damaged pages (\(damagedPages.count)):")
            for damaged in damagedPages.prefix(10) { lines.append("    page \(damaged.page): \(damaged.problem)") }
            if damagedPages.count > 10 { lines.append("    ... (--json lists them all)") }
        }
        if schemaDamaged { lines.append("  the schema (sqlite_schema) is damaged: tables it no longer names get generic tables (recovered_root_N)") }
        if orphanPages > 0 { lines.append("  \(orphanPages) pages no b-tree reached any more were read") }
        if unaccountedPages > 0 { lines.append("  \(unaccountedPages) pages hold nothing readable (lost overflow pages, zeroed or garbled pages)") }
        if unreadableCells > 0 { lines.append("  \(unreadableCells) cells could not be read and are lost") }
        if damagedRecords > 0 {
            lines.append("  \(damagedRecords) rows whose record is damaged were kept in lost_and_found, as far as they could be read")
        }
        if freelistRowsIgnored > 0 {
            lines.append("  \(freelistRowsIgnored) rows on free pages (deleted rows) were not taken back")
        }
        let nameWidth = max(5, tables.map { $0.name.count }.max() ?? 5)
        lines.append("  " + "table".padding(nameWidth) + "       rows  lost+found  pages  damaged")
        for table in tables {
            var line = "  " + table.name.padding(nameWidth)
            line += String(table.rows).leftPadded(to: 11, with: " ")
            line += String(table.lostAndFoundRows).leftPadded(to: 12, with: " ")
            line += String(table.pagesRead).leftPadded(to: 7, with: " ")
            line += String(table.pagesDamaged).leftPadded(to: 9, with: " ")
            var marks: [String] = []
            if table.generic { marks.append("schema lost") }
            if table.pagesAttached > 0 { marks.append("\(table.pagesAttached) unreached pages taken back") }
            if !marks.isEmpty { line += "  (" + marks.joined(separator: "; ") + ")" }
            lines.append(line)
        }
        if let lostAndFoundTable, lostAndFoundRows > 0 {
            lines.append("  \(lostAndFoundRows) rows could not be placed: see table \(lostAndFoundTable) (rootpgno, pgno, cell, nfield, id, reason, c0, ...)")
        }
        for failure in objectsNotRecreated {
            lines.append("  not recreated: \(failure.type) \(failure.name): \(failure.message)")
        }
        if !foreignKeyOrphans.isEmpty {
            let total = foreignKeyOrphans.reduce(0) { $0 + $1.rows }
            lines.append("  \(total) rows refer to a parent row that was lost (foreign_key_check, and so check, fails on them):")
            for orphans in foreignKeyOrphans {
                let parentColumns = orphans.parentColumns.isEmpty ? "" : "(\(orphans.parentColumns.joined(separator: ", ")))"
                lines.append("    \(orphans.table)(\(orphans.columns.joined(separator: ", "))) -> \(orphans.parent)\(parentColumns): \(orphans.rows) rows")
            }
        }
        return lines
    }
}

private extension String {
    /// The string padded with spaces on the right to `width` characters.
    func padding(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
