/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-nbd-lite: serve an image over NBD with qemu-nbd's command line.
 *
 * The server is nbdkit running this project's plugin (plugin.c): this
 * program parses qemu-nbd's options, checks what can be checked before
 * anything listens (objects, TLS credentials, option values), and
 * replaces itself with nbdkit, mapping each option onto nbdkit's own or
 * its filters' (docs/qemu-nbd-lite.md has the table):
 *
 *   -k SOCKET -> -U SOCKET      -b ADDR -> -i ADDR     -p PORT -> -p PORT
 *   -r -> -r (and read-only=on) --fork -> (no -f)      --pid-file -> -P
 *   no -t -> exitlast filter    -e N -> shared=N       -o N -> offset filter
 *   --tls-creds ID -> --tls=require --tls-certificates=DIR | --tls-psk=FILE
 *
 * Secrets never reach nbdkit's command line: those --object defines are
 * registered here (a prompt=on one asks on this terminal) and handed to
 * the plugin through an inherited memfd (secrets-fd=N).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../qemu-img-lite/img.h"
#include "crypto/secret.h"
#include "crypto/tlscreds.h"

#define QNL_PLUGIN "nbdkit-qil-plugin.so"

enum {
    QNL_OPT_OBJECT = 256,
    QNL_OPT_TLS_CREDS,
    QNL_OPT_TLS_AUTHZ,
    QNL_OPT_FORK,
    QNL_OPT_PID_FILE,
    QNL_OPT_SELINUX_LABEL,
    QNL_OPT_CACHE,
    QNL_OPT_AIO,
    QNL_OPT_DISCARD,
    QNL_OPT_DETECT_ZEROES,
    QNL_OPT_IMAGE_OPTS,
    QNL_OPT_REENCRYPT,
};

static void qnl_help(void)
{
    printf(
"Usage: qemu-nbd-lite [OPTIONS] FILE\n"
"Serve a disk image over NBD (raw, LUKS1, LUKS2, qcow2 with or without\n"
"LUKS; decrypted), with qemu-nbd's options; the server is nbdkit.\n"
"\n"
"  -h, --help                display this help and exit\n"
"  -V, --version             output version information and exit\n"
"\n"
"Connection properties:\n"
"  -p, --port=PORT           port to listen on (default `10809')\n"
"  -b, --bind=IFACE          interface to bind to (default: all)\n"
"  -k, --socket=PATH         listen on a unix socket instead\n"
"  -e, --shared=NUM          device can be shared by NUM clients (default\n"
"                            '1', 0 for no limit; more than 1 offers\n"
"                            multi-conn)\n"
"  -t, --persistent          don't exit on the last connection\n"
"  -v, --verbose             display extra debugging information (nbdkit -v)\n"
"  -x, --export-name=NAME    expose export by name (default is empty string)\n"
"  -D, --description=TEXT    export a human-readable description\n"
"\n"
"Exposing part of the image:\n"
"  -o, --offset=OFFSET       offset into the image\n"
"\n"
"General purpose options:\n"
"  --object type,id=ID,...   secret,id=ID,data=|file=|prompt=on (a key-secret\n"
"                            of the image); tls-creds-x509,id=ID,dir=DIR,\n"
"                            endpoint=server or tls-creds-psk,id=ID,dir=DIR,\n"
"                            endpoint=server (for --tls-creds)\n"
"  --tls-creds=ID            require TLS with the credentials of object ID\n"
"  --fork                    fork off the server process and exit the parent\n"
"                            once the server is running\n"
"  --pid-file=PATH           store the server's process ID in the given file\n"
"\n"
"Block device options:\n"
"  -f, --format=FORMAT       set image format (raw, luks, qcow2)\n"
"  -r, --read-only           export read-only\n"
"  -U, --force-share         with -r: open the image without locking it\n"
"  -n, --nocache             disable host cache (--cache=none)\n"
"      --cache=MODE          writeback (default), writethrough, none,\n"
"                            directsync or unsafe (no flush reaches the disk)\n"
"      --discard=MODE        set discard mode (ignore, unmap)\n"
"      --detect-zeroes=MODE  set detect-zeroes mode (off, on, unmap)\n"
"      --image-opts          treat FILE as a full set of image options\n"
"      --reencrypt           give the LUKS image a new volume key while it is\n"
"                            served (or resume that run): FILE's options get\n"
"                            reencrypt=on; SIGUSR1 pauses/continues, SIGUSR2\n"
"                            reports progress on stderr (docs/reencrypt.md)\n"
"\n"
"Not here: -c/-d (no kernel NBD client: mount with nbdfuse, see\n"
"docs/nbd.md), -L (use nbdinfo --list), -s, -l, -A, -B, -T, --tls-authz.\n");
}

