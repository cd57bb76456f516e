/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The connections of an nbd node (block/nbd-conn.h).
 *
 * libnbd's synchronous calls hold the handle's lock from the request to
 * its reply, so threads sharing a handle take turns on the wire. Here
 * threads start commands with nbd_aio_* (libnbd sends what the socket
 * takes at once) and learn of their end in completion callbacks, which
 * libnbd calls as it reads the replies. Someone has to read them: the
 * threads that wait take turns at it (leader and followers). A waiting
 * thread becomes the connection's poller if there is none: it polls the
 * socket for what libnbd waits for (nbd_aio_get_direction) and runs
 * nbd_aio_notify_read/write, which call the callbacks of every thread's
 * commands; the other waiters sleep until their command is done or the
 * poller leaves (its own command done), when one of them takes over.
 *
 * A thread that waits alone thus reads its own reply, as with a
 * synchronous call: no hand-off to another thread per request (on a busy
 * machine with 2 CPUs, a dedicated polling thread made each round trip
 * 20 times slower: every hand-off waits for a time slice). A command
 * that could not all be sent leaves libnbd waiting to write, which the
 * poller may not be polling for: the thread that started it then kicks
 * the connection (an eventfd the poller polls too) and it looks again.
 *
 * Connecting goes through the same poll, with a deadline: a server that
 * drops SYNs, or accepts and never speaks, costs at most the timeout;
 * closing the node interrupts a connection still being made.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "block/nbd-conn.h"

/* A polite NBD_CMD_DISC at close may take this long, then we just go. */
#define NBD_CONN_DISCONNECT_MS 1000
/* A waiting poller looks at its command again at least this often. */
#define NBD_CONN_RECHECK_MS 1000

struct NBDConn {
    const NBDConnConfig *cfg;
    struct nbd_handle *nbd;
    int wake_fd;
    /* An extra connection, connecting in a thread of its own. */
    GThread *connector;
    gint stop;
    gint usable;
    gint in_flight;
    GMutex lock;
    GCond cond;                 /* a command done, or the poller left */
    bool polling;               /* under lock: a waiter polls */
    char *lost;                 /* under lock: why the connection ended */
};

void nbd_conn_config_clear(NBDConnConfig *cfg)
{
    g_free(cfg->host);
    g_free(cfg->port);
    g_free(cfg->path);
    g_free(cfg->export);
    g_free(cfg->tls_certificates);
    g_free(cfg->tls_psk_file);
    g_free(cfg->tls_username);
    g_free(cfg->tls_hostname);
    g_free(cfg->meta_context);
    memset(cfg, 0, sizeof(*cfg));
}

/* libnbd's message, less the name of the call it starts with. */
static const char *nbd_conn_libnbd_error(void)
{
    const char *msg = nbd_get_error();
    int err = nbd_get_errno();

    if (!msg) {
        return g_strerror(err ? err : EIO);
    }
    if (g_str_has_prefix(msg, "nbd_") && strstr(msg, ": ")) {
        return strstr(msg, ": ") + 2;
    }
    return msg;
}

/*
 * libnbd's reason, and what the user can do about the usual TLS
 * mismatches (libnbd's messages name GnuTLS calls, not the cause).
 */
static void nbd_conn_connect_error(const NBDConnConfig *cfg, const char *why,
                                   Error **errp)
{
    const char *hint = "";

    if (strstr(why, "requires TLS")) {
        hint = " (the server requires TLS: use an nbds:// name or "
               "tls-creds=ID)";
    } else if (cfg->tls && strstr(why, "server refused TLS")) {
        hint = " (the server does not offer TLS)";
    } else if (cfg->tls && cfg->tls_psk_file &&
               strstr(why, "gnutls_handshake")) {
        hint = " (TLS handshake failed: is the pre-shared key, or the "
               "username, the server's?)";
    } else if (cfg->tls && strstr(why, "certificate")) {
        hint = " (the server's certificate is not trusted by the CA "
               "certificate given, or does not name the host)";
    } else if (cfg->tls && strstr(why, "non-properly terminated")) {
        /* The server ended the handshake: it did not like ours. */
        hint = " (the server refused our credentials: does it want a "
               "client certificate, client-cert.pem and client-key.pem?)";
    }
    error_setg(errp, "Could not connect to '%s': %s%s", cfg->name, why, hint);
}

