import Testing
@testable import Picker

/// Assets for the model tests: key i is named by `names[i - 1]`, captured a day apart. A shared
/// asset is offered for delivery only, as photogate's decision answers for an authorized app (a
/// limited selection never holds one; `GrantStoreTests` check the decision's side).
func makeAssets(_ names: [String], videos: Set<Int64> = [], shared: Set<Int64> = [],
                albums: [Int64: [Int32]] = [:], start: Double = 1_700_000_000) -> [PickerAsset] {
    names.enumerated().map { i, n in
        let key = Int64(i + 1)
        return PickerAsset(key: key, name: n, captureDate: start + Double(i) * 86400,
                           mediaKind: videos.contains(key) ? "mp4" : "jpeg", isVideo: videos.contains(key),
                           size: 1000 * UInt64(i + 1), hasLocation: i % 2 == 0, isShared: shared.contains(key),
                           offeredIn: shared.contains(key) ? [.deliver] : [.selection, .deliver], albums: albums[key] ?? [])
    }
}

func keys(_ m: PickerModel) -> [Int64] { m.rows.map { m.assets[Int($0)].key } }

@Suite struct SelectionTests {
    @Test func selectionModePreselectsTheCurrentSelectionAndDeselectingRevokes() {
        var m = PickerModel(assets: makeAssets(["a", "b", "c", "d"]), albums: [],
                            grants: [1: false, 2: true], config: PickerConfig(mode: .selection))
        #expect(m.selected == [1, 2])
        #expect(m.pendingDiff().isEmpty)
        #expect(m.toggle(m.assets[1]) == .deselected)   // b
        #expect(m.toggle(m.assets[2]) == .selected)     // c
        #expect(m.pendingDiff() == GrantDiff(revoke: [2], grant: [3]))
        #expect(m.target() == [1: false, 3: false])
    }

    @Test func deliverModeStartsEmptyAndKeepsEarlierPicks() {
        var m = PickerModel(assets: makeAssets(["a", "b", "c"]), albums: [], grants: [1: false],
                            config: PickerConfig(mode: .deliver))
        #expect(m.selected.isEmpty)
        #expect(m.isGranted(m.assets[0]))
        m.toggle(m.assets[0])
        m.toggle(m.assets[0])      // deselecting an earlier pick does not take it back
        m.toggle(m.assets[1])
        #expect(m.pendingDiff() == GrantDiff(grant: [2]))
        #expect(m.target() == [1: false, 2: false])
    }

    @Test func selectionModeLeavesOutSharedAssetsAndDeliverModeOffersThem() {
        let assets = makeAssets(["mine", "cloud"], shared: [2])
        let sel = PickerModel(assets: assets, albums: [], grants: [:], config: PickerConfig(mode: .selection))
        #expect(sel.assets.map(\.name) == ["mine"])
        let del = PickerModel(assets: assets, albums: [], grants: [:], config: PickerConfig(mode: .deliver))
        #expect(del.assets.map(\.name) == ["mine", "cloud"])
    }

    @Test func mediaFiltersOfferOnlyImagesOrOnlyVideos() {
        let assets = makeAssets(["p1", "v1", "p2", "v2"], videos: [2, 4])
        let images = PickerModel(assets: assets, albums: [], grants: [:], config: PickerConfig(mode: .deliver, filter: .images))
        #expect(images.assets.map(\.name) == ["p1", "p2"])
        let videos = PickerModel(assets: assets, albums: [], grants: [:], config: PickerConfig(mode: .deliver, filter: .videos))
        #expect(videos.assets.map(\.name) == ["v1", "v2"])
    }

    @Test func filteredOutPreselectedAssetsStayUntouched() {
        // A video in the selection, picker opened with --images: the video is not offered, and
        // confirming neither revokes it nor strips its location.
        var m = PickerModel(assets: makeAssets(["p", "v"], videos: [2]), albums: [], grants: [2: false],
                            config: PickerConfig(mode: .selection, filter: .images))
        m.setStripLocation(true)
        m.toggle(m.assets[0])
        #expect(m.pendingDiff() == GrantDiff(grantStripped: [1]))
    }

