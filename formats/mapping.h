/* mapping.h - area names and properties (winIDEA's mapping), read from a Text1 or XML export.
 *
 * A mapping tells, per handle: the area's name, parent, line number or state value, file,
 * value type and unit, and for a variable the handle of its state area (HANDLE.STATE), which
 * W events need to update both. State areas have one entry per state value (same handle,
 * different `value`). CONTEXTS gives task names by context handle.
 *
 * Readers: tlc_mapping_parse_text1 (the HANDLE(...) and CONTEXTS sections of a Text1 export,
 * whatever macro order the section's header line declares) and tlc_mapping_parse_xml (the XML
 * export's mapping node, read with expat). Both report errors with the line number and reason.
 *
 * A mapping owns its strings. Lookups are O(log n) after tlc_mapping_finish() sorts it.
 * Not thread-safe; built once, then read-only (shared read-only across threads is fine).
 *
 * Text1 entry fields (the contract between the Text1 writer and tlc_mapping_parse_text1).
 * A section header `* HANDLE(Functions) %HANDLE%,%NAME%,%VALUE%` declares its entry format:
 * macros and the literal text between them. An entry is read token by token against it:
 *  - a literal must appear exactly (the entry's leading/trailing literals included);
 *  - a field followed by a literal ends at the first occurrence of that literal on the line
 *    (a field followed by the format's trailing literal ends where the line's suffix begins);
 *    the last field of a format without a trailing literal takes the rest of the line;
 *  - a field that starts with `"` is first tried as a CSV-quoted field: `""` inside is one
 *    quote and the field ends at the first single `"`. If that quote is directly followed by
 *    the separator (or the end of the line for the last field), the field is the unquoted text
 *    (it may then hold separators, quotes and line breaks). Otherwise the field is read raw as
 *    above, so hand-written names like the seed's `"TestStatic1.c"#StaticFunc` stay intact;
 *  - HANDLE-like numbers (HANDLE, HANDLE.PARENT, HANDLE.STATE, VALUE) are hex with an optional
 *    0x and surrounding blanks; a number macro directly followed by another macro (no literal
 *    between) takes the hex digits (at most 8 for handles); a text macro cannot be.
 * So a writer must quote (wrap in `"`, double inner quotes) exactly the fields for which
 * tlc_mapping_field_needs_quotes() says so: those holding the separator's first character, a
 * CR or LF, and those starting with `"` that would not read back raw (they have no single `"`
 * before their last character, or end with `"`). Everything else may be written raw.
 *
 * Data sections: a state entry (handle type 3 or 5) is linked to its variable by HANDLE.PARENT
 * or the variable's HANDLE.STATE when the format has them (tlc_mapping_finish() completes the
 * other direction). When the format has neither, a state entry listed right after its variable
 * (or after that variable's earlier states) whose handle has the same low 28 bits (winIDEA's
 * numbering, the seed's 20000000 -> 30000000) gets the variable as parent and the variable its
 * state_handle. NAME.PARENT without HANDLE.PARENT links to the nearest earlier entry of the
 * same section with that name.
 */
#ifndef TLC_MAPPING_H
#define TLC_MAPPING_H

#include <stddef.h>
#include <stdint.h>

#define TLC_NO_HANDLE 0xFFFFFFFFu

typedef struct tlc_map_area {
  uint32_t handle;
  uint32_t parent;       /* HANDLE.PARENT or TLC_NO_HANDLE */
  uint32_t state_handle; /* HANDLE.STATE or TLC_NO_HANDLE */
  uint8_t has_value;     /* VALUE present (line number, state value) */
  uint64_t value;
  char *name;       /* never NULL ("" when empty) */
  char *file;       /* never NULL */
  char *value_type; /* "I64", "F64" or "" */
  char *unit;       /* never NULL */
  char *path;       /* never NULL */
  /* The five strings of an entry added to a mapping share one allocation owned through
   * `name`: read them, never free or replace them one by one. */
} tlc_map_area_t;

typedef struct tlc_map_ctx {
  uint64_t handle;
  char *name;
} tlc_map_ctx_t;

typedef struct tlc_mapping {
  tlc_map_area_t *areas;
  size_t nareas, capareas;
  tlc_map_ctx_t *contexts;
  size_t ncontexts, capcontexts;
  size_t max_areas; /* cap (default 1,000,000 when 0) */
} tlc_mapping_t;

