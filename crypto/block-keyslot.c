/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Which key slot an amend fills, and which it erases: one policy, with one
 * set of messages (QEMU's, from its crypto/block-luks.c), for every format
 * with key slots. The format describes its slots (QCryptoBlockKeyslots);
 * the writing stays with the format.
 */
#include "blockpriv.h"

static int keyslot_check_index(const QCryptoBlockKeyslots *slots, int i,
                               Error **errp)
{
    if (i < 0 || i >= slots->nslots) {
        error_setg(errp, "Invalid keyslot %d specified, must be between 0 "
                   "and %d", i, slots->nslots - 1);
        return -1;
    }
    return 0;
}

static bool keyslot_is(uint32_t mask, int i)
{
    return mask & (1u << i);
}

int qcrypto_block_keyslot_select_free(const QCryptoBlockKeyslots *slots,
                                      const QCryptoBlockAmendOptions *options,
                                      bool force, Error **errp)
{
    g_assert(slots->nslots > 0 && slots->nslots <= 32);

    if (!options->has_new_secret) {
        error_setg(errp, "'new-secret' is required to activate a keyslot");
        return -1;
    }
    if (options->has_keyslot) {
        if (keyslot_check_index(slots, options->keyslot, errp) < 0) {
            return -1;
        }
        if (keyslot_is(slots->active, options->keyslot) && !force) {
            error_setg(errp, "Refusing to overwrite active keyslot %d - "
                       "please erase it first", options->keyslot);
            return -1;
        }
        return options->keyslot;
    }
    for (int i = 0; i < slots->nslots; i++) {
        if (!keyslot_is(slots->active, i)) {
            return i;
        }
    }
    error_setg(errp, "Can't add a keyslot - all keyslots are in use");
    return -1;
}

/*
 * keyslot=N: that slot, which old-secret (if given) must open. With force
 * an inactive one is nothing to do (qemu-img says nothing either).
 */
static int keyslot_select_by_index(QCryptoBlock *block,
                                   const QCryptoBlockKeyslots *slots,
                                   QCryptoBlockReadFunc readfunc,
                                   void *opaque,
                                   const QCryptoBlockAmendOptions *options,
                                   bool force, uint32_t *erase, Error **errp)
{
    int i = options->keyslot;

    if (keyslot_check_index(slots, i, errp) < 0) {
        return -1;
    }
    if (!keyslot_is(slots->active, i) && force) {
        return 0;
    }
    if (!keyslot_is(slots->active, i)) {
        error_setg(errp, "Given keyslot %d is already erased (inactive)", i);
        return -1;
    }
    if (options->has_old_secret) {
        int ret = slots->try_secret(block, i, &options->old_secret, readfunc,
                                    opaque, errp);

        if (ret < 0) {
            return -1;
        }
        if (ret == 0) {
            error_setg(errp, "Given keyslot %d doesn't contain the given old "
                       "password for erase operation", i);
            return -1;
        }
    }
    *erase = 1u << i;
    return 0;
}

/* old-secret alone: every slot that can open the data and it opens. */
static int keyslot_select_by_secret(QCryptoBlock *block,
                                    const QCryptoBlockKeyslots *slots,
                                    QCryptoBlockReadFunc readfunc,
                                    void *opaque,
                                    const QCryptoBlockAmendOptions *options,
                                    uint32_t *erase, Error **errp)
{
    for (int i = 0; i < slots->nslots; i++) {
        int ret;

        if (!keyslot_is(slots->openers, i)) {
            continue;
        }
        ret = slots->try_secret(block, i, &options->old_secret, readfunc,
                                opaque, errp);
        if (ret < 0) {
            return -1;
        }
        if (ret == 1) {
            *erase |= 1u << i;
        }
    }
    if (!*erase) {
        error_setg(errp, "No keyslots match given (old) password for erase "
                   "operation");
        return -1;
    }
    return 0;
}

int qcrypto_block_keyslot_select_erase(QCryptoBlock *block,
                                       const QCryptoBlockKeyslots *slots,
                                       QCryptoBlockReadFunc readfunc,
                                       void *opaque,
                                       const QCryptoBlockAmendOptions *options,
                                       bool force, uint32_t *erase,
                                       Error **errp)
{
    g_assert(slots->nslots > 0 && slots->nslots <= 32);
    *erase = 0;

    if (options->has_new_secret) {
        error_setg(errp, "'new-secret' must not be given when erasing "
                   "keyslots");
        return -1;
    }
    /* The costs of a new key slot do not apply either (as qemu-img). */
    if (options->has_iter_time || options->has_kdf || options->kdf_memory ||
        options->kdf_parallel) {
        error_setg(errp, "'%s' must not be given when erasing keyslots",
                   options->has_iter_time ? "iter-time" :
                   options->has_kdf ? "kdf" :
                   options->kdf_memory ? "kdf-memory" : "kdf-parallel");
        return -1;
    }
    if (options->has_keyslot) {
        if (keyslot_select_by_index(block, slots, readfunc, opaque, options,
                                    force, erase, errp) < 0) {
            return -1;
        }
    } else if (options->has_old_secret) {
        if (keyslot_select_by_secret(block, slots, readfunc, opaque, options,
                                     erase, errp) < 0) {
            return -1;
        }
    } else {
        error_setg(errp, "To erase keyslot(s), either explicit keyslot index "
                   "or the password currently contained in them must be "
                   "given");
        return -1;
    }

    /*
     * No slot left that opens the data: the data is gone for good, which
     * only force may ask for. A header with no such slot to begin with
     * (LUKS2 with only unbound slots) loses nothing more.
     */
    if (slots->openers && !(slots->openers & ~*erase) && !force) {
        if (options->has_keyslot) {
            error_setg(errp, "Attempt to erase the only active keyslot %d "
                       "which will erase all the data in the image "
                       "irreversibly - refusing operation", options->keyslot);
        } else {
            error_setg(errp, "All the active keyslots match the (old) "
                       "password that was given and erasing them will "
                       "erase all the data in the image irreversibly - "
                       "refusing operation");
        }
        return -1;
    }
    return 0;
}
