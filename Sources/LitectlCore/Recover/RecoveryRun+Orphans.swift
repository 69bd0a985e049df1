// Pages no b-tree reaches after every known b-tree has been walked: children
// of damaged interior pages, subtrees cut off by a lost page, leaves whose
// parent was destroyed, and (unless the freelist is to be ignored) free pages
// that a damaged table may have lost to a corrupt freelist. They are grouped
// by the interior pages that still point to them, and each group goes back to
// the table it belongs to: the table whose damaged page pointed to it, or the
// one damaged table whose columns fit every row (by field count, NULL rowid
// alias, NOT NULL, STRICT types and TEXT affinity) and, when several do, whose
// lost key ranges hold its rowids. A group that fits no table goes to a table
// made for it when the schema is damaged (its table's schema row may be what
// was lost), else to lost_and_found; free pages that fit no damaged table hold
// deleted rows and are left alone, as the recover extension leaves them.

extension RecoveryRun {
    /// One page looked at in the pass over unreached pages.
    struct UnreachedPage {
        var table: Bool
        var leaf: Bool
        var free: Bool
        var children: [UInt32]
    }

    func salvageOrphans() throws {
        for page in schemaPages { _ = owners.claim(page, as: .tree, owner: 0) }
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: file.pageSize, alignment: 8)
        defer { buffer.deallocate() }

        // The b-tree pages among the pages nothing claimed (and the free leaves).
        var pages: [UInt32: UnreachedPage] = [:]
        // Counted up before use, so that a count of UInt32.max cannot overflow.
        var page: UInt32 = 1
        while page < file.pageCount {
            page += 1
            let role = owners.role(page)
            guard role == .none || role == .freeLeaf && request.readFreelist else { continue }
            extraPagesRead += 1
            if extraPagesRead & 255 == 0 { report(walker.pagesRead + extraPagesRead) }
            guard file.copy(page, into: buffer) else {
                if role == .none { unaccountedPages += 1 }
                continue
            }
            let type = buffer.load(as: UInt8.self)
            let table = type == BTreePage.tableLeaf || type == BTreePage.tableInterior
            let index = type == BTreePage.indexLeaf || type == BTreePage.indexInterior
            guard table || index,
                  let read = SalvagePage.read(buffer, pageSize: file.pageSize, usable: file.usable, number: page,
                                              table: table, repair: false), !read.cells.isEmpty else {
                if role == .none { unaccountedPages += 1 }
                continue
            }
            var children: [UInt32] = []
            if !read.isLeaf {
                children = read.cells.filter { $0.index < read.suspectFrom }.map { $0.cell.leftChild } + [read.page.rightChild]
                children = children.filter { $0 >= 2 && $0 <= file.pageCount && $0 != page }
            }
            pages[page] = UnreachedPage(table: table, leaf: read.isLeaf, free: role == .freeLeaf, children: children)
            if role == .none { orphanPages += 1 }
        }
        guard !pages.isEmpty else { return }

