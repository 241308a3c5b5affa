/* fileread.h - the daemon's one whole-file reader (mapping files, aprof/BR reports). */
#ifndef TLC_FILEREAD_H
#define TLC_FILEREAD_H

#include <stddef.h>

/* Reads the whole file at `path` into a tlc_malloc'd buffer with a NUL appended (*data, the
 * caller frees it with tlc_free; *len excludes the NUL). Reads in growing chunks, so it works on
 * pipes and files whose size changes; at most `max` bytes. Returns 0, -errno (open or read),
 * TLC_ELIMIT (longer than max) or TLC_ENOMEM; on error *data is untouched. Blocking: the loop
 * calls it only where the file is small and rare (a target's creation). Any thread. */
int tlc_file_read(const char *path, size_t max, char **data, size_t *len);

#endif
