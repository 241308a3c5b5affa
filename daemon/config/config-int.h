/* config-int.h - what config.c (parsing), keys.c (the [daemon] key table) and man.c (the man
 * pages' key list) share inside the config module; nothing outside it includes this.
 *
 * The [daemon] keys are one table (keys.c): the INI handler, the command line's long options
 * (one per key, '_' spelled '-'), SIGHUP's reload classes and the man pages all read it, so a
 * key added there exists everywhere without further code.
 */
#ifndef TLC_CONFIG_INT_H
#define TLC_CONFIG_INT_H

#include "config/config.h"

#include <stddef.h>
#include <stdint.h>

enum ktype {
  K_STR,
  K_BOOL,
  K_SIZE,
  K_DUR,
  K_LEVEL,
  K_DEBUG,
  K_WINDOWS,
  K_ADDR,
  K_U64,
  K_SYNC,
  K_MAINEXP,
  K_SECS, /* a duration whose bare number is seconds (SPEC's `SECONDS` options) */
  K_SERVE /* HOST:PORT, unix:PATH, or empty */
};

typedef struct dkey {
  const char *name;
  enum ktype type;
  size_t off;
  size_t size;  /* K_STR: capacity; K_SIZE: sizeof field */
  uint64_t max; /* K_SIZE, K_U64: largest value; K_DUR: largest ms (0: the parser's cap) */
  size_t span;  /* the field's bytes, compared by tlc_config_diff (0: K_WINDOWS, compared apart) */
  enum tlc_cfg_reload reload; /* what a SIGHUP that changes it does */
  /* The man pages' entry (tlc_config_man): the value's mdoc spelling (NULL: from the type), and
   * what the key does, mdoc text ('\n' between lines); the default and the reload class are
   * added from the defaults and `reload`, unless the text says "default:" itself. */
  const char *arg;
  const char *doc;
} dkey_t;

/* The table: tlc_cfg_ndkeys entries, at most TLC_CFG_DKEYS_CAP (the command line's option
 * arrays are sized by it; keys.c checks the table fits at compile time). */
#define TLC_CFG_DKEYS_CAP 256
extern const dkey_t tlc_cfg_dkeys[];
extern const size_t tlc_cfg_ndkeys;

/* The key called `name`, or NULL. */
const dkey_t *tlc_cfg_find_dkey(const char *name);
/* Smallest value of a K_SIZE key where 0 (or a tiny value) makes no sense (else 0). */
uint64_t tlc_cfg_dkey_min(const dkey_t *k);
/* 1 if an earlier key of the table names the same field (an alias: "nats" for nats_url). */
int tlc_cfg_dkey_alias(const dkey_t *k);

#endif
