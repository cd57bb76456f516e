/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * New files that appear under their name only when they are complete
 * (block/file-create.c).
 *
 * A new image is made unnamed: an O_TMPFILE file in the target's
 * directory, or, where the file system has no O_TMPFILE, a hidden
 * temporary name next to the target (".NAME.XXXXXX"). When the image is
 * complete, commit syncs it and links it to its name, which never
 * replaces anything there. Until then a kill of any kind, power loss
 * included, leaves nothing under the name (and, for O_TMPFILE, nothing
 * at all: the kernel frees an unlinked file when its last descriptor
 * closes).
 */
#ifndef BLOCK_FILE_CREATE_H
#define BLOCK_FILE_CREATE_H

#include <stdbool.h>
#include <stdint.h>

#include "qemu/error.h"

typedef struct FileCreate FileCreate;

/*
 * Start making the regular file path (mode 0644 less the umask, as
 * open(O_CREAT) would): fails with EEXIST ("Could not create 'path': File
 * exists") if the name is taken. The new file is open read-write on
 * file_create_fd(). One reference, for file_create_unref().
 */
FileCreate *file_create_new(const char *path, Error **errp);
FileCreate *file_create_ref(FileCreate *fc);
/*
 * Drop a reference. The last one closes the file; one never committed
 * leaves nothing behind (its temporary name, if any, is removed).
 */
void file_create_unref(FileCreate *fc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FileCreate, file_create_unref)

int file_create_fd(FileCreate *fc);
/* The name the file gets when committed. */
const char *file_create_path(FileCreate *fc);
/* The temporary name it has until then, NULL if unnamed (O_TMPFILE). */
const char *file_create_temp_path(FileCreate *fc);
bool file_create_is_committed(FileCreate *fc);

/*
 * Tell fc that bytes more were written to it: every few MiB this starts
 * the write-back of what is dirty, so that the sync in commit finds little
 * left to write. Thread-safe; a hint only.
 */
void file_create_wrote(FileCreate *fc, uint64_t bytes);

/*
 * Whether commit syncs the file and its directory (the default) and
 * file_create_wrote() starts write-back. Without, the name still shows
 * only a complete file to other processes, but a crash may leave it
 * named with part of its data (BDRV_O_CREATE_NO_SYNC).
 */
void file_create_set_sync(FileCreate *fc, bool sync);

/*
 * Sync the file, give it its name (failing with EEXIST, and changing
 * nothing, if something took the name meanwhile), and sync the directory.
 * Committing twice is harmless.
 */
int file_create_commit(FileCreate *fc, Error **errp);

/*
 * For tests: whether O_TMPFILE is tried (by default it is); without it,
 * new files get a temporary name. Call before any file is created.
 */
void file_create_use_tmpfile(bool use);


#endif
