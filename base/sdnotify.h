/* sdnotify.h - systemd integration without blocking: sd_notify, the watchdog, socket activation.
 *
 * Notifications use the documented datagram protocol directly (one AF_UNIX SOCK_DGRAM sendto to
 * $NOTIFY_SOCKET, '@' = abstract namespace) with MSG_DONTWAIT: a notify reader that stops reading
 * never blocks the loop (a message is dropped and counted instead). libsystemd's sd_notify sends
 * on a blocking socket, so it is not used for that; libsystemd reads the watchdog's settings
 * (sd_watchdog_enabled) and the inherited sockets (sd_listen_fds_with_names).
 *
 * Health gate (RELIABILITY R15): WATCHDOG=1 is sent from a loop timer at half WATCHDOG_USEC and
 * only when every registered health check passes (tlc_sd_health_add) and the loop itself is not
 * late (the timer fired within one period of schedule). So a blocked loop or a stalled stage
 * stops the pings and systemd restarts the service.
 *
 * Loop thread only.
 */
#ifndef TLC_SDNOTIFY_H
#define TLC_SDNOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define TLC_SD_MAX_FDS    64
#define TLC_SD_MAX_HEALTH 8

/* Sends `msg` ("READY=1", "STATUS=...", several lines allowed) to $NOTIFY_SOCKET. Returns 1
 * sent, 0 no socket configured, or a negative error (counted in tlc_sd_dropped). */
int tlc_sd_notify(const char *msg);
/* Messages that could not be sent. */
uint64_t tlc_sd_dropped(void);

/* A health check: returns 0 when its stage is making progress, else non-zero (and may set
 * *why to a static string). */
typedef int (*tlc_sd_health_fn)(void *ud, const char **why);

/* Registers a health check consulted before every watchdog ping. Returns 0 or TLC_ELIMIT. */
int tlc_sd_health_add(tlc_sd_health_fn fn, void *ud);
void tlc_sd_health_remove(void *ud);
/* Runs every registered health check now (the HTTP /-/healthy path). Returns 0 when all pass,
 * else non-zero with *why set to the first failing check's reason (never NULL then). */
int tlc_sd_health_check(const char **why);

/* Starts the watchdog timer on `loop` if $WATCHDOG_USEC is set (and $WATCHDOG_PID, when set,
 * is ours). Returns 1 started, 0 not requested, or a negative libuv error. */
int tlc_sd_watchdog_start(uv_loop_t *loop);
/* Stops and closes the timer (close callback frees nothing: the timer is static). */
void tlc_sd_watchdog_stop(void);
/* Watchdog pings sent and withheld by the health gate. */
uint64_t tlc_sd_watchdog_sent(void);
uint64_t tlc_sd_watchdog_withheld(void);

/* One inherited socket. */
typedef struct tlc_sd_fd {
  int fd;
  char name[64]; /* LISTEN_FDNAMES entry, "unknown" when absent */
  int taken;     /* set by the adopter */
} tlc_sd_fd_t;

/* Reads the inherited sockets (once; unsets LISTEN_* so children do not inherit them). Returns
 * the count (0 when not socket-activated) and sets *out to a static array. */
int tlc_sd_listen_fds(tlc_sd_fd_t **out);

/* Checks that `fd` is a listening stream socket (SO_TYPE == SOCK_STREAM, SO_ACCEPTCONN) of
 * family AF_INET/AF_INET6 (want_unix 0) or AF_UNIX (1). Returns 0 or a negative error with
 * why[] telling what it is instead. */
int tlc_sd_check_stream_listener(int fd, int want_unix, char *why, size_t whylen);

#endif
