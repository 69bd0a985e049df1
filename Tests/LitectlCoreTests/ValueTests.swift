// The value type's exactness: equality never crosses storage classes, TEXT
// compares as bytes, REALs by bit pattern, and the order agrees with SQLite's.
import Foundation
import Testing
import LitectlCore
import TestSupport

@Suite struct ValueTests {
    @Test func oneIsFourDifferentValues() {
        let forms: [Value] = [.integer(1), .real(1.0), .text("1"), .blob([0x31])]
        for (i, a) in forms.enumerated() {
            for (j, b) in forms.enumerated() {
                #expect((a == b) == (i == j), "\(a) vs \(b)")
            }
        }
        #expect(Set(forms).count == 4)
        #expect(Set(forms + forms).count == 4, "equal values hash alike")
    }

    @Test func textComparesAsBytesNotAsUnicodeEquivalents() {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect(composed == decomposed, "Swift String == folds canonical equivalents (the trap)")
        #expect(Value.text(composed) != Value.text(decomposed))
        #expect(Value.compare(.text(composed), .text(decomposed)) != 0)
    }

    @Test func realsCompareByBitPattern() {
        #expect(Value.real(0.0) != Value.real(-0.0))
        #expect(Value.real(-0.0) < Value.real(0.0))
        #expect(Value.real(0.1) == Value.real(0.1))
        #expect(Value.integer(1) < Value.real(1.0), "an INTEGER sorts before an equal REAL")
    }

    @Test func integerAgainstDoubleIsExactBeyondTwoToThe53() {
        let big = Int64(1) << 53 + 1  // not representable as a Double
        #expect(Value.integer(big) > Value.real(9007199254740992.0))
        #expect(Value.integer(.max) < Value.real(9223372036854775808.0))
        #expect(Value.integer(.min) > Value.real(-9223372036854777856.0))
        #expect(Value.integer(-1) > Value.real(-1.5))
        #expect(Value.integer(2) > Value.real(1.5))
        #expect(Value.integer(1) < Value.real(1.5))
    }

    @Test func orderAgreesWithSQLiteOrderBy() throws {
        let folder = try TemporaryFolder("order")
        let db = folder.file("o.db")
        let values: [Value] = [
            .null, .integer(3), .real(2.5), .integer(-7), .real(-1e300), .real(1e300), .integer(.max), .integer(.min),
            .text("b"), .text("a"), .text("ab"), .text(""), .text("\u{E9}"), .text("e\u{301}"), .text("Z"),
            .blob([]), .blob([0x00]), .blob([0xFF]), .blob([0x00, 0x01]), .real(0.1), .integer(9007199254740993),
            .real(9007199254740992.0),
        ]
        var script = "CREATE TABLE t(v);\n"
        for value in values { script += "INSERT INTO t VALUES(\(value.sqlLiteral));\n" }
        try makeDatabase(db, script)
        let sqliteOrder = try Connection(path: db).rows("SELECT v FROM t ORDER BY v").map { $0[0] }
        #expect(values.sorted() == sqliteOrder)
    }
}
