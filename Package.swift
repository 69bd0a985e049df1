// swift-tools-version: 6.0
// litectl: a command-line administration toolkit for SQLite databases.
// The core (`LitectlCore`) holds all behaviour over the system libsqlite3; the
// `litectl` executable only parses arguments, calls the core and formats.
import PackageDescription

let package = Package(
    name: "litectl",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "litectl", targets: ["litectl"]),
        .library(name: "LitectlCore", targets: ["LitectlCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"])]
        ),
        .target(
            name: "LitectlCore",
            dependencies: [
                "CSQLite", "CZlib", "CZstd",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ]
        ),
        // The S3 client (SigV4, credentials, HTTP) and the repository store
        // over it: the only network code, kept out of the core.
        .target(
            name: "LitectlS3",
            dependencies: [
                "LitectlCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "litectl",
            dependencies: [
                "LitectlCore", "LitectlS3",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "TestSupport",
            dependencies: ["LitectlCore"],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "LitectlCoreTests",
            dependencies: ["LitectlCore", "TestSupport"]
        ),
        .testTarget(
            name: "LitectlS3Tests",
            dependencies: ["LitectlS3", "LitectlCore", "TestSupport"]
        ),
        .testTarget(
            name: "LitectlCLITests",
            dependencies: ["litectl", "LitectlCore", "TestSupport"]
        ),
    ]
)
