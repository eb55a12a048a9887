"""A masking pump's memory: what the daemon's malloc settings must leave alone."""

from __future__ import annotations

from paddedcell.supervisor import procs, session


def test_a_batchs_blocks_stay_below_the_pinned_mmap_threshold():
    # The sanitizer's copy, the redactor's scan buffer (its held tail + the batch) and its
    # output come from the heap, reused, not as fresh mappings faulted in page by page
    # (at 128 KiB: 131,000 faults and 3x the CPU for 128 MiB): raising REDACTED_BATCH
    # means raising the threshold too.
    assert session.REDACTED_BATCH + 64 * 1024 <= procs.PINNED_MMAP_THRESHOLD
    assert procs.pin_malloc_thresholds.__defaults__ == (procs.PINNED_MMAP_THRESHOLD,)
