// `litectl recover` against the sqlite3 shell's `.recover` (SQLite's own
// salvage, of the same SQLite version) on damaged copies of every real
// database: per table of the original, litectl keeps at least the rows the
// shell keeps (in the table or in lost_and_found) and at least as many of
// the original's rows, and its tables hold at least as many rows exactly as
// they were.
// Skipped when ../shared/corpus/real is absent, or the shell with
// sqlite_dbpage cannot be built (scripts/build-sqlite-shell).
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct RecoverParityTests {
    /// Damages chosen for what they break, beside the standard ones: a cell
    /// count made too large (its pointer array then seems to cover the
    /// page's first cells; the bit-flipped sql-murder-mystery lost
    /// rows so), the leaf holding an R*Tree's root node (the issue's
    /// GeoPackage with a zeroed leaf), and a leaf of Chinook's Track, whose
    /// rows other tables refer to (the foreign-key orphans).
    static func chosen(for path: String, map: PageMap) -> [CorpusDamage] {
        let pageSize = map.pageSize
        func zero(_ page: UInt32) -> @Sendable (inout [UInt8]) -> Void {
            { bytes in for i in Int(page - 1) * pageSize..<Int(page) * pageSize { bytes[i] = 0 } }
        }
        var damages: [CorpusDamage] = []
        if let leaves = map.trees["person"]?.leaves, leaves.count > 2 {
            let leaf = leaves[leaves.count / 2]
            damages.append(CorpusDamage(name: "cell count of leaf \(leaf) of person 2,048 too large") { bytes in
                bytes[Int(leaf - 1) * pageSize + 3] ^= 0x08
            })
        }
        if let node = map.trees["rtree_point2d_geom_node"]?.leaves.first {
            damages.append(CorpusDamage(name: "leaf \(node) of rtree_point2d_geom_node (the R*Tree's root node) zeroed", apply: zero(node)))
        }
        if DurableFolder.baseName(of: path).hasPrefix("Chinook"), let leaves = map.trees["Track"]?.leaves, leaves.count > 2 {
            damages.append(CorpusDamage(name: "leaf \(leaves[1]) of Track zeroed", apply: zero(leaves[1])))
        }
        return damages
    }

    @Test(.enabled(if: !realDatabases.isEmpty && recoverShell != nil))
    func keepsAtLeastWhatTheShellKeeps() throws {
        let shell = try #require(recoverShell)
        var copies = 0
        for path in realDatabases {
            let folder = try TemporaryFolder("recover-parity")
            let original = try folder.copy(path, as: "original.db")
            let map = try PageMap.read(original)
            let pristine = [UInt8](try Data(contentsOf: URL(fileURLWithPath: original)))
            for damage in CorpusDamage.standard(for: path, map: map) + RecoverParityTests.chosen(for: path, map: map) {
                copies += 1
                let label = "\(DurableFolder.baseName(of: path)): \(damage.name)"
                let damaged = folder.file("damaged.db"), ours = folder.file("litectl.db"), theirs = folder.file("shell.db")
                for file in [damaged, ours, theirs] { try? FileManager.default.removeItem(atPath: file) }
                var bytes = pristine
                damage.apply(&bytes)
                try Data(bytes).write(to: URL(fileURLWithPath: damaged))

                let run = try runProcess(litectlBinary, ["recover", damaged, ours])
                #expect(run.status == 0 || run.status == 1, "\(label): \(run.stderr)")
                let script = try runProcess(shell, [damaged, ".recover"])
                // Applied as far as SQLite takes it (the shell writes rows a STRICT table refuses, say).
                try runProcess(sqlite3Binary, [theirs], input: script.stdoutBytes)

                let a = try SalvageTally.tally(output: ours, original: original, map: map)
                let b = try SalvageTally.tally(output: theirs, original: original, map: map)
                for table in b.keys.sorted() {
                    let mine = a[table] ?? SalvageTally(), shells = b[table] ?? SalvageTally()
                    #expect(mine.rows >= shells.rows, "\(label): \(table): litectl keeps \(mine), the shell \(shells)")
                    #expect(mine.present >= shells.present, "\(label): \(table): litectl keeps \(mine), the shell \(shells)")
                }
                let mine = SalvageTally.total(a.values), shells = SalvageTally.total(b.values)
                #expect(mine.exact >= shells.exact, "\(label): litectl keeps \(mine), the shell \(shells)")
                print("recover parity: \(label): litectl \(mine); the shell's .recover \(shells)")
            }
        }
        #expect(copies >= 16)
    }
}
