// The space treemap of a database report: one rectangle per table and index,
// its area in proportion to its pages, laid out by the squarified algorithm
// (Bruls, Huizing, van Wijk 2000) first per table (a table with its indexes)
// and then per b-tree inside each table's rectangle; free pages a block of
// their own; past a few hundred tables the smallest go into one "others" block.

/// A rectangle in the treemap's coordinates.
struct TreemapRect: Equatable, Sendable {
    var x: Double
    var y: Double
    var width: Double
    var height: Double

    var area: Double { width * height }
}

enum Treemap {
    /// Lays out `weights` (each > 0, largest first) in `bounds`: one
    /// rectangle per weight, in the same order, whose areas are in
    /// proportion to the weights and which tile `bounds` exactly. Rows are
    /// filled along the shorter side while that keeps their rectangles closer
    /// to squares.
    static func squarify(_ weights: [Double], in bounds: TreemapRect) -> [TreemapRect] {
        var result = [TreemapRect](repeating: TreemapRect(x: 0, y: 0, width: 0, height: 0), count: weights.count)
        let total = weights.reduce(0, +)
        guard total > 0, bounds.area > 0 else { return result }
        let scale = bounds.area / total
        let areas = weights.map { $0 * scale }
        var free = bounds
        var start = 0
        while start < areas.count {
            let side = min(free.width, free.height)
            var end = start + 1
            var sum = areas[start]
            var worst = worstRatio(sum: sum, largest: areas[start], smallest: areas[start], side: side)
            while end < areas.count {
                let next = worstRatio(sum: sum + areas[end], largest: areas[start], smallest: areas[end], side: side)
                if next > worst { break }
                sum += areas[end]
                worst = next
                end += 1
            }
            let last = end == areas.count
            if free.width >= free.height {
                // A column at the left of the free space.
                let width = last ? free.width : min(free.width, sum / free.height)
                var y = free.y
                for i in start..<end {
                    let height = i == end - 1 ? free.y + free.height - y : areas[i] / width
                    result[i] = TreemapRect(x: free.x, y: y, width: width, height: height)
                    y += height
                }
                free.x += width
                free.width -= width
            } else {
                // A row at the top of the free space.
                let height = last ? free.height : min(free.height, sum / free.width)
                var x = free.x
                for i in start..<end {
                    let width = i == end - 1 ? free.x + free.width - x : areas[i] / height
                    result[i] = TreemapRect(x: x, y: free.y, width: width, height: height)
                    x += width
                }
                free.y += height
                free.height -= height
            }
            start = end
        }
        return result
    }

    /// The worst aspect ratio of a row of rectangles of total area `sum`
    /// laid along a side of length `side`.
    static func worstRatio(sum: Double, largest: Double, smallest: Double, side: Double) -> Double {
        let s2 = sum * sum, w2 = side * side
        return max(w2 * largest / s2, s2 / (w2 * smallest))
    }
}

/// One block of the treemap: a b-tree, the free pages, or the others.
struct TreemapBlock: Sendable {
    enum Kind: String, Sendable {
        case table, index
        /// Free pages (the freelist).
        case free
        /// Auto-vacuum pointer-map pages.
        case pointerMap = "pointer-map"
        /// Pages in no b-tree and not free (the lock-byte page of a file over 1 GiB).
        case other
        /// The smallest tables, with their indexes, in one block.
        case others
    }

    var kind: Kind
    var name: String
    var table: String
    var pages: Int64
    /// The object's statistics (nil for free pages and the others).
    var stats: ObjectStats?
    /// For `.others`: how many b-trees it holds.
    var count = 0
    var rect = TreemapRect(x: 0, y: 0, width: 0, height: 0)
}

/// The treemap of one file: which blocks are drawn, where, and which tables'
/// outlines group them.
struct TreemapLayout: Sendable {
    static let width = 1000.0
    static let height = 560.0
    /// At most this many tables are drawn one by one...
    static let maxTables = 300
    /// ...and at most this many b-trees in all...
    static let maxBlocks = 1000
    /// ...and a table smaller than this (in square units of the 1000 x 560
    /// picture) goes into the others.
    static let minTableArea = 24.0

