// An R*Tree as salvage finds it in its three shadow tables (`_node`, `_rowid`,
// `_parent`), read where salvage wrote them: checked as SQLite's rtreecheck()
// checks it (every node present and big enough, boxes well formed and inside
// their parent's, every mapping of `_rowid` and `_parent` right, their row
// counts exact), and, when the check fails, the entries its leaf nodes still
// hold, so that the virtual table can be built again through its module
// rather than copied broken. Nodes and mappings are looked up one at a time
// by key, so that memory stays flat however large the tree.
// https://www.sqlite.org/rtree.html#integrity_check
// (the node format: SQLite's ext/rtree/rtree.c, "Database Format of R-Tree Tables")

/// The columns of an R*Tree: its dimensions, its coordinate type, and its
/// auxiliary columns (`+name`, kept in `_rowid` after `nodeno`).
struct RTreeShape: Equatable {
    var dimensions: Int
    /// rtree_i32: 32-bit integer coordinates (else 32-bit floats).
    var integer: Bool
    var auxiliary: Int

    /// Bytes of one cell of a node: the 64-bit rowid or child node, then a
    /// (min, max) pair of 32-bit coordinates per dimension.
    var cellSize: Int { 8 + dimensions * 8 }
}

/// One entry of an R*Tree: its rowid, box and auxiliary values.
struct RTreeEntry {
    var rowid: Int64
    /// min, max for each dimension, as stored (32-bit patterns).
    var coordinates: [UInt32]
    var auxiliary: [Value]
    /// `_rowid` names the node it was found in as its node.
    var confirmed: Bool
    /// The node it was found in, and its cell there.
    var node: Int64
    var cell: Int
}

/// The salvaged shadow tables of one R*Tree, read by key.
final class RTreeSalvage {
    /// SQLite's RTREE_MAX_DEPTH.
    static let maxDepth = 40
    /// The smallest node the module accepts when it connects (rtree.c's getNodeSize).
    static let minimumNodeSize = 512 - 64

    let shape: RTreeShape
    private let db: Connection
    /// The schema the shadow tables are in (main, or temp when staged for a rebuild).
    private let schema: String
    private let nodeTable: String?, rowidTable: String?, parentTable: String?
    // Each reads `rowid, *` of one row by rowid: the first column is the
    // rowid's alias in the module's tables, and rowid is read too so that a
    // damaged table whose first column is not still gives its keys.
    private let nodeQuery: Statement?, rowidQuery: Statement?, parentQuery: Statement?

    /// The shadow tables `node`, `rowid` and `parent` (nil: lost) of `db`'s
    /// schema `schema`: the first column of each is its key, or one made so
    /// (see `RecoveryRun.stage`).
    init(db: Connection, schema: String, shape: RTreeShape, node: String?, rowid: String?, parent: String?) throws {
        self.db = db
        self.schema = schema
        self.shape = shape
        nodeTable = node
        rowidTable = rowid
        parentTable = parent
        func query(_ table: String?) throws -> Statement? {
            try table.map { try db.prepare("SELECT rowid, * FROM \(quoteIdentifier(schema, $0)) WHERE rowid = ?1") }
        }
        nodeQuery = try query(node)
        rowidQuery = try query(rowid)
        parentQuery = try query(parent)
    }


    // MARK: Reading

    /// The row of `statement`'s table whose rowid is `key`, from its second column on.
    private func row(_ statement: Statement?, _ key: Int64) throws -> [Value]? {
        guard let statement else { return nil }
        defer { statement.reset() }
        try statement.bind([.integer(key)])
        guard try statement.step() else { return nil }
        return Array(statement.values().dropFirst(2))
    }

    /// Node `number`'s data; nil when it is missing, "" when it is no BLOB.
    func node(_ number: Int64) throws -> [UInt8]? {
        guard let values = try row(nodeQuery, number) else { return nil }
        if case .blob(let bytes)? = values.first { return bytes }
        return []
    }

    /// The node `_rowid` names for entry `rowid`, and its auxiliary values.
    func mapping(_ rowid: Int64) throws -> (node: Value, auxiliary: [Value])? {
        guard let values = try row(rowidQuery, rowid), let node = values.first else { return nil }
        let auxiliary = (0..<shape.auxiliary).map { $0 + 1 < values.count ? values[$0 + 1] : .null }
        return (node, auxiliary)
    }

