// SigV4 against AWS's published examples: the S3 developer guide's signed
// requests (GET with a Range, PUT with a payload, GET of a sub-resource and a
// listing; https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html)
// and the generic SigV4 test suite's get-vanilla cases (aws-sig-v4-test-suite).
import XCTest
import LitectlS3

final class SigV4Tests: XCTestCase {
    let s3Example = SigV4Signer(credentials: AWSCredentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE",
                                                           secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
                                region: "us-east-1", service: "s3")
    let emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    func testS3GetObjectWithRange() {
        let signed = s3Example.sign(method: "GET", path: "/test.txt", query: [],
                                    headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
                                              ("x-amz-content-sha256", emptyHash), ("x-amz-date", "20130524T000000Z")],
                                    payloadHash: emptyHash, amzDate: "20130524T000000Z")
        XCTAssertEqual(signed.canonicalRequest, """
            GET
            /test.txt

            host:examplebucket.s3.amazonaws.com
            range:bytes=0-9
            x-amz-content-sha256:\(emptyHash)
            x-amz-date:20130524T000000Z

            host;range;x-amz-content-sha256;x-amz-date
            \(emptyHash)
            """)
        XCTAssertEqual(signed.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        XCTAssertEqual(signed.authorization, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    func testS3PutObject() {
        let payload = Array("Welcome to Amazon S3.".utf8)
        let hash = SigV4Signer.sha256Hex(payload)
        XCTAssertEqual(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let signed = s3Example.sign(method: "PUT", path: "/" + SigV4Signer.uriEncode("test$file.text", keepSlash: true), query: [],
                                    headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                                              ("x-amz-date", "20130524T000000Z"), ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                                              ("x-amz-content-sha256", hash)],
                                    payloadHash: hash, amzDate: "20130524T000000Z")
        XCTAssertTrue(signed.canonicalRequest.hasPrefix("PUT\n/test%24file.text\n\n"))
        XCTAssertEqual(signed.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    func testS3GetBucketLifecycle() {
        let signed = s3Example.sign(method: "GET", path: "/", query: [("lifecycle", "")],
                                    headers: [("Host", "examplebucket.s3.amazonaws.com"), ("x-amz-date", "20130524T000000Z"),
                                              ("x-amz-content-sha256", emptyHash)],
                                    payloadHash: emptyHash, amzDate: "20130524T000000Z")
        XCTAssertTrue(signed.canonicalRequest.hasPrefix("GET\n/\nlifecycle=\n"))
        XCTAssertEqual(signed.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    func testS3ListObjects() {
        let signed = s3Example.sign(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")],
                                    headers: [("Host", "examplebucket.s3.amazonaws.com"), ("x-amz-date", "20130524T000000Z"),
                                              ("x-amz-content-sha256", emptyHash)],
                                    payloadHash: emptyHash, amzDate: "20130524T000000Z")
        XCTAssertTrue(signed.canonicalRequest.hasPrefix("GET\n/\nmax-keys=2&prefix=J\n"), "query parameters sorted")
        XCTAssertEqual(signed.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    /// aws-sig-v4-test-suite: get-vanilla and get-vanilla-query-order-key-case.
    func testGenericSuiteVanilla() {
        let signer = SigV4Signer(credentials: AWSCredentials(accessKeyID: "AKIDEXAMPLE",
                                                            secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                                 region: "us-east-1", service: "service")
        let headers = [("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z")]
        let vanilla = signer.sign(method: "GET", path: "/", query: [], headers: headers, payloadHash: emptyHash, amzDate: "20150830T123600Z")
        XCTAssertEqual(vanilla.stringToSign, """
            AWS4-HMAC-SHA256
            20150830T123600Z
            20150830/us-east-1/service/aws4_request
            bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63
            """)
        XCTAssertEqual(vanilla.signature, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        let ordered = signer.sign(method: "GET", path: "/", query: [("Param2", "value2"), ("Param1", "value1")], headers: headers,
                                  payloadHash: emptyHash, amzDate: "20150830T123600Z")
        XCTAssertEqual(ordered.signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")
    }

    func testURIEncoding() {
        XCTAssertEqual(SigV4Signer.uriEncode("a b/c~d+e=f&ü", keepSlash: true), "a%20b/c~d%2Be%3Df%26%C3%BC")
        XCTAssertEqual(SigV4Signer.uriEncode("a/b", keepSlash: false), "a%2Fb")
    }
}
