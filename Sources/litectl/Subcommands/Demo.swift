// `litectl demo`: makes sample databases in a temporary folder and runs
// litectl's commands on them, showing each command line before its output.
import ArgumentParser
import Foundation
import LitectlCore

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show litectl at work on sample databases made in a temporary folder.",
        discussion: "The folder is removed afterwards unless --keep is given.")

    @Flag(help: "Keep the temporary folder and print its path.")
    var keep = false

    func run() throws {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("litectl-demo-\(ProcessInfo.processInfo.processIdentifier)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer {
            if keep { printOut(""); printOut("(sample databases kept in \(folder))") }
            else { try? FileManager.default.removeItem(atPath: folder) }
        }
        let paths = try SampleDatabases.create(in: folder)
        printOut("Sample databases in \(folder): \(paths.map { ($0 as NSString).lastPathComponent }.joined(separator: ", "))")
        let previous = FileManager.default.currentDirectoryPath
        _ = FileManager.default.changeCurrentDirectoryPath(folder)
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }

        for arguments in [["info", "shop.db"], ["info", "--json", "archive.db"], ["info", "missing.db"],
                          ["query", "shop.db", "--attach", "arch=archive.db", "--format", "table",
                           "SELECT name, total, (SELECT count(*) FROM arch.snapshots) AS snapshots FROM customer_totals ORDER BY id"],
                          ["tables", "shop.db", "archive.db", "--counts", "--format", "table"],
                          ["backup", "-v", "shop.db", "."], ["backup", "--gzip-level", "1", "--verify", "full", "-v", "shop.db", "shop-copy.db.gz"],
                          ["repo", "init", "repo"], ["backup", "-v", "shop.db", "archive.db", "--repo", "repo", "--tag", "demo"],
                          ["query", "--write", "shop.db", "UPDATE customers SET balance = balance + 1"],
                          ["backup", "-v", "shop.db", "--repo", "repo"], ["snapshots", "--repo", "repo"],
                          ["restore", "-v", "--repo", "repo", "latest", "--db", "shop.db", "shop-restored.db"],
                          ["verify", "--repo", "repo", "--read-data", "--json"],
                          ["hash", "shop.db", "archive.db"], ["diff", "--summary", "shop.db", "archive.db"],
                          ["check", "shop.db"], ["stats", "--tables", "--top", "3", "--format", "table", "shop.db"]] {
            printOut(""); printOut("$ litectl " + arguments.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " "))
            do {
                var command = try Litectl.parseAsRoot(arguments)
                try command.run()
            } catch let code as ExitCode {
                printOut("(exit status \(code.rawValue))")
            }
        }
    }
}