/* Where a reader failed: 1-based line (0 if not line-based), byte offset, and why. */
typedef struct tlc_parse_err {
  uint64_t line;
  uint64_t offset;
  char reason[160];
} tlc_parse_err_t;

/* Fills e (may be NULL: nothing) with line (0 if not line-based), byte offset and the formatted
 * reason (cut to fit): every line- or byte-based reader of formats/ says where it failed so. */
void tlc_parse_err_set(tlc_parse_err_t *e, uint64_t line, uint64_t off, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Initialises an empty mapping (set max_areas afterwards to change the cap). */
void tlc_mapping_init(tlc_mapping_t *m);
/* Frees every entry and context. Safe on zeroed memory and after a failed parse. */
void tlc_mapping_fini(tlc_mapping_t *m);

/* Parse buf[0..len) (no NUL needed; the caller keeps it) and add its entries to m (then call
 * tlc_mapping_finish); several files may be added to one mapping. Return 0, or a negative
 * error with *err filled (line, byte offset, reason): TLC_ESYNTAX, TLC_ERANGE (a number too
 * large), TLC_ELIMIT (max_areas entries or contexts), TLC_ENOMEM. A Text1 or XML input without
 * any mapping section is TLC_ESYNTAX. After a failure m holds the entries read before it. */
int tlc_mapping_parse_text1(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err);
int tlc_mapping_parse_xml(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err);
/* Either, chosen by content (XML if the first non-blank byte is '<'). */
int tlc_mapping_parse(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err);

/* Adds one entry (copies the strings; NULL is ""). Returns 0 or a negative error. */
int tlc_mapping_add(tlc_mapping_t *m, const tlc_map_area_t *a);
int tlc_mapping_add_ctx(tlc_mapping_t *m, uint64_t handle, const char *name);

/* Whether a Text1 field must be written quoted (see the rules above) so that the reader gets
 * it back exactly. `sep` is the first character of the literal following the field in the entry
 * format, or '\0' when the field is the last one. Returns 1 or 0. */
int tlc_mapping_field_needs_quotes(const char *s, char sep);

/* Sorts for lookup (by handle, then value) and completes the parent/state links between
 * variables and their states. Must be called after the last add. */
void tlc_mapping_finish(tlc_mapping_t *m);

/* The area entry for a handle (for state areas: the first entry, by value), or NULL. */
const tlc_map_area_t *tlc_mapping_find(const tlc_mapping_t *m, uint32_t handle);
/* The entry for (handle, value) of a state area, or NULL. */
const tlc_map_area_t *tlc_mapping_find_value(const tlc_mapping_t *m, uint32_t handle,
                                             uint64_t value);
/* The CONTEXTS name for a context handle (a task value), or NULL. */
const char *tlc_mapping_ctx_name(const tlc_mapping_t *m, uint64_t handle);

struct tlc_table;
struct tlc_stat;

/* The entry naming a statistics row: for a state row the entry of its (handle, state value),
 * else the area's entry; NULL when `m` is NULL or does not list it. */
const tlc_map_area_t *tlc_mapping_row_entry(const tlc_mapping_t *m, const struct tlc_stat *r);

/* 1 when row i of the sorted table `t` is the first row of its area (code rows repeat per
 * context) and `m` (may be NULL) has no entry for it: an observed area that a mapping section
 * must list on its own. */
int tlc_mapping_row_unlisted(const tlc_mapping_t *m, const struct tlc_table *t, size_t i);

/* The name exporters show for context `c` of table `t`: a task's CONTEXTS name from `m` (may be
 * NULL) when there is one, else tlc_ctx_name()'s (core<N>, task<HEX>, thread<HEX>, Neutral).
 * Returns either a string owned by `m` or `buf`. */
const char *tlc_mapping_ctx_display(const tlc_mapping_t *m, const struct tlc_table *t, uint32_t c,
                                    char *buf, size_t len);

/* The name views show for a state row (handle, state value): "VARIABLE = VALUE NAME", the
 * variable's name (the value entry's parent, Text1's NAME.PARENT) and the value's, each the
 * number (handle %08X, value %llX) when `m` (may be NULL) has no name for it. Into buf. */
const char *tlc_mapping_state_display(const tlc_mapping_t *m, uint32_t handle, uint64_t state,
                                      char *buf, size_t len);

#endif
