// `litectl stats` output: the columns every row format shows, the JSON report
// (the input of `--compare`), and growth per object between two reports.
// Keys and columns are documented in man/litectl-stats.1; add, never rename.
import Foundation

extension FileStats {
    /// Column names of a row of object statistics, in order.
    public static let columns = [
        "name", "kind", "table", "pages", "bytes", "share_percent", "leaf_pages", "interior_pages", "overflow_pages",
        "entries", "payload", "unused", "unused_percent", "avg_payload", "max_payload", "overflow_entries", "depth",
        "fragmentation_percent",
    ]

    /// One object's row, matching `columns`.
    public func row(_ o: ObjectStats) -> [Value] {
        let bytes = o.bytes(pageSize: pageSize)
        return [
            .text(o.name), .text(o.kind.rawValue), .text(o.table), .integer(o.pages), .integer(bytes),
            .real(rounded(sharePercent(o))), .integer(o.leafPages), .integer(o.interiorPages), .integer(o.overflowPages),
            .integer(o.entries), .integer(o.payload), .integer(o.unused),
            .real(bytes == 0 ? 0 : rounded(Double(o.unused) * 100 / Double(bytes))),
            .real(rounded(o.averagePayload)), .integer(o.maxPayload), .integer(o.overflowEntries), .integer(o.depth),
            .real(rounded(o.fragmentationPercent)),
        ]
    }

    /// The report as one JSON document, keys in a fixed order: path,
    /// page_size, page_count, freelist_pages, pointer_map_pages, used_pages,
    /// bytes_in_use, unused_percent, file_size, wal_size, objects [rows], tables [rows].
    public var json: JSON {
        func rows(_ list: [ObjectStats]) -> JSON {
            .array(list.map { o in
                .object(zip(FileStats.columns, row(o)).map { name, value in
                    switch value {
                    case .integer(let i): (name, .integer(i))
                    case .real(let d): (name, .number(d))
                    default: (name, .string(String(decoding: value.bytesForDisplay, as: UTF8.self)))
                    }
                })
            })
        }
        return .object([
            ("path", .string(path)),
            ("page_size", .integer(pageSize)),
            ("page_count", .integer(pageCount)),
            ("freelist_pages", .integer(freelistPages)),
            ("pointer_map_pages", .integer(pointerMapPages)),
            ("used_pages", .integer(usedPages)),
            ("bytes_in_use", .integer(bytesInUse)),
            ("unused_percent", .number(rounded(unusedPercent))),
            ("file_size", .optional(fileSize) { .integer($0) }),
            ("wal_size", .optional(walSize) { .integer($0) }),
            ("objects", rows(objects)),
            ("tables", rows(tables)),
        ])
    }

    /// The file totals as `label  value` pairs, for the text summary.
    public var summary: [(String, String)] {
        [
            ("file", path),
            ("page size", "\(pageSize)"),
            ("pages", "\(pageCount) (\(humanBytes(pageCount * pageSize)))"),
            ("in b-trees", "\(usedPages) pages, \(humanBytes(bytesInUse)) in use"),
            ("freelist", "\(freelistPages) pages (\(formatPercent(pageCount == 0 ? 0 : Double(freelistPages) * 100 / Double(pageCount))))"),
            ("pointer map", "\(pointerMapPages) pages"),
            ("unused", formatPercent(unusedPercent) + " of the file (free pages and unused bytes on pages)"),
            ("wal", walSize.map { "\($0) bytes" } ?? "none"),
        ]
    }
}

func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }

/// Growth of each object between an earlier `stats --format json` report and now.
public struct StatsComparison: Sendable {
    public struct Change: Sendable {
        public var name: String
        public var kind: String
        public var oldPages: Int64?
        public var newPages: Int64?
        public var oldEntries: Int64?
        public var newEntries: Int64?
    }

    public var oldPageCount: Int64
    public var newPageCount: Int64
    public var pageSize: Int64
    /// Largest growth first; objects only in one report included.
    public var changes: [Change]

    public static let columns = ["name", "kind", "old_pages", "new_pages", "page_change", "byte_change", "growth_percent",
                                 "old_entries", "new_entries", "entry_change"]

    public func row(_ c: Change) -> [Value] {
        let change = (c.newPages ?? 0) - (c.oldPages ?? 0)
        let growth: Value = (c.oldPages ?? 0) > 0 ? .real(rounded(Double(change) * 100 / Double(c.oldPages!))) : .null
        return [.text(c.name), .text(c.kind), c.oldPages.map(Value.integer) ?? .null, c.newPages.map(Value.integer) ?? .null,
                .integer(change), .integer(change * pageSize), growth,
                c.oldEntries.map(Value.integer) ?? .null, c.newEntries.map(Value.integer) ?? .null,
                .integer((c.newEntries ?? 0) - (c.oldEntries ?? 0))]
    }

    /// Compares `new` with the report in `oldJSON` (the bytes of a
    /// `stats --format json` output); `tables` compares tables with their
    /// indexes instead of each b-tree.
    public init(oldJSON: [UInt8], oldPath: String, new: FileStats, tables: Bool) throws {
        func bad(_ why: String) -> DatabaseError {
            DatabaseError(code: .error, message: "not a litectl stats JSON report (\(why))", path: oldPath)
        }
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: Data(oldJSON)) } catch { throw bad("invalid JSON") }
        guard let document = parsed as? [String: Any] else { throw bad("not a JSON object") }
        let key = tables ? "tables" : "objects"
        guard let rows = document[key] as? [[String: Any]] else { throw bad("no \"\(key)\" array") }
        func integer(_ any: Any?) -> Int64? { (any as? NSNumber)?.int64Value }
        oldPageCount = integer(document["page_count"]) ?? 0
        newPageCount = new.pageCount
        pageSize = new.pageSize

        var byKey: [String: Change] = [:]
        var order: [String] = []
        for row in rows {
            guard let name = row["name"] as? String, let kind = row["kind"] as? String else { throw bad("a row without name or kind") }
            let k = kind + "\u{0}" + name
            byKey[k] = Change(name: name, kind: kind, oldPages: integer(row["pages"]), newPages: nil,
                              oldEntries: integer(row["entries"]), newEntries: nil)
            order.append(k)
        }
        for object in tables ? new.tables : new.objects {
            let k = object.kind.rawValue + "\u{0}" + object.name
            if byKey[k] == nil {
                byKey[k] = Change(name: object.name, kind: object.kind.rawValue, oldPages: nil, newPages: nil, oldEntries: nil, newEntries: nil)
                order.append(k)
            }
            byKey[k]!.newPages = object.pages
            byKey[k]!.newEntries = object.entries
        }
        changes = order.map { byKey[$0]! }.sorted { a, b in
            let da = (a.newPages ?? 0) - (a.oldPages ?? 0), db = (b.newPages ?? 0) - (b.oldPages ?? 0)
            return da != db ? da > db : Array(a.name.utf8).lexicographicallyPrecedes(Array(b.name.utf8))
        }
    }
}
