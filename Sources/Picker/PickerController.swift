/// The picker's key bindings and screen state on top of `PickerModel`: which view is shown (the
/// asset list or the album list), the search and date prompts, the help and details panels, and
/// the one-line message. Pure: a key in, a command out, so the bindings are unit-tested.
public struct PickerController: Sendable {
    public enum View: Equatable, Sendable { case assets, albums }

    public enum Panel: Equatable, Sendable {
        case none
        case help
        /// Details of one asset (the preview where no desktop viewer is available).
        case info(title: String, lines: [String])
    }

    public enum Input: Equatable, Sendable {
        case none
        /// Typing a search; `previous` is the query to go back to on Escape.
        case search(text: String, previous: String)
        case date(text: String)
    }

    /// An entry of the album list.
    public enum AlbumEntry: Equatable, Sendable {
        case all, selected
        case album(Int)
    }

    public enum Command: Equatable, Sendable {
        case none
        case confirm
        case cancel
        /// Continuous mode: write the changes now.
        case apply
        case preview(PickerAsset)
        case redraw
    }

    public var model: PickerModel
    public let continuous: Bool
    public private(set) var view: View = .assets
    public private(set) var panel: Panel = .none
    public private(set) var input: Input = .none
    public private(set) var albumCursor = 0
    public private(set) var albumTop = 0
    /// One line for the person (cleared by the next key).
    public var message: String?
    /// Rows of the list on screen (the page size).
    public private(set) var listHeight = 20

    public init(model: PickerModel, continuous: Bool = false) {
        self.model = model
        self.continuous = continuous
    }

    public var albumEntries: [AlbumEntry] {
        [.all, .selected] + model.browsableAlbums.map { .album($0) }
    }

    public func title(of e: AlbumEntry) -> String {
        switch e {
        case .all: return "All Photos"
        case .selected: return "Selected"
        case .album(let i): return model.albums[i].name
        }
    }

    public var scopeTitle: String {
        switch model.scope {
        case .all: return "All Photos"
        case .selected: return "Selected"
        case .album(let i): return (model.albums[i].isShared ? "Shared: " : "Album: ") + model.albums[i].name
        }
    }

    public mutating func resize(listHeight h: Int) {
        listHeight = max(1, h)
        model.scrollIntoView(height: listHeight)
        scrollAlbums()
    }

    public mutating func showInfo(title: String, lines: [String]) {
        panel = .info(title: title, lines: lines)
    }

    // MARK: keys

    public mutating func handle(_ key: Key) -> Command {
        message = nil
        if panel != .none {
            // Any key closes a panel; Escape there never cancels the picker.
            panel = .none
            return key == .ctrl("l") ? .redraw : .none
        }
        switch input {
        case .search(let text, let previous): return handleSearch(key, text, previous)
        case .date(let text): return handleDate(key, text)
        case .none: break
        }
        switch key {
        case .escape, .char("q"): return .cancel
        case .char("?"): panel = .help; return .none
        case .char("s"):
            model.setStripLocation(!model.stripLocation)
            message = model.stripLocation
                ? "strip location ON: the picked assets reach the app without location"
                : "strip location off"
            return continuous ? .apply : .none
        case .ctrl("l"): return .redraw
        default: break
        }
        return view == .albums ? handleAlbums(key) : handleAssets(key)
    }

    private mutating func handleAssets(_ key: Key) -> Command {
        let h = listHeight
        switch key {
        case .up, .char("k"), .ctrl("p"): model.moveCursor(by: -1, height: h)
        case .down, .char("j"), .ctrl("n"): model.moveCursor(by: 1, height: h)
        case .pageUp, .ctrl("b"): model.page(-1, height: h)
        case .pageDown, .ctrl("f"): model.page(1, height: h)
        case .ctrl("u"): model.moveCursor(by: -max(1, h / 2), height: h)
        case .ctrl("d"): model.moveCursor(by: max(1, h / 2), height: h)
        case .home, .char("g"): model.moveCursor(to: 0, height: h)
        case .end, .char("G"): model.moveCursor(to: model.count - 1, height: h)
        case .char("/"): input = .search(text: model.query, previous: model.query)
        case .char("d"): input = .date(text: "")
        case .tab, .backTab: view = .albums; scrollAlbums()
        case .left, .char("h"), .backspace:
            if model.scope != .all { view = .albums; scrollAlbums() }
        case .char(" "):
            switch model.toggleCurrent() {
            case .limitReached:
                message = "limit reached: at most \(model.limit ?? 0) selected (deselect one first)"
                return .none
            case .nothing: return .none
            case .selected, .deselected:
                model.moveCursor(by: 1, height: h)
                return continuous ? .apply : .none
            }
        case .char("a"):
            if model.allInViewSelected {
                let n = model.deselectAllInView()
                message = "deselected \(n) in view"
            } else {
                let (n, limited) = model.selectAllInView()
                message = limited ? "selected \(n) in view, then reached the limit of \(model.limit ?? 0)" : "selected \(n) in view"
            }
            return continuous ? .apply : .none
        case .char("A"):
            message = "deselected \(model.deselectAllInView()) in view"
            return continuous ? .apply : .none
        case .char("p"), .char("i"):
            if let a = model.current { return .preview(a) }
        case .enter: return .confirm
        default: break
        }
        return .none
    }

