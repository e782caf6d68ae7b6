import PGSystem

/// A whole view build frees a lot at once: the snapshot it was built from (~140 bytes an asset),
/// the old view, the tables' sort buffers. glibc keeps freed memory in its heap for later
/// allocations, and after large arrays are freed it raises its mmap and trim thresholds (up to
/// 32 and 64 MiB), so it keeps more. At a million assets that was 60-100 MB the daemon never
/// used again but held in its RSS. `malloc_trim` gives the free pages back: all of the main
/// heap's, and the free chunks inside other threads' heaps, but not the free top of those (so
/// the large buffers a mount's start hands to a worker thread are allocated by the thread that
/// builds the view, `ViewModel.TableBuild`). It walks every heap and the pages it gives back are
/// faulted in again by the next build, so it runs only after whole builds of large views, never
/// after a patch.
enum FreedMemory {
    /// Views smaller than this leave too little behind to be worth a walk of the heaps.
    static let worthIt = 50_000

    /// After a whole build of a view of `count` assets.
    static func giveBack(afterBuildOf count: Int) {
        if count >= worthIt { _ = pg_malloc_trim() }
    }
}
