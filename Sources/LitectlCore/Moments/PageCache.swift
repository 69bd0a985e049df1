// The pages of moments kept in memory, by page id, up to a number of bytes:
// two moments of one database share every unchanged page, and a page is
// only ever stored once checked against its id, so an entry serves any
// moment that names that id. Built on Repository/ (the ids are its page ids).
// Evicts by CLOCK (second chance): a page read again since the hand last
// passed stays one more turn. Not thread-safe: its owner locks.

final class PageCache {
    private struct Slot { var id: PageID; var bytes: [UInt8]; var referenced: Bool }
    private var slots: [Slot] = []
    private var slotOf: [PageID: Int] = [:]
    private var hand = 0
    /// Bytes of pages held.
    private(set) var used = 0
    /// The most bytes of pages it holds (0: none).
    let capacity: Int

    init(capacity: Int) { self.capacity = max(0, capacity) }

    var count: Int { slots.count }

    func get(_ id: PageID) -> [UInt8]? {
        guard let i = slotOf[id] else { return nil }
        slots[i].referenced = true
        return slots[i].bytes
    }

    func contains(_ id: PageID) -> Bool { slotOf[id] != nil }

    /// Keeps `bytes` as page `id`'s (checked by the caller), evicting others
    /// to stay within `capacity`; a page larger than the whole cache is not kept.
    func put(_ id: PageID, _ bytes: [UInt8]) {
        guard slotOf[id] == nil, bytes.count <= capacity else { return }
        while used + bytes.count > capacity && !slots.isEmpty {
            if hand >= slots.count { hand = 0 }
            if slots[hand].referenced {
                slots[hand].referenced = false
                hand += 1
                continue
            }
            let gone = slots[hand]
            used -= gone.bytes.count
            slotOf[gone.id] = nil
            let last = slots.count - 1
            if hand != last {
                slots[hand] = slots[last]
                slotOf[slots[hand].id] = hand
            }
            slots.removeLast()
        }
        slotOf[id] = slots.count
        slots.append(Slot(id: id, bytes: bytes, referenced: false))
        used += bytes.count
    }
}