    @Test func limitRefusesOneMoreAndCountsPreselectedAssets() {
        var m = PickerModel(assets: makeAssets(["a", "b", "c"]), albums: [], grants: [1: false],
                            config: PickerConfig(mode: .selection, limit: 2))
        #expect(m.toggle(m.assets[1]) == .selected)
        #expect(m.atLimit)
        #expect(m.toggle(m.assets[2]) == .limitReached)
        #expect(!m.selected.contains(3))
        #expect(m.toggle(m.assets[0]) == .deselected)
        #expect(m.toggle(m.assets[2]) == .selected)
        #expect(m.selected == [2, 3])
    }

    @Test func selectAllInViewRespectsSearchAndLimit() {
        let names = ["beach1", "city1", "beach2", "beach3", "city2", "beach4"]
        var m = PickerModel(assets: makeAssets(names), albums: [], grants: [:], config: PickerConfig(mode: .deliver, limit: 3))
        m.setQuery("beach")
        let r = m.selectAllInView()
        #expect(r.added == 3 && r.limited)
        #expect(m.selected == [1, 3, 4])   // the first three matches, in list order
    }

    @Test func selectAllInViewRespectsMediaFilterAndAlbum() {
        let assets = makeAssets(["p1", "v1", "p2", "p3"], videos: [2], albums: [1: [0], 2: [0], 3: [0]])
        var m = PickerModel(assets: assets, albums: [PickerAlbum(name: "Trip")], grants: [:],
                            config: PickerConfig(mode: .deliver, filter: .images))
        m.setScope(.album(0))
        let r = m.selectAllInView()
        #expect(r.added == 2 && !r.limited)
        #expect(m.selected == [1, 3])      // not the video, not p3 (outside the album)
        #expect(m.allInViewSelected)
        #expect(m.deselectAllInView() == 2)
        #expect(m.selected.isEmpty)
    }

    @Test func deselectAllInViewLeavesTheRestSelected() {
        var m = PickerModel(assets: makeAssets(["x1", "y1", "x2"]), albums: [], grants: [1: false, 2: false, 3: false],
                            config: PickerConfig(mode: .selection))
        m.setQuery("x")
        #expect(m.deselectAllInView() == 2)
        #expect(m.selected == [2])
        #expect(m.pendingDiff() == GrantDiff(revoke: [1, 3]))
    }
}

@Suite struct GrantDiffTests {
    @Test func diffAddsRevokesStripsAndUnstrips() {
        let d = GrantDiff.between([1: false, 2: false, 3: true, 4: true], [1: false, 2: true, 3: false, 5: false, 6: true])
        #expect(d.revoke == [3, 4])          // 4 gone; 3 loses stripping, which takes a fresh grant
        #expect(d.grant == [3, 5])
        #expect(d.grantStripped == [2, 6])
        #expect(GrantDiff.between([1: true], [1: true]).isEmpty)
    }

    @Test func stripLocationStripsEverySelectedAssetAndOffNeverUnstrips() {
        var m = PickerModel(assets: makeAssets(["a", "b", "c"]), albums: [], grants: [1: false, 2: true],
                            config: PickerConfig(mode: .selection))
        m.toggle(m.assets[2])
        m.setStripLocation(true)
        #expect(m.pendingDiff() == GrantDiff(grantStripped: [1, 3]))
        m.setStripLocation(false)
        #expect(m.pendingDiff() == GrantDiff(grant: [3]))   // b keeps its stripping
    }

    @Test func continuousWritesOnlyWhatChangedAndCancelRestoresTheStart() {
        var m = PickerModel(assets: makeAssets(["a", "b", "c"]), albums: [], grants: [1: false],
                            config: PickerConfig(mode: .selection))
        m.toggle(m.assets[1])
        let first = m.changedDiff()
        #expect(first == GrantDiff(grant: [2]))
        m.markApplied(first)
        #expect(m.changedDiff().isEmpty)
        #expect(m.pendingDiff().isEmpty)
        m.toggle(m.assets[0])
        m.setStripLocation(true)
        let second = m.changedDiff()
        #expect(second == m.pendingDiff())
        #expect(second == GrantDiff(revoke: [1], grantStripped: [2]))
        m.markApplied(second)
        #expect(m.applied == [2: true])
        #expect(m.hasAppliedChanges)
        // Escape: back to exactly what was granted before.
        #expect(m.revertDiff() == GrantDiff(revoke: [2], grant: [1]))
    }

