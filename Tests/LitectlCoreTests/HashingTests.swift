// SHA-256 against the system's sha256sum.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct HashingTests {
    @Test func matchesSha256sum() throws {
        let folder = try TemporaryFolder("sha")
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try Data(bytes).write(to: URL(fileURLWithPath: folder.file("f")))
        var hasher = SHA256Hasher()
        hasher.update(Array(bytes[0..<777]))
        hasher.update(Array(bytes[777...]))
        let expected = try runProcess("/usr/bin/sha256sum", [folder.file("f")]).stdout.prefix(64)
        #expect(hasher.finalizeHex() == String(expected))
    }
}
