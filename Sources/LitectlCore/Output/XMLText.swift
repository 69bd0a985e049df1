// Text made safe for an XML 1.0 document (check's JUnit report): markup
// characters as entities, and the characters XML 1.0 cannot hold at all
// (C0 controls but tab, line feed and carriage return; U+FFFE, U+FFFF) shown
// visibly as \xNN or \u{NNNN}, since no escape can carry them.
// See https://www.w3.org/TR/xml/#charsets

public enum XMLText {
    /// `text` for element content, or with `attribute` for a double-quoted
    /// attribute value (where line breaks and tabs are character references,
    /// so that a parser's attribute-value normalization keeps them).
    public static func escaped(_ text: String, attribute: Bool = false) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"" where attribute: out += "&quot;"
            case "\n" where attribute: out += "&#10;"
            case "\r": out += "&#13;"
            case "\t" where attribute: out += "&#9;"
            case "\n", "\t": out.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20:
                out += "\\x" + (scalar.value < 16 ? "0" : "") + String(scalar.value, radix: 16, uppercase: true)
            case "\u{FFFE}", "\u{FFFF}":
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