        // Parents among them (never across free pages: a free page has no live parent).
        var parent: [UInt32: UInt32] = [:]
        for number in pages.keys.sorted() {
            guard let info = pages[number], !info.leaf, !info.free else { continue }
            for child in info.children {
                guard let c = pages[child], !c.free, c.table == info.table, parent[child] == nil else { continue }
                parent[child] = number
            }
        }
        // Each page's group (its topmost ancestor) and the known tree one of its
        // ancestors was set aside from, with path compression so that any shape
        // of pointers costs one pass.
        var resolved: [UInt32: (top: UInt32, tree: Int?)] = [:]
        for start in pages.keys.sorted() {
            var path: [UInt32] = []
            var onPath = Set<UInt32>()
            var current = start
            var answer: (top: UInt32, tree: Int?)?
            while true {
                if let known = resolved[current] { answer = known; break }
                path.append(current)
                onPath.insert(current)
                guard let up = parent[current], !onPath.contains(up) else { break }
                current = up
            }
            var result = answer ?? (top: path.last ?? start, tree: nil)
            for number in path.reversed() {
                if let link = walker.setAside[number], tables[link.tree] != nil { result.tree = link.tree }
                resolved[number] = result
            }
        }
        var groups: [UInt32: [UInt32]] = [:]
        for (number, info) in pages where info.leaf || !info.table {
            groups[resolved[number]?.top ?? number, default: []].append(number)
        }
        for top in groups.keys.sorted() {
            let members = groups[top]!.sorted()
            try salvageGroup(top: top, members: members, tree: resolved[top]?.tree ?? members.lazy.compactMap { resolved[$0]?.tree }.first,
                             pages: pages, buffer: buffer)
        }
    }

    /// Places the rows of one group of unreached pages.
    private func salvageGroup(top: UInt32, members: [UInt32], tree: Int?, pages: [UInt32: UnreachedPage],
                              buffer: UnsafeMutableRawPointer) throws {
        let isTable = pages[top]?.table ?? pages[members[0]]!.table
        let allFree = members.allSatisfy { pages[$0]?.free == true }

        // First look: how many rows fit each candidate table.
        let candidates = tables.values.filter { $0.withoutRowid != isTable && !$0.generic }.sorted { $0.id < $1.id }
        var accepted = Array(repeating: 0, count: candidates.count)
        var exact = Array(repeating: 0, count: candidates.count)
        var inRange = Array(repeating: 0, count: candidates.count)
        var rows = 0
        var widest = 0
        // Cells whose record is damaged or that are stray (read from past a
        // page's cell pointer array): kept in lost_and_found, but no evidence
        // of which table the group is.
        var unplaceable = 0
        for number in members {
            guard file.copy(number, into: buffer),
                  let read = SalvagePage.read(buffer, pageSize: file.pageSize, usable: file.usable, number: number,
                                              table: isTable, repair: false) else { continue }
            for item in read.cells {
                let cell = SalvageCell(page: number, index: item.index, cell: item.cell, bytes: UnsafeRawPointer(buffer), trust: .salvaged)
                _ = readRecord(cell, tree: -1, owners: &owners, claim: .peek)
                guard item.index < read.suspectFrom, record.damage == nil else {
                    unplaceable += 1
                    continue
                }
                rows += 1
                widest = max(widest, record.count)
                for (k, table) in candidates.enumerated() where table.accepts(record) {
                    accepted[k] += 1
                    if table.exactlyFits(record) { exact[k] += 1 }
                    if isTable && table.inLostRange(item.cell.rowid) { inRange[k] += 1 }
                }
            }
        }
        guard rows + unplaceable > 0 else { return }

        var target: SalvageTable?
        if let tree, let linked = tables[tree], linked.withoutRowid != isTable {
            target = linked
        } else if rows > 0 {
            var fits = candidates.indices.filter { accepted[$0] == rows && candidates[$0].damaged }
            if allFree { fits = fits.filter { !isTable || inRange[$0] == rows } }
            if fits.count > 1 && isTable {
                let ranged = fits.filter { inRange[$0] == rows }
                if !ranged.isEmpty { fits = ranged }
            }
            if fits.count > 1 {
                let exactFits = fits.filter { exact[$0] == rows }
                if !exactFits.isEmpty { fits = exactFits }
            }
            if fits.count == 1 { target = candidates[fits[0]] }
        }
        if target == nil {
            if allFree {
                freelistRowsIgnored += rows + unplaceable
                return
            }
            if isTable && schemaDamaged && rows > 0 && widest <= SalvagedRecord.maxColumns {
                target = try genericTable(top: top, width: max(widest, 1))
            } else if !isTable && !schemaDamaged && !tables.values.contains(where: { $0.withoutRowid && $0.damaged }) {
                // Pages of a damaged index: indexes are made again from their tables.
                return
            }
        }

        // Second pass: the rows go to the target (or lost_and_found), the pages to its tree.
        let overflowOwner = target?.id ?? -1
        for number in members {
            guard file.copy(number, into: buffer),
                  let read = SalvagePage.read(buffer, pageSize: file.pageSize, usable: file.usable, number: number,
                                              table: isTable, repair: false) else { continue }
            if let target {
                owners.reassign(number, to: .tree, owner: target.id)
                target.pagesAttached += 1
                target.damaged = true
            } else {
                owners.reassign(number, to: .tree, owner: nil)
            }
            for item in read.cells {
                let cell = SalvageCell(page: number, index: item.index, cell: item.cell, bytes: UnsafeRawPointer(buffer),
                                       trust: item.index < read.suspectFrom ? .salvaged : .stray)
                if let target {
                    try place(cell, in: target, owners: &owners, attached: true)
                    continue
                }
                _ = readRecord(cell, tree: overflowOwner, owners: &owners)
                var reason = "on a page no b-tree reaches, and fits no known table"
                if cell.trust == .stray {
                    reason = "on a page no b-tree reaches, read from past its cell pointer array"
                }
                if let damage = record.damage {
                    damagedRecords += 1
                    reason = "on a page no b-tree reaches; its record is damaged: \(damage)"
                }
                try lost.add(root: top, page: number, cell: item.index, rowid: isTable ? item.cell.rowid : nil, record: record,
                             reason: reason)
            }
        }
        payloads.trim()
    }

    /// A table for rows whose table's schema row is lost: named after the
    /// page they were found under, with columns c0, c1, ... and their rowids.
    private func genericTable(top: UInt32, width: Int) throws -> SalvageTable {
        var name = "recovered_root_\(top)"
        var n = 0
        while try out.hasObject(name) {
            n += 1
            name = "recovered_root_\(top)_\(n)"
        }
        let columns = (0..<width).map { "c\($0)" }.joined(separator: ", ")
        try out.db.execute("CREATE TABLE main.\(quoteIdentifier(name))(\(columns))")
        let table = try SalvageTable(db: out.db, id: nextTree, name: name, root: top, encoding: file.encoding, generic: true)
        nextTree += 1
        tables[table.id] = table
        return table
    }
}
