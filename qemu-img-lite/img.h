/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite: what the commands share (main.c, prompt.c, progress.c,
 * signals.c, and create.c for the creation options).
 */
#ifndef QEMU_IMG_LITE_H
#define QEMU_IMG_LITE_H

#include <signal.h>

#include "block/block.h"
#include "block/options.h"

/* Set by SIGINT / SIGTERM / SIGHUP; long-running loops check it and stop. */
extern volatile sig_atomic_t img_interrupted;
/*
 * Route SIGINT, SIGTERM and SIGHUP to img_interrupted, for the block layer
 * too; ignore SIGPIPE (signals.c).
 */
void img_install_signal_handlers(void);

/*
 * The program's name in messages: the base name of argv[0] (report.c);
 * "qemu-img-lite" until set, and again after img_set_progname(NULL).
 */
void img_set_progname(const char *argv0);
const char *img_get_progname(void);

/* "PROGRAM: <file>: <message>" (file may be NULL) on stderr. */
void img_error(const char *file, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* The same with err's message; frees err. */
void img_error_free(const char *file, Error *err);
/*
 * The causes an error reports before its message (error_add_report_
 * before), one "PROGRAM: line" each; img_error_free() prints them.
 */
void img_error_before(const Error *err);
/* The advice an error carries (error_append_hint), after its message. */
void img_error_hint(const Error *err);

/*
 * Parse a command's options with GOptionContext. entries is the command's
 * own table; --object and -q are added for every command. On a usage error
 * prints it and returns -1. *argc / *argv are left with the positional
 * arguments, the command name first.
 */
typedef struct ImgCommonOpts {
    char **objects;
    gboolean quiet;
} ImgCommonOpts;

int img_parse_args(int *argc, char ***argv, const char *params,
                   const char *summary, const char *description,
                   const GOptionEntry *entries, ImgCommonOpts *common);
void img_common_opts_clear(ImgCommonOpts *common);

/*
 * Register the --object secret,... and tls-creds-x509|psk,... arguments
 * (object.c); prints errors.
 */
int img_add_objects(char **objects);
/* The ids of the secrets registered so far, in order (NULL: none). */
const GPtrArray *img_object_secret_ids(void);
/* Wipe and forget every object. */
void img_objects_clear(void);

/* A bound on one typed line: far beyond any passphrase typed at a prompt. */
#define IMG_PROMPT_MAX 4096

/*
 * prompt=on (prompt.c): the passphrase of secret id, typed on the
 * terminal with echo off, *len bytes in secure memory; free it with
 * qcrypto_secure_free(line, IMG_PROMPT_MAX + 1). NULL (and a message
 * printed) on failure or ^C.
 */
uint8_t *img_prompt_secret(const char *id, size_t *len);

/* Merge every -o string into one option set; prints errors. */
GHashTable *img_parse_create_opts(char **opt_strs);

/* -o size=2M becomes size=2097152, as qemu-img shows it (create.c). */
void img_normalize_size_opt(GHashTable *opts);

/*
 * "-o help" (or "-o ?") among the creation options of fmt (create.c):
 * lists them as qemu-img does, with the protocol's when filename (the
 * target's) is given, and returns 1; 0 without "help"; -1 (and a message)
 * if fmt cannot create images.
 */
int img_handle_opts_help(GHashTable *opts, const char *fmt,
                         const char *filename);
/* The same for amend's options. */
int img_handle_amend_opts_help(GHashTable *opts, const char *fmt);

/*
 * Warn (create.c) when the new image bs holds more than the size asked
 * for: a requested sector-size padded it (docs/luks.md, "Size rounding").
 */
void img_warn_if_padded(const char *filename, BlockDriverState *bs,
                        uint64_t size);

/*
 * Open an image: name is a file name, or with image_opts a QEMU option
 * string ("driver=luks,key-secret=s0,file.filename=x"). Prints errors.
 */
BlockDriverState *img_open(const char *name, const char *fmt,
                           bool image_opts, int flags);

/*
 * -l SNAPSHOT of convert and measure (image.c): "snapshot.id=ID,
 * snapshot.name=NAME" (either or both) or a bare id or name (in *name).
 * Prints qemu-img's errors.
 */
int img_parse_snapshot_param(const char *param, char **id, char **name);
/* Read bs (read-only) as the snapshot param names from now on. */
int img_load_snapshot(BlockDriverState *bs, const char *param,
                      const char *id, const char *name);

/*
 * A user-given size ("1G", "1.5G", "512M", "4k", "0x100"); prints errors
 * ("Invalid image size specified...") and qemu-img's warning for a hex
 * number with a suffix.
 */
int img_parse_size(const char *str, uint64_t *size);
/* The same for another size: what names it ("rate limit"). */
int img_parse_size_as(const char *str, const char *what, uint64_t *size);

/* qemu-img's human-readable size: "16 MiB", "0.977 KiB", "256 KiB". */
char *img_size_to_str(uint64_t size);

/* --output=human|json; prints errors. Returns true for json. */
int img_parse_output_format(const char *str, bool *json);

/*
 * Append s to out as a JSON string the way QEMU's JSON writer quotes it
 * (json-quote.c): usual escapes, all but printable ASCII as \uXXXX.
 */
void img_json_append_quoted(GString *out, const char *s);

/* qemu-img -p: "    (12.34/100%)\r" lines on stdout (progress.c). */
typedef struct ImgProgress {
    bool enabled;
    double last;
} ImgProgress;

void img_progress_init(ImgProgress *p, bool enabled);
void img_progress_update(ImgProgress *p, double percent);
/*
 * qemu-img's own rule (its qemu_progress_print: convert, amend): a line
 * whenever the value moved by more than 1 since the last one, either way
 * (amend's may go back), and at 0 and at 100 every time.
 */
void img_progress_print(ImgProgress *p, float current);
void img_progress_end(ImgProgress *p);

int img_create(int argc, char **argv);
int img_convert(int argc, char **argv);
int img_info(int argc, char **argv);
int img_map(int argc, char **argv);
int img_dd(int argc, char **argv);
int img_amend(int argc, char **argv);
int img_compare(int argc, char **argv);
int img_measure(int argc, char **argv);
int img_resize(int argc, char **argv);
int img_reencrypt(int argc, char **argv);
int img_rebase(int argc, char **argv);
int img_commit(int argc, char **argv);
int img_check(int argc, char **argv);
int img_bitmap(int argc, char **argv);
int img_snapshot(int argc, char **argv);

/* "Snapshot list:" and qemu-img 7.2's table of snapshots (snapshot.c). */
void img_print_snapshot_list(const BlockSnapshotInfo *list, size_t n);

/*
 * Refuse (errp set, -1) a local file or block device the kernel uses: a
 * loop device's backing file, a mounted or held device (in-use.c).
 * Anything else (not local, not there) passes: the open decides.
 */
int img_check_not_in_use(const char *path, Error **errp);

#endif
