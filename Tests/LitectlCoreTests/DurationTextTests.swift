// The one duration syntax (`DurationText`): every form the options take, the
// round trip of help texts' defaults, and the inputs it must refuse.
import XCTest
import LitectlCore

final class DurationTextTests: XCTestCase {
    func testForms() throws {
        let cases: [(String, Double)] = [
            ("90", 90), ("2.5", 2.5), ("0", 0), ("0.5", 0.5), (".5", 0.5), ("5.", 5),
            ("90s", 90), ("0.5s", 0.5), ("250ms", 0.25), ("15m", 900), ("1h", 3600), ("7d", 604_800),
            ("2w", 1_209_600), ("1y", 31_536_000), ("1h30m", 5400), ("1d12h", 129_600), ("1h0m5s", 3605),
            ("1.5h", 5400), ("1m30s500ms", 90.5), ("7D", 604_800), ("1H30M", 5400),
        ]
        for (text, seconds) in cases {
            XCTAssertEqual(try DurationText.seconds(text), seconds, accuracy: 1e-9, text)
        }
    }

    func testRefused() {
        for text in ["", "s", "-5", "+5", "1e3", "5 s", " 5", "5x", "1..5", "1.2.3s", ".", ".s", "1h1h", "30m1h",
                     "1hm", "h1", "5sec", "nan", "inf", "1_000", "5\u{0}", "١٢s", "101y", "99999999999999999999d"] {
            XCTAssertThrowsError(try DurationText.seconds(text), text) { error in
                XCTAssertTrue("\(error)".contains("give a duration like"), "\(error)")
            }
        }
    }

    func testUnitRequired() throws {
        XCTAssertThrowsError(try DurationText.seconds("7", bareNumbers: false)) { error in
            XCTAssertTrue("\(error)".contains("needs a unit"), "\(error)")
        }
        XCTAssertEqual(try DurationText.seconds("7d", bareNumbers: false), 604_800)
        XCTAssertEqual(try DurationText.seconds("7s", bareNumbers: false), 7)
    }

    /// What help texts print as a default reads back as the same duration.
    func testTextRoundTrip() throws {
        for seconds in [0, 0.1, 0.5, 1, 1.5, 59, 60, 90, 3600, 5400, 86_400, 90_061, 604_800] {
            let text = DurationText.text(seconds)
            XCTAssertEqual(try DurationText.seconds(text), seconds, accuracy: 1e-9, text)
        }
        XCTAssertEqual(DurationText.text(3600), "1h")
        XCTAssertEqual(DurationText.text(5400), "1h30m")
        XCTAssertEqual(DurationText.text(0.1), "0.1s")
        XCTAssertEqual(DurationText.text(60), "1m")
    }
}
