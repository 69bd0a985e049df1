// An R*Tree as salvage finds it in its three shadow tables (`_node`, `_rowid`,
// `_parent`): checked as SQLite's rtreecheck() checks it (every node present
// and big enough, boxes well formed and inside their parent's, every mapping
// of `_rowid` and `_parent` right, their row counts exact), and, when the
// check fails, the entries its leaf nodes still hold, so that the virtual
// table can be built again through its module rather than copied broken.
// https://www.sqlite.org/rtree.html#integrity_check
// (the node format: sqlite's ext/rtree/rtree.c, "Database Format of R-Tree Tables")

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
}

/// The salvaged rows of one R*Tree's shadow tables.
struct RTreeSalvage {
    /// SQLite's RTREE_MAX_DEPTH.
    static let maxDepth = 40
    /// The smallest node the module accepts when it connects (rtree.c's getNodeSize).
    static let minimumNodeSize = 512 - 64

    let shape: RTreeShape
    /// `_node`: nodeno → data (BLOB values only).
    var nodes: [Int64: [UInt8]] = [:]
    /// `_node` rows whose data is no BLOB.
    var badNodes = 0
    /// `_rowid`: rowid → (nodeno, auxiliary values).
    var rowids: [Int64: (node: Value, auxiliary: [Value])] = [:]
    /// `_parent`: nodeno → parentnode.
    var parents: [Int64: Value] = [:]

    init(shape: RTreeShape) { self.shape = shape }

    // MARK: Reading nodes

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
    func problem() -> String? {
        if badNodes > 0 { return "\(badNodes) rows of its _node table hold no BLOB" }
        guard let root = nodes[1] else { return "its root node is missing" }
        guard root.count >= RTreeSalvage.minimumNodeSize else { return "its root node is too small (\(root.count) bytes)" }
        let depth = RTreeSalvage.read16(root, 0)
        guard depth <= RTreeSalvage.maxDepth else { return "its depth (\(depth)) is out of range" }
        var leaves = 0, interior = 0
        var visited: Set<Int64> = [1]
        // (node, depth, the parent cell's box): depth first, as rtreecheck.
        var stack: [(node: Int64, depth: Int, bounds: [UInt32]?)] = [(1, depth, nil)]
        while let item = stack.popLast() {
            let (node, level, bounds) = (item.node, item.depth, item.bounds)
            guard let data = nodes[node] else { return "node \(node) is missing" }
            guard data.count == root.count else { return "node \(node) is \(data.count) bytes, not \(root.count)" }
            let count = RTreeSalvage.read16(data, 2)
            guard 4 + count * shape.cellSize <= data.count else { return "node \(node) is too small for its \(count) cells" }
            for (index, cell) in cells(data).enumerated() {
                for d in 0..<shape.dimensions {
                    let low = cell.coordinates[2 * d], high = cell.coordinates[2 * d + 1]
                    if greater(low, high) { return "dimension \(d) of cell \(index) of node \(node) is corrupt" }
                    if let bounds, greater(bounds[2 * d], low) || greater(high, bounds[2 * d + 1]) {
                        return "dimension \(d) of cell \(index) of node \(node) lies outside its parent's box"
                    }
                }
                if level > 0 {
                    interior += 1
                    guard parents[cell.key] == .integer(node) else { return "the _parent row of node \(cell.key) is missing or wrong" }
                    guard visited.insert(cell.key).inserted else { return "node \(cell.key) is reached twice" }
                    stack.append((cell.key, level - 1, cell.coordinates))
                } else {
                    leaves += 1
                    guard rowids[cell.key]?.node == .integer(node) else { return "the _rowid row of entry \(cell.key) is missing or wrong" }
                }
            }
        }
        if leaves != rowids.count { return "its _rowid table has \(rowids.count) rows for \(leaves) entries" }
        if interior != parents.count { return "its _parent table has \(parents.count) rows for \(interior) child nodes" }
        return nil
    }

    /// The number of entries of a sound tree (its `_rowid` rows).
    var entryCount: Int { rowids.count }

    // MARK: Salvaging entries

    /// The entries the salvaged nodes still hold, in rowid order, and the
    /// number of `_rowid` rows whose entry is found nowhere (known losses).
    /// An entry is taken from a node that the walk from node 1 reaches at
    /// leaf depth, or from any other node that `_rowid` names as its entry's
    /// node (a leaf the walk could not reach); boxes whose minimum exceeds
    /// their maximum are left out. A rowid found twice keeps the copy
    /// `_rowid` confirms, else the first found.
    func entries() -> (entries: [RTreeEntry], lost: Int) {
        var leafNodes: [Int64] = []
        var visited: Set<Int64> = []
        if let root = nodes[1], root.count >= 4 {
            let depth = RTreeSalvage.read16(root, 0)
            if depth <= RTreeSalvage.maxDepth {
                visited.insert(1)
                var level: [Int64] = [1]
                var remaining = depth
                while remaining > 0 && !level.isEmpty {
                    var next: [Int64] = []
                    for node in level {
                        for cell in cells(nodes[node] ?? []) where nodes[cell.key] != nil && visited.insert(cell.key).inserted {
                            next.append(cell.key)
                        }
                    }
                    level = next
                    remaining -= 1
                }
                leafNodes = level
            }
        }
        let leafSet = Set(leafNodes)
        var found: [Int64: (entry: RTreeEntry, confirmed: Bool)] = [:]
        func take(_ node: Int64, requireConfirmation: Bool) {
            for cell in cells(nodes[node] ?? []) {
                let confirmed = rowids[cell.key]?.node == .integer(node)
                if requireConfirmation && !confirmed { continue }
                if (0..<shape.dimensions).contains(where: { greater(cell.coordinates[2 * $0], cell.coordinates[2 * $0 + 1]) }) { continue }
                if let earlier = found[cell.key], earlier.confirmed || !confirmed { continue }
                let auxiliary = rowids[cell.key]?.auxiliary ?? Array(repeating: .null, count: shape.auxiliary)
                found[cell.key] = (RTreeEntry(rowid: cell.key, coordinates: cell.coordinates, auxiliary: auxiliary), confirmed)
            }
        }
        for node in leafNodes { take(node, requireConfirmation: false) }
        for node in nodes.keys.sorted() where !visited.contains(node) && !leafSet.contains(node) {
            take(node, requireConfirmation: true)
        }
        let lost = rowids.keys.reduce(0) { $0 + (found[$1] == nil ? 1 : 0) }
        return (found.values.map(\.entry).sorted { $0.rowid < $1.rowid }, lost)
    }
}