    var blocks: [TreemapBlock] = []
    /// Each table drawn one by one, with the rectangle around its b-trees.
    var tables: [(name: String, rect: TreemapRect, blocks: Int)] = []
    var totalPages: Int64 = 0

    init(_ stats: FileStats) {
        // Tables with their b-trees, largest first.
        // Grouped by the name's bytes (ASCII case folded, as SQLite matches
        // names), never by Swift's String equality, which merges é and e + U+0301.
        var byTable: [[UInt8]: [ObjectStats]] = [:]
        for object in stats.objects where object.pages > 0 { byTable[sqlNameKey(object.table), default: []].append(object) }
        let groups = byTable.map { (name: $0.value[0].table, objects: $0.value, pages: $0.value.reduce(0) { $0 + $1.pages }) }
            .sorted { $0.pages != $1.pages ? $0.pages > $1.pages : compareNames($0.name, $1.name) }
        let free = stats.freelistPages, pointerMap = stats.pointerMapPages
        let inTrees = groups.reduce(0) { $0 + $1.pages }
        let other = max(0, stats.pageCount - inTrees - free - pointerMap)
        totalPages = inTrees + free + pointerMap + other
        guard totalPages > 0 else { return }
        let pageArea = Self.width * Self.height / Double(totalPages)

        var kept: [(name: String, objects: [ObjectStats], pages: Int64)] = []
        var keptBlocks = 0
        var others = (pages: Int64(0), count: 0, tables: 0)
        for group in groups {
            if kept.count < Self.maxTables, keptBlocks + group.objects.count <= Self.maxBlocks,
               Double(group.pages) * pageArea >= Self.minTableArea {
                kept.append(group)
                keptBlocks += group.objects.count
            } else {
                others.pages += group.pages
                others.count += group.objects.count
                others.tables += 1
            }
        }

        // The top level: tables, free pages, pointer map, others, largest first.
        enum Top { case table(Int), block(TreemapBlock) }
        var top: [(pages: Int64, item: Top)] = kept.indices.map { (kept[$0].pages, .table($0)) }
        if free > 0 { top.append((free, .block(TreemapBlock(kind: .free, name: "free pages", table: "", pages: free)))) }
        if pointerMap > 0 {
            top.append((pointerMap, .block(TreemapBlock(kind: .pointerMap, name: "pointer map", table: "", pages: pointerMap))))
        }
        if other > 0 { top.append((other, .block(TreemapBlock(kind: .other, name: "other pages", table: "", pages: other)))) }
        if others.pages > 0 {
            let name = "\(others.tables) other table\(others.tables == 1 ? "" : "s")"
            top.append((others.pages, .block(TreemapBlock(kind: .others, name: name, table: "", pages: others.pages,
                                                           count: others.count))))
        }
        top.sort { $0.pages > $1.pages }
        let bounds = TreemapRect(x: 0, y: 0, width: Self.width, height: Self.height)
        let rects = Treemap.squarify(top.map { Double($0.pages) }, in: bounds)
        for (entry, rect) in zip(top, rects) {
            switch entry.item {
            case .block(var block):
                block.rect = rect
                blocks.append(block)
            case .table(let i):
                let objects = kept[i].objects.sorted {
                    $0.pages != $1.pages ? $0.pages > $1.pages : compareNames($0.name, $1.name)
                }
                let inner = Treemap.squarify(objects.map { Double($0.pages) }, in: rect)
                for (object, r) in zip(objects, inner) {
                    blocks.append(TreemapBlock(kind: object.kind == .index ? .index : .table, name: object.name,
                                               table: object.table, pages: object.pages, stats: object, rect: r))
                }
                tables.append((kept[i].name, rect, objects.count))
            }
        }
    }
}

extension TreemapLayout {
    /// Colour of a share (0-100%) of something wasted: green at 0, yellow
    /// about a quarter, red from half up.
    static func colour(_ percent: Double) -> String {
        let share = max(0, min(1, percent / 50))
        let hue = Int((120 * (1 - share)).rounded())
        return "hsl(\(hue),55%,62%)"
    }

