/* testalloc.h - the counting, failing allocator the tests install through tlc_alloc_set().
 *
 * Every block carries a small header with its size, so the tests can assert zero live bytes
 * at the end of a case and fail the Nth allocation (allocation-failure sweeps, curl's torture
 * style). Single-threaded use only (the loop thread); libuv's threadpool does not allocate
 * through tlc_malloc in the paths the tests sweep.
 */
#ifndef TLC_TESTALLOC_H
#define TLC_TESTALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Installs the counting allocator (and resets the counters and the failure plan). */
void testalloc_install(void);
/* Restores the C library's allocator. Live blocks must be zero. */
void testalloc_uninstall(void);

/* Bytes and blocks currently allocated through the counting allocator. */
size_t testalloc_live_bytes(void);
size_t testalloc_live_blocks(void);
/* Allocations made since install (or since the last testalloc_fail_at). */
uint64_t testalloc_count(void);
/* Peak live bytes since install. */
size_t testalloc_peak_bytes(void);
/* Largest single request seen since install (or since testalloc_max_request_reset). */
size_t testalloc_max_request(void);
void testalloc_max_request_reset(void);

/* Makes the nth allocation from now fail (1 = the next one); 0 disables. Counters of
 * allocations restart at 0. */
void testalloc_fail_at(uint64_t nth);
/* Number of allocations that were failed on purpose since install. */
uint64_t testalloc_failed(void);

#endif
