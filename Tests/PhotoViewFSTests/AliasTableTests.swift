import Testing
@testable import PhotoViewFS

/// The aliases a mount keeps: the newest `capacity`, the oldest out first (a bulk change of
/// thousands of versions neither grows the table nor evicts the alias a rename just made).
@Suite struct AliasTableTests {
    @Test func keepsTheNewestAndEvictsTheOldestFirst() {
        var t = AliasTable(capacity: 3)
        for i in 1...3 { t.insert(UInt64(100 + i), row: Int64(i)) }
        #expect(t[101] == 1 && t[103] == 3)
        t.insert(104, row: 4)
        #expect(t[101] == nil, "the oldest stayed")
        #expect(t[102] == 2 && t[104] == 4 && t.count == 3)
        // Re-aliasing an inode updates it in place.
        t.insert(102, row: 20)
        #expect(t[102] == 20 && t.count == 3)
    }

    @Test func aBulkChangeStaysWithinCapacity() {
        var t = AliasTable(capacity: 1024)
        for i in 0..<200_000 { t.insert(UInt64(i), row: Int64(i)) }
        #expect(t.count == 1024)
        #expect(t[199_999] == 199_999 && t[198_976] == 198_976 && t[198_975] == nil)
    }
}
