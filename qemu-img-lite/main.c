/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite: a disk image tool whose command lines are qemu-img's
 * (create, convert, info, amend, compare, measure, resize, map, dd), for
 * raw and LUKS images. This file dispatches the commands and holds the option
 * plumbing they share: option parsing, secrets, image opening, sizes and
 * errors. The passphrase prompt, the progress display and the signal
 * handling have files of their own (prompt.c, progress.c, signals.c).
 */
#include <stdio.h>
#include <string.h>

#include "img.h"

/*
 * entries, each string option taken as bytes. qemu-img passes its
 * arguments on unconverted, and so must we (passphrases in data=, file
 * names, option values). GOption converts G_OPTION_ARG_STRING values from
 * the locale's encoding to UTF-8 and refuses what does not convert ("Invalid
 * byte sequence in conversion input": any non-ASCII byte in the C locale,
 * "\xff" in any); its FILENAME types hand the bytes over unchanged on
 * POSIX, into the same char * and char ** variables.
 */
static GOptionEntry *img_entries_as_bytes(const GOptionEntry *entries)
{
    size_t n = 0;
    GOptionEntry *copy;

    while (entries[n].long_name) {
        n++;
    }
    copy = g_memdup2(entries, (n + 1) * sizeof(*entries));
    for (size_t i = 0; i < n; i++) {
        if (copy[i].arg == G_OPTION_ARG_STRING) {
            copy[i].arg = G_OPTION_ARG_FILENAME;
        } else if (copy[i].arg == G_OPTION_ARG_STRING_ARRAY) {
            copy[i].arg = G_OPTION_ARG_FILENAME_ARRAY;
        }
    }
    return copy;
}

/* Whether -c takes an argument among entries. */
static bool img_short_takes_arg(const GOptionEntry *entries, char c)
{
    for (const GOptionEntry *e = entries; e->long_name; e++) {
        if (e->short_name == c && e->arg != G_OPTION_ARG_NONE &&
            !(e->flags & G_OPTION_FLAG_NO_ARG)) {
            return true;
        }
    }
    return false;
}

/*
 * getopt (qemu-img's parser) takes a short option's argument glued to it,
 * "-odata_file=x" (qemu-iotests 244); GOption only "-o x": such arguments
 * are split in two first. Nothing after "--" is. The new vector stays
 * reachable (from here) for the life of the process.
 */
static void img_split_glued(int *argc, char ***argv,
                            const GOptionEntry *own,
                            const GOptionEntry *common)
{
    static GPtrArray *keep;
    GPtrArray *out = g_ptr_array_new();

    for (int i = 0; i < *argc; i++) {
        char *a = (*argv)[i];

        if (i > 0 && g_str_equal(a, "--")) {
            for (; i < *argc; i++) {
                g_ptr_array_add(out, (*argv)[i]);
            }
            break;
        }
        if (i > 0 && a[0] == '-' && a[1] && a[1] != '-' && a[2] &&
            (img_short_takes_arg(own, a[1]) ||
             img_short_takes_arg(common, a[1]))) {
            char *opt = g_strndup(a, 2);

            if (!keep) {
                keep = g_ptr_array_new();
            }
            g_ptr_array_add(keep, opt);
            g_ptr_array_add(out, opt);
            g_ptr_array_add(out, a + 2);
            continue;
        }
        g_ptr_array_add(out, a);
    }
    if (out->len == (guint)*argc) {
        g_ptr_array_free(out, true);
        return;
    }
    *argc = out->len;
    g_ptr_array_add(out, NULL);
    if (!keep) {
        keep = g_ptr_array_new();
    }
    *argv = (char **)out->pdata;
    g_ptr_array_add(keep, g_ptr_array_free(out, false));
}

