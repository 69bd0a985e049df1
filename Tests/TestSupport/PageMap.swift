// Where every row of a sound database lives, read from its bytes by a small
// b-tree reader of the tests' own (independent of litectl's page readers):
// the pages of each b-tree (interior, leaf, overflow), the page holding each
// row and its overflow pages, and the freelist. The recover tests damage
// chosen pages of a copy and then expect every row on the other pages back.
// https://www.sqlite.org/fileformat2.html
import Foundation
import LitectlCore

/// A row's identity: its rowid, or a WITHOUT ROWID table's primary key values.
public enum RowKey: Hashable, Sendable {
    case rowid(Int64)
    case key([Value])
}

/// The page layout of a sound database file.
public struct PageMap: Sendable {
    public struct Tree: Sendable {
        public var name: String
        public var type: String
        public var root: UInt32
        public var withoutRowid: Bool
        public var interior: [UInt32] = []
        public var leaves: [UInt32] = []
        public var overflow: [UInt32] = []
        /// Each row's pages: the page of its cell and its overflow pages (tables only).
        public var rows: [RowKey: [UInt32]] = [:]
        public var allPages: [UInt32] { interior + leaves + overflow }
    }

    public var pageSize: Int
    public var usable: Int
    public var pageCount: UInt32
    /// Tables and indexes by name (sqlite_schema as "sqlite_schema").
    public var trees: [String: Tree] = [:]
    public var freelistTrunks: [UInt32] = []
    public var freelistLeaves: [UInt32] = []

    /// Reads the map of the (sound, UTF-8) database at `path`.
    public static func read(_ path: String) throws -> PageMap {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let sizeField = Int(bytes[16]) << 8 | Int(bytes[17])
        let pageSize = sizeField == 1 ? 65536 : sizeField
        var map = PageMap(pageSize: pageSize, usable: pageSize - Int(bytes[20]), pageCount: UInt32(bytes.count / pageSize))
        let db = try Connection(path: path, mode: .readOnly)
        var objects: [(type: String, name: String, root: UInt32, withoutRowid: Bool, keyCount: Int)] =
            [("table", "sqlite_schema", 1, false, 0)]
        for row in try db.rows("SELECT type, name, rootpage FROM sqlite_schema WHERE rootpage > 0") {
            guard case .text(let t) = row[0], case .text(let n) = row[1], case .integer(let r) = row[2] else { continue }
            let name = String(decoding: n, as: UTF8.self)
            var withoutRowid = false, keyCount = 0
            if t == Array("table".utf8) {
                withoutRowid = try db.scalar("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [.text(name)]) == .integer(1)
                if withoutRowid {
                    keyCount = try db.rows("SELECT 1 FROM pragma_index_list(?1) AS l, pragma_index_info(l.name) WHERE l.origin = 'pk'",
                                           [.text(name)]).count
                }
            }
            objects.append((String(decoding: t, as: UTF8.self), name, UInt32(r), withoutRowid, keyCount))
        }
        for object in objects {
            var tree = Tree(name: object.name, type: object.type, root: object.root, withoutRowid: object.withoutRowid)
            let table = object.type == "table" && !object.withoutRowid
            map.walk(bytes, object.root, table: table, keyCount: object.type == "table" ? object.keyCount : 0, into: &tree)
            map.trees[object.name] = tree
        }
        // The freelist.
        var trunk = map.u32(bytes, 32)
        while trunk != 0 && map.freelistTrunks.count < Int(map.pageCount) {
            map.freelistTrunks.append(trunk)
            let base = Int(trunk - 1) * pageSize
            let count = Int(map.u32(bytes, base + 4))
            for i in 0..<count { map.freelistLeaves.append(map.u32(bytes, base + 8 + 4 * i)) }
            trunk = map.u32(bytes, base)
        }
        return map
    }

    func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
    }

