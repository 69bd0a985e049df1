// Which cells of a damaged table leaf keep their place (Recover/
// TreeSalvage.swift `ascendingRun`): a rowid out of order leaves alone;
// two that could trade places both leave (the page cannot tell which is
// damaged); two cells of one rowid (a repeated cell pointer) keep one of
// them in the table, never neither.
import Testing
@testable import LitectlCore

@Suite struct AscendingRunTests {
    func run(_ keys: [Int64]) -> [Bool] {
        TreeSalvage.ascendingRun(keys, Array(repeating: .salvaged, count: keys.count))
    }

    @Test func aSoundOrderKeepsEveryCell() {
        #expect(run([1, 2, 5, 9, 40]) == [true, true, true, true, true])
    }

    @Test func oneKeyOutOfOrderLeavesAlone() {
        #expect(run([10, 20, 99, 40, 50]) == [true, true, false, true, true])
    }

    @Test func twoKeysThatCouldTradePlacesBothLeave() {
        #expect(run([10, 30, 20, 40]) == [true, false, false, true])
    }

    @Test func twoCellsOfOneRowidKeepTheLastInTheTable() {
        #expect(run([10, 20, 30, 30, 50]) == [true, true, false, true, true])
        #expect(run([7, 7]) == [false, true])
    }
}
