/* br.h - BR (Business Rules!) profiler file: reader, JSON view and record emitters.
 *
 * The file is a sequence of variable-length records in network byte order (seeds/002):
 * CREATE MODULE MAPPING (1), CURRENT LINE (3), TIME SPENT IN LINE (4), BACKTRACE (5),
 * END CURRENT LINE (6), FUNCTION NAME (7), GOSUB (8), MAIN ROUTINE (9). A line entry runs from
 * CURRENT LINE to END CURRENT LINE; the reader turns each into a tlc_br_line_t. The structural
 * rules it enforces are listed in br.c's design note.
 *
 * Pure: no I/O. A tlc_br_t owns everything in it; not thread-safe.
 */
#ifndef TLC_BR_H
#define TLC_BR_H

#include "base/htab.h"
#include "base/out.h"
#include "formats/mapping.h" /* tlc_parse_err_t */

#include <stddef.h>
#include <stdint.h>

/* Record types. */
enum tlc_br_rec {
  TLC_BR_MODULE = 1,
  TLC_BR_CURRENT_LINE = 3,
  TLC_BR_TIME = 4,
  TLC_BR_BACKTRACE = 5,
  TLC_BR_END = 6,
  TLC_BR_FUNCTION = 7,
  TLC_BR_GOSUB = 8,
  TLC_BR_MAIN = 9
};

/* tlc_br_frame_t.flags */
#define TLC_BR_F_GOSUB 0x01u /* a GOSUB record followed it */
#define TLC_BR_F_MAIN  0x02u /* a MAIN ROUTINE record followed it */

#define TLC_BR_NONAME 0xFFFFFFFFu

/* A position: a CURRENT LINE or a BACKTRACE record, with what followed it. */
typedef struct tlc_br_frame {
  uint32_t line;
  uint16_t module;
  uint8_t clause;
  uint8_t flags;     /* TLC_BR_F_* */
  uint32_t function; /* index into tlc_br_t.names, TLC_BR_NONAME when absent */
} tlc_br_frame_t;

/* One line entry (CURRENT LINE ... END CURRENT LINE). */
typedef struct tlc_br_line {
  tlc_br_frame_t at;
  uint8_t has_time; /* TIME SPENT IN LINE present (timed profiles) */
  uint64_t time_ns;
  size_t first_bt; /* backtrace: frames[first_bt .. first_bt + nbt), innermost caller first */
  size_t nbt;
  uint64_t offset; /* byte offset of the CURRENT LINE record */
} tlc_br_line_t;

typedef struct tlc_br_module {
  uint16_t number;
  char *file; /* never NULL */
  uint64_t offset;
} tlc_br_module_t;

typedef struct tlc_br {
  tlc_br_module_t *modules; /* in file order */
  size_t nmodules, capmodules;
  tlc_br_line_t *lines;
  size_t nlines, caplines;
  tlc_br_frame_t *frames;
  size_t nframes, capframes;
  char **names; /* distinct function names, in order of first appearance */
  size_t nnames, capnames;
  uint64_t records;     /* records read */
  uint64_t by_type[10]; /* records per type (index = type) */
  /* caps (0 = default 10,000,000 each) */
  size_t max_lines, max_frames;
  /* private */
  uint32_t *modidx_; /* module number -> index + 1 (65536 entries, lazily allocated) */
  tlc_htab_t nhash_; /* function-name hash -> names index */
} tlc_br_t;

/* Initialises an empty profile (caps at their defaults; set them before parsing). */
void tlc_br_init(tlc_br_t *b);
/* Frees everything a profile owns. Safe on zeroed memory and after a failed parse. */
void tlc_br_fini(tlc_br_t *b);

/* Parses a whole BR profiler file buf[0..len) into `b` (freshly initialised). Returns 0, or a
 * negative error with *err (line 0) naming the byte offset of the offending record and why:
 * TLC_EFRAME unknown record type or a record out of place, TLC_ETRUNC a record running past the
 * end or an entry left open, TLC_ELIMIT a cap reached, TLC_ENOMEM. */
int tlc_br_parse(tlc_br_t *b, const uint8_t *buf, size_t len, tlc_parse_err_t *err);

/* Whether buf[0..len) looks like a BR profiler file: it starts with a MODULE MAPPING or a
 * CURRENT LINE record and its first records (up to 16) have known types, fit, and follow the
 * structural rules. A plausibility test for format auto-detection (try the native formats
 * first: a bin1x record can look like this too). Returns 1 or 0. */
int tlc_br_sniff(const uint8_t *buf, size_t len);

/* The file name mapped to a module number, or NULL. */
const char *tlc_br_module_file(const tlc_br_t *b, uint16_t module);

/* Writes the profile as one JSON document (schema "tlcap-br/1", docs/report-json.md) and a
 * newline: modules, every line entry, and a summary per (module, line, clause). Returns 0,
 * TLC_ENOMEM, or the output's sticky error. */
int tlc_br_to_json(const tlc_br_t *b, tlc_out_t *o);

/* Record emitters, in network byte order, for writers and tests. The caller orders them
 * (module mappings first; CURRENT LINE, then FUNCTION NAME / GOSUB / MAIN, TIME, BACKTRACE
 * each optionally followed by FUNCTION NAME / GOSUB / MAIN, END). Names longer than the
 * record allows (65535 bytes for a file, 255 for a function) are cut: those two return 1 when
 * they cut, else 0. Errors are the output's (sticky, see out.h). */
int tlc_br_write_module(tlc_out_t *o, uint16_t module, const char *file);
void tlc_br_write_current_line(tlc_out_t *o, uint16_t module, uint32_t line, uint8_t clause);
void tlc_br_write_time(tlc_out_t *o, uint64_t ns);
void tlc_br_write_backtrace(tlc_out_t *o, uint16_t module, uint32_t line, uint8_t clause);
int tlc_br_write_function(tlc_out_t *o, const char *name);
void tlc_br_write_gosub(tlc_out_t *o);
void tlc_br_write_main(tlc_out_t *o);
void tlc_br_write_end(tlc_out_t *o);

#endif
