/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite: SIGINT, SIGTERM and SIGHUP set a flag that long-running
 * loops (the passphrase prompt's, and the block layer's, which is given
 * the flag with each image: img_open(), the creations) check, so that
 * they stop cleanly: a new image is then never given its name.
 */
#include "img.h"

volatile sig_atomic_t img_interrupted;

static void img_signal_handler(int sig)
{
    img_interrupted = 1;
}

void img_install_signal_handlers(void)
{
    struct sigaction sa = { .sa_handler = img_signal_handler };

    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A closed terminal or ssh session: stop as for SIGTERM. */
    sigaction(SIGHUP, &sa, NULL);
    /*
     * As qemu-img: a reader of -p output that goes away ("| head") makes
     * writes to stdout fail with EPIPE, and the copy goes on.
     */
    signal(SIGPIPE, SIG_IGN);
}
