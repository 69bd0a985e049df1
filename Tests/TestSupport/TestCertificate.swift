// Self-signed TLS certificates for the S3 tests' HTTPS servers (FaultProxy
// with a certificate), made by the openssl CLI in a temporary folder: one for
// 127.0.0.1, one for another name, one that has expired.
import Foundation

public final class TestCertificate: @unchecked Sendable {
    /// PEM files: the certificate (also usable as its own CA bundle) and its key.
    public let certificate: String
    public let key: String
    let folder: TemporaryFolder

    public enum Kind: Sendable {
        /// Valid for a day, for IP address 127.0.0.1.
        case loopback
        /// Valid for a day, for DNS name `name` only.
        case otherName(String)
        /// For 127.0.0.1, but its validity ended a day ago.
        case expired
    }

    public init(_ kind: Kind) throws {
        folder = try TemporaryFolder("cert")
        certificate = folder.file("cert.pem")
        key = folder.file("key.pem")
        let subject: String, altName: String
        switch kind {
        case .loopback, .expired: (subject, altName) = ("/CN=127.0.0.1", "IP:127.0.0.1")
        case .otherName(let name): (subject, altName) = ("/CN=\(name)", "DNS:\(name)")
        }
        let keyArguments = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key]
        switch kind {
        case .loopback, .otherName:
            try Self.openssl(["req", "-x509"] + keyArguments + ["-out", certificate, "-days", "1", "-subj", subject,
                                                                 "-addext", "subjectAltName=\(altName)"])
        case .expired:
            // `x509 -days -1` signs a certificate whose end lies a day before now.
            let request = folder.file("request.csr"), extensions = folder.file("ext.cnf")
            try "subjectAltName=\(altName)\n".write(toFile: extensions, atomically: true, encoding: .utf8)
            try Self.openssl(["req", "-new"] + keyArguments + ["-out", request, "-subj", subject])
            try Self.openssl(["x509", "-req", "-in", request, "-signkey", key, "-days", "-1", "-extfile", extensions, "-out", certificate])
        }
    }

    static func openssl(_ arguments: [String]) throws {
        let r = try runProcess("/usr/bin/openssl", arguments)
        guard r.status == 0 else { throw POSIXError(.EIO) }
    }
}
