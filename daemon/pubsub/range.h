/* range.h - range statistics (range.c): GetStats.range and Subscribe.history, computed
 * off the loop by the view's history hook, one query at a time per connection (its state:
 * tlc__ps_sub_t.hq). Loop thread; the answer is encoded on the pool thread that computed it.
 */
#ifndef TLC_PUBSUB_RANGE_H
#define TLC_PUBSUB_RANGE_H

#include "pubsub/feed.h"
#include "pubsub/sub.h"

void tlc__ps_hist_stop(tlc__ps_sub_t *s);
void tlc__ps_hist_get_stats(tlc__ps_sub_t *s, uint32_t req, const Tlcap__GetStats *g);
/* AroundRequest: the moment (history/moment.h) through the view's around hook. */
void tlc__ps_hist_around(tlc__ps_sub_t *s, uint32_t req, const Tlcap__AroundRequest *g);
int tlc__ps_hist_subscribe_check(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r);
void tlc__ps_hist_subscribe_start(tlc__ps_sub_t *s, uint32_t req, const Tlcap__Subscribe *r,
                                  subn_t *sn, spec_t *fspec);

#endif