    @Test func aFailedWriteIsRetriedAndCoveredByRevert() {
        var m = PickerModel(assets: makeAssets(["a", "b"]), albums: [], grants: [1: false],
                            config: PickerConfig(mode: .selection))
        m.toggle(m.assets[1])
        let d = m.changedDiff()
        m.markFailed(d)                         // the write may or may not have happened
        #expect(m.pendingDiff() == GrantDiff(grant: [2]))   // confirm retries it
        #expect(m.revertDiff() == GrantDiff(revoke: [2]))   // cancel revokes it in case it landed
    }
}

@Suite struct SearchTests {
    @Test func searchMatchesNameAlbumAndDateIgnoringCase() {
        let assets = makeAssets(["Beach.JPG", "harbour.jpg", "Receipt.png"], albums: [2: [0]], start: 1_688_169_600) // 2023-07-01
        var m = PickerModel(assets: assets, albums: [PickerAlbum(name: "Summer Trip")], grants: [:], config: PickerConfig(mode: .deliver))
        m.setQuery("beach")
        #expect(keys(m) == [1])
        m.setQuery("SUMMER")
        #expect(keys(m) == [2])
        m.setQuery("2023-07-03")
        #expect(keys(m) == [3])
        m.setQuery("zzz")
        #expect(keys(m).isEmpty)
        m.setQuery("")
        #expect(keys(m) == [1, 2, 3])
        #expect(m.searchKey(ofAssetAt: 1) == "harbour.jpg\nsummer trip\n2023-07-02 00:00")
    }

    @Test func searchIsIncrementalAndGoingBackCostsNothing() {
        let names = (0..<1000).map { "img_\($0)" }
        var m = PickerModel(assets: makeAssets(names), albums: [], grants: [:], config: PickerConfig(mode: .deliver))
        m.setQuery("img_9")
        let afterFirst = m.searchWork
        #expect(afterFirst == 1000)
        let hits = m.count                   // img_9, img_90..99, img_900..999
        #expect(hits == 111)
        m.setQuery("img_99")
        #expect(m.searchWork == afterFirst + hits)   // only the previous results were examined
        m.setQuery("img_9")
        #expect(m.searchWork == afterFirst + hits)   // back: reused, nothing examined
        #expect(m.count == 111)
        m.setQuery("img_1")                 // not an extension: starts again from the list
        #expect(m.searchWork == afterFirst + hits + 1000)
    }

    /// 100,000 assets: typing a query character by character examines each key of the
    /// shrinking result only, far fewer than rescanning the library on every key; moving and
    /// drawing never scan.
    @Test func search100kAssetsIsBoundedInOperations() {
        let n = 100_000
        var assets: [PickerAsset] = []
        assets.reserveCapacity(n)
        for i in 0..<n {
            var digits = String(i)
            while digits.count < 5 { digits = "0" + digits }
            assets.append(PickerAsset(key: Int64(i + 1), name: "IMG_\(digits).jpg", captureDate: 1_262_304_000 + Double(i) * 600,
                                      mediaKind: "jpeg", isVideo: false, size: 1_000_000, hasLocation: false, albums: []))
        }
        var m = PickerModel(assets: assets, albums: [], grants: [:], config: PickerConfig(mode: .deliver))
        let query = "img_0999"
        var expected = 0
        var previous = n
        for len in 1...query.count {
            m.setQuery(String(query.prefix(len)))
            expected += previous
            previous = m.count
        }
        #expect(m.count == 10)                      // IMG_09990 ... IMG_09999
        #expect(m.searchWork == expected)
        #expect(m.searchWork == 5 * n + 10_000 + 1_000 + 100)
        #expect(m.searchWork < query.count * n * 2 / 3)   // a rescan per key would be 8 * n

        // Deleting the query back to nothing examines nothing.
        for len in stride(from: query.count - 1, through: 0, by: -1) { m.setQuery(String(query.prefix(len))) }
        #expect(m.count == n)
        let work = m.searchWork
        #expect(work == expected)

        // Scrolling is arithmetic, and a frame formats only the rows on screen.
        m.moveCursor(to: n - 1, height: 20)
        m.page(-1, height: 20)
        #expect(m.cursor == n - 21)
        #expect(m.visibleRows(height: 20).count == 20)
        #expect(m.searchWork == work)
        let c = PickerController(model: m)
        let frame = Renderer.frame(c, header: PickerHeader(app: "org.example.A", status: "limited"), width: 80, height: 24)
        #expect(frame.count == 24)
        #expect(frame.filter { $0.contains("IMG_") }.count == 20)
    }
}

