/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The connections of an nbd node (block/nbd.c) to its server: libnbd
 * handles, each connected with a deadline (TLS included), on which
 * threads start commands with libnbd's nbd_aio_* calls, so that they
 * overlap on the wire, and wait for them, polling the connection in
 * turns. What the commands are is the driver's business, not this file's.
 */
#ifndef BLOCK_NBD_CONN_H
#define BLOCK_NBD_CONN_H

#include <libnbd.h>

#include "block/block_int.h"

/* Where the server is and how to talk to it; the same for every connection. */
typedef struct NBDConnConfig {
    /* A unix socket at path, or TCP to host:port. */
    bool unix_socket;
    char *host, *port, *path;
    char *export;
    /* TLS: none, or required (nbds://, tls-creds=): libnbd's settings. */
    bool tls;
    char *tls_certificates;     /* an x509 directory, or NULL */
    char *tls_psk_file;         /* a psktool keys file, or NULL */
    char *tls_username;         /* PSK identity, NULL for libnbd's */
    char *tls_hostname;         /* the name the certificate must carry */
    bool tls_verify_peer;
    /* The most a connection and its handshake may take, 0: no limit. */
    gint64 timeout_us;
    /*
     * The block status context: NULL for base:allocation, or QEMU's
     * x-dirty-bitmap ("qemu:dirty-bitmap:NAME": dirty reads as a hole).
     */
    char *meta_context;
    /* How errors name the server (the node's filename). */
    const char *name;
} NBDConnConfig;

void nbd_conn_config_clear(NBDConnConfig *cfg);

typedef struct NBDConn NBDConn;

/*
 * Connect to the server (the caller waits, at most cfg->timeout_us).
 * cfg must outlive the connection.
 */
NBDConn *nbd_conn_open(const NBDConnConfig *cfg, Error **errp);
/*
 * The same, but connecting in a thread of its own: the connection becomes
 * usable (nbd_conn_usable()) when the handshake is done, and stays
 * unusable if it fails (an extra connection is a bonus).
 */
NBDConn *nbd_conn_open_background(const NBDConnConfig *cfg);
/* Disconnect politely (briefly) and free; nobody may be waiting on c. */
void nbd_conn_close(NBDConn *c);

/* The handle, for nbd_aio_* calls and queries; any thread may use it. */
struct nbd_handle *nbd_conn_handle(NBDConn *c);
/* Connected and not lost. */
bool nbd_conn_usable(NBDConn *c);
/*
 * After starting commands on c with nbd_aio_*: libnbd may have been left
 * with part of one to write when the socket has room, which the thread
 * polling c must then be told to poll for.
 */
void nbd_conn_started(NBDConn *c);
/*
 * Wait until *finished is set by nbd_conn_complete() (from a command's
 * completion callback), reading replies meanwhile unless another thread
 * does. Commands end also when the connection is lost (libnbd ends them
 * with ENOTCONN), so this returns once they have been started.
 */
void nbd_conn_wait(NBDConn *c, const gint *finished);
/* Set *finished and wake the threads waiting on c. */
void nbd_conn_complete(NBDConn *c, gint *finished);
/* Why the connection ended, if it did (a copy), else NULL. */
char *nbd_conn_lost_reason(NBDConn *c);

/* The driver's count of requests in flight on c (to pick the least busy). */
int nbd_conn_in_flight(NBDConn *c);
void nbd_conn_add_in_flight(NBDConn *c, int n);

#endif
