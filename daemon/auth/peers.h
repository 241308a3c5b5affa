/* peers.h - connections at once per peer address, for the daemon's network ports (the HTTP
 * port and the subscriber port each keep one table): under a port's global cap, one address may
 * hold at most `max` connections, so a single peer (a flood of idle connections, slowloris
 * headers, half-open TLS handshakes) cannot take every slot and lock the others out.
 *
 * An address is the peer's IP without its port; an IPv4-mapped IPv6 address (::ffff:a.b.c.d)
 * is the IPv4 address it maps, so a dual-stack listener counts a peer once. Loopback addresses
 * are counted like any other. Unix-domain peers (and any family other than IPv4/IPv6) are not
 * counted: tlc_peers_take gives them TLC_PEERS_NONE.
 *
 * The table is an array of (address, count) entries scanned linearly: it holds at most one
 * entry per connection open, and a port's connections are capped (64 HTTP, 256 subscribers by
 * default), so a scan per accepted connection costs well under a microsecond.
 *
 * Threads: none; the owner calls it from one thread (the daemon's loop).
 */
#ifndef TLC_PEERS_H
#define TLC_PEERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define TLC_PEERS_NONE SIZE_MAX /* a slot that is not counted (Unix socket, unknown family) */

typedef struct tlc_peers_entry {
  uint8_t addr[16]; /* IPv6, or IPv4 in the last 4 bytes (family tells) */
  uint8_t family;   /* 4 or 6; 0: a free entry */
  uint32_t count;
} tlc_peers_entry_t;

typedef struct tlc_peers {
  size_t max; /* connections per address (0: no cap, everything is still counted) */
  tlc_peers_entry_t *v;
  size_t n, cap;
  uint64_t refused; /* takes refused: the address had max already */
} tlc_peers_t;

/* An empty table with a cap of `max` connections per address (0: none). */
void tlc_peers_init(tlc_peers_t *p, size_t max);
void tlc_peers_fini(tlc_peers_t *p);

/* Counts one connection from `sa` (len bytes). Returns 0 with *slot (to give back with
 * tlc_peers_release; TLC_PEERS_NONE for a peer that is not counted), TLC_ELIMIT when the address
 * has max connections already (counted in refused; nothing taken), TLC_ENOMEM. */
int tlc_peers_take(tlc_peers_t *p, const struct sockaddr *sa, size_t len, size_t *slot);

/* Gives back one connection of slot (TLC_PEERS_NONE: nothing). */
void tlc_peers_release(tlc_peers_t *p, size_t slot);

/* The address of `sa` as text ("192.0.2.7", "::1"; an IPv4-mapped address as IPv4) into buf;
 * "?" when it is not an IP address. Returns buf. */
const char *tlc_peers_name(const struct sockaddr *sa, size_t len, char *buf, size_t buflen);

/* SPEC 8's loopback rule, the one predicate the configuration's checks, the subscriber port and
 * the HTTP port (bind and Host checks) all use: 1 when `sa` is a loopback address -
 * 127.0.0.0/8, ::1, or an IPv4-mapped ::ffff:127.x.y.z - else 0 (other families included). */
int tlc_peers_is_loopback(const struct sockaddr *sa);

/* The same for an address written as text: numeric, or the name "localhost" (exactly); any
 * other name is 0, since it may resolve beyond loopback. */
int tlc_peers_host_is_loopback(const char *host);

#endif
