/// What the title bar says about the app and the request being answered.
public struct PickerHeader: Sendable, Equatable {
    public var app: String
    /// The app's read-write status ("limited", "not-determined", ...).
    public var status: String
    /// "request 3" when answering a request.
    public var request: String?

    public init(app: String, status: String, request: String? = nil) {
        self.app = app
        self.status = status
        self.request = request
    }
}

/// Draws one frame as lines of text, each exactly `width` columns (plus SGR attributes): a title
/// bar, the column header, the list (only the rows on screen are formatted, whatever the size of
/// the library), a status bar with the selection count and strip-location, and a line for the
/// prompt, a message or the key hints. ASCII only, so any terminal shows it.
public enum Renderer {
    public static let minWidth = 60
    public static let minHeight = 10

    static let reverse = "\u{1B}[7m", bold = "\u{1B}[1m", reset = "\u{1B}[0m"

    public static func listHeight(rows: Int) -> Int { max(1, rows - 4) }

    public static func frame(_ c: PickerController, header: PickerHeader, width: Int, height: Int) -> [String] {
        guard width >= minWidth, height >= minHeight else {
            var lines = [String](repeating: String(repeating: " ", count: max(0, width)), count: max(0, height))
            if height > 0 {
                lines[0] = TerminalText.fit("terminal too small: need \(minWidth)x\(minHeight) (Esc cancels)", width)
            }
            return lines
        }
        var lines: [String] = []
        lines.reserveCapacity(height)
        lines.append(titleBar(c, header, width))
        let listH = listHeight(rows: height)
        switch c.panel {
        case .help:
            lines.append(bold + TerminalText.fit(" Keys (any key closes this)", width) + reset)
            lines += panelLines(helpLines(c), listH, width)
        case .info(let title, let body):
            lines.append(bold + TerminalText.fit(" " + TerminalText.sanitize(title) + " (any key closes this)", width) + reset)
            lines += panelLines(body.map { " " + TerminalText.sanitize($0) }, listH, width)
        case .none:
            if c.view == .albums {
                lines.append(bold + albumHeader(width) + reset)
                lines += albumRows(c, listH, width)
            } else {
                lines.append(bold + columnHeader(width) + reset)
                lines += assetRows(c, listH, width)
            }
        }
        lines.append(statusBar(c, width))
        lines.append(bottomLine(c, width))
        return lines
    }

    // MARK: parts

    static func titleBar(_ c: PickerController, _ h: PickerHeader, _ width: Int) -> String {
        var mode = c.model.mode == .selection ? "edit selection" : "deliver as picked"
        if c.continuous { mode += ", continuous" }
        switch c.model.config.filter {
        case .images: mode += ", images"
        case .videos: mode += ", videos"
        case .all: break
        }
        var left = " pick: \(TerminalText.sanitize(h.app)) (\(h.status)), \(mode)"
        if let r = h.request { left += ", \(r)" }
        let right = TerminalText.clip(TerminalText.sanitize(c.view == .albums ? "Albums" : c.scopeTitle), width / 3) + " "
        let rw = TerminalText.width(right)
        return reverse + TerminalText.fit(left, width - rw) + right + reset
    }

    /// Column widths: cursor and mark (5), name, date (16), type (4), size (8), album,
    /// location (3), and 6 spaces between them.
    static func columns(_ width: Int) -> (name: Int, album: Int) {
        let rest = max(0, width - 41)
        let name = max(8, rest * 6 / 10)
        return (name, max(0, rest - name))
    }

    static func columnHeader(_ width: Int) -> String {
        let (nw, aw) = columns(width)
        let s = "     " + TerminalText.fit("NAME", nw) + " " + TerminalText.fit("CAPTURED (UTC)", 16) + " "
            + TerminalText.fit("TYPE", 4) + " " + TerminalText.fit("SIZE", 8, right: true) + " "
            + TerminalText.fit("ALBUM", aw) + " " + "LOC"
        return TerminalText.fit(s, width)
    }

    /// One asset row, without attributes: ">" marks the cursor (besides reverse video, for
    /// terminals and screen readers without it), then "[x]" selected, "[p]" picked earlier.
    public static func row(_ c: PickerController, _ a: PickerAsset, width: Int, isCursor: Bool = false) -> String {
        let (nw, aw) = columns(width)
        let m = c.model
        let mark = (isCursor ? ">" : " ") + (m.isSelected(a) ? "[x] " : (m.mode == .deliver && m.isGranted(a) ? "[p] " : "[ ] "))
        var album = ""
        if let first = a.albums.first, Int(first) < m.albums.count {
            album = TerminalText.sanitize(m.albums[Int(first)].name)
            if a.albums.count > 1 {
                let more = "+\(a.albums.count - 1)"
                album = TerminalText.clip(album, max(1, aw - more.count)) + more
            }
        }
        let s = mark + TerminalText.fit(TerminalText.sanitize(a.name), nw) + " " + UTCDate.format(a.captureDate) + " "
            + TerminalText.fit(a.mediaKind, 4) + " " + TerminalText.fit(pickerSize(a.size), 8, right: true) + " "
            + TerminalText.fit(album, aw) + " " + (a.hasLocation ? "yes" : " - ")
        return TerminalText.fit(s, width)
    }