int img_parse_args(int *argc, char ***argv, const char *params,
                   const char *summary, const char *description,
                   const GOptionEntry *entries, ImgCommonOpts *common)
{
    const GOptionEntry common_entries[] = {
        { "object", 0, 0, G_OPTION_ARG_STRING_ARRAY, &common->objects,
          "define a secret: secret,id=ID,data=STRING[,format=raw|base64], "
          "secret,id=ID,file=PATH (any bytes; file=/dev/stdin reads a pipe) "
          "or secret,id=ID,prompt=on (asks on the terminal, no echo); "
          "keyid=ID,iv=BASE64 for one encrypted with secret ID (libvirt); "
          "data= shows the passphrase in the process list; "
          "tls-creds-x509,id=ID,dir=DIR or tls-creds-psk,id=ID,dir=DIR "
          "for nbds:// (docs/nbd.md)", "OBJECTDEF" },
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &common->quiet,
          "quiet mode: no progress, no messages but errors", NULL },
        { NULL }
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(params);
    g_autoptr(GError) gerr = NULL;
    g_autofree GOptionEntry *own = img_entries_as_bytes(entries);
    g_autofree GOptionEntry *common_own = img_entries_as_bytes(common_entries);

    g_option_context_set_summary(ctx, summary);
    if (description) {
        g_option_context_set_description(ctx, description);
    }
    g_option_context_add_main_entries(ctx, own, NULL);
    g_option_context_add_main_entries(ctx, common_own, NULL);
    img_split_glued(argc, argv, own, common_own);
    if (!g_option_context_parse(ctx, argc, argv, &gerr)) {
        const char *unknown = gerr->message + strlen("Unknown option ");

        /* GOption's "Unknown option -x" in qemu-img's (getopt's) words. */
        if (g_error_matches(gerr, G_OPTION_ERROR,
                            G_OPTION_ERROR_UNKNOWN_OPTION) &&
            g_str_has_prefix(gerr->message, "Unknown option ")) {
            img_error(NULL, "unrecognized option '%s'", unknown);
        } else {
            img_error(NULL, "%s", gerr->message);
        }
        fprintf(stderr, "Try '%s --help' for more information.\n",
                g_get_prgname());
        return -1;
    }
    /*
     * GOption leaves the "--" that ends the options in argv: drop it, so
     * that "create img -- -1024" sees the size, as getopt would.
     */
    for (int i = 1; i < *argc; i++) {
        if (g_str_equal((*argv)[i], "--")) {
            memmove(&(*argv)[i], &(*argv)[i + 1],
                    (*argc - i) * sizeof(char *));
            (*argc)--;
            break;
        }
    }
    return 0;
}

void img_common_opts_clear(ImgCommonOpts *common)
{
    /* --object definitions may hold a passphrase (data=): wipe them. */
    for (char **o = common->objects; o && *o; o++) {
        explicit_bzero(*o, strlen(*o));
    }
    g_clear_pointer(&common->objects, g_strfreev);
}

/*
 * qemu-img's is_valid_option_list(): not empty, and not ending with a
 * comma that separates nothing (an even run of them is literal commas).
 */
static bool img_valid_option_list(const char *s)
{
    size_t len = strlen(s), commas = 0;

    while (commas < len && s[len - 1 - commas] == ',') {
        commas++;
    }
    return len && commas % 2 == 0;
}

GHashTable *img_parse_create_opts(char **opt_strs)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();

    for (char **o = opt_strs; o && *o; o++) {
        Error *err = NULL;

        if (!img_valid_option_list(*o)) {
            img_error(NULL, "Invalid option list: %s", *o);
            return NULL;
        }
        if (g_str_equal(*o, "help") || g_str_equal(*o, "?")) {
            g_hash_table_insert(opts, g_strdup("help"), g_strdup("on"));
            continue;
        }
        if (qemu_opts_parse_into(opts, *o, NULL, &err) < 0) {
            img_error_free(NULL, err);
            return NULL;
        }
    }
    return g_steal_pointer(&opts);
}

/*
 * Test-only: with QIL_FILE_CREATE_NO_TMPFILE=1 in the environment, new
 * images get a hidden temporary name (.NAME.XXXXXX) instead of O_TMPFILE,
 * so that tests/cli/test_kill.py can see a kill leaves nothing named. The
 * block layer reads no environment: the tool tells it.
 */
static void img_test_file_create(void)
{
    const char *env = g_getenv("QIL_FILE_CREATE_NO_TMPFILE");

    if (env && g_str_equal(env, "1")) {
        bdrv_file_create_use_tmpfile(false);
    }
}

int img_parse_output_format(const char *str, bool *json)
{
    if (!str || g_str_equal(str, "human")) {
        *json = false;
    } else if (g_str_equal(str, "json")) {
        *json = true;
    } else {
        img_error(NULL, "--output must be used with human or json as "
                  "argument.");
        return -1;
    }
    return 0;
}

typedef struct ImgCommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *synopsis;
} ImgCommand;

