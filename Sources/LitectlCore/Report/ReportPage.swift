// The frame every report page shares: one self-contained HTML document with
// its style and its one script inline, under a Content Security Policy that
// forbids every fetch (no network, no other file) and runs no script but the
// report's own, named by its SHA-256 (so markup that slipped into a name could
// not run even if escaping failed).
// See https://www.w3.org/TR/CSP3/#grammardef-hash-source
import Foundation

enum ReportPage {
    /// The page's head: charset, the policy, the title, the style.
    static func begin(_ html: inout HTMLText, title: String) {
        html.markup("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
        html.markup("<meta http-equiv=\"Content-Security-Policy\" content=\"\(policy)\">\n")
        html.markup("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
        html.markup("<meta name=\"referrer\" content=\"no-referrer\">\n<title>")
        html.svgText(title)  // plain: a <title> shows markup as text
        html.markup("</title>\n<style>\(style)</style>\n</head>\n<body>\n")
    }

    /// The footer, the script, and the end of the document.
    static func end(_ html: inout HTMLText, generator: String) {
        html.markup("<footer>")
        html.text(generator)
        html.markup("</footer>\n<script>\(script)</script>\n</body></html>\n")
    }

    /// Nothing may be fetched (`default-src 'none'` covers images, fonts,
    /// frames, connections); inline style is allowed; the one script runs by its hash.
    static let policy = "default-src 'none'; style-src 'unsafe-inline'; script-src '\(scriptHash)'; base-uri 'none'; form-action 'none'"

    static let scriptHash: String = {
        var hasher = SHA256Hasher()
        hasher.update(Array(script.utf8))
        return "sha256-" + Data(hasher.finalizeBytes()).base64EncodedString()
    }()

    /// Sorting of the tables marked `sortable` (numbers by their `data-v`),
    /// on a click or from the link's `#sort=` fragment, and the treemap's
    /// colouring by unused bytes or by fragmentation.
    static let script = """
        (function () {
          function key(cell) {
            var v = cell.getAttribute('data-v');
            if (v === null && cell.classList.contains('n')) v = cell.textContent;
            return v === null ? cell.textContent : parseFloat(v);
          }
          function sortTable(table, column, ascending) {
            var heads = table.tHead.rows[0].cells;
            Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('aria-sort'); });
            heads[column].setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
            var body = table.tBodies[0];
            var rows = Array.prototype.slice.call(body.rows);
            var fixed = rows.filter(function (r) { return r.classList.contains('fixed'); });
            rows = rows.filter(function (r) { return !r.classList.contains('fixed'); });
            rows.sort(function (a, b) {
              var x = key(a.cells[column]), y = key(b.cells[column]);
              var c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
              return ascending ? c : -c;
            });
            rows.concat(fixed).forEach(function (r) { body.appendChild(r); });
          }
          document.querySelectorAll('table.sortable').forEach(function (table) {
            Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
              th.tabIndex = 0;
              function sort() { sortTable(table, column, th.getAttribute('aria-sort') !== 'ascending'); }
              th.addEventListener('click', sort);
              th.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sort(); } });
            });
          });
          // A link may name a sort: #sort=TABLE-ID:COLUMN or #sort=TABLE-ID:COLUMN:desc.
          var wanted = /^#sort=([A-Za-z0-9-]+):([0-9]+)(:desc)?$/.exec(location.hash);
          var target = wanted && document.getElementById(wanted[1]);
          if (target && target.classList.contains('sortable') && +wanted[2] < target.tHead.rows[0].cells.length) {
            sortTable(target, +wanted[2], !wanted[3]);
          }
          document.querySelectorAll('input[name=colour]').forEach(function (input) {
            input.addEventListener('change', function () {
              var by = input.value === 'fragmentation' ? 'data-c2' : 'data-c1';
              document.querySelectorAll('svg.treemap rect[data-c1]').forEach(function (r) {
                r.setAttribute('fill', r.getAttribute(by));
              });
              document.querySelectorAll('.legend-what').forEach(function (s) {
                s.textContent = input.value === 'fragmentation' ? 'leaf pages out of order' : 'unused bytes';
              });
            });
          });
        })();
        """

    static let style = """
        :root{--ok:#2e7d32;--warn:#b26a00;--err:#c62828;--note:#546e7a;--line:#ddd;--muted:#666}
        body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:16px 20px 40px;color:#1d1d1d;background:#fff}
        h1{font-size:22px;margin:0 0 4px;word-break:break-all}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:3px}
        h3{font-size:15px;margin:18px 0 6px;word-break:break-all}
        dl.facts{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:2px 14px;margin:8px 0}
        dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;word-break:break-all}
        .verdict{display:inline-block;padding:4px 10px;border-radius:4px;color:#fff;font-weight:600}
        .verdict.ok{background:var(--ok)}.verdict.warning{background:var(--warn)}.verdict.error{background:var(--err)}
        .sev{display:inline-block;min-width:58px;padding:0 5px;border-radius:3px;color:#fff;font-size:12px;text-align:center}
        .sev.error{background:var(--err)}.sev.warning{background:var(--warn)}.sev.note{background:var(--note)}.sev.added{background:var(--ok)}
        table{border-collapse:collapse;margin:6px 0;font-size:13px}
        th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
        th{background:#f4f4f4;font-weight:600;white-space:nowrap}
        table.sortable th{cursor:pointer}table.sortable th[aria-sort=ascending]::after{content:" ▲"}table.sortable th[aria-sort=descending]::after{content:" ▼"}
        td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
        td.name{word-break:break-all;max-width:340px}
        .esc{color:#a0005a;background:#fbe9f2;border-radius:2px;font-family:ui-monospace,monospace}
        .more{color:var(--muted);font-style:italic}
        code,.v{font-family:ui-monospace,"SFMono-Regular",Menlo,monospace;font-size:12px}
        td.v{white-space:pre-wrap;word-break:break-all;max-width:260px}
        .fix{color:var(--muted)}
        svg.treemap{width:100%;height:auto;border:1px solid var(--line);display:block}
        svg.treemap rect.block{stroke:#fff;stroke-width:.6}svg.treemap rect.outline{fill:none;stroke:#333;stroke-width:1.4;pointer-events:none}
        svg.treemap text{font-size:11px;fill:#111;pointer-events:none}
        .legend{display:flex;gap:16px;align-items:center;flex-wrap:wrap;margin:6px 0;color:var(--muted);font-size:13px}
        .ramp{display:inline-block;width:120px;height:10px;background:linear-gradient(90deg,hsl(120,55%,62%),hsl(60,55%,62%),hsl(0,55%,62%));vertical-align:middle}
        .swatch{display:inline-block;width:12px;height:12px;vertical-align:middle;border:1px solid #999}
        .bars td.bar{width:45%;min-width:200px}
        .bar span{display:inline-block;height:12px;vertical-align:middle}
        .ins{background:#66bb6a}.del{background:#ef5350}.upd{background:#ffb300}.grow{background:#e57373}.shrink{background:#64b5f6}
        tr.old td.changed{background:#fde0dc}tr.new td.changed{background:#d7f5dc}
        tr.insert td.v{background:#eef9ef}tr.delete td.v{background:#fdeeee}
        td.op{font-weight:700;text-align:center}tr.pair-end td{border-bottom:2px solid #bbb}
        td.key{font-weight:600}
        pre.sql{background:#f7f7f7;padding:6px 8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all;margin:4px 0}
        .muted{color:var(--muted)}
        footer{margin-top:36px;color:var(--muted);font-size:12px}
        """
}

extension HTMLText {
    /// A `dl` of facts in two columns.
    mutating func facts(_ pairs: [(String, String)]) {
        markup("<dl class=\"facts\">")
        for (label, value) in pairs {
            markup("<dt>")
            text(label)
            markup("</dt><dd>")
            text(value, limit: 1_000)
            markup("</dd>")
        }
        markup("</dl>\n")
    }

    /// A `td` holding a number, right-aligned, sortable by `sortValue` (by
    /// its text when that is the number: fewer bytes per row of a long table).
    mutating func numberCell(_ shown: String, sortValue: String? = nil) {
        if let sortValue, sortValue != shown {
            markup("<td class=\"n\" data-v=\"\(sortValue)\">")
        } else {
            markup("<td class=\"n\">")
        }
        text(shown)
        markup("</td>")
    }

    /// A `td` holding a name.
    mutating func nameCell(_ name: String) {
        markup("<td class=\"name\">")
        text(name)
        markup("</td>")
    }
}

/// When a report was made, in UTC: `2024-06-01 12:00:00 UTC`.
func reportTimestamp(_ date: Date) -> String {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
    func two(_ v: Int?) -> String { let s = String(v ?? 0); return s.count < 2 ? "0" + s : s }
    return "\(c.year ?? 0)-\(two(c.month))-\(two(c.day)) \(two(c.hour)):\(two(c.minute)):\(two(c.second)) UTC"
}
