// swift-tools-version:6.1
import PackageDescription

// Module map (see README "Architecture"):
//   CFuse3       system library target for libfuse3 (module map + shim header only)
//   CCrypto      system library target for OpenSSL's libcrypto (SHA-256 for GrantStore only, with the CPU's SHA extensions)
//   Threads      NativeThread, the one thread primitive (plain pthreads)
//   FUSE         small safe wrapper over the low-level libfuse API; knows nothing about photos
//   LibraryRun   the library's folder on disk as every module names it, and its run/ folder, where
//                the library, the CLI and running mounts meet: the bell, the mounts' registry and
//                acknowledgments (and the kernel's mount table, which the registry is read against)
//   PhotoLibrary the domain: assets, apps, statuses, grants and the visibility policy (pure Swift),
//                and LibraryPort, all a mount asks of the library
//   Redaction    media sniffing, metadata and location scanners, read planner (pure byte logic)
//   Confined     decoders of files apps wrote (libvips, ffmpeg) in bubblewrap, under prlimit and timeout
//   GrantStore   the library folder and its database (GRDB on SQLite); implements LibraryPort
//   CatalogPostgres  the PostgreSQL client the catalog uses on several hosts (issue 41): synchronous
//                sessions and a LISTEN doorbell with heartbeat and reconnect, over postgres-nio
//   PhotoViewFS  the FUSE adapter: one app's view of the library as a filesystem, over LibraryPort
//   WebUI        the person's local web app (`photogate ui`): Hummingbird on loopback, pages and
//                thumbnails served from the binary, every action a GrantStore call
//   photogate    the command-line tool
let package = Package(
    name: "photogate",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "photogate", targets: ["photogate"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        // The web app's HTTP server (issue 35); its optional traits (swift-configuration) off.
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        // The catalog on PostgreSQL (issue 41). It has no package traits: swift-nio-ssl and
        // swift-crypto come with it whether TLS is used or not.
        .package(url: "https://github.com/vapor/postgres-nio", exact: "1.33.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CFuse3",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        // No pkgConfig: libcrypto.pc names -L/usr/lib/<triplet>, which would put Debian's older
        // libfuse3 ahead of the one scripts/setup builds into .deps/fuse3.
        .systemLibrary(name: "CCrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "PGSystem"),
        .target(name: "Threads", dependencies: ["PGSystem"]),
        .target(name: "FUSE", dependencies: ["CFuse3", "PGSystem", "Threads"]),
        // FUSE for its one reader of /proc/self/mountinfo (MountIdentity), under MountTable.
        .target(name: "LibraryRun", dependencies: ["PGSystem", "FUSE"]),
        .target(name: "PhotoLibrary", dependencies: ["Redaction"]),
        .target(name: "Redaction"),
        .target(name: "Confined", dependencies: ["PGSystem"]),
        .target(
            name: "GrantStore",
            dependencies: ["PhotoLibrary", "LibraryRun", "Redaction", "PGSystem", "CCrypto", "Threads", "CatalogPostgres",
                           .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .target(
            name: "CatalogPostgres",
            dependencies: ["Threads", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "Logging", package: "swift-log")]
        ),
        .target(name: "PhotoViewFS", dependencies: ["FUSE", "LibraryRun", "PhotoLibrary", "Redaction", "Threads", "PGSystem", "Confined"]),
        .target(name: "Picker"),
        .target(
            name: "WebUI",
            dependencies: ["GrantStore", "PhotoLibrary", "Redaction", "PGSystem", "Threads", "Confined", .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "HTTPTypes", package: "swift-http-types"), .product(name: "Logging", package: "swift-log")],
            resources: [.embedInCode("Assets/index.html"), .embedInCode("Assets/app.js"), .embedInCode("Assets/app.css"),
                        .embedInCode("Assets/placeholder.svg")]
        ),
        .executableTarget(
            name: "photogate",
            dependencies: [
                "PhotoLibrary", "GrantStore", "LibraryRun", "PhotoViewFS", "Redaction", "PGSystem",
                "Picker", "WebUI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(name: "PhotoLibraryTests", dependencies: ["PhotoLibrary"]),
        .testTarget(name: "RedactionTests", dependencies: ["Redaction", "TestSupport"], exclude: ["Corpus"]),
        .testTarget(name: "GrantStoreTests", dependencies: ["GrantStore", "PhotoLibrary", "Redaction", "TestSupport"]),
        .testTarget(name: "FUSETests", dependencies: ["FUSE", "TestSupport"]),
        .testTarget(name: "LibraryRunTests", dependencies: ["LibraryRun"]),
        .testTarget(name: "CLITests", dependencies: ["PhotoLibrary", "GrantStore", "TestSupport"]),
        .testTarget(name: "PhotoViewFSTests", dependencies: ["PhotoViewFS", "GrantStore", "LibraryRun", "PhotoLibrary", "TestSupport"]),
        .testTarget(name: "PickerTests", dependencies: ["Picker", "TestSupport", "CSysShims"]),
        .target(name: "CSysShims", path: "Tests/CSysShims"),
        .testTarget(name: "CatalogPostgresTests", dependencies: ["CatalogPostgres", "TestSupport"]),
        .testTarget(name: "MountTests", dependencies: ["TestSupport", "CSysShims", "GrantStore", "PhotoLibrary"]),
    ],
    swiftLanguageModes: [.v6]
)