static struct nbd_handle *nbd_conn_new_handle(const NBDConnConfig *cfg,
                                              Error **errp)
{
    struct nbd_handle *h = nbd_create();

    if (!h) {
        nbd_conn_connect_error(cfg, nbd_conn_libnbd_error(), errp);
        return NULL;
    }
    if (nbd_set_export_name(h, cfg->export) < 0 ||
        nbd_add_meta_context(h, cfg->meta_context ? cfg->meta_context :
                             LIBNBD_CONTEXT_BASE_ALLOCATION) < 0) {
        goto fail;
    }
    if (cfg->tls) {
        if (!nbd_supports_tls(h)) {
            error_setg(errp, "Could not connect to '%s': this libnbd was "
                       "built without TLS", cfg->name);
            nbd_close(h);
            return NULL;
        }
        if (nbd_set_tls(h, LIBNBD_TLS_REQUIRE) < 0 ||
            (cfg->tls_certificates &&
             nbd_set_tls_certificates(h, cfg->tls_certificates) < 0) ||
            (cfg->tls_psk_file &&
             nbd_set_tls_psk_file(h, cfg->tls_psk_file) < 0) ||
            (cfg->tls_username &&
             nbd_set_tls_username(h, cfg->tls_username) < 0) ||
            nbd_set_tls_verify_peer(h, cfg->tls_verify_peer) < 0) {
            goto fail;
        }
#ifdef LIBNBD_HAVE_NBD_SET_TLS_HOSTNAME
        if (cfg->tls_hostname &&
            nbd_set_tls_hostname(h, cfg->tls_hostname) < 0) {
            goto fail;
        }
#endif
    }
    return h;

fail:
    nbd_conn_connect_error(cfg, nbd_conn_libnbd_error(), errp);
    nbd_close(h);
    return NULL;
}

/*
 * Wait, at most timeout_ms (-1: no limit), until the socket is ready for
 * what libnbd waits for or the connection is kicked; then let libnbd go
 * on. -1 (libnbd's error set) when the connection failed.
 */
