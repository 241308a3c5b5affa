/* out.h - a bounded output buffer that every writer in formats/ formats into.
 *
 * Writers (Text1, XML, JSON, aprof, BR, the native encoders) never do I/O themselves: they
 * append to a tlc_out_t. With a write callback, the buffer is flushed through it whenever it
 * fills (the daemon and the tools pass a callback that writes to a file descriptor or FILE);
 * without one, the buffer grows up to its cap and the caller takes the bytes (tests, messages).
 *
 * Errors are sticky: the first failure (callback error, cap reached, no memory) is kept in
 * `err`, later appends do nothing, and tlc_out_flush()/tlc_out_fini() report it. Writers can
 * therefore append freely and check once at the end.
 *
 * Not thread-safe; one owner at a time.
 */
#ifndef TLC_OUT_H
#define TLC_OUT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Writes all `len` bytes or fails; returns 0 or a negative error (kept as the sticky error). */
typedef int (*tlc_out_write_cb)(void *ud, const void *buf, size_t len);

typedef struct tlc_out {
  char *buf;
  size_t len;     /* bytes buffered */
  size_t cap;     /* allocated */
  size_t max;     /* cap on the buffer (memory mode: on the whole output) */
  uint64_t total; /* bytes appended so far (flushed or not) */
  tlc_out_write_cb write;
  void *ud;
  int err;
} tlc_out_t;

/* Initialises `o`. With `cb`, `max` is the flush threshold (default 64 KiB when 0); without
 * one, `max` caps the whole output (default 1 GiB when 0). Allocates lazily. Returns 0. */
int tlc_out_init(tlc_out_t *o, size_t max, tlc_out_write_cb cb, void *ud);

/* Flushes (if a callback is set) and frees the buffer. Returns the sticky error or 0.
 * Safe on zeroed memory. */
int tlc_out_fini(tlc_out_t *o);

/* Passes buffered bytes to the callback (no-op in memory mode). Returns the sticky error or 0. */
int tlc_out_flush(tlc_out_t *o);

/* Memory mode: detaches the buffer (NUL-terminated, length in *len), which the caller frees
 * with tlc_free(); `o` becomes empty. Returns NULL (and keeps the error) after a failure. */
char *tlc_out_take(tlc_out_t *o, size_t *len);

void tlc_out_write(tlc_out_t *o, const void *p, size_t n);
void tlc_out_putc(tlc_out_t *o, char c);
void tlc_out_puts(tlc_out_t *o, const char *s);
void tlc_out_printf(tlc_out_t *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tlc_out_vprintf(tlc_out_t *o, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 0)))
#endif
    ;

/* Length (1..4) of the valid UTF-8 sequence starting at s (NUL-terminated), or 0 when the bytes
 * there are not valid UTF-8 (overlong forms, surrogates, code points past U+10FFFF, U+FFFE and
 * U+FFFF included). The JSON and XML writers replace such bytes with U+FFFD. */
size_t tlc_utf8_len(const unsigned char *s);

/* Fast number formatting (no printf): decimal, and uppercase hex zero-padded to `width`
 * digits (width 0 = no padding, "0" for zero). */
void tlc_out_u64(tlc_out_t *o, uint64_t v);
void tlc_out_i64(tlc_out_t *o, int64_t v);
void tlc_out_hex(tlc_out_t *o, uint64_t v, unsigned width);

#endif