    func varint(_ b: [UInt8], _ at: Int) -> (UInt64, Int) {
        var v: UInt64 = 0
        for i in 0..<8 {
            v = v << 7 | UInt64(b[at + i] & 0x7F)
            if b[at + i] < 0x80 { return (v, i + 1) }
        }
        return (v << 8 | UInt64(b[at + 8]), 9)
    }

    mutating func walk(_ b: [UInt8], _ page: UInt32, table: Bool, keyCount: Int, into tree: inout Tree) {
        let base = Int(page - 1) * pageSize
        let h = base + (page == 1 ? 100 : 0)
        let type = b[h]
        let leaf = type == 0x0D || type == 0x0A
        if leaf { tree.leaves.append(page) } else { tree.interior.append(page) }
        let count = Int(b[h + 3]) << 8 | Int(b[h + 4])
        let pointers = h + (leaf ? 8 : 12)
        for i in 0..<count {
            var at = base + (Int(b[pointers + 2 * i]) << 8 | Int(b[pointers + 2 * i + 1]))
            if !leaf {
                walk(b, u32(b, at), table: table, keyCount: keyCount, into: &tree)
                at += 4
                if type == 0x05 { continue }
            }
            let (size, n1) = varint(b, at)
            at += n1
            var rowid: Int64 = 0
            if type == 0x0D {
                let (r, n2) = varint(b, at)
                rowid = Int64(bitPattern: r)
                at += n2
            }
            let p = Int(size)
            let u = usable
            let maxLocal = type == 0x0D ? u - 35 : (u - 12) * 64 / 255 - 23
            let minLocal = (u - 12) * 32 / 255 - 23
            var local = p
            if p > maxLocal {
                let k = minLocal + (p - minLocal) % (u - 4)
                local = k <= maxLocal ? k : minLocal
            }
            var payload = Array(b[at..<(at + local)])
            var pages = [page]
            if local < p {
                var next = u32(b, at + local)
                while next != 0 && payload.count < p {
                    tree.overflow.append(next)
                    pages.append(next)
                    let o = Int(next - 1) * pageSize
                    payload += b[(o + 4)..<(o + 4 + min(u - 4, p - payload.count))]
                    next = u32(b, o)
                }
            }
            if type == 0x0D {
                tree.rows[.rowid(rowid)] = pages
            } else if keyCount > 0 {
                tree.rows[.key(PageMap.fields(payload, count: keyCount))] = pages
            }
        }
        if !leaf { walk(b, u32(b, h + 8), table: table, keyCount: keyCount, into: &tree) }
    }

    /// The first `count` fields of a record, as values (TEXT as its bytes: UTF-8 files).
    static func fields(_ r: [UInt8], count: Int) -> [Value] {
        let map = PageMap(pageSize: 0, usable: 0, pageCount: 0)
        let (headerSize, n) = map.varint(r, 0)
        var at = n
        var offset = Int(headerSize)
        var values: [Value] = []
        while at < Int(headerSize) && values.count < count {
            let (t, len) = map.varint(r, at)
            at += len
            let type = Int(t)
            switch type {
            case 0: values.append(.null)
            case 1...6:
                let width = [0, 1, 2, 3, 4, 6, 8][type]
                var v = Int64(Int8(bitPattern: r[offset]))
                for j in 1..<width { v = v << 8 | Int64(r[offset + j]) }
                values.append(.integer(v))
                offset += width
            case 7:
                var bits: UInt64 = 0
                for j in 0..<8 { bits = bits << 8 | UInt64(r[offset + j]) }
                values.append(.real(Double(bitPattern: bits)))
                offset += 8
            case 8: values.append(.integer(0))
            case 9: values.append(.integer(1))
            default:
                let length = (type - 12) / 2
                let bytes = Array(r[offset..<(offset + length)])
                values.append(type % 2 == 0 ? .blob(bytes) : .text(bytes))
                offset += length
            }
        }
        return values
    }
}
