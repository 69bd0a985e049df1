// `litectl repo upgrade`: a version-3 repository made version 4, so that
// `litectl replicate` may store segments in it. Only `config` changes (its
// version field); every object of version 3 is an object of version 4. It is
// explicit because a litectl from before version 4 then refuses the
// repository as a whole, which is the point: its prune would not know that
// segments use packs, and would delete them.
import Foundation

public enum RepoUpgrade {
    public enum Outcome: Sendable, Equatable {
        case upgraded(from: Int)
        case alreadyCurrent
    }

    /// Upgrades the repository at `store` to version 4 under an exclusive
    /// lock (no other litectl at work in it meanwhile, older ones included).
    public static func run(_ store: ObjectStore, secret: RepoSecret?, lockTimeout: Double) throws -> Outcome {
        let repository = try Repository.open(store, secret: secret)
        if repository.version >= 4 { return .alreadyCurrent }
        guard repository.version == 3 else {
            throw StoreError(.other, location: store.location,
                             message: "repository format version \(repository.version) cannot be upgraded (only version 3 can; its snapshots record their page ids' digest): make a new repository with `litectl repo init`")
        }
        let lock = try RepoLock(repository, exclusive: true, command: "repo upgrade", timeout: lockTimeout)
        defer { lock.release() }
        let bytes = try store.get("config")
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              object["format"] as? String == Repository.format, (object["version"] as? NSNumber)?.intValue == 3 else {
            throw StoreError(.other, location: store.location + "/config", message: "not a valid repository config, or changed meanwhile")
        }
        // The config's fields in their written order, the version replaced.
        var fields: [(String, JSON)] = [("format", .string(Repository.format)), ("version", .integer(4))]
        for key in ["id", "created_at", "page_id", "compression"] {
            if let value = object[key] as? String { fields.append((key, .string(value))) }
        }
        fields.append(("upgraded_at", .string(Timestamp.iso8601(Clock.wall()))))
        fields.append(("encryption", try encryptionJSON(object["encryption"])))
        try store.put("config", Array((JSON.object(fields).pretty + "\n").utf8))
        // The config reads back as version 4, with the same id and key.
        let reopened = try Repository.open(store, secret: secret)
        guard reopened.version == 4, reopened.id == repository.id else {
            throw StoreError(.other, location: store.location + "/config", message: "the upgraded config does not read back")
        }
        return .upgraded(from: 3)
    }

    /// The `encryption` member as it was (null, or its fields in the written order).
    static func encryptionJSON(_ value: Any?) throws -> JSON {
        guard let enc = value as? [String: Any] else { return .null }
        var out: [(String, JSON)] = []
        for key in ["cipher", "kdf", "salt", "n", "r", "p", "wrapped_key"] {
            if let s = enc[key] as? String { out.append((key, .string(s))) }
            else if let n = enc[key] as? NSNumber { out.append((key, .integer(n.int64Value))) }
        }
        return .object(out)
    }
}
