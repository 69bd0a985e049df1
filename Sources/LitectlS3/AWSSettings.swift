// Where the S3 settings come from, as the AWS CLI reads them: explicit
// options, then the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION/AWS_DEFAULT_REGION, AWS_ENDPOINT_URL,
// AWS_PROFILE, AWS_CA_BUNDLE), then the profile in ~/.aws/credentials and
// ~/.aws/config.
import Foundation
import LitectlCore
import NIOSSL

/// What the command line gave (nil: look further).
public struct S3Options: Sendable {
    public var endpoint: String?
    public var region: String?
    public var profile: String?
    /// A PEM file of CA certificates to trust instead of the system's (as the AWS CLI's --ca-bundle).
    public var caBundle: String?
    public init(endpoint: String? = nil, region: String? = nil, profile: String? = nil, caBundle: String? = nil) {
        self.endpoint = endpoint; self.region = region; self.profile = profile; self.caBundle = caBundle
    }
}

/// The settings a client uses.
public struct S3Settings: Sendable, Equatable {
    public var credentials: AWSCredentials
    public var region: String
    /// nil: AWS itself (https://s3.REGION.amazonaws.com).
    public var endpoint: String?
    /// PEM certificates to trust instead of the system's CA roots (a private
    /// CA, a self-signed server), as the AWS CLI's AWS_CA_BUNDLE and ca_bundle.
    public var caBundle: String?
}

public enum AWSSettings {
    /// INI sections of an AWS shared file: section name → key → value.
    public static func parseINI(_ text: String) -> [String: [String: String]] {
        var out: [String: [String: String]] = [:]
        var section: String?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let section, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            out[section, default: [:]][key] = value
        }
        return out
    }

    /// Resolves the settings; `environment` and `home` are injectable for tests.
    public static func resolve(_ options: S3Options, environment: [String: String] = ProcessInfo.processInfo.environment,
                               home: String? = nil, location: String) throws -> S3Settings {
        func env(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let home = home ?? env("HOME") ?? NSHomeDirectory()
        let profile = options.profile ?? env("AWS_PROFILE") ?? "default"
        func read(_ path: String) -> [String: [String: String]] {
            guard let data = FileManager.default.contents(atPath: path) else { return [:] }
            return parseINI(String(decoding: data, as: UTF8.self))
        }
        let credentialsFile = env("AWS_SHARED_CREDENTIALS_FILE") ?? home + "/.aws/credentials"
        let configFile = env("AWS_CONFIG_FILE") ?? home + "/.aws/config"
        let fromCredentials = read(credentialsFile)[profile] ?? [:]
        let config = read(configFile)
        let fromConfig = config[profile == "default" ? "default" : "profile " + profile] ?? config[profile] ?? [:]
        func setting(_ key: String) -> String? { fromCredentials[key] ?? fromConfig[key] }

        let credentials: AWSCredentials
        if let id = env("AWS_ACCESS_KEY_ID"), let secret = env("AWS_SECRET_ACCESS_KEY") {
            credentials = AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN"))
        } else if let id = setting("aws_access_key_id"), let secret = setting("aws_secret_access_key") {
            credentials = AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: setting("aws_session_token"))
        } else {
            throw StoreError(.denied, location: location,
                             message: "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give a profile (AWS_PROFILE, --profile) in \(credentialsFile) or \(configFile)")
        }
        let region = options.region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ?? setting("region") ?? "us-east-1"
        let endpointSource = options.endpoint != nil ? "--endpoint" : env("AWS_ENDPOINT_URL_S3") != nil ? "AWS_ENDPOINT_URL_S3"
            : env("AWS_ENDPOINT_URL") != nil ? "AWS_ENDPOINT_URL" : "endpoint_url of profile \(profile)"
        var endpoint = options.endpoint ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL") ?? setting("endpoint_url")
        if let e = endpoint {
            // Credentials in the URL would be printed in every error that
            // names the endpoint: refused, and the URL named with them masked.
            if let problem = URLRedaction.credentialProblem(e) {
                throw StoreError(.other, location: endpointSource, message: problem)
            }
            guard e.hasPrefix("http://") || e.hasPrefix("https://"), URL(string: e)?.host != nil else {
                throw StoreError(.other, location: URLRedaction.redacted(e), message: "not an endpoint URL (give http://HOST:PORT or https://HOST)")
            }
            guard URL(string: e)?.query == nil, URL(string: e)?.fragment == nil else {
                throw StoreError(.other, location: URLRedaction.redacted(e), message: "an endpoint URL takes no query string or fragment (give http://HOST:PORT or https://HOST)")
            }
            while endpoint!.hasSuffix("/") { endpoint!.removeLast() }
        }
        let caBundle = options.caBundle ?? env("AWS_CA_BUNDLE") ?? setting("ca_bundle")
        if let caBundle {
            // Checked here, so that a bad bundle is named rather than failing every handshake.
            guard let certificates = try? NIOSSLCertificate.fromPEMFile(caBundle), !certificates.isEmpty else {
                throw StoreError(.other, location: caBundle, message: "not a readable file of PEM certificates (AWS_CA_BUNDLE, ca_bundle)")
            }
        }
        return S3Settings(credentials: credentials, region: region, endpoint: endpoint, caBundle: caBundle)
    }
}
