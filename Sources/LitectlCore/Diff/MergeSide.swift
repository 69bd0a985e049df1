// One side of a merge in key order, as the merges of DiffEngine and
// KeylessResidue read it: decoded rows (`RowStream`) or key columns and the
// raw record, decoded only when the merge must look into a row
// (`RecordStream`). The merge loops are written once, over either.

protocol MergeSide: AnyObject {
    /// Moves to the next row; false at the end.
    func next() throws -> Bool
    /// The current row's key columns, where the merge's key indexes find them.
    var keyRow: DiffRow { get }
    /// Whether the current rows of this side and `other` are the same bytes
    /// (then they are equal rows; rows that differ in bytes may still hold
    /// equal values, which the merge decides from `decoded`).
    func sameBytes(as other: Self) -> Bool
    /// The current row in the plan's columns, valid until the next call of
    /// `next` or `decoded`.
    func decoded() throws -> DiffRow
}

// Inlined: the merge loops call these once or twice a row.
extension RowStream: MergeSide {
    var keyRow: DiffRow { @inline(__always) get { row } }
    @inline(__always) func sameBytes(as other: RowStream) -> Bool { compareBytes(row.encoded, other.row.encoded) == 0 }
    @inline(__always) func decoded() -> DiffRow { row }
}

extension RecordStream: MergeSide {
    var keyRow: DiffRow { @inline(__always) get { keys } }
    @inline(__always) func sameBytes(as other: RecordStream) -> Bool { compareBytes(record, other.record) == 0 }
}
