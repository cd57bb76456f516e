/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite: SIGINT and SIGTERM set a flag that long-running loops
 * (and the passphrase prompt) check, so that they stop cleanly.
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
}
