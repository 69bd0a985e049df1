// The one place the executable builds an S3 store (LitectlS3).
import LitectlCore
import LitectlS3

func makeS3Store(url: String, endpoint: String?, region: String?, profile: String?) throws -> ObjectStore {
    try S3ObjectStore(url: url, options: S3Options(endpoint: endpoint, region: region, profile: profile))
}