@Suite struct NavigationTests {
    @Test func albumNavigationScopesTheListAndHidesEmptyAndSharedOnlyAlbums() {
        let assets = makeAssets(["a", "b", "c", "s"], shared: [4], albums: [1: [0], 3: [0], 4: [2]])
        let albums = [PickerAlbum(name: "Trip"), PickerAlbum(name: "Empty"), PickerAlbum(name: "Family", isShared: true)]
        var m = PickerModel(assets: assets, albums: albums, grants: [:], config: PickerConfig(mode: .selection))
        #expect(m.browsableAlbums == [0])          // Empty has nothing, Family only a shared asset
        m.setScope(.album(0))
        #expect(keys(m) == [1, 3])
        m.toggle(m.assets[0])
        m.setScope(.selected)
        #expect(keys(m) == [1])
        m.setScope(.all)
        #expect(keys(m) == [1, 2, 3])
        let d = PickerModel(assets: assets, albums: albums, grants: [:], config: PickerConfig(mode: .deliver))
        #expect(d.browsableAlbums == [0, 2])
    }

    @Test func controllerOpensAnAlbumAndGoesBack() {
        let assets = makeAssets(["a", "b", "c"], albums: [2: [0]])
        var c = PickerController(model: PickerModel(assets: assets, albums: [PickerAlbum(name: "Trip")], grants: [:],
                                                    config: PickerConfig(mode: .deliver)))
        _ = c.handle(.tab)
        #expect(c.view == .albums)
        #expect(c.albumEntries == [.all, .selected, .album(0)])
        _ = c.handle(.down); _ = c.handle(.down)
        _ = c.handle(.enter)                       // opens Trip: Enter does not confirm here
        #expect(c.view == .assets)
        #expect(c.model.scope == .album(0))
        #expect(keys(c.model) == [2])
        _ = c.handle(.left)
        #expect(c.view == .albums)
        _ = c.handle(.home); _ = c.handle(.enter)
        #expect(c.model.scope == .all)
    }

    @Test func cursorAndScrollMath() {
        var m = PickerModel(assets: makeAssets((1...100).map { "n\($0)" }), albums: [], grants: [:], config: PickerConfig(mode: .deliver))
        m.moveCursor(by: -5, height: 10)
        #expect(m.cursor == 0 && m.top == 0)
        m.moveCursor(by: 12, height: 10)
        #expect(m.cursor == 12 && m.top == 3)       // just enough to show it
        m.page(1, height: 10)
        #expect(m.cursor == 22 && m.top == 13)      // window and cursor move one screen
        m.moveCursor(to: 1000, height: 10)
        #expect(m.cursor == 99 && m.top == 90)
        m.page(1, height: 10)
        #expect(m.cursor == 99 && m.top == 90)
        m.page(-1, height: 10)
        #expect(m.cursor == 89 && m.top == 80)
        m.scrollIntoView(height: 30)               // the terminal grew
        #expect(m.top == 70 && m.visibleRows(height: 30) == 70..<100)
        m.moveCursor(to: 0, height: 30)
        #expect(m.top == 0)
    }

