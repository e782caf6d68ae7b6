import Testing
@testable import GrantStore

/// A catalog's URL in messages (`CatalogLink.safeCatalog`) never carries its password, in any of
/// the forms `init --catalog` takes (issue 41): the command's own output, errors, and the daemon's
/// logs quote it.
@Suite struct CatalogLinkTests {
    func safe(_ url: String) -> String { CatalogLink(catalog: url, shared: "/s").safeCatalog }

    @Test func thePasswordIsLeftOutOfEveryForm() {
        for url in ["postgresql://photos:S3cret@nas/photos",
                    "postgresql:///photos?host=/run/postgresql&user=photos&password=S3cret",
                    "postgres://nas/photos?password=S3cret&user=photos",
                    "postgresql:///photos?user=a%40b&password=S3cret",
                    "postgresql://photos:S3cret@nas/photos?application_name=x@y"] {
            #expect(!safe(url).contains("S3cret"), "\(url) -> \(safe(url))")
        }
    }

    @Test func aURLWithoutPasswordIsQuotedAsItIs() {
        #expect(safe("postgresql://photos@nas/photos") == "postgresql://photos@nas/photos")
        #expect(safe("postgresql:///photos?host=/run/postgresql") == "postgresql:///photos?host=/run/postgresql")
    }
}
