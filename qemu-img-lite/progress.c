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

void img_progress_print(ImgProgress *p, float current)
{
    /*
     * qemu_progress_print(current, 0), in its float arithmetic: a line
     * when the value moved by more than 1 either way since the last one,
     * and at 0 and 100 every time (NaN, 0 of 0 bytes, never).
     */
    if (current > 100) {
        current = 100;
    }
    if (p->enabled &&
        (current > (float)p->last + 1.0f || current < (float)p->last - 1.0f ||
         current == 0 || current == 100)) {
        p->last = current;
        printf("    (%3.2f/100%%)\r", current);
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