    static func assetRows(_ c: PickerController, _ listH: Int, _ width: Int) -> [String] {
        let m = c.model
        var out: [String] = []
        out.reserveCapacity(listH)
        if m.count == 0 {
            let why: String
            if !m.query.isEmpty { why = "  nothing matches \"\(TerminalText.sanitize(m.query))\"" }
            else if m.scope == .selected { why = "  nothing selected" }
            else { why = "  no assets to pick here" }
            out.append(TerminalText.fit(why, width))
        }
        for r in m.visibleRows(height: listH) {
            guard let a = m.asset(atRow: r) else { continue }
            let text = row(c, a, width: width, isCursor: r == m.cursor)
            out.append(r == m.cursor ? reverse + text + reset : text)
        }
        while out.count < listH { out.append(String(repeating: " ", count: width)) }
        return out
    }

    static func albumHeader(_ width: Int) -> String {
        TerminalText.fit("    " + TerminalText.fit("ALBUM", width - 14) + TerminalText.fit("ASSETS", 9, right: true), width)
    }

    static func albumRows(_ c: PickerController, _ listH: Int, _ width: Int) -> [String] {
        let entries = c.albumEntries
        var out: [String] = []
        let lo = min(c.albumTop, entries.count)
        for i in lo..<min(entries.count, lo + listH) {
            let e = entries[i]
            let count: Int
            var name = TerminalText.sanitize(c.title(of: e))
            switch e {
            case .all: count = c.model.assets.count
            case .selected: count = c.model.selectedCount
            case .album(let k):
                count = c.model.albumMembers[k].count
                if c.model.albums[k].isShared { name = "Shared: " + name }
            }
            let text = TerminalText.fit((i == c.albumCursor ? ">   " : "    ") + TerminalText.fit(name, width - 14) + TerminalText.fit(String(count), 9, right: true), width)
            out.append(i == c.albumCursor ? reverse + text + reset : text)
        }
        while out.count < listH { out.append(String(repeating: " ", count: width)) }
        return out
    }

    static func panelLines(_ body: [String], _ listH: Int, _ width: Int) -> [String] {
        var out = body.prefix(listH).map { TerminalText.fit($0, width) }
        while out.count < listH { out.append(String(repeating: " ", count: width)) }
        return out
    }

    static func statusBar(_ c: PickerController, _ width: Int) -> String {
        let m = c.model
        var left = " \(m.selectedCount) selected"
        if let l = m.limit { left += " (limit \(l))" }
        left += " | strip location: \(m.stripLocation ? "ON" : "off")"
        if !m.query.isEmpty, case .none = c.input { left += " | search: \"\(TerminalText.sanitize(m.query))\"" }
        let pos = c.view == .albums ? "\(c.albumCursor + 1)/\(c.albumEntries.count) " : "\(m.count == 0 ? 0 : m.cursor + 1)/\(m.count) "
        let pw = TerminalText.width(pos)
        return reverse + TerminalText.fit(left, width - pw) + pos + reset
    }

    static func bottomLine(_ c: PickerController, _ width: Int) -> String {
        switch c.input {
        case .search(let text, _):
            let found = " \(c.model.count) found "
            let prompt = "/" + TerminalText.sanitize(text) + "_"
            let room = width - TerminalText.width(found)
            // Keep the end of a long query in view.
            var shown = prompt
            while TerminalText.width(shown) > room && !shown.isEmpty { shown.removeFirst() }
            return TerminalText.fit(shown, room) + found
        case .date(let text):
            return TerminalText.fit("Jump to date (YYYY-MM-DD, UTC): " + text + "_", width)
        case .none:
            if let msg = c.message { return bold + TerminalText.fit(" " + TerminalText.sanitize(msg), width) + reset }
            let hints = c.view == .albums
                ? " enter:open  tab:back  /:search  s:strip  esc:cancel  ?:keys"
                : " space:select a:all /:search tab:albums s:strip enter:done esc:cancel ?:keys"
            return TerminalText.fit(hints, width)
        }
    }

    static func helpLines(_ c: PickerController) -> [String] {
        var lines = [
            " Move      up/down or j/k, PgUp/PgDn (^B/^F), g/G (Home/End) first/last",
            " Date      d  jump to a capture date: YYYY, YYYY-MM, YYYY-MM-DD (UTC)",
            " Search    /  name, album or date as you type; Enter keeps it, Esc drops it",
            " Albums    Tab  album list; Enter opens one, Left/Backspace goes back to it",
            " Select    space  select or deselect (then moves down)",
            "           a  select all in view (again: deselect all);  A  deselect all in view",
            " Options   s  strip location from the picked assets (shown below)",
            " Preview   p  open in the desktop viewer, or show details here",
            " Done      Enter  confirm;  Esc or q  cancel: nothing changes",
            " Redraw    ^L",
            "",
        ]
        switch c.model.mode {
        case .selection:
            lines.append(" Mode: the app's limited selection. What is selected when you confirm is")
            lines.append(" the selection: deselecting revokes. Shared assets cannot be selected.")
        case .deliver:
            lines.append(" Mode: deliver. Confirming hands the selected assets to the app as picked;")
            lines.append(" [p] marks assets picked earlier (they stay picked).")
        }
        if c.continuous {
            lines.append(" Continuous: each change reaches the app at once; Esc takes them back.")
        }
        if let l = c.model.limit { lines.append(" At most \(l) selected.") }
        return lines
    }
}