static const ImgCommand img_commands[] = {
    { "amend", img_amend,
      "amend [--object OBJ] [--image-opts] [-f FMT] [--force] -o OPTIONS "
      "FILENAME" },
    { "bitmap", img_bitmap,
      "bitmap (--merge SOURCE | --add | --remove | --clear | --enable | "
      "--disable)... [-b SOURCE_FILE [-F SOURCE_FMT]] [-g GRANULARITY] "
      "[--object OBJ] [--image-opts | -f FMT] FILENAME BITMAP" },
    { "check", img_check,
      "check [--object OBJ] [--image-opts] [-f FMT] [--output=human|json] "
      "[-q] [-r leaks|all] [-T CACHE] [-U] FILENAME" },
    { "compare", img_compare,
      "compare [--object OBJ] [--image-opts] [-f FMT] [-F FMT] [-p] [-q] "
      "[-s] [-U] FILE1 FILE2" },
    { "convert", img_convert,
      "convert [--object OBJ] [--image-opts] [--target-image-opts] [-f FMT] "
      "[-O FMT] [-o OPTIONS] [-n] [-p] [-q] [-S SIZE] [-t CACHE] [-U] "
      "[-C] [-m N] [-r RATE] [--target-is-zero] [--salvage] SRC DST" },
    { "create", img_create,
      "create [--object OBJ] [-f FMT] [-o OPTIONS] [-q] FILENAME [SIZE]" },
    { "dd", img_dd,
      "dd [--object OBJ] [--image-opts] [-f FMT] [-O FMT] [-U] [bs=N] "
      "[count=N] [skip=N] if=INPUT of=OUTPUT" },
    { "info", img_info,
      "info [--object OBJ] [--image-opts] [-f FMT] [--output=human|json] "
      "[--backing-chain] [-U] FILENAME" },
    { "map", img_map,
      "map [--object OBJ] [--image-opts] [-f FMT] [--output=human|json] "
      "[-s OFFSET] [-l LENGTH] [-U] FILENAME" },
    { "measure", img_measure,
      "measure [--object OBJ] [--output=human|json] [-O FMT] [-o OPTIONS] "
      "[--size N | [--image-opts] [-f FMT] [-U] FILENAME]" },
    { "commit", img_commit,
      "commit [--object OBJ] [--image-opts] [-q] [-f FMT] [-t CACHE] "
      "[-b BASE] [-r RATE] [-d] [-p] FILENAME" },
    { "rebase", img_rebase,
      "rebase [--object OBJ] [--image-opts] [-U] [-q] [-f FMT] [-t CACHE] "
      "[-T SRC_CACHE] [-p] [-u] -b BACKING_FILE [-F BACKING_FMT] FILENAME" },
    { "reencrypt", img_reencrypt,
      "reencrypt [--object OBJ] [-p] [-q] [--resilience datashift] "
      "[--hotzone-size SIZE] [--init-only | --resume-only] "
      "[--reduce-device-size SIZE] --encrypt "
      "[-o key-secret=ID[,OPTIONS]] FILENAME | --resume-only --image-opts "
      "driver=luks,key-secret=ID,file.filename=FILE | [--resilience "
      "checksum|journal|none] [-o NEW_OPTIONS] --image-opts "
      "driver=luks,key-secret=ID,file.filename=FILE (new volume key)" },
    { "snapshot", img_snapshot,
      "snapshot [--object OBJ] [--image-opts] [-U] [-q] [-l | -a SNAPSHOT | "
      "-c SNAPSHOT | -d SNAPSHOT] FILENAME" },
    { "resize", img_resize,
      "resize [--object OBJ] [--image-opts] [-f FMT] [--preallocation=MODE] "
      "[-q] [--shrink] FILENAME [+|-]SIZE" },
};

static void img_help(void)
{
    printf("qemu-img-lite version " QIL_VERSION
           ": raw, LUKS1, LUKS2 and qcow2 disk images, with qemu-img's "
           "command lines\n"
           "usage: qemu-img-lite [--help | --version] COMMAND [ARGS]\n\n"
           "Commands:\n");
    for (size_t i = 0; i < G_N_ELEMENTS(img_commands); i++) {
        printf("  %s\n", img_commands[i].synopsis);
    }
    printf("\n'qemu-img-lite COMMAND --help' describes a command's options.\n"
           "Images are locked as qemu-img locks them; -U (--force-share) "
           "reads one\nwithout locking it.\n"
           "Formats: raw, luks (LUKS1 and LUKS2), qcow2 (with LUKS or AES "
           "inside).\nImages may be files, block devices or NBD exports "
           "(nbd://, nbd+unix://).\n"
           "Sizes take the suffixes k, M, G, T, P, E (powers of 1024).\n");
}

int main(int argc, char **argv)
{
    const char *cmd;
    int ret;

    img_set_progname(argv[0]);
    if (argc < 2) {
        img_error(NULL, "Not enough arguments");
        fprintf(stderr, "Try '%s --help' for more information\n",
                img_get_progname());
        return 1;
    }
    cmd = argv[1];
    if (g_str_equal(cmd, "--help") || g_str_equal(cmd, "-h")) {
        img_help();
        return 0;
    }
    if (g_str_equal(cmd, "--version") || g_str_equal(cmd, "-V")) {
        printf("qemu-img-lite version " QIL_VERSION "\n");
        return 0;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(img_commands); i++) {
        if (g_str_equal(cmd, img_commands[i].name)) {
            g_autofree char *prgname = g_strdup_printf("%s %s",
                                                       img_get_progname(),
                                                       cmd);

            g_set_prgname(prgname);
            img_install_signal_handlers();
            img_test_file_create();
            ret = img_commands[i].run(argc - 1, argv + 1);
            img_objects_clear();
            return ret;
        }
    }
    img_error(NULL, "Command not found: %s", cmd);
    fprintf(stderr, "Try '%s --help' for more information\n",
                img_get_progname());
    return 1;
}
