/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite: the passphrase prompt of "--object secret,prompt=on".
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/select.h>
#include <termios.h>
#include <unistd.h>

#include "img.h"
#include "crypto/secure-mem.h"

/*
 * One byte from the terminal; -1 with errno EINTR once SIGINT or SIGTERM
 * (whose handler only sets img_interrupted) has come, so ^C ends the
 * prompt and the caller restores the echo. The caller blocks both signals;
 * pselect() unblocks them only while it waits, atomically, so a ^C that
 * lands between the check of the flag and the wait is not lost.
 */
static ssize_t img_prompt_getc(int fd, char *ch, const sigset_t *waitmask)
{
    for (;;) {
        fd_set readable;

        if (img_interrupted) {
            errno = EINTR;
            return -1;
        }
        FD_ZERO(&readable);
        FD_SET(fd, &readable);
        if (pselect(fd + 1, &readable, NULL, NULL, NULL, waitmask) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        /* Canonical mode: readable means a whole line is there. */
        return read(fd, ch, 1);
    }
}

/*
 * prompt=on: read one line from the controlling terminal with echo off
 * (termios), without its trailing newline, into secure memory (*len + 1
 * bytes, NUL-terminated; free with qcrypto_secure_free()). /dev/tty rather
 * than stdin, so stdin can still be a pipe and the prompt still reaches
 * the user when stdout is redirected, as ssh and cryptsetup do.
 */
uint8_t *img_prompt_secret(const char *id, size_t *len)
{
    struct termios saved, noecho;
    sigset_t stop, waitmask;
    g_autofree char *prompt = g_strdup_printf("Enter passphrase for "
                                              "secret '%s': ", id);
    uint8_t *line;
    size_t n = 0;
    bool ok = false;
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

    if (fd < 0 || tcgetattr(fd, &saved) < 0) {
        img_error(NULL, "Secret '%s': prompt=on needs a terminal, and this "
                  "process has none (%s); pipe the passphrase in with "
                  "file=/dev/stdin instead", id,
                  g_strerror(fd < 0 ? errno : ENOTTY));
        if (fd >= 0) {
            close(fd);
        }
        return NULL;
    }
    noecho = saved;
    /* No echo, but the newline the user types still shows (ECHONL). */
    noecho.c_lflag &= ~(ECHO | ECHOE | ECHOK);
    noecho.c_lflag |= ECHONL;
    if (tcsetattr(fd, TCSAFLUSH, &noecho) < 0) {
        img_error(NULL, "Secret '%s': cannot turn the terminal's echo off: "
                  "%s", id, g_strerror(errno));
        close(fd);
        return NULL;
    }
    (void)!write(fd, prompt, strlen(prompt));

    line = qcrypto_secure_alloc(IMG_PROMPT_MAX + 1);
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, &waitmask);
    for (;;) {
        char ch;
        ssize_t got = img_prompt_getc(fd, &ch, &waitmask);

        if (got < 0) {
            img_error(NULL, "Secret '%s': %s", id, img_interrupted ?
                      "interrupted" : g_strerror(errno));
            break;
        }
        if (got == 0 || ch == '\n') {       /* EOF (^D) ends the line too */
            /* ^C then Enter may complete the line before SIGINT lands. */
            ok = !img_interrupted;
            if (!ok) {
                img_error(NULL, "Secret '%s': interrupted", id);
            }
            break;
        }
        if (n == IMG_PROMPT_MAX) {
            img_error(NULL, "Secret '%s': passphrase longer than %d bytes",
                      id, IMG_PROMPT_MAX);
            break;
        }
        line[n++] = ch;
    }
    sigprocmask(SIG_SETMASK, &waitmask, NULL);
    tcsetattr(fd, TCSAFLUSH, &saved);
    close(fd);
    if (!ok) {
        qcrypto_secure_free(line, IMG_PROMPT_MAX + 1);
        return NULL;
    }
    *len = n;
    return line;
}