/*
 * The plugin: beside this program in the build tree, else where it is
 * installed (QNL_PLUGINDIR).
 */
static char *qnl_find_plugin(void)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    const char *env = g_getenv("QEMU_NBD_LITE_PLUGIN");

    if (env && *env) {
        return g_strdup(env);
    }
    if (exe) {
        g_autofree char *dir = g_path_get_dirname(exe);
        char *path = g_build_filename(dir, QNL_PLUGIN, NULL);

        if (g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
            return path;
        }
        g_free(path);
    }
    return g_build_filename(QNL_PLUGINDIR, QNL_PLUGIN, NULL);
}

/*
 * Every registered secret into a memfd, "ID\0BASE64\0" each, rewound for
 * the plugin to read: -1 and a message on failure. Left open across exec.
 */
static int qnl_secrets_fd(void)
{
    const GPtrArray *ids = img_object_secret_ids();
    int fd;

    if (!ids || ids->len == 0) {
        return -2;
    }
    fd = memfd_create("qemu-nbd-lite-secrets", 0);
    if (fd < 0) {
        img_error(NULL, "Cannot hand secrets to the server: memfd_create: %s",
                  g_strerror(errno));
        return -1;
    }
    for (guint i = 0; i < ids->len; i++) {
        const char *id = g_ptr_array_index(ids, i);
        uint8_t *data = NULL;
        size_t len = 0;
        char *b64;
        Error *err = NULL;
        bool ok;

        if (qcrypto_secret_lookup(id, &data, &len, &err) < 0) {
            img_error_free(NULL, err);
            close(fd);
            return -1;
        }
        b64 = g_base64_encode(data, len);
        qcrypto_secret_value_free(data, len);
        ok = write(fd, id, strlen(id) + 1) == (ssize_t)(strlen(id) + 1) &&
             write(fd, b64, strlen(b64) + 1) == (ssize_t)(strlen(b64) + 1);
        explicit_bzero(b64, strlen(b64));
        g_free(b64);
        if (!ok) {
            img_error(NULL, "Cannot hand secrets to the server: %s",
                      g_strerror(errno));
            close(fd);
            return -1;
        }
    }
    if (lseek(fd, 0, SEEK_SET) < 0) {
        img_error(NULL, "Cannot hand secrets to the server: %s",
                  g_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void qnl_arg(GPtrArray *argv, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static void qnl_arg(GPtrArray *argv, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_ptr_array_add(argv, g_strdup_vprintf(fmt, ap));
    va_end(ap);
}

static int qnl_unsupported(const char *what, const char *instead)
{
    img_error(NULL, "%s is not supported%s%s", what, instead ? ": " : "",
              instead ? instead : "");
    return 1;
}

int main(int argc, char **argv)
{
    static const struct option long_opts[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "bind", required_argument, NULL, 'b' },
        { "port", required_argument, NULL, 'p' },
        { "socket", required_argument, NULL, 'k' },
        { "offset", required_argument, NULL, 'o' },
        { "read-only", no_argument, NULL, 'r' },
        { "allocation-depth", no_argument, NULL, 'A' },
        { "bitmap", required_argument, NULL, 'B' },
        { "connect", required_argument, NULL, 'c' },
        { "disconnect", no_argument, NULL, 'd' },
        { "list", no_argument, NULL, 'L' },
        { "snapshot", no_argument, NULL, 's' },
        { "load-snapshot", required_argument, NULL, 'l' },
        { "nocache", no_argument, NULL, 'n' },
        { "cache", required_argument, NULL, QNL_OPT_CACHE },
        { "aio", required_argument, NULL, QNL_OPT_AIO },
        { "discard", required_argument, NULL, QNL_OPT_DISCARD },
        { "detect-zeroes", required_argument, NULL, QNL_OPT_DETECT_ZEROES },
        { "shared", required_argument, NULL, 'e' },
        { "format", required_argument, NULL, 'f' },
        { "persistent", no_argument, NULL, 't' },
        { "verbose", no_argument, NULL, 'v' },
        { "object", required_argument, NULL, QNL_OPT_OBJECT },
        { "export-name", required_argument, NULL, 'x' },
        { "description", required_argument, NULL, 'D' },
        { "tls-creds", required_argument, NULL, QNL_OPT_TLS_CREDS },
        { "tls-authz", required_argument, NULL, QNL_OPT_TLS_AUTHZ },
        { "image-opts", no_argument, NULL, QNL_OPT_IMAGE_OPTS },
        { "reencrypt", no_argument, NULL, QNL_OPT_REENCRYPT },
        { "trace", required_argument, NULL, 'T' },
        { "fork", no_argument, NULL, QNL_OPT_FORK },
        { "pid-file", required_argument, NULL, QNL_OPT_PID_FILE },
        { "selinux-label", required_argument, NULL, QNL_OPT_SELINUX_LABEL },
        { "force-share", no_argument, NULL, 'U' },
        { NULL, 0, NULL, 0 }
    };
    const char *bindto = NULL, *port = NULL, *sockpath = NULL;
    const char *format = NULL, *export_name = NULL, *description = NULL;
    const char *tls_creds_id = NULL, *pid_file = NULL, *cache = NULL;
    const char *discard = NULL, *detect_zeroes = NULL;
    g_autoptr(GPtrArray) objects = g_ptr_array_new();
    g_autoptr(GPtrArray) nargv = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *plugin = NULL;
    bool readonly = false, persistent = false, verbose = false;
    bool image_opts = false, fork_server = false, force_share = false;
    bool reencrypt = false;
    uint64_t offset = 0;
    long shared = 1;
    int secrets_fd, c;

    img_set_progname(argv[0]);
    while ((c = getopt_long(argc, argv, "hVb:p:k:o:rAB:c:dLsl:nf:e:tvx:D:T:U",
                            long_opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            qnl_help();
            return 0;
        case 'V':
            printf("qemu-nbd-lite version " QIL_VERSION "\n");
            return 0;
        case 'b':
            bindto = optarg;
            break;
        case 'p':
            port = optarg;
            break;
        case 'k':
            sockpath = optarg;
            break;
        case 'o':
            if (img_parse_size_as(optarg, "offset", &offset) < 0) {
                return 1;
            }
            break;
        case 'r':
            readonly = true;
            break;
        case 'n':
            cache = "none";
            break;
        case QNL_OPT_CACHE:
            cache = optarg;
            break;
        case QNL_OPT_AIO:
            /* The block layer's I/O is synchronous, in nbdkit's threads. */
            if (!g_str_equal(optarg, "threads")) {
                return qnl_unsupported("--aio other than 'threads'", NULL);
            }
            break;
        case QNL_OPT_DISCARD:
            discard = optarg;
            break;
        case QNL_OPT_DETECT_ZEROES:
            detect_zeroes = optarg;
            break;
        case 'e': {
            char *end;

            errno = 0;
            shared = strtol(optarg, &end, 0);
            if (errno || end == optarg || *end || shared < 0 ||
                shared > 65535) {
                img_error(NULL, "Invalid shared device number '%s'", optarg);
                return 1;
            }
            break;
        }
        case 'f':
            format = optarg;
            break;
        case 't':
            persistent = true;
            break;
        case 'v':
            verbose = true;
            break;
        case QNL_OPT_OBJECT:
            g_ptr_array_add(objects, optarg);
            break;
        case 'x':
            export_name = optarg;
            break;
        case 'D':
            description = optarg;
            break;
        case QNL_OPT_TLS_CREDS:
            tls_creds_id = optarg;
            break;
        case QNL_OPT_IMAGE_OPTS:
            image_opts = true;
            break;
        case QNL_OPT_REENCRYPT:
            reencrypt = true;
            break;
        case QNL_OPT_FORK:
            fork_server = true;
            break;
        case QNL_OPT_PID_FILE:
            pid_file = optarg;
            break;
        case 'U':
            force_share = true;
            break;
        case 'c':
        case 'd':
            return qnl_unsupported("The kernel's NBD client (-c, -d)",
                                   "mount the export with nbdfuse "
                                   "(docs/nbd.md)");
        case 'L':
            return qnl_unsupported("-L", "list a server's exports with "
                                   "'nbdinfo --list'");
        case 's':
        case 'l':
            return qnl_unsupported("Snapshots (-s, -l)", NULL);
        case 'A':
        case 'B':
            return qnl_unsupported("Exposing allocation depth or bitmaps "
                                   "(-A, -B)", NULL);
        case 'T':
            return qnl_unsupported("Tracing (-T)", "use -v");
        case QNL_OPT_TLS_AUTHZ:
            return qnl_unsupported("--tls-authz", NULL);
        case QNL_OPT_SELINUX_LABEL:
            return qnl_unsupported("--selinux-label", NULL);
        default:
            fprintf(stderr, "Try '%s --help' for more information.\n",
                    img_get_progname());
            return 1;
        }
    }

    if (argc - optind != 1) {
        img_error(NULL, argc - optind ? "Too many arguments" :
                  "Not enough arguments");
        fprintf(stderr, "Try '%s --help' for more information.\n",
                img_get_progname());
        return 1;
    }
    if (sockpath && (port || bindto)) {
        img_error(NULL, "-k and -p/-b are mutually exclusive");
        return 1;
    }
    if (force_share && !readonly) {
        img_error(NULL, "--force-share (-U) requires --read-only (-r)");
        return 1;
    }
    if (image_opts && format) {
        img_error(NULL, "--image-opts and -f are mutually exclusive");
        return 1;
    }
    /* A LUKS image's key secret is an image option: FILE is options. */
    if (reencrypt && (!image_opts || readonly)) {
        img_error(NULL, "--reencrypt needs --image-opts "
                  "(driver=luks,key-secret=ID,file.filename=FILE) and a "
                  "read-write export");
        return 1;
    }
    img_install_signal_handlers();
    g_ptr_array_add(objects, NULL);
    if (img_add_objects((char **)objects->pdata) < 0) {
        return 1;
    }

    g_ptr_array_add(nargv, g_strdup("nbdkit"));
    if (!fork_server) {
        g_ptr_array_add(nargv, g_strdup("-f"));
    }
    if (pid_file) {
        qnl_arg(nargv, "--pidfile=%s", pid_file);
    }
    if (sockpath) {
        struct stat st;

        /*
         * As qemu-nbd (QEMU's unix_listen()): a socket left by an earlier
         * server is replaced; any other file is nbdkit's error.
         */
        if (lstat(sockpath, &st) == 0 && S_ISSOCK(st.st_mode)) {
            unlink(sockpath);
        }
        qnl_arg(nargv, "--unix=%s", sockpath);
    } else {
        if (bindto) {
            qnl_arg(nargv, "--ipaddr=%s", bindto);
        }
        qnl_arg(nargv, "--port=%s", port ? port : "10809");
    }
    if (readonly) {
        g_ptr_array_add(nargv, g_strdup("-r"));
    }
    if (verbose) {
        g_ptr_array_add(nargv, g_strdup("-v"));
    }
    if (tls_creds_id) {
        Error *err = NULL;
        const QCryptoTLSCreds *creds =
            qcrypto_tls_creds_lookup(tls_creds_id, &err);

        if (!creds) {
            img_error_free(NULL, err);
            return 1;
        }
        if (creds->endpoint != QCRYPTO_TLS_CREDS_ENDPOINT_SERVER) {
            img_error(NULL, "Expecting TLS credentials with a server "
                      "endpoint (endpoint=server)");
            return 1;
        }
        g_ptr_array_add(nargv, g_strdup("--tls=require"));
        if (creds->type == QCRYPTO_TLS_CREDS_PSK) {
            g_autofree char *psk = qcrypto_tls_creds_psk_file(creds);

            qnl_arg(nargv, "--tls-psk=%s", psk);
        } else {
            qnl_arg(nargv, "--tls-certificates=%s", creds->dir);
            if (creds->verify_peer) {
                g_ptr_array_add(nargv, g_strdup("--tls-verify-peer"));
            }
        }
    }
    /* Filters, outermost first. */
    if (!persistent) {
        g_ptr_array_add(nargv, g_strdup("--filter=exitlast"));
    }
    if (offset) {
        g_ptr_array_add(nargv, g_strdup("--filter=offset"));
    }
    plugin = qnl_find_plugin();
    g_ptr_array_add(nargv, g_strdup(plugin));
    qnl_arg(nargv, "image=%s%s", argv[optind],
            reencrypt ? ",reencrypt=on" : "");
    if (format) {
        qnl_arg(nargv, "format=%s", format);
    }
    if (image_opts) {
        g_ptr_array_add(nargv, g_strdup("image-opts=on"));
    }
    if (readonly) {
        g_ptr_array_add(nargv, g_strdup("read-only=on"));
    }
    if (force_share) {
        g_ptr_array_add(nargv, g_strdup("force-share=on"));
    }
    if (shared != 1) {
        g_ptr_array_add(nargv, g_strdup("multi-conn=on"));
    }
    if (shared > 0) {
        /* The plugin makes a client beyond N wait, as qemu-nbd does. */
        qnl_arg(nargv, "shared=%ld", shared);
    }
    if (offset) {
        qnl_arg(nargv, "offset=%" G_GUINT64_FORMAT, offset);
    }
    qnl_arg(nargv, "export=%s", export_name ? export_name : "");
    if (description) {
        qnl_arg(nargv, "description=%s", description);
    }
    if (cache) {
        qnl_arg(nargv, "cache=%s", cache);
    }
    if (discard) {
        qnl_arg(nargv, "discard=%s", discard);
    }
    if (detect_zeroes) {
        qnl_arg(nargv, "detect-zeroes=%s", detect_zeroes);
    }
    secrets_fd = qnl_secrets_fd();
    if (secrets_fd == -1) {
        return 1;
    }
    if (secrets_fd >= 0) {
        qnl_arg(nargv, "secrets-fd=%d", secrets_fd);
    }
    img_objects_clear();
    g_ptr_array_add(nargv, NULL);

    /*
     * --fork with --pid-file: nbdkit's parent exits as soon as it has
     * forked, and the server writes the file a moment later. qemu-nbd
     * returns with the file there, which scripts rely on: wait for both.
     */
    if (fork_server && pid_file) {
        pid_t child;
        int status;

        /* An old file must not pass for the new server's. */
        unlink(pid_file);
        child = fork();
        if (child < 0) {
            img_error(NULL, "Cannot fork: %s", g_strerror(errno));
            return 1;
        }
        if (child > 0) {
            if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
                WEXITSTATUS(status) != 0) {
                return 1;
            }
            for (int i = 0; i < 1000; i++) {
                if (g_file_test(pid_file, G_FILE_TEST_EXISTS)) {
                    return 0;
                }
                g_usleep(10000);
            }
            img_error(NULL, "The server did not write '%s'", pid_file);
            return 1;
        }
    }
    execvp("nbdkit", (char **)nargv->pdata);
    img_error(NULL, "Cannot run nbdkit (the server; Debian package "
              "'nbdkit'): %s", g_strerror(errno));
    return 1;
}
