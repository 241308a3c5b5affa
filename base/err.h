/* tlc_err.h - tlcap's own error codes.
 *
 * Every function in tlcap returns int: 0 on success, a negative code on failure. Failures that
 * come from the OS or libuv pass on libuv's code (UV_E*, which are -errno on Unix and never
 * below -4095). tlcap's own errors live in the range -20000..-20999 so that they can never
 * collide with those, and one X-macro table yields both the enum and tlc_strerror().
 *
 * Pure: no I/O, no state. Safe from any thread.
 */
#ifndef TLC_ERR_H
#define TLC_ERR_H

#define TLC_ERR_BASE (-20000)

/* XX(name, message) - append only; the numbers are part of the wire protocol's error codes. */
#define TLC_ERR_MAP(XX)                                                                            \
  XX(EFRAME, "invalid record or block")                                                            \
  XX(ETRUNC, "truncated record at end of input")                                                   \
  XX(ERANGE, "value out of range")                                                                 \
  XX(ELIMIT, "configured limit reached")                                                           \
  XX(EFORMAT, "unrecognised input format")                                                         \
  XX(ENOMEM, "out of memory")                                                                      \
  XX(EINVAL, "invalid argument")                                                                   \
  XX(ESYNTAX, "syntax error")                                                                      \
  XX(EVERSION, "unsupported format version")                                                       \
  XX(EIO, "input/output error")                                                                    \
  XX(EAGAIN, "more input needed")

/* The codes themselves: TLC_EFRAME = -20001, TLC_ETRUNC = -20002, ... in table order. */
enum tlc_err_idx_ {
#define TLC_ERR_IDX_(name, msg) TLC_ERR_IDX_##name,
  TLC_ERR_IDX_ZERO_ = 0,
  TLC_ERR_MAP(TLC_ERR_IDX_) TLC_ERR_IDX_END_
#undef TLC_ERR_IDX_
};

enum tlc_err {
#define TLC_ERR_CODE_(name, msg) TLC_##name = TLC_ERR_BASE - TLC_ERR_IDX_##name,
  TLC_ERR_MAP(TLC_ERR_CODE_)
#undef TLC_ERR_CODE_
};

/* Returns a static, human-readable message for a tlcap code, for a negative errno value
 * (UV_E* on Unix), or "unknown error". Never NULL. */
const char *tlc_strerror(int err);

/* Returns the symbolic name ("TLC_EFRAME", "ENOENT", ...) of a code. Never NULL. */
const char *tlc_err_name(int err);

#endif