static int nbd_conn_poll(NBDConn *c, int timeout_ms)
{
    unsigned dir = nbd_aio_get_direction(c->nbd);
    struct pollfd fds[2] = {
        { .fd = nbd_aio_get_fd(c->nbd) },
        { .fd = c->wake_fd, .events = POLLIN },
    };
    short ev;

    if (fds[0].fd < 0) {
        return -1;
    }
    if (dir & LIBNBD_AIO_DIRECTION_READ) {
        fds[0].events |= POLLIN;
    }
    if (dir & LIBNBD_AIO_DIRECTION_WRITE) {
        fds[0].events |= POLLOUT;
    }
    if (poll(fds, 2, timeout_ms) < 0) {
        return errno == EINTR ? 0 : -1;
    }
    if (fds[1].revents & POLLIN) {
        uint64_t n;

        if (read(c->wake_fd, &n, sizeof(n)) < 0) {
            /* EAGAIN: another kick was drained already */
        }
    }
    ev = fds[0].revents;
    /* A hang-up or error is news for whichever direction libnbd waits. */
    if ((ev & POLLIN) ||
        ((ev & (POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ))) {
        return nbd_aio_notify_read(c->nbd);
    }
    if (ev & (POLLOUT | POLLHUP | POLLERR)) {
        return nbd_aio_notify_write(c->nbd);
    }
    return 0;
}

static void nbd_conn_kick(NBDConn *c)
{
    uint64_t one = 1;

    if (write(c->wake_fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is full of kicks not yet seen, enough */
    }
}

static void nbd_conn_set_lost(NBDConn *c, const char *why)
{
    g_mutex_lock(&c->lock);
    if (!c->lost) {
        c->lost = g_strdup(why);
    }
    g_mutex_unlock(&c->lock);
}

/* Connect and shake hands, within the configured time. */
static int nbd_conn_connect(NBDConn *c, Error **errp)
{
    const NBDConnConfig *cfg = c->cfg;
    gint64 deadline = cfg->timeout_us ?
        g_get_monotonic_time() + cfg->timeout_us : 0;
    int ret = cfg->unix_socket ? nbd_aio_connect_unix(c->nbd, cfg->path)
            : nbd_aio_connect_tcp(c->nbd, cfg->host, cfg->port);

    while (ret >= 0 && !nbd_aio_is_ready(c->nbd)) {
        int timeout_ms = -1;

        if (nbd_aio_is_dead(c->nbd) || nbd_aio_is_closed(c->nbd)) {
            ret = -1;
            break;
        }
        if (g_atomic_int_get(&c->stop)) {
            error_setg(errp, "Could not connect to '%s': closed while "
                       "connecting", cfg->name);
            return -1;
        }
        if (deadline) {
            gint64 left = deadline - g_get_monotonic_time();

            if (left <= 0) {
                error_setg(errp, "Could not connect to '%s': no answer "
                           "within %" G_GINT64_FORMAT " seconds (the "
                           "server may be down or overloaded; "
                           "open-timeout=SECONDS sets the limit)",
                           cfg->name,
                           (cfg->timeout_us + G_USEC_PER_SEC - 1) /
                           G_USEC_PER_SEC);
                return -1;
            }
            timeout_ms = (int)MIN((left + 999) / 1000, G_MAXINT);
        }
        ret = nbd_conn_poll(c, timeout_ms);
    }
    if (ret < 0) {
        nbd_conn_connect_error(cfg, nbd_conn_libnbd_error(), errp);
        return -1;
    }
    return 0;
}

static gpointer nbd_conn_connector(gpointer opaque)
{
    NBDConn *c = opaque;
    Error *err = NULL;

    if (nbd_conn_connect(c, &err) < 0) {
        nbd_conn_set_lost(c, error_get_pretty(err));
        error_free(err);
    } else {
        g_atomic_int_set(&c->usable, 1);
    }
    return NULL;
}

void nbd_conn_wait(NBDConn *c, const gint *finished)
{
    g_mutex_lock(&c->lock);
    while (!g_atomic_int_get(finished)) {
        int ret;

        if (c->polling) {
            g_cond_wait(&c->cond, &c->lock);
            continue;
        }
        c->polling = true;
        g_mutex_unlock(&c->lock);
        /*
         * A bounded wait: a command of ours ended by another thread (one
         * whose nbd_aio_* call read our reply, or found the connection
         * dead and ended every command) wakes nobody; the socket may say
         * nothing more. Looking again each second costs nothing.
         */
        ret = nbd_conn_poll(c, NBD_CONN_RECHECK_MS);
        if (ret < 0 || nbd_aio_is_dead(c->nbd) || nbd_aio_is_closed(c->nbd)) {
            /*
             * Gone: libnbd has ended every command in flight (ENOTCONN),
             * ours included, and refuses new ones.
             */
            g_atomic_int_set(&c->usable, 0);
            nbd_conn_set_lost(c, nbd_conn_libnbd_error());
            /*
             * Not a busy loop if the command is somehow not ended yet
             * (or poll(2) itself failed): 10 ms once, on the way out.
             */
            if (!g_atomic_int_get(finished)) {
                g_usleep(10 * 1000);
            }
        }
        g_mutex_lock(&c->lock);
        c->polling = false;
        /* Whoever still waits may take over. */
        g_cond_broadcast(&c->cond);
    }
    g_mutex_unlock(&c->lock);
}

void nbd_conn_complete(NBDConn *c, gint *finished)
{
    g_mutex_lock(&c->lock);
    g_atomic_int_set(finished, 1);
    g_cond_broadcast(&c->cond);
    g_mutex_unlock(&c->lock);
}

void nbd_conn_started(NBDConn *c)
{
    if (nbd_aio_get_direction(c->nbd) & LIBNBD_AIO_DIRECTION_WRITE) {
        nbd_conn_kick(c);
    }
}

static NBDConn *nbd_conn_new(const NBDConnConfig *cfg, Error **errp)
{
    NBDConn *c;
    struct nbd_handle *h = nbd_conn_new_handle(cfg, errp);
    int fd;

    if (!h) {
        return NULL;
    }
    fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) {
        error_setg_errno(errp, errno, "Could not connect to '%s': eventfd",
                         cfg->name);
        nbd_close(h);
        return NULL;
    }
    c = g_new0(NBDConn, 1);
    c->cfg = cfg;
    c->nbd = h;
    c->wake_fd = fd;
    g_mutex_init(&c->lock);
    g_cond_init(&c->cond);
    return c;
}

static void nbd_conn_free(NBDConn *c)
{
    nbd_close(c->nbd);
    close(c->wake_fd);
    g_mutex_clear(&c->lock);
    g_cond_clear(&c->cond);
    g_free(c->lost);
    g_free(c);
}

NBDConn *nbd_conn_open(const NBDConnConfig *cfg, Error **errp)
{
    NBDConn *c = nbd_conn_new(cfg, errp);

    if (!c) {
        return NULL;
    }
    if (nbd_conn_connect(c, errp) < 0) {
        nbd_conn_free(c);
        return NULL;
    }
    g_atomic_int_set(&c->usable, 1);
    return c;
}

NBDConn *nbd_conn_open_background(const NBDConnConfig *cfg)
{
    NBDConn *c = nbd_conn_new(cfg, NULL);

    if (c) {
        c->connector = g_thread_new("nbd-connect", nbd_conn_connector, c);
    }
    return c;
}

void nbd_conn_close(NBDConn *c)
{
    gint64 deadline;

    /* Nobody waits on c any more: only a connector may still run. */
    g_atomic_int_set(&c->stop, 1);
    nbd_conn_kick(c);
    if (c->connector) {
        g_thread_join(c->connector);
    }
    /*
     * Tell the server we go (NBD_CMD_DISC) and give it a moment to close:
     * bounded, so that a server that hangs does not hang us.
     */
    if (nbd_aio_is_ready(c->nbd) && nbd_aio_disconnect(c->nbd, 0) == 0) {
        deadline = g_get_monotonic_time() + NBD_CONN_DISCONNECT_MS * 1000;
        while (!nbd_aio_is_closed(c->nbd) && !nbd_aio_is_dead(c->nbd)) {
            gint64 left = deadline - g_get_monotonic_time();

            if (left <= 0 || nbd_poll(c->nbd, (int)(left / 1000) + 1) < 0) {
                break;
            }
        }
    }
    nbd_conn_free(c);
}

struct nbd_handle *nbd_conn_handle(NBDConn *c)
{
    return c->nbd;
}

bool nbd_conn_usable(NBDConn *c)
{
    return g_atomic_int_get(&c->usable);
}


char *nbd_conn_lost_reason(NBDConn *c)
{
    char *why;

    g_mutex_lock(&c->lock);
    why = g_strdup(c->lost);
    g_mutex_unlock(&c->lock);
    return why;
}

int nbd_conn_in_flight(NBDConn *c)
{
    return g_atomic_int_get(&c->in_flight);
}

void nbd_conn_add_in_flight(NBDConn *c, int n)
{
    g_atomic_int_add(&c->in_flight, n);
}