    /// The treemap as an inline SVG: each block a `rect` whose data
    /// attributes give its name, kind, table and pages (so a test can read
    /// the picture back), its colour by unused bytes (`data-c2` by
    /// fragmentation), and a `<title>` with the exact figures; labels where
    /// they fit; each table's outline over its b-trees.
    func render(into html: inout HTMLText, stats: FileStats) {
        html.markup("<svg class=\"treemap\" viewBox=\"0 0 \(Int(Self.width)) \(Int(Self.height))\" role=\"img\" aria-label=\"Pages by table and index\" xmlns=\"http://www.w3.org/2000/svg\">")
        html.markup("<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#e4e4e4\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b8b8b8\" stroke-width=\"2\"/></pattern></defs>")
        let pageSize = stats.pageSize
        for block in blocks {
            let r = block.rect
            html.markup("<rect x=\"\(Figures.decimal(r.x))\" y=\"\(Figures.decimal(r.y))\" width=\"\(Figures.decimal(r.width))\" height=\"\(Figures.decimal(r.height))\"")
            html.attribute("data-name", block.name)
            html.markup(" data-kind=\"\(block.kind.rawValue)\"")
            if block.kind == .table || block.kind == .index { html.attribute("data-table", block.table) }
            html.markup(" data-pages=\"\(block.pages)\"")
            if block.kind == .others { html.markup(" data-count=\"\(block.count)\"") }
            // The tooltip: the name (escaped, its line breaks shown as \n), then a line per figure.
            var head: [String] = []
            var lines: [String] = []
            if let o = block.stats {
                let bytes = o.bytes(pageSize: pageSize)
                let unused = bytes == 0 ? 0 : Double(o.unused) * 100 / Double(bytes)
                let fill = Self.colour(unused), fragmentation = Self.colour(o.fragmentationPercent)
                html.markup(" fill=\"\(fill)\" data-c1=\"\(fill)\" data-c2=\"\(fragmentation)\"")
                head = o.kind == .index ? ["index ", o.name, " on ", o.table] : ["table ", o.name]
                lines = ["\(o.pages) pages, \(humanBytes(bytes)) (\(Figures.percent(stats.sharePercent(o))) of the file)",
                         "\(o.entries) \(o.kind == .index ? "keys" : "rows"), unused \(Figures.percent(unused)), fragmentation \(Figures.percent(o.fragmentationPercent))"]
                if o.overflowPages > 0 { lines.append("\(o.overflowPages) overflow pages") }
            } else {
                html.markup(block.kind == .free ? " fill=\"url(#hatch)\"" : " fill=\"#d0d0d0\"")
                let share = Double(block.pages) * 100 / Double(max(1, stats.pageCount))
                head = [block.name + (block.kind == .others ? " (\(block.count) b-trees)" : "")]
                lines = ["\(block.pages) pages, \(humanBytes(block.pages * pageSize)) (\(Figures.percent(share)) of the file)"]
            }
            html.markup(" class=\"block\"><title>")
            for part in head { html.svgText(part) }
            for line in lines {
                html.markup("\n")
                html.svgText(line)
            }
            html.markup("</title></rect>")
        }
        for table in tables where table.blocks > 1 {
            let r = table.rect
            html.markup("<rect class=\"outline\" x=\"\(Figures.decimal(r.x))\" y=\"\(Figures.decimal(r.y))\" width=\"\(Figures.decimal(r.width))\" height=\"\(Figures.decimal(r.height))\"/>")
        }
        // Labels: a line of 11-unit text where the block is wide and tall enough.
        for block in blocks where block.rect.height >= 15 && block.rect.width >= 30 {
            let fits = Int((block.rect.width - 6) / 6.4)
            let name = block.name
            let characters = Array(name.unicodeScalars)
            guard fits >= 3 else { continue }
            var label = characters.count <= fits ? name : String(String.UnicodeScalarView(characters.prefix(fits - 1))) + "…"
            if label.isEmpty { label = "?" }
            html.markup("<text x=\"\(Figures.decimal(block.rect.x + 3))\" y=\"\(Figures.decimal(block.rect.y + 12))\">")
            html.svgText(label, limit: fits)
            html.markup("</text>")
        }
        html.markup("</svg>")
    }
}
