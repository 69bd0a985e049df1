// URLs as litectl shows them: the credentials a URL can carry (the userinfo of
// `http://KEY:SECRET@host`, the signature, credential and token of a presigned
// query string) are replaced by `***` before a URL reaches a message, so that
// no error line, note, JSON document or metrics file prints a secret. Endpoint
// and repository URLs with credentials are refused (docs/safety.md); this is
// how the refusal, and any other message about such a URL, names it.

public enum URLRedaction {
    /// What replaces a secret.
    public static let mask = "***"

    /// Query parameters whose values are secrets, by what their names contain
    /// (lower case): AWS's presigned `X-Amz-Signature`, `X-Amz-Credential`,
    /// `X-Amz-Security-Token`, `AWSAccessKeyId`, `Signature`, and the usual
    /// `token`, `secret`, `password`, `key`.
    static let secretParameterParts = ["signature", "credential", "token", "secret", "password", "passwd", "key", "sig"]

    /// The userinfo of `url` (`KEY:SECRET` in `http://KEY:SECRET@host:1/x`,
    /// also without a scheme: `KEY:SECRET@host`), or nil when it has none.
    public static func userinfo(of url: String) -> Substring? {
        let authority = authorityRange(of: url)
        guard let at = url[authority].lastIndex(of: "@") else { return nil }
        return url[authority.lowerBound..<at]
    }

    /// Whether `url` has a query string that carries a secret (see `secretParameterParts`).
    public static func hasSecretQuery(_ url: String) -> Bool {
        redactedQuery(of: url) != nil
    }

    /// `url` with its userinfo and the values of secret query parameters
    /// replaced by `***`; the rest (scheme, host, port, path) as it was.
    public static func redacted(_ url: String) -> String {
        var out = url
        if let (range, query) = redactedQuery(of: out) { out.replaceSubrange(range, with: query) }
        if let info = userinfo(of: out) { out.replaceSubrange(info.startIndex..<info.endIndex, with: mask) }
        return out
    }

    /// `text` with every occurrence of each URL of `urls` that holds a
    /// secret replaced by its redacted form (for a message built from a URL
    /// elsewhere).
    public static func redacting(_ urls: [String?], in text: String) -> String {
        var out = text
        for case let url? in urls where redacted(url) != url {
            out = out.replacingEvery(url, with: redacted(url))
        }
        return out
    }

    /// Why `url`, an endpoint or repository URL, is refused: it holds
    /// credentials (a userinfo, or a secret in its query string), which would
    /// then be printed wherever the URL is. The URL is named redacted. nil
    /// when it holds none.
    public static func credentialProblem(_ url: String) -> String? {
        let how = "give credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or in a profile (--profile, AWS_PROFILE)"
        if userinfo(of: url) != nil {
            return "\(redacted(url)): a URL must not hold credentials (user:password@): \(how)"
        }
        if hasSecretQuery(url) {
            return "\(redacted(url)): a URL must not hold credentials (a signature, key or token in its query string): \(how)"
        }
        return nil
    }

    /// Where the authority is: after `scheme://` (or from the start when
    /// there is none) up to the first `/`, `?` or `#`.
    private static func authorityRange(of url: String) -> Range<String.Index> {
        var start = url.startIndex
        if let marker = url.firstRange(of: "://") { start = marker.upperBound }
        let end = url[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        return start..<end
    }

    /// The query of `url` (between `?` and `#`) with secret values masked,
    /// and its range; nil when nothing in it is secret.
    private static func redactedQuery(of url: String) -> (Range<String.Index>, String)? {
        guard let question = url.firstIndex(of: "?") else { return nil }
        let start = url.index(after: question)
        let end = url[start...].firstIndex(of: "#") ?? url.endIndex
        var changed = false
        let pairs = url[start..<end].split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
            guard let eq = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<eq].lowercased()
            guard secretParameterParts.contains(where: { name.contains($0) }), pair.index(after: eq) < pair.endIndex else { return String(pair) }
            changed = true
            return pair[...eq] + mask
        }
        return changed ? (start..<end, pairs.joined(separator: "&")) : nil
    }
}

extension String {
    /// Every occurrence of `target` replaced by `replacement` (no Foundation in the base).
    func replacingEvery(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            out += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}
