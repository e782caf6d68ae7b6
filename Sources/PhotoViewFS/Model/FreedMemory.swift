import CSystem

/// A whole view build frees a lot at once: the snapshot it was built from (~140 bytes an asset),
/// the old view, the tables' sort buffers. glibc keeps freed memory in its heap for later
/// allocations, and after large arrays are freed it raises its mmap and trim thresholds (up to
/// 32 and 64 MiB), so it keeps more. At a million assets that was 60-100 MB the daemon never
/// used again but held in its RSS. `malloc_trim` gives the free pages back; it walks the heap,
/// a few milliseconds, so it runs after whole builds, never after a patch. It cannot shrink a
/// worker thread's heap, so large buffers that workers fill are allocated by the thread that
/// calls this (`ViewModel.TableBuild`).
enum FreedMemory {
    static func giveBack() { _ = pg_malloc_trim() }
}
