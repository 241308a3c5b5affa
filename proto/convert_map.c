/* convert_map.c - a received Mapping back into a tlc_mapping_t (client side only).
 *
 * Kept apart from convert.c so that the daemon side, which only reads a mapping's fields,
 * does not pull in formats' mapping functions. Cost: O(areas log areas) for the final sort.
 */
#include "proto/convert.h"

#include "base/err.h"

#include <string.h>

int tlc_pb_mapping_get(tlc_mapping_t *m, const Tlcap__Mapping *pm) {
  size_t i;
  int r;
  for (i = 0; i < pm->n_areas; i++) {
    const Tlcap__MapArea *p = pm->areas[i];
    tlc_map_area_t a;
    if (p == NULL)
      return TLC_EFRAME;
    memset(&a, 0, sizeof(a));
    a.handle = p->handle;
    a.parent = p->parent;
    a.state_handle = p->state_handle;
    a.has_value = p->has_value ? 1 : 0;
    a.value = p->value;
    a.name = p->name;
    a.file = p->file;
    a.value_type = p->value_type;
    a.unit = p->unit;
    a.path = p->path;
    if ((r = tlc_mapping_add(m, &a)) < 0)
      return r;
  }
  for (i = 0; i < pm->n_contexts; i++) {
    if (pm->contexts[i] == NULL)
      return TLC_EFRAME;
    if ((r = tlc_mapping_add_ctx(m, pm->contexts[i]->handle, pm->contexts[i]->name)) < 0)
      return r;
  }
  tlc_mapping_finish(m);
  return 0;
}
