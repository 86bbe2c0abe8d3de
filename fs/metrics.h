/*
 * The Prometheus exporter: GET /metrics over HTTP (libmicrohttpd: one
 * polling thread serving every connection at once, a connection idle for
 * DV_METRICS_TIMEOUT_S closed, bounded connections and memory), text
 * exposition format 0.0.4. Names start with datavofs_; per-tier
 * families carry a tier="NAME" label. The numbers are the status file's
 * (status.h says what they mean).
 *
 * The socket is bound before the daemon forks, so that a bad address or a
 * port in use fails the mount with a message on the terminal; the thread
 * starts after the fork (threads do not survive fork()).
 *
 * Address: "" or NULL means 127.0.0.1:9110; "PORT" means 127.0.0.1:PORT;
 * "ADDR:PORT" or "[V6ADDR]:PORT" as given. Port 0 picks a free port
 * (dv_metrics_address() tells which). Only an address given explicitly
 * can be non-loopback, and binding one is logged as a warning.
 */
#ifndef DV_METRICS_H
#define DV_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "datavofs.h"

#define DV_METRICS_DEFAULT_PORT "9110"
/* A connection idle this long is closed. */
#define DV_METRICS_TIMEOUT_S 10

struct dv_metrics;

/*
 * Renders the exposition text for @fs: a malloc'd NUL-terminated string of
 * *@len bytes, or NULL when out of memory.
 */
char *dv_metrics_text(struct dv_fs *fs, size_t *len);

/*
 * Splits @spec (see above) into @host and @port. 0, or -EINVAL with a
 * message in @err.
 */
int dv_metrics_parse_addr(const char *spec, char *host, size_t hostlen,
			  char *port, size_t portlen, char *err, size_t errlen);

/* True when @spec turns the exporter off: off, false, no, none. */
bool dv_metrics_spec_is_off(const char *spec);

/*
 * Binds and listens on @spec for @fs (borrowed; must outlive the
 * exporter). 0 with a new exporter in *@out, or -errno with a message in
 * @err. Nothing is served until dv_metrics_start().
 */
int dv_metrics_listen(struct dv_fs *fs, const char *spec,
		      struct dv_metrics **out, char *err, size_t errlen);

/* Starts serving (threads: call after any fork). 0 or -errno. */
int dv_metrics_start(struct dv_metrics *m);

/* The bound address, e.g. "127.0.0.1:9110" (borrowed). */
const char *dv_metrics_address(const struct dv_metrics *m);

/*
 * Stops serving (if started): closes every connection, however slow, and
 * the socket, then frees. NULL: no-op.
 */
void dv_metrics_free(struct dv_metrics *m);

#endif
