/* tlc_log_level.h - the one set of log levels (syslog's numbers) that every library hands to
 * its log sink (store.h log_cb, pubsub.h log, fleet.h log) and that daemon/log.h prints. */
#ifndef TLC_LOG_LEVEL_H
#define TLC_LOG_LEVEL_H

enum tlc_log_level {
  TLC_LOG_ERR = 3,
  TLC_LOG_WARN = 4,
  TLC_LOG_NOTICE = 5,
  TLC_LOG_INFO = 6,
  TLC_LOG_DEBUG = 7
};

#endif