    /// The parent `_parent` names for node `number`.
    func parent(_ number: Int64) throws -> Value? {
        try row(parentQuery, number)?.first
    }

    func count(_ table: String?) throws -> Int {
        guard let table, case .integer(let n)? = try db.scalar("SELECT count(*) FROM \(quoteIdentifier(schema, table))") else { return 0 }
        return Int(n)
    }

    private static func read16(_ data: [UInt8], _ at: Int) -> Int { Int(data[at]) << 8 | Int(data[at + 1]) }

    private static func read32(_ data: [UInt8], _ at: Int) -> UInt32 {
        UInt32(data[at]) << 24 | UInt32(data[at + 1]) << 16 | UInt32(data[at + 2]) << 8 | UInt32(data[at + 3])
    }

    private static func read64(_ data: [UInt8], _ at: Int) -> Int64 {
        Int64(bitPattern: UInt64(read32(data, at)) << 32 | UInt64(read32(data, at + 4)))
    }

    /// The cells of `data` that lie inside it (a cell count larger than
    /// the node is cut to what fits).
    private func cells(_ data: [UInt8]) -> [(key: Int64, coordinates: [UInt32])] {
        guard data.count >= 4 else { return [] }
        let count = min(RTreeSalvage.read16(data, 2), (data.count - 4) / shape.cellSize)
        return (0..<count).map { i in
            let at = 4 + i * shape.cellSize
            return (RTreeSalvage.read64(data, at), (0..<(shape.dimensions * 2)).map { RTreeSalvage.read32(data, at + 8 + $0 * 4) })
        }
    }

    /// True when `low` > `high` as the tree's coordinate type compares them.
    private func greater(_ low: UInt32, _ high: UInt32) -> Bool {
        if shape.integer { return Int32(bitPattern: low) > Int32(bitPattern: high) }
        return Float(bitPattern: low) > Float(bitPattern: high)
    }

    // MARK: Checking

    /// nil when the shadow tables form a sound R*Tree (what rtreecheck()
    /// checks, and that every node is as long as node 1, which the module
    /// requires when it reads one); else the first problem found.
    func problem() throws -> String? {
        guard let root = try node(1) else { return "its root node is missing" }
        guard root.count >= RTreeSalvage.minimumNodeSize else { return "its root node is too small (\(root.count) bytes)" }
        let depth = RTreeSalvage.read16(root, 0)
        guard depth <= RTreeSalvage.maxDepth else { return "its depth (\(depth)) is out of range" }
        var leaves = 0, interior = 0
        var visited: Set<Int64> = [1]
        // (node, depth, the parent cell's box), depth first as rtreecheck()
        // walks; the stack holds at most depth × cells per node.
        var stack: [(node: Int64, depth: Int, bounds: [UInt32]?)] = [(1, depth, nil)]
        while let item = stack.popLast() {
            let (number, level, bounds) = (item.node, item.depth, item.bounds)
            guard let data = try node(number) else { return "node \(number) is missing" }
            guard data.count == root.count else { return "node \(number) is \(data.count) bytes, not \(root.count)" }
            let count = RTreeSalvage.read16(data, 2)
            guard 4 + count * shape.cellSize <= data.count else { return "node \(number) is too small for its \(count) cells" }
            for (index, cell) in cells(data).enumerated() {
                for d in 0..<shape.dimensions {
                    let low = cell.coordinates[2 * d], high = cell.coordinates[2 * d + 1]
                    if greater(low, high) { return "dimension \(d) of cell \(index) of node \(number) is corrupt" }
                    if let bounds, greater(bounds[2 * d], low) || greater(high, bounds[2 * d + 1]) {
                        return "dimension \(d) of cell \(index) of node \(number) lies outside its parent's box"
                    }
                }
                if level > 0 {
                    interior += 1
                    guard try parent(cell.key) == .integer(number) else { return "the _parent row of node \(cell.key) is missing or wrong" }
                    guard visited.insert(cell.key).inserted else { return "node \(cell.key) is reached twice" }
                    stack.append((cell.key, level - 1, cell.coordinates))
                } else {
                    leaves += 1
                    guard try mapping(cell.key)?.node == .integer(number) else { return "the _rowid row of entry \(cell.key) is missing or wrong" }
                }
            }
        }
        let mapped = try count(rowidTable), parents = try count(parentTable)
        if leaves != mapped { return "its _rowid table has \(mapped) rows for \(leaves) entries" }
        if interior != parents { return "its _parent table has \(parents) rows for \(interior) child nodes" }
        return nil
    }

