// Moments as people write them (`MomentTime`, `PointInTime`): every form of
// WHEN against times computed independently (Python's calendar.timegm), the
// end-of-unit rule, and the inputs that must be refused.
import Foundation
import XCTest
import LitectlCore

final class PointInTimeTests: XCTestCase {
    /// 2026-12-07T08:00:00Z (calendar.timegm((2026, 12, 7, 8, 0, 0))).
    let eight = 1_796_630_400.0
    let now = 1_796_634_000.5  // 2026-12-07T09:00:00.5Z

    func t(_ text: String) throws -> Double { try MomentTime.parse(text, now: now) }

    func testRFC3339() throws {
        // A whole second means up to its last microsecond.
        XCTAssertEqual(try t("2026-12-07T08:00:00Z"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T09:00:00+01:00"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T03:00:00-05:00"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T13:30:00+05:30"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T09:00:00+0100"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07t08:00:00z"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07 08:00:00"), eight + 0.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T08:00:00"), eight + 0.999999, accuracy: 1e-6)
        // Fractions: up to the end of the last digit given.
        XCTAssertEqual(try t("2026-12-07T08:00:00.25Z"), eight + 0.259999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T09:00:00.123456+01:00"), eight + 0.123456, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T08:00:00.000Z"), eight + 0.000999, accuracy: 1e-6)
        // A minute, a day: their whole length.
        XCTAssertEqual(try t("2026-12-07T08:00Z"), eight + 59.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07T09:00+01:00"), eight + 59.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2026-12-07"), 1_796_601_600 + 86_399.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("2024-02-29"), 1_709_164_800 + 86_399.999999, accuracy: 1e-6)
    }

    func testRelativeAndEpoch() throws {
        XCTAssertEqual(try t("-10m"), now - 600, accuracy: 1e-9)
        XCTAssertEqual(try t("-2h"), now - 7200, accuracy: 1e-9)
        XCTAssertEqual(try t("-1d"), now - 86_400, accuracy: 1e-9)
        XCTAssertEqual(try t("-1h30m"), now - 5400, accuracy: 1e-9)
        XCTAssertEqual(try t("-90"), now - 90, accuracy: 1e-9)
        XCTAssertEqual(try t("-0.5s"), now - 0.5, accuracy: 1e-9)
        XCTAssertEqual(try t("now"), now)
        // 1765098000 is 2025-12-07T09:00:00Z (date -u -d @1765098000).
        XCTAssertEqual(try t("1765098000"), 1_765_098_000.999999, accuracy: 1e-6)
        XCTAssertEqual(try t("1765098000.5"), 1_765_098_000.599999, accuracy: 1e-6)
        XCTAssertEqual(try t("1765098000"), try t("2025-12-07T09:00:00Z"), accuracy: 1e-9)
        // Without `now`, the wall clock.
        let wall = Date().timeIntervalSince1970
        XCTAssertEqual(try MomentTime.parse("-1h"), wall - 3600, accuracy: 5)
    }

    func testRefused() {
        for text in ["", "yesterday", "-", "-10x", "+10m", "--10m", "-1h-1h", "2026-13-01", "2026-02-29", "2026-04-31",
                     "2026-12-07T24:00:00Z", "2026-12-07T08:60Z", "2026-12-07T08:00:60Z", "2026-12-07T08Z", "2026-12-07T8:00Z",
                     "2026-12-07T08:00:00+25:00", "2026-12-07T08:00:00+01:60", "2026-12-07T08:00:00ZZ", "2026-12-07T08:00:00.Z",
                     "2026-12-07T08:00:00.1234567890Z", "2026-12-07+01:00", "26-12-07", "2026/12/07", "1765098000.", ".5",
                     "1.2.3", "999999999999999", "1969-12-31T23:59:59Z", "2026-12-07T08:00:00 Z", "1e9"] {
            XCTAssertThrowsError(try t(text), text) { error in
                XCTAssertTrue("\(error)".contains("give a time like"), "\(text): \(error)")
            }
        }
    }

    func testPointInTime() throws {
        XCTAssertEqual(try PointInTime.parse("latest", now: now), .latest)
        XCTAssertEqual(try PointInTime.parse("3fa8c2d1", now: now), .snapshot("3fa8c2d1"))
        XCTAssertEqual(try PointInTime.parse("3FA8", now: now), .snapshot("3fa8"))
        let full = String(repeating: "12", count: 32)
        XCTAssertEqual(try PointInTime.parse(full, now: now), .snapshot(full))
        // Decimal digits are epoch seconds, never an id.
        func time(_ text: String) throws -> Double? {
            if case .time(let t) = try PointInTime.parse(text, now: now) { return t }
            return nil
        }
        XCTAssertEqual(try XCTUnwrap(try time("12345678")), 12_345_678.999999, accuracy: 1e-6)
        XCTAssertEqual(try XCTUnwrap(try time("-10m")), now - 600, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(try time("2026-12-07T09:00:00.5+01:00")), eight + 0.599999, accuracy: 1e-6)
        for text in ["abc", "Latest", "xyz12345", "3fa8c2d1!", "deadbeefg"] {
            XCTAssertThrowsError(try PointInTime.parse(text, now: now), text) { error in
                XCTAssertTrue("\(error)".contains("snapshot id"), "\(error)")
            }
        }
    }
}