    private mutating func handleAlbums(_ key: Key) -> Command {
        let entries = albumEntries
        switch key {
        case .up, .char("k"), .ctrl("p"): albumCursor -= 1
        case .down, .char("j"), .ctrl("n"): albumCursor += 1
        case .pageUp, .ctrl("b"): albumCursor -= listHeight; albumTop -= listHeight
        case .pageDown, .ctrl("f"): albumCursor += listHeight; albumTop += listHeight
        case .home, .char("g"): albumCursor = 0
        case .end, .char("G"): albumCursor = entries.count - 1
        case .enter, .right, .char("l"):
            let e = entries[max(0, min(entries.count - 1, albumCursor))]
            switch e {
            case .all: model.setScope(.all)
            case .selected: model.setScope(.selected)
            case .album(let i): model.setScope(.album(i))
            }
            view = .assets
            model.scrollIntoView(height: listHeight)
        case .tab, .backTab, .left, .char("h"), .backspace: view = .assets
        case .char("/"):
            if model.scope != .all { model.setScope(.all) }
            view = .assets
            input = .search(text: "", previous: "")
        default: break
        }
        scrollAlbums()
        return .none
    }

    private mutating func scrollAlbums() {
        let n = albumEntries.count
        albumCursor = max(0, min(n - 1, albumCursor))
        albumTop = max(0, min(albumTop, max(0, n - listHeight)))
        if albumCursor < albumTop { albumTop = albumCursor }
        if albumCursor >= albumTop + listHeight { albumTop = albumCursor - listHeight + 1 }
    }

    private mutating func handleSearch(_ key: Key, _ text: String, _ previous: String) -> Command {
        var t = text
        switch key {
        case .char(let c): t.append(c)
        case .backspace:
            if t.isEmpty { input = .none; return .none }
            t.removeLast()
        case .ctrl("u"): t = ""
        case .ctrl("w"):
            while t.last == " " { t.removeLast() }
            while let l = t.last, l != " " { _ = l; t.removeLast() }
        case .enter:
            input = .none
            if !model.query.isEmpty { message = "\(model.count) found for \"\(model.query)\" (/ to change, Esc to cancel the picker)" }
            return .none
        case .escape:
            input = .none
            model.setQuery(previous)
            return .none
        case .up, .ctrl("p"): model.moveCursor(by: -1, height: listHeight); return .none
        case .down, .ctrl("n"): model.moveCursor(by: 1, height: listHeight); return .none
        case .pageUp: model.page(-1, height: listHeight); return .none
        case .pageDown: model.page(1, height: listHeight); return .none
        default: return .none
        }
        input = .search(text: t, previous: previous)
        model.setQuery(t)
        return .none
    }

    private mutating func handleDate(_ key: Key, _ text: String) -> Command {
        var t = text
        switch key {
        case .char(let c) where c.isASCII && (c.isNumber || c == "-" || c == " " || c == ":"):
            if t.count < 16 { t.append(c) }
        case .backspace:
            if t.isEmpty { input = .none; return .none }
            t.removeLast()
        case .ctrl("u"): t = ""
        case .escape: input = .none; return .none
        case .enter:
            input = .none
            if t.isEmpty { return .none }
            guard let date = UTCDate.parse(t) else {
                message = "not a date: \"\(t)\" (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DD HH:MM, UTC)"
                return .none
            }
            if !model.jump(toDate: date, height: listHeight) { message = "nothing to jump in" }
            else if let a = model.current, a.captureDate < date { message = "nothing from \(t) on: at the last asset" }
            return .none
        default: break
        }
        input = .date(text: t)
        return .none
    }
}
