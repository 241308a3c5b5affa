/* man.c - the man pages' key list (tlc_config_man): every [daemon] key of the table (keys.c)
 * with its value's spelling, its default (from tlc_config_init) and its reload class, as mdoc,
 * so tlcapd(8) and tlcapd.ini(5) cannot drift from the options the daemon takes.
 */
#include "config/config-int.h"

#include "base/out.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The value's mdoc spelling when the table gives none. */
static const char *man_arg(const dkey_t *k) {
  static const char *const by_type[] = {
    [K_STR] = "Ar value",
    [K_BOOL] = "Ar bool",
    [K_SIZE] = "Ar n",
    [K_DUR] = "Ar duration",
    [K_LEVEL] = "Ar level",
    [K_DEBUG] = "Ar list",
    [K_WINDOWS] = "Ar list",
    [K_ADDR] = "Ar host : Ns Ar port",
    [K_U64] = "Ar size",
    [K_SYNC] = "Cm on_close | never | periodic",
    [K_MAINEXP] = "Cm text1 | xml",
    [K_SECS] = "Ar seconds",
    [K_SERVE] = "Ar host : Ns Ar port | Cm unix: Ns Ar path",
  };
  return k->arg != NULL ? k->arg : by_type[k->type];
}

/* `v` with the largest binary suffix that divides it (64M), or plain. */
static void man_size(char *buf, size_t len, uint64_t v) {
  static const char sfx[] = "KMGT";
  int i = -1;
  while (v != 0 && v % 1024 == 0 && i < 3) {
    v /= 1024;
    i++;
  }
  if (i < 0)
    snprintf(buf, len, "%llu", (unsigned long long)v);
  else
    snprintf(buf, len, "%llu%c", (unsigned long long)v, sfx[i]);
}

/* `ms` in the largest unit the duration parser takes that divides it (30s, 168h). */
static void man_dur(char *buf, size_t len, uint64_t ms) {
  static const struct {
    uint64_t ms;
    const char *unit;
  } u[] = { { 3600000, "h" }, { 60000, "m" }, { 1000, "s" } };
  for (size_t i = 0; ms != 0 && i < sizeof(u) / sizeof(u[0]); i++)
    if (ms % u[i].ms == 0) {
      snprintf(buf, len, "%llu%s", (unsigned long long)(ms / u[i].ms), u[i].unit);
      return;
    }
  snprintf(buf, len, ms == 0 ? "0" : "%llums", (unsigned long long)ms);
}

/* Key k's value in c as the man page shows a default ("" when the type has no plain text). */
static void man_value(const dkey_t *k, const tlc_config_t *c, char *buf, size_t len) {
  static const char *const levels[] = { "emerg", "alert",  "crit", "err",
                                        "warn",  "notice", "info", "debug" };
  const char *p = (const char *)c + k->off;
  uint64_t u = 0;
  buf[0] = '\0';
  switch (k->type) {
  case K_STR:
  case K_SERVE:
  case K_ADDR:
  case K_DEBUG:
    snprintf(buf, len, "%.*s", (int)strnlen(p, k->span), p);
    if (p[0] == '\0')
      snprintf(buf, len, "none");
    break;
  case K_BOOL:
    snprintf(buf, len, "%s", *(const int *)(const void *)p ? "yes" : "no");
    break;
  case K_SIZE: /* a size_t or uint32_t field, as set_dkey writes it */
    if (k->span == sizeof(uint32_t)) {
      uint32_t u32;
      memcpy(&u32, p, sizeof(u32));
      u = u32;
    } else {
      memcpy(&u, p, k->span < sizeof(u) ? k->span : sizeof(u));
    }
    if (k->arg != NULL && strcmp(k->arg, "Ar size") == 0)
      man_size(buf, len, u);
    else
      snprintf(buf, len, "%llu", (unsigned long long)u);
    break;
  case K_U64:
  case K_DUR:
  case K_SECS:
    memcpy(&u, p, k->span < sizeof(u) ? k->span : sizeof(u));
    if (k->type == K_U64 && k->arg == NULL)
      man_size(buf, len, u);
    else if (k->type == K_U64)
      snprintf(buf, len, "%llu", (unsigned long long)u);
    else
      man_dur(buf, len, u);
    break;
  case K_LEVEL:
    snprintf(buf, len, "%s", c->log_level >= 0 && c->log_level < 8 ? levels[c->log_level] : "");
    break;
  case K_SYNC:
    snprintf(buf, len, "%s",
             c->sync_mode == 0   ? "on_close"
             : c->sync_mode == 1 ? "never"
                                 : "periodic");
    break;
  case K_MAINEXP:
    snprintf(buf, len, "%s", c->main_export == 0 ? "text1" : "xml");
    break;
  case K_WINDOWS:
    break;
  }
}

/* The key as a long option after Fl, which writes the first '-': "\-" for the second and for
 * each '_' (mdoc: a plain '-' may be set as a hyphen). */
static void man_option(tlc_out_t *o, const char *name) {
  tlc_out_puts(o, "\\-"); /* Fl writes the first one */
  for (; *name != '\0'; name++)
    if (*name == '_')
      tlc_out_puts(o, "\\-");
    else
      tlc_out_putc(o, *name);
}

int tlc_config_man(tlc_out_t *o, int options) {
  tlc_config_t def;
  int r = tlc_config_init(&def);
  if (r != 0)
    return r;
  for (const dkey_t *k = tlc_cfg_dkeys; k < tlc_cfg_dkeys + tlc_cfg_ndkeys; k++) {
    char v[320];
    if (options) {
      tlc_out_puts(o, ".It Fl ");
      man_option(o, k->name);
      tlc_out_printf(o, " %s\n", man_arg(k));
    } else {
      tlc_out_printf(o, ".It Ic %s No = %s\n", k->name, man_arg(k));
    }
    tlc_out_printf(o, "%s\n", k->doc);
    man_value(k, &def, v, sizeof(v));
    if (strstr(k->doc, "default:") == NULL && v[0] != '\0' && !tlc_cfg_dkey_alias(k))
      tlc_out_printf(o, "Default: %s.\n", v);
    if (tlc_cfg_dkey_alias(k))
      continue;
    tlc_out_puts(o, k->reload == TLC_CFG_LIVE      ? "A reload applies a change.\n"
                    : k->reload == TLC_CFG_RESTART ? "A change needs a restart (a reload keeps the "
                                                     "running value and logs it).\n"
                                                   : "A reload that changes it is refused.\n");
  }
  tlc_config_fini(&def);
  return o->err;
}
