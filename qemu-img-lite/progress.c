/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite -p: the progress display.
 */
#include <stdio.h>

#include "img.h"

void img_progress_init(ImgProgress *p, bool enabled)
{
    p->enabled = enabled;
    p->last = 0;
    if (enabled) {
        printf("    (%3.2f/100%%)\r", 0.0);
        fflush(stdout);
    }
}

void img_progress_update(ImgProgress *p, double percent)
{
    /* One line per whole percent at most, as qemu-img. */
    if (p->enabled && percent - p->last >= 1.0) {
        p->last = percent;
        printf("    (%3.2f/100%%)\r", percent);
        fflush(stdout);
    }
}

void img_progress_set(ImgProgress *p, double percent)
{
    if (p->enabled && (percent > p->last + 1.0 || percent < p->last - 1.0 ||
                       percent == 0 || percent == 100)) {
        p->last = percent;
        printf("    (%3.2f/100%%)\r", percent);
        fflush(stdout);
    }
}

void img_progress_end(ImgProgress *p)
{
    if (p->enabled) {
        printf("\n");
        fflush(stdout);
    }
}
