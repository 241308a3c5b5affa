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

void tlc_mapping_init(tlc_mapping_t *m);
void tlc_mapping_fini(tlc_mapping_t *m);

/* Parse buf[0..len) and add its entries to m (then call tlc_mapping_finish). Return 0, or a
 * negative error with *err filled (TLC_ESYNTAX, TLC_ELIMIT, TLC_ENOMEM). */
int tlc_mapping_parse_text1(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err);
int tlc_mapping_parse_xml(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err);
/* Either, chosen by content (XML if the first non-blank byte is '<'). */
int tlc_mapping_parse(tlc_mapping_t *m, const char *buf, size_t len, tlc_parse_err_t *err);

/* Adds one entry (copies the strings; NULL is ""). Returns 0 or a negative error. */
int tlc_mapping_add(tlc_mapping_t *m, const tlc_map_area_t *a);
int tlc_mapping_add_ctx(tlc_mapping_t *m, uint64_t handle, const char *name);

/* Sorts for lookup. Must be called after the last add. */
void tlc_mapping_finish(tlc_mapping_t *m);

/* The area entry for a handle (for state areas: the first entry, by value), or NULL. */
const tlc_map_area_t *tlc_mapping_find(const tlc_mapping_t *m, uint32_t handle);
/* The entry for (handle, value) of a state area, or NULL. */
const tlc_map_area_t *tlc_mapping_find_value(const tlc_mapping_t *m, uint32_t handle,
                                             uint64_t value);
/* The CONTEXTS name for a context handle (a task value), or NULL. */
const char *tlc_mapping_ctx_name(const tlc_mapping_t *m, uint64_t handle);

#endif