    @Test func jumpToDateFindsTheFirstAssetOnOrAfterIt() throws {
        // Captured 2023-11-14 22:13:20 and then a day apart.
        var m = PickerModel(assets: makeAssets((1...10).map { "n\($0)" }), albums: [], grants: [:], config: PickerConfig(mode: .deliver))
        m.jump(toDate: try #require(UTCDate.parse("2023-11-17")), height: 5)
        #expect(m.current?.name == "n4")
        m.jump(toDate: try #require(UTCDate.parse("2030")), height: 5)
        #expect(m.current?.name == "n10")
        m.jump(toDate: try #require(UTCDate.parse("2001-02")), height: 5)
        #expect(m.current?.name == "n1")
    }
}

@Suite struct ControllerTests {
    func controller(_ names: [String] = ["alpha", "beta", "gamma"], continuous: Bool = false, limit: Int? = nil) -> PickerController {
        PickerController(model: PickerModel(assets: makeAssets(names), albums: [], grants: [:],
                                            config: PickerConfig(mode: .deliver, limit: limit)), continuous: continuous)
    }

    func type(_ c: inout PickerController, _ text: String) {
        for ch in text { _ = c.handle(.char(ch)) }
    }

    @Test func searchPromptFiltersAsYouTypeEnterKeepsEscapeDrops() {
        var c = controller()
        _ = c.handle(.char("/"))
        type(&c, "ga")
        #expect(c.input == .search(text: "ga", previous: ""))
        #expect(keys(c.model) == [3])
        _ = c.handle(.enter)
        #expect(c.input == .none && c.model.query == "ga")
        _ = c.handle(.char("/"))
        type(&c, "x")
        #expect(c.model.count == 0)
        _ = c.handle(.escape)                      // back to "ga", and the picker is not cancelled
        #expect(c.input == .none && c.model.query == "ga" && keys(c.model) == [3])
    }

    @Test func escapeAndQCancelEnterConfirms() {
        var c = controller()
        #expect(c.handle(.escape) == .cancel)
        #expect(c.handle(.char("q")) == .cancel)
        #expect(c.handle(.enter) == .confirm)
    }

    @Test func spaceTogglesAndMovesDownAndContinuousAsksToApply() {
        var c = controller(continuous: true)
        #expect(c.handle(.char(" ")) == .apply)
        #expect(c.model.selected == [1] && c.model.cursor == 1)
        #expect(c.handle(.char("s")) == .apply)
        #expect(c.model.stripLocation)
        var plain = controller()
        #expect(plain.handle(.char(" ")) == .none)
    }

    @Test func limitReachedSaysSoInsteadOfSelecting() {
        var c = controller(limit: 1)
        _ = c.handle(.char(" "))
        _ = c.handle(.char(" "))
        #expect(c.model.selected == [1])
        #expect(c.message?.contains("limit") == true)
    }

    @Test func helpAndDetailsPanelsCloseOnAnyKeyWithoutCancelling() {
        var c = controller()
        _ = c.handle(.char("?"))
        #expect(c.panel == .help)
        #expect(c.handle(.escape) == .none)
        #expect(c.panel == .none)
        #expect(c.handle(.char("p")) == .preview(c.model.assets[0]))
    }

    @Test func dateKeyPromptsAndJumps() {
        var c = controller(["a", "b", "c", "d"])
        _ = c.handle(.char("d"))
        type(&c, "2023-11-16")
        _ = c.handle(.enter)
        #expect(c.model.current?.name == "c")
        _ = c.handle(.char("d"))
        type(&c, "2023-13")
        _ = c.handle(.enter)
        #expect(c.message?.hasPrefix("not a date") == true)
    }
}

@Suite struct KeyDecoderTests {
    @Test func decodesArrowsPagesAndHomeEndInTheirCommonForms() {
        var d = KeyDecoder()
        let bytes: [UInt8] = Array("\u{1B}[A\u{1B}OB\u{1B}[1;5C\u{1B}[D\u{1B}[5~\u{1B}[6~\u{1B}[H\u{1B}[4~\u{1B}[1~\u{1B}OF\u{1B}[Z".utf8)
        #expect(d.feed(bytes) == [.up, .down, .right, .left, .pageUp, .pageDown, .home, .end, .home, .end, .backTab])
    }

    @Test func sequencesSplitAcrossReadsStillDecode() {
        var d = KeyDecoder()
        #expect(d.feed([0x1b]).isEmpty)
        #expect(d.hasPending)
        #expect(d.feed([0x5b]).isEmpty)
        #expect(d.feed([0x36, 0x7e]) == [.pageDown])
        #expect(d.feed([0xc3]).isEmpty)            // half of "é"
        #expect(d.feed([0xa9]) == [.char("é")])
    }

    @Test func aLoneEscapeIsEscapeAfterThePause() {
        var d = KeyDecoder()
        #expect(d.feed([0x1b]).isEmpty)
        #expect(d.flush() == [.escape])
        #expect(!d.hasPending)
        #expect(d.feed([0x1b, 0x1b]) == [.escape])
        #expect(d.flush() == [.escape])
    }

    @Test func controlKeysEnterBackspaceAndAlt() {
        var d = KeyDecoder()
        #expect(d.feed([0x0d, 0x0a, 0x7f, 0x08, 0x09, 0x0c, 0x1b, 0x78, 0x20]) ==
                [.enter, .enter, .backspace, .backspace, .tab, .ctrl("l"), .alt("x"), .char(" ")])
    }
}

@Suite struct RenderTests {
    static func visible(_ line: String) -> String {
        var out = ""
        var it = line.unicodeScalars.makeIterator()
        while let u = it.next() {
            if u == "\u{1B}" {
                while let v = it.next(), !(v.value >= 0x40 && v.value <= 0x7e && v != "[") {}
                continue
            }
            out.unicodeScalars.append(u)
        }
        return out
    }

    @Test func aFrameFits80x24AndShowsStripLocationInTheFooter() {
        let assets = makeAssets(["a-rather-long-file-name-that-does-not-fit-the-column.jpg", "b.jpg"], albums: [1: [0, 1]])
        var c = PickerController(model: PickerModel(assets: assets, albums: [PickerAlbum(name: "Summer 2024"), PickerAlbum(name: "B")],
                                                    grants: [:], config: PickerConfig(mode: .selection, limit: 5)))
        c.resize(listHeight: Renderer.listHeight(rows: 24))
        let frame = Renderer.frame(c, header: PickerHeader(app: "org.example.A", status: "limited"), width: 80, height: 24)
        #expect(frame.count == 24)
        for line in frame { #expect(TerminalText.width(Self.visible(line)) == 80, "\(line)") }
        let text = frame.map(Self.visible)
        #expect(text[1].contains("NAME") && text[1].contains("CAPTURED") && text[1].contains("TYPE")
                && text[1].contains("SIZE") && text[1].contains("ALBUM") && text[1].contains("LOC"))
        #expect(text[2].hasPrefix(">[ ] a-rather-long"))
        #expect(text[2].contains("Summer 20") && text[2].contains("+1") && text[2].hasSuffix("yes"))
        #expect(text[22].contains("0 selected (limit 5)") && text[22].contains("strip location: off"))
    }

    @Test func namesCannotInjectTerminalControls() {
        let evil = "x\u{1B}[2Jy\u{9B}31mz\u{202E}gpj.exe"
        let c = PickerController(model: PickerModel(assets: makeAssets([evil]), albums: [], grants: [:], config: PickerConfig(mode: .deliver)))
        let row = Renderer.row(c, c.model.assets[0], width: 80)
        #expect(!row.unicodeScalars.contains { $0.value == 0x1b || $0.value == 0x9b || $0.value == 0x202e })
        #expect(row.contains("x?[2Jy?31mz?gpj.exe"))
    }

    @Test func tooSmallATerminalSaysSo() {
        let c = PickerController(model: PickerModel(assets: [], albums: [], grants: [:], config: PickerConfig(mode: .deliver)))
        let frame = Renderer.frame(c, header: PickerHeader(app: "a.b", status: "limited"), width: 40, height: 5)
        #expect(frame.count == 5 && frame[0].hasPrefix("terminal too small"))
    }

    @Test func utcDatesFormatAndParse() {
        #expect(UTCDate.format(0) == "1970-01-01 00:00")
        #expect(UTCDate.format(1_720_953_060) == "2024-07-14 10:31")
        #expect(UTCDate.format(951_782_400) == "2000-02-29 00:00")
        #expect(UTCDate.parse("2024-07-14 10:31") == 1_720_953_060)
        #expect(UTCDate.parse("2000-02-29") == 951_782_400)
        #expect(UTCDate.parse("1970") == 0)
        #expect(UTCDate.parse("2023-02-29") == nil)
        #expect(UTCDate.parse("24-07-14") == nil)
        #expect(UTCDate.parse("") == nil)
    }
}