    // MARK: Salvaging entries

    /// Calls `take` with each entry the salvaged nodes still hold: first
    /// those of the nodes the walk from node 1 reaches at leaf depth, then
    /// those of any other node that `_rowid` names as their node (a leaf the
    /// walk could not reach). Boxes whose minimum exceeds their maximum
    /// come too (see `invalidDimension`: the module refuses them, and the
    /// caller keeps them elsewhere). A rowid may come twice (a stale copy of
    /// a node): `take` keeps the copy `_rowid` confirms, else the first.
    func forEachEntry(_ take: (RTreeEntry) throws -> Void) throws {
        var visited: Set<Int64> = []
        var leafNodes: [Int64] = []
        if let root = try node(1), root.count >= 4 {
            let depth = RTreeSalvage.read16(root, 0)
            if depth <= RTreeSalvage.maxDepth {
                visited.insert(1)
                var level: [Int64] = [1]
                var remaining = depth
                while remaining > 0 && !level.isEmpty {
                    var next: [Int64] = []
                    for number in level {
                        for cell in cells(try node(number) ?? []) where !visited.contains(cell.key) {
                            if try node(cell.key) != nil {
                                visited.insert(cell.key)
                                next.append(cell.key)
                            }
                        }
                    }
                    level = next
                    remaining -= 1
                }
                leafNodes = level
            }
        }
        func takeCells(of number: Int64, _ data: [UInt8], requireConfirmation: Bool) throws {
            for (index, cell) in cells(data).enumerated() {
                let mapping = try mapping(cell.key)
                let confirmed = mapping?.node == .integer(number)
                if requireConfirmation && !confirmed { continue }
                try take(RTreeEntry(rowid: cell.key, coordinates: cell.coordinates,
                                    auxiliary: mapping?.auxiliary ?? Array(repeating: .null, count: shape.auxiliary), confirmed: confirmed,
                                    node: number, cell: index))
            }
        }
        for number in leafNodes { try takeCells(of: number, try node(number) ?? [], requireConfirmation: false) }
        guard let nodeTable else { return }
        let all = try db.prepare("SELECT rowid, * FROM \(quoteIdentifier(schema, nodeTable)) ORDER BY rowid")
        try all.forEachRow { row in
            guard case .integer(let number) = row.value(at: 0), !visited.contains(number),
                  case .blob(let data) = row.value(at: 2) else { return }
            try takeCells(of: number, data, requireConfirmation: true)
        }
    }

    /// The first dimension of `entry` whose minimum exceeds its maximum (as
    /// the tree's coordinate type compares them), or nil: the module refuses
    /// such a box with a constraint error.
    func invalidDimension(_ entry: RTreeEntry) -> Int? {
        (0..<shape.dimensions).first { greater(entry.coordinates[2 * $0], entry.coordinates[2 * $0 + 1]) }
    }

    /// The `_rowid` rows of this tree whose entry neither the R*Tree `kept`
    /// (in main) holds nor `elsewhere` names (entries kept in
    /// lost_and_found): known losses.
    func unmappedEntries(notIn kept: String, elsewhere: Set<Int64> = []) throws -> Int {
        guard let rowidTable else { return 0 }
        let missing = try db.prepare("""
            SELECT rowid FROM \(quoteIdentifier(schema, rowidTable)) WHERE rowid NOT IN (SELECT rowid FROM main.\(quoteIdentifier(kept)))
            """)
        var lost = 0
        try missing.forEachRow { row in
            if case .integer(let rowid) = row.value(at: 0), elsewhere.contains(rowid) { return }
            lost += 1
        }
        return lost
    }
}
