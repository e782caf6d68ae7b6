// The page, its script, style and placeholder image, served from the binary (no build step).
// The files are in Assets/ (embedded at build time by SwiftPM).
enum WebAssets {
    static let page = String(decoding: PackageResources.index_html, as: UTF8.self)
    static let script = String(decoding: PackageResources.app_js, as: UTF8.self)
    static let style = String(decoding: PackageResources.app_css, as: UTF8.self)
    static let placeholder = String(decoding: PackageResources.placeholder_svg, as: UTF8.self)
}
